#include "engine/ldm_replicas.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>

#include "engine/random.h"

namespace polymargin::engine {

namespace {

constexpr std::size_t kStride = LdmState::kStride;
// An average's scalars, summed over the processes: renormalisations, replicas averaging, the
// progressive margins (rows, correct, sum, sum of squares, hinge), the steps since the last one.
enum Scalar : std::size_t {
  kRenorms,
  kAveraging,
  kMarginRows,
  kMarginCorrect,
  kMarginSum,
  kMarginSumSq,
  kMarginHinge,
  kSteps,
  kScalars
};
// Feature slots a task of the averaging passes handles: 256 KiB of each replica's array.
constexpr std::size_t kSlotGrain = 16384;
// Seed stream of the replicas' pairing generators (kPermutation), apart from every other stream.
constexpr std::uint64_t kReplicaStream = 0x5245504c49434153ULL;

}  // namespace

LdmReplicas::LdmReplicas(const LdmConfig& config, std::uint64_t m, std::uint32_t max_index,
                         LabelMap labels, int local, int total, int first)
    : total_(total), first_(first) {
  if (local < 1 || total < local || first < 0 || first + local > total)
    throw std::invalid_argument("LdmReplicas: replicas " + std::to_string(first) + " + " +
                                std::to_string(local) + " of " + std::to_string(total));
  for (int k = 0; k < local; ++k) {
    replicas_.push_back(std::make_unique<LdmTrainer>(config, m, max_index, labels));
    LdmTrainer& replica = *replicas_.back();
    if (total > 1) {
      // Averaging starts at the same point of the data as one replica's t0.
      replica.t0_ = static_cast<std::uint64_t>(replica.config_.avg_start_epochs) * m /
                    static_cast<std::uint64_t>(total);
      set_rng(replica, first + k);
    }
  }
}

void LdmReplicas::set_rng(LdmTrainer& replica, int global) const {
  replica.state_.rng = derive_seed(replica.config_.seed ^ kReplicaStream, replica.state_.t,
                                   static_cast<std::uint64_t>(global));
}

double LdmReplicas::calibrate(const CsrView& sample, const Peers& peers) {
  LdmTrainer& lead = this->lead();
  double eta0 = lead.calibrate(sample);
  bool clamped = lead.eta0_clamped_;
  if (!peers.alone()) {
    // Each process's η0 in its own slot (0: no rows yet); the first that has one decides.
    std::vector<double> found(2 * static_cast<std::size_t>(peers.count), 0.0);
    found[2 * peers.index] = eta0;
    found[2 * peers.index + 1] = clamped ? 1 : 0;
    peers.sum(found);
    eta0 = 0;
    for (std::size_t p = 0; p < found.size() && eta0 <= 0; p += 2) {
      eta0 = found[p];
      clamped = found[p + 1] != 0;
    }
  }
  for (const auto& replica : replicas_) {
    replica->state_.eta0 = eta0;
    replica->eta0_clamped_ = clamped;
  }
  return eta0;
}

void LdmReplicas::learn(const CsrView& window, const std::function<bool()>& spare) {
  if (replicas_.size() == 1) {
    replicas_.front()->learn(window);
    return;
  }
  learn_shares(window, replicas_.size(), [&](std::size_t k, const CsrView& share) {
    replicas_[k]->learn(share);
    if (spare)
      while (spare()) {
      }
  });
}

void LdmReplicas::average(const Peers& peers) {
  if (total_ == 1) return;
  const std::size_t n = replicas_.size();
  LdmState& lead = replicas_.front()->state_;
  const std::size_t slots = lead.wa.size() / kStride;

  // The scalars: Σ renormalisations, replicas averaging, the progressive margins, and the
  // steps made since the last average; summed over the processes first, for the weights.
  std::array<double, kScalars> scalars{};
  std::vector<double> steps(n);
  for (std::size_t k = 0; k < n; ++k) {
    const LdmState& s = replicas_[k]->state_;
    const MarginStats& p = replicas_[k]->progress_;
    steps[k] = static_cast<double>(s.t - synced_t_);
    scalars[kRenorms] += static_cast<double>(s.renorms);
    scalars[kAveraging] += s.avg_is_zero ? 0 : 1;
    scalars[kMarginRows] += static_cast<double>(p.rows);
    scalars[kMarginCorrect] += static_cast<double>(p.correct);
    scalars[kMarginSum] += p.sum;
    scalars[kMarginSumSq] += p.sum_sq;
    scalars[kMarginHinge] += p.hinge;
    scalars[kSteps] += steps[k];
  }
  peers.sum_in_place(scalars);
  // Replica k's weight is its steps over all replicas' steps: a share of the rows, as one learner
  // would have made them. No steps anywhere (every replica still holds the last mean): equal
  // weights.
  const bool stepped = scalars[kSteps] > 0;
  if (!stepped) std::fill(steps.begin(), steps.end(), 1.0);
  const double inverse = 1.0 / (stepped ? scalars[kSteps] : static_cast<double>(total_));

  // What each local replica represents, summed slot by slot in replica order into the lead's
  // array: w at W's place, w̄ at A's.
  struct Scale {
    double a, b, c;
    bool avg_is_zero;
  };
  std::vector<Scale> scale;
  std::vector<double*> arrays;
  for (const auto& replica : replicas_) {
    const LdmState& s = replica->state_;
    scale.push_back({s.a, s.b, s.c, s.avg_is_zero});
    arrays.push_back(replica->state_.wa.data());
  }
  const auto represented_sums = [&](std::size_t f, double& w_sum, double& avg_sum) {
    w_sum = avg_sum = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const double W = arrays[k][kStride * f], A = arrays[k][kStride * f + 1];
      const Scale& s = scale[k];
      w_sum += steps[k] * (W / s.a);
      avg_sum += steps[k] * (s.avg_is_zero ? W / s.a : (A + s.b * W) / s.c);
    }
  };
  const auto write_mean = [&](std::size_t f, double w, double avg) {
    for (std::size_t k = 0; k < n; ++k) {
      arrays[k][kStride * f] = w;
      arrays[k][kStride * f + 1] = avg;
    }
  };
  const auto each_slot = [&](auto&& body) {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, slots, kSlotGrain),
                      [&](const tbb::blocked_range<std::size_t>& range) {
                        for (std::size_t f = range.begin(); f != range.end(); ++f) body(f);
                      });
  };
  const bool averaging = scalars[kAveraging] > 0;
  if (peers.alone()) {
    // One pass: each slot's sum becomes its mean in every replica at once.
    each_slot([&](std::size_t f) {
      double w_sum, avg_sum;
      represented_sums(f, w_sum, avg_sum);
      write_mean(f, w_sum * inverse, averaging ? avg_sum * inverse : 0.0);
    });
  } else {
    // The sums in the lead's array, summed over the processes in place, then the mean everywhere.
    each_slot([&](std::size_t f) {
      double w_sum, avg_sum;
      represented_sums(f, w_sum, avg_sum);
      arrays[0][kStride * f] = w_sum;
      arrays[0][kStride * f + 1] = avg_sum;
    });
    peers.sum({lead.wa.data(), lead.wa.size()});
    each_slot([&](std::size_t f) {
      write_mean(f, arrays[0][kStride * f] * inverse,
                 averaging ? arrays[0][kStride * f + 1] * inverse : 0.0);
    });
  }
  // The mean step: the run's steps over the replicas (Σ_p t_p / P would drop the remainder at
  // every average; with more replicas than rows between two averages t would never move).
  run_steps_ += static_cast<std::uint64_t>(scalars[kSteps]);
  const std::uint64_t t = run_steps_ / static_cast<std::uint64_t>(total_);
  synced_t_ = t;
  for (std::size_t k = 0; k < n; ++k) {
    LdmTrainer& replica = *replicas_[k];
    LdmState& s = replica.state_;
    // The mean step can be at or before t0 although some replica had begun to average: its next
    // step sets w̄ = w (μ = 1), which holds only with A flagged zero.
    s.a = s.c = 1;
    s.avg_is_zero = !averaging || t <= replica.t0_;
    s.b = s.avg_is_zero ? 1 : 0;
    s.t = t;
    const bool holds_totals = first_ == 0 && k == 0;
    s.renorms = holds_totals ? static_cast<std::uint64_t>(scalars[kRenorms]) : 0;
    replica.progress_ = {};
    if (holds_totals)
      replica.progress_ = {static_cast<std::uint64_t>(scalars[kMarginRows]),
                           static_cast<std::uint64_t>(scalars[kMarginCorrect]), scalars[kMarginSum],
                           scalars[kMarginSumSq], scalars[kMarginHinge]};
    set_rng(replica, first_ + static_cast<int>(k));
  }
}

void LdmReplicas::spread_lead(std::uint64_t run_steps) {
  run_steps_ = run_steps;
  if (total_ == 1) return;
  LdmTrainer& lead = this->lead();
  if (first_ != 0) {  // the run's totals are process 0's
    lead.state_.renorms = 0;
    lead.progress_ = {};
  }
  set_rng(lead, first_);
  for (std::size_t k = 1; k < replicas_.size(); ++k) {
    LdmTrainer& replica = *replicas_[k];
    LdmState& s = replica.state_;
    std::memcpy(s.wa.data(), lead.state_.wa.data(), s.wa.size() * sizeof(double));
    s.avg_is_zero = lead.state_.avg_is_zero;
    s.a = lead.state_.a;
    s.b = lead.state_.b;
    s.c = lead.state_.c;
    s.t = lead.state_.t;
    s.eta0 = lead.state_.eta0;
    s.renorms = 0;
    replica.eta0_clamped_ = lead.eta0_clamped_;
    replica.progress_ = {};
    set_rng(replica, first_ + static_cast<int>(k));
  }
  synced_t_ = lead.state_.t;
}

MarginStats LdmReplicas::take_progress() {
  MarginStats total;
  for (const auto& replica : replicas_) {
    const MarginStats p = replica->take_progress();
    total.rows += p.rows;
    total.correct += p.correct;
    total.sum += p.sum;
    total.sum_sq += p.sum_sq;
    total.hinge += p.hinge;
  }
  return total;
}

std::uint64_t LdmReplicas::sync_bytes() const {
  return lead().state_.wa.size() * sizeof(double) + kScalars * sizeof(double);
}

}  // namespace polymargin::engine
