#include "engine/ldm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "engine/errors.h"
#include "engine/limits.h"
#include "engine/random.h"
#include "engine/sparse.h"

namespace polymargin::engine {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// η0 calibration: sample pairs and the bracket's bounds (§1.5).
constexpr std::uint64_t kCalibrationPairs = 1000;
constexpr double kMinEta0 = 1.0 / (1 << 30);
constexpr int kPatience = 3;
// W and A are interleaved in one array (LdmState::wa).
constexpr std::size_t kStride = LdmState::kStride;
// How many steps ahead the row data of j is prefetched (2-8 measured alike; 1 is too late).
constexpr std::size_t kRowLead = 3;

// Uniform in [0, n) by multiply-shift (Lemire); the bias, ≤ n/2^64, is far below anything
// measurable here.
std::uint32_t random_below(std::uint64_t& state, std::uint32_t n) {
  const auto product = static_cast<unsigned __int128>(splitmix64_next(state)) * n;
  return static_cast<std::uint32_t>(product >> 64);
}

}  // namespace

void LdmConfig::validate() const {
  auto fail = [](const char* field, const std::string& rule) { throw ConfigError(field, rule); };
  if (!cost_in_range(c))
    fail("c", "must be a positive number in [1e-30, 1e30] (got " + message_number(c) +
                  "): beyond, the step sizes and the default lambdas underflow or overflow");
  if (lambda1 && (!(*lambda1 >= 0) || !std::isfinite(*lambda1)))
    fail("lambda1", "must be ≥ 0 (got " + message_number(*lambda1) + ")");
  if (lambda2 && (!(*lambda2 >= 0) || !std::isfinite(*lambda2)))
    fail("lambda2", "must be ≥ 0 (got " + message_number(*lambda2) + ")");
  if (epochs < 1) fail("epochs", "must be ≥ 1 (got " + std::to_string(epochs) + ")");
  if (avg_start_epochs < 0 || avg_start_epochs >= epochs)
    fail("avg_start_epochs", "must be in [0, epochs) so that averaging happens (got " +
                                 std::to_string(avg_start_epochs) + " with " +
                                 std::to_string(epochs) + " epochs)");
  if (!std::isfinite(eta0)) fail("eta0", "must be finite (got " + message_number(eta0) + ")");
  if (!(bias >= 0) || !std::isfinite(bias))
    fail("bias", "must be ≥ 0 (got " + message_number(bias) + "; 0 = no bias)");
  if (!(renorm_threshold > 1)) fail("renorm_threshold", "must be > 1");
}

LdmConfig LdmConfig::resolved(std::uint64_t m) const {
  LdmConfig r = *this;
  const double mc = static_cast<double>(m) * c;
  if (!r.lambda1) r.lambda1 = kDefaultLambda1Rel * mc;
  if (!r.lambda2) r.lambda2 = kDefaultLambda2Rel * mc;
  return r;
}

double ldm_step_size(double eta0, double lambda, std::uint64_t t) {
  const double x = 1 + lambda * eta0 * static_cast<double>(t);
  return eta0 / std::sqrt(x * std::sqrt(x));
}

double ldm_objective(double lambda, double lambda1p, double lambda2p, const MarginStats& margins,
                     double norm2) {
  const double hinge = margins.rows ? margins.hinge / margins.rows : 0;
  return lambda / 2 * norm2 + 2 * lambda1p * margins.variance() - lambda2p * margins.mean() + hinge;
}

LdmTrainer::LdmTrainer(const LdmConfig& config, std::uint64_t m, std::uint32_t max_index,
                       LabelMap labels)
    : config_(config.resolved(m)), m_(m), bias_slot_(max_index + 1), labels_(labels) {
  config_.validate();
  if (m == 0) throw std::invalid_argument("LdmTrainer: no training rows");
  const double mc = static_cast<double>(m) * config_.c;
  lambda_ = 1 / mc;
  lambda1p_ = *config_.lambda1 / mc;
  lambda2p_ = *config_.lambda2 / mc;
  t0_ = static_cast<std::uint64_t>(config_.avg_start_epochs) * m;
  state_.wa.assign(kStride * (std::size_t{max_index} + 2), 0.0);
  state_.rng = config_.seed;
  if (config_.eta0 > 0) state_.eta0 = clamp_eta0(config_.eta0);
}

double LdmTrainer::clamp_eta0(double eta0) {
  // 1 − λη_t ≥ 1/2 keeps the divisor a positive and finite (§1.6).
  const double eta_max = 0.5 / lambda_;
  eta0_clamped_ = eta0 > eta_max;
  return std::min(eta0, eta_max);
}

double LdmTrainer::calibrate(const CsrView& sample) {
  if (state_.eta0 > 0 || sample.rows == 0) return state_.eta0;
  const std::uint64_t pairs = std::min(kCalibrationPairs, m_);
  std::uint64_t rng = config_.seed ^ 0x6a09e667f3bcc909ULL;  // independent of the pairing stream
  const auto n = static_cast<std::uint32_t>(sample.rows);
  sample_i_.resize(pairs);
  sample_j_.resize(pairs);
  sample_features_.clear();
  for (std::uint64_t k = 0; k < pairs; ++k) {
    sample_i_[k] = random_below(rng, n);
    sample_j_[k] = random_below(rng, n);
    const sparse::Row x = sparse::row(sample, sample_i_[k]);
    sample_features_.insert(sample_features_.end(), x.index, x.index + x.nnz);
  }
  std::sort(sample_features_.begin(), sample_features_.end());
  sample_features_.erase(std::unique(sample_features_.begin(), sample_features_.end()),
                         sample_features_.end());
  if (!slot_of_.empty()) in_feature_order(sample_features_);
  sample_features_.push_back(bias_slot_);

  // Factor-2 search around η0 = 1 (Bottou's determineEta0, LDM-ref's determine_eta0), keeping the
  // cheapest η seen. Unlike their bracket, a walk stops only after kPatience factors without
  // improvement: F_S is noisy at large η (a9a: cost(1/2) > cost(1) but cost(1/32) is 3× lower),
  // and stopping at the first uphill step there picked η0 = 1, 30× too large. Non-finite costs
  // count as +∞ and never count against the patience, so a diverging start keeps halving.
  const double eta_max = 0.5 / lambda_;
  double best = std::min(1.0, eta_max), best_cost = calibration_cost(sample, best);
  auto walk = [&](double eta, double factor) {
    for (int misses = 0; misses < kPatience && eta >= kMinEta0 && eta <= eta_max; eta *= factor) {
      const double cost = calibration_cost(sample, eta);
      if (cost < best_cost) {
        best = eta;
        best_cost = cost;
        misses = 0;
      } else if (best_cost < kInf) {
        ++misses;
      }
    }
  };
  walk(best / 2, 0.5);
  walk(best * 2, 2);
  const double eta0 = best;
  state_.eta0 = clamp_eta0(eta0);
  return state_.eta0;
}

void LdmTrainer::in_feature_order(std::vector<std::uint32_t>& slots) const {
  // The sums over the sample's features (calibration_cost's ‖w‖²) then add in the order they
  // would without renumbering. One pass over the table, marking the sample's slots in a bitmap.
  const std::size_t size = slot_of_.size();
  std::vector<std::uint64_t> marked(size / 64 + 1, 0);
  const auto beyond = std::lower_bound(slots.begin(), slots.end(), size);
  for (auto it = slots.begin(); it != beyond; ++it)
    marked[*it / 64] |= std::uint64_t{1} << (*it % 64);
  std::vector<std::uint32_t> ordered;
  ordered.reserve(slots.size());
  for (std::size_t f = 0; f < size; ++f) {
    const std::uint32_t s = slot_of_[f];
    if (marked[s / 64] >> (s % 64) & 1) ordered.push_back(s);
  }
  ordered.insert(ordered.end(), beyond, slots.end());  // ids beyond the table are their own slots
  slots.swap(ordered);
}

double LdmTrainer::calibration_cost(const CsrView& sample, double eta0) {
  // S plain SGD steps from w = 0 with the training schedule, no averaging (§1.5). W is zero
  // outside sample_features_, so renormalising and resetting touch only those slots.
  double* w = state_.wa.data();  // W only: A stays untouched (and flagged zero)
  const std::size_t nb = kStride * bias_slot_;
  const double bias = config_.bias;
  double a = 1;
  bool finite = true;
  for (std::size_t k = 0; k < sample_i_.size() && finite; ++k) {
    const double eta = ldm_step_size(eta0, lambda_, k);
    const sparse::Row xi = sparse::row(sample, sample_i_[k]);
    const sparse::Row xj = sparse::row(sample, sample_j_[k]);
    const double yi = labels_.sign(sample.labels[sample_i_[k]]);
    const double yj = labels_.sign(sample.labels[sample_j_[k]]);
    const double gi = yi * (sparse::dot_any<kStride>(w, xi) + bias * w[nb]) / a;
    const double gj = yj * (sparse::dot_any<kStride>(w, xj) + bias * w[nb]) / a;
    const double phi = ldm_phi(yi, gi, gj, lambda1p_, lambda2p_);
    a /= 1 - lambda_ * eta;
    if (phi != 0) {
      const double delta = -eta * phi * a;
      sparse::axpy_any<kStride>(delta, xi, w);
      w[nb] += delta * bias;
    }
    if (a > config_.renorm_threshold) {
      for (const std::uint32_t f : sample_features_) w[kStride * f] /= a;
      a = 1;
    }
    finite = std::isfinite(gi + gj);
  }
  MarginStats margins;
  for (const std::uint32_t i : sample_i_) {
    const double y = labels_.sign(sample.labels[i]);
    margins.add(y, (sparse::dot_any<kStride>(w, sparse::row(sample, i)) + bias * w[nb]) / a);
  }
  double norm2 = 0;
  for (const std::uint32_t f : sample_features_) {
    norm2 += (w[kStride * f] / a) * (w[kStride * f] / a);
    w[kStride * f] = 0;
  }
  const double cost = ldm_objective(lambda_, lambda1p_, lambda2p_, margins, norm2);
  return finite && std::isfinite(cost) ? cost : kInf;
}

void LdmTrainer::learn(const CsrView& batch) {
  if (released_norm2_) throw std::logic_error("LdmTrainer::learn after finish_and_release()");
  if (batch.rows == 0) return;
  if (state_.eta0 <= 0) calibrate(batch);
  // j for row k: the next row (the rows come shuffled), or a seeded Fisher–Yates permutation.
  const auto n = static_cast<std::uint32_t>(batch.rows);
  pairing_.resize(n);
  if (config_.pairing == Pairing::kNextRow) {
    for (std::uint32_t k = 0; k < n; ++k) pairing_[k] = k + 1 < n ? k + 1 : 0;
  } else {
    std::iota(pairing_.begin(), pairing_.end(), 0u);
    for (std::uint32_t k = n - 1; k > 0; --k)
      std::swap(pairing_[k], pairing_[random_below(state_.rng, k + 1)]);
  }
  learn_pairs(batch, nullptr, pairing_.data(), n);
}

void LdmTrainer::learn_pairs(const CsrView& rows, const std::uint32_t* i_rows,
                             const std::uint32_t* j_rows, std::size_t steps) {
  if (steps == 0) return;
  if (state_.eta0 <= 0) calibrate(rows);
  // The loss variant and the value layout are chosen once per batch, never per non-zero.
  const bool values = rows.values != nullptr;
  if (config_.hinge_only()) {
    values ? run<true, true>(rows, i_rows, j_rows, steps)
           : run<true, false>(rows, i_rows, j_rows, steps);
  } else {
    values ? run<false, true>(rows, i_rows, j_rows, steps)
           : run<false, false>(rows, i_rows, j_rows, steps);
  }
  if (!std::isfinite(state_.a) || !std::isfinite(state_.b) || !std::isfinite(state_.c))
    diverged(state_.t, "scaling scalar");
}

template <bool kHingeOnly, bool kValues>
void LdmTrainer::run(const CsrView& rows, const std::uint32_t* i_rows, const std::uint32_t* j_rows,
                     std::size_t steps) {
  // W_f = w[2f] and A_f = avg[2f] = w[2f + 1] (disjoint elements, hence __restrict).
  double* __restrict w = state_.wa.data();
  double* __restrict avg = state_.wa.data() + 1;
  const std::size_t nb = kStride * bias_slot_;
  const double bias = config_.bias;
  const double threshold = config_.renorm_threshold;
  const double eta0 = state_.eta0;
  // Scalars live in registers during the loop and are written back before anything that reads
  // state_ (renormalise, diverged) and at the end.
  double a = state_.a, b = state_.b, c = state_.c;
  std::uint64_t t = state_.t;
  MarginStats progress = progress_;
  auto sync = [&] {
    state_.a = a;
    state_.b = b;
    state_.c = c;
    state_.t = t;
  };
  auto i_of = [&](std::size_t k) -> std::size_t { return i_rows ? i_rows[k] : k; };

  for (std::size_t k = 0; k < steps; ++k) {
    const std::size_t i = i_of(k), j = j_rows[k];
    const sparse::Row xi = sparse::row(rows, i);
    // Two-stage prefetch. With permuted pairing the j rows are scattered over the window (MBs,
    // beyond L2), so their index/value lines are fetched kRowLead steps ahead; one step ahead, the
    // weight lines of the next i and j rows follow, their indices now in cache (KDD-size: 1.0 →
    // 1.25-1.45 M steps/s). The i rows are consecutive: the hardware prefetcher streams them. With
    // next-row pairing j = i + 1, and both prefetches mostly find their lines already on the way.
    if constexpr (!kHingeOnly) {
      if (k + kRowLead < steps)
        sparse::prefetch_row<kValues>(sparse::row(rows, j_rows[k + kRowLead]));
    }
    if (k + 1 < steps) {
      // A_f shares W_f's cache line: one prefetch serves the dot, the step and the average.
      sparse::prefetch<kStride>(w, sparse::row(rows, i_of(k + 1)));
      if constexpr (!kHingeOnly) sparse::prefetch<kStride>(w, sparse::row(rows, j_rows[k + 1]));
    }
    if (a > threshold || c > threshold) {
      sync();
      renormalise();
      a = state_.a, b = state_.b, c = state_.c;
    }
    const double eta = ldm_step_size(eta0, lambda_, t);
    const double yi = labels_.sign(rows.labels[i]);
    const double si = (sparse::dot<kValues, kStride>(w, xi) + bias * w[nb]) / a;
    const double gi = yi * si;
    double phi;
    if constexpr (kHingeOnly) {
      // SVM: x_j never enters, and a met margin writes nothing.
      if (!std::isfinite(gi)) {
        sync();
        diverged(t, "score");
      }
      phi = gi < 1 ? -yi : 0.0;
    } else {
      const double yj = labels_.sign(rows.labels[j]);
      const double gj =
          yj * (sparse::dot<kValues, kStride>(w, sparse::row(rows, j)) + bias * w[nb]) / a;
      if (!std::isfinite(gi + gj)) {
        sync();
        diverged(t, "score");
      }
      phi = ldm_phi(yi, gi, gj, lambda1p_, lambda2p_);
    }
    progress.add(yi, si);

    a /= 1 - lambda_ * eta;  // w ← (1 − λη) w
    const double mu = ldm_average_rate(t, t0_);
    if (mu >= 1) {
      if (phi != 0) {
        const double delta = -eta * phi * a;
        sparse::axpy<kValues, kStride>(delta, xi, w);
        w[nb] += delta * bias;
      }
      b = 1;  // w̄ = w while A is flagged zero
      c = a;
    } else {
      if (state_.avg_is_zero) {
        for (std::size_t f = 0; f < state_.wa.size(); f += kStride) avg[f] = 0;
        state_.avg_is_zero = false;
      }
      if (phi != 0) {
        const double delta = -eta * phi * a;
        sparse::axpy2<kValues, kStride>(delta, w, -b * delta, avg, xi);
        w[nb] += delta * bias;
        avg[nb] -= b * delta * bias;
      }
      c /= 1 - mu;
      b += mu * c / a;
    }
    ++t;
  }
  sync();
  progress_ = progress;
}

void LdmTrainer::renormalise() {
  sparse::WeightVector& wa = state_.wa;
  const double a = state_.a;
  if (state_.avg_is_zero) {
    for (std::size_t f = 0; f < wa.size(); f += kStride) wa[f] /= a;
    state_.b = 1;
  } else {
    const double b = state_.b, c = state_.c;
    for (std::size_t f = 0; f < wa.size(); f += kStride) {
      wa[f + 1] = (wa[f + 1] + b * wa[f]) / c;
      wa[f] /= a;
    }
    state_.b = 0;
  }
  state_.a = state_.c = 1;
  ++state_.renorms;
}

void LdmTrainer::diverged(std::uint64_t t, const char* what) const {
  throw NumericalError(
      "training diverged: non-finite " + std::string(what) + " at step " + std::to_string(t) +
      " (epoch " + std::to_string(t / m_ + 1) +
      "); scale the features (--scale maxabs), or lower --eta0, the lambdas or --bias");
}

void LdmTrainer::add_margins(const CsrView& rows, MarginStats& margins) const {
  const double* w = state_.wa.data();
  const double* avg = w + 1;
  const std::size_t nb = kStride * bias_slot_;
  const double bias = config_.bias;
  for (std::size_t r = 0; r < rows.rows; ++r) {
    const sparse::Row x = sparse::row(rows, r);
    const double sw = sparse::dot_any<kStride>(w, x) + bias * w[nb];
    const double score =
        state_.avg_is_zero
            ? sw / state_.a
            : (sparse::dot_any<kStride>(avg, x) + bias * avg[nb] + state_.b * sw) / state_.c;
    margins.add(labels_.sign(rows.labels[r]), score);
  }
}

MarginStats LdmTrainer::take_progress() { return std::exchange(progress_, MarginStats{}); }

std::vector<double> LdmTrainer::weights() const {
  std::vector<double> w(state_.wa.size() / kStride);
  for (std::size_t f = 0; f < w.size(); ++f) w[f] = state_.wa[kStride * slot(f)] / state_.a;
  return w;
}

std::vector<double> LdmTrainer::averaged_weights() const {
  if (state_.avg_is_zero) return weights();
  std::vector<double> w(state_.wa.size() / kStride);
  for (std::size_t f = 0; f < w.size(); ++f) {
    const std::size_t k = kStride * slot(f);
    w[f] = (state_.wa[k + 1] + state_.b * state_.wa[k]) / state_.c;
  }
  return w;
}

double LdmTrainer::averaged_norm2() const {
  if (released_norm2_) return *released_norm2_;
  // In place: the per-epoch log calls this on 20 M-feature vectors.
  const sparse::WeightVector& wa = state_.wa;
  double norm2 = 0;
  for (std::size_t f = 0; f < wa.size(); f += kStride) {
    const double x =
        state_.avg_is_zero ? wa[f] / state_.a : (wa[f + 1] + state_.b * wa[f]) / state_.c;
    norm2 += x * x;
  }
  return norm2;
}

double LdmTrainer::objective(const MarginStats& margins) const {
  return ldm_objective(lambda_, lambda1p_, lambda2p_, margins, averaged_norm2());
}

LinearModel LdmTrainer::finish(const std::vector<float>* maxabs) { return build_model(maxabs, false); }

LinearModel LdmTrainer::finish_and_release(const std::vector<float>* maxabs) {
  return build_model(maxabs, true);
}

namespace {
// The reader fed x_f / maxabs_f; folding 1/maxabs_f into w_f lets the model score raw rows.
double folded(const std::vector<float>* maxabs, std::size_t f, double w) {
  return !maxabs ? w : (*maxabs)[f] > 0 ? w / (*maxabs)[f] : 0.0;
}
}  // namespace

template <class Push>
void LdmTrainer::copy_out(bool release, Push push) {
  // After renormalising, w̄ is W (A flagged zero: w̄ = w, a = 1) or A. Copied out a chunk of
  // (W, A) pairs at a time; when releasing, each chunk's pages go back to the system as soon as it
  // is copied, so the peak is W + A, not W + A + the copy. The chunks are whole 2 MiB pages of the
  // interleaved array (which starts on a 2 MiB boundary when it spans one or more; a smaller array
  // is one chunk, of which nothing is discarded).
  const double* average = state_.wa.data() + (state_.avg_is_zero ? 0 : 1);
  constexpr std::size_t kChunk = sparse::HugePageAllocator<double>::kHugePage / (kStride * 8);
  for (std::size_t begin = 0; begin < bias_slot_; begin += kChunk) {
    const std::size_t end = std::min<std::size_t>(begin + kChunk, bias_slot_);
    for (std::size_t s = begin; s < end; ++s) push(s, average[kStride * s]);
    if (release && end < bias_slot_)  // the last chunk also holds the bias pair: freed below
      sparse::discard_pages(state_.wa.data() + kStride * begin, kStride * kChunk);
  }
  if (release) sparse::WeightVector().swap(state_.wa);
}

LinearModel LdmTrainer::build_model(const std::vector<float>* maxabs, bool release) {
  if (maxabs && maxabs->size() < bias_slot_)
    throw std::invalid_argument("LdmTrainer::finish: scaling vector shorter than the weights");
  renormalise();
  const double* average = state_.wa.data() + (state_.avg_is_zero ? 0 : 1);
  LinearModel model;
  model.algorithm = config_.algorithm();
  model.config = describe();
  model.labels = labels_;
  model.max_index = bias_slot_ - 1;
  model.bias_value = config_.bias;
  model.bias_weight = config_.bias != 0 ? average[kStride * bias_slot_] : 0.0;
  model.weights.reserve(bias_slot_);  // not resize: its pages are touched only as chunks arrive
  if (slot_of_.empty()) {
    if (release) released_norm2_ = averaged_norm2();
    copy_out(release,
             [&](std::size_t f, double w) { model.weights.push_back(folded(maxabs, f, w)); });
  } else {
    // w̄ in slot order first, then put in feature order (the slot-ordered copy freed after): the
    // peak stays at W + A. ‖w̄‖² and the folding then run in feature order, as without slots.
    std::vector<double, sparse::HugePageAllocator<double>> by_slot;  // read at random below
    by_slot.reserve(bias_slot_);
    copy_out(release, [&](std::size_t, double w) { by_slot.push_back(w); });
    constexpr std::size_t kAhead = 16;  // requested a few ids ahead
    for (std::size_t f = 0; f < bias_slot_; ++f) {
      if (f + kAhead < bias_slot_) __builtin_prefetch(by_slot.data() + slot(f + kAhead));
      model.weights.push_back(by_slot[slot(f)]);
    }
    decltype(by_slot)().swap(by_slot);
    if (release) {
      double norm2 = 0;
      for (const double x : model.weights) norm2 += x * x;
      released_norm2_ = norm2 + model.bias_weight * model.bias_weight;
    }
    if (maxabs)
      for (std::size_t f = 0; f < bias_slot_; ++f)
        model.weights[f] = folded(maxabs, f, model.weights[f]);
  }
  for (const double x : model.weights)
    if (!std::isfinite(x)) diverged(state_.t, "weight");
  if (!std::isfinite(model.bias_weight)) diverged(state_.t, "bias weight");
  return model;
}

void LdmTrainer::restore(LdmState state, const MarginStats& progress, bool eta0_clamped) {
  const bool in_place = state.wa.empty();  // read into the trainer's own W and A already
  if (!in_place && state.wa.size() != state_.wa.size())
    throw std::invalid_argument("LdmTrainer::restore: " + std::to_string(state.wa.size()) +
                                " weight slots, expected " + std::to_string(state_.wa.size()));
  if (released_norm2_) throw std::logic_error("LdmTrainer::restore after finish_and_release()");
  if (in_place) state.wa = std::move(state_.wa);
  state_ = std::move(state);
  progress_ = progress;
  eta0_clamped_ = eta0_clamped;
}

void LdmTrainer::warm_start(std::span<const double> w, double bias_weight) {
  if (state_.t != 0) throw std::logic_error("LdmTrainer::warm_start after the first step");
  if (w.size() > bias_slot_)
    throw std::invalid_argument("LdmTrainer::warm_start: more weights than feature slots");
  // w = W / a with a = 1 and A flagged zero (w̄ = w): exactly the state of step 0.
  for (std::size_t f = 0; f < state_.wa.size(); f += kStride) state_.wa[f] = 0;
  for (std::size_t f = 0; f < w.size(); ++f) state_.wa[kStride * slot(f)] = w[f];
  state_.wa[kStride * bias_slot_] = bias_weight;
  state_.a = state_.b = state_.c = 1;
  state_.avg_is_zero = true;
}

nlohmann::json LdmTrainer::describe() const {
  return {{"algorithm", config_.algorithm()},
          {"lambda1", *config_.lambda1},
          {"lambda2", *config_.lambda2},
          {"lambda1_rel", lambda1p_},
          {"lambda2_rel", lambda2p_},
          {"c", config_.c},
          {"epochs", config_.epochs},
          {"avg_start_epochs", config_.avg_start_epochs},
          {"eta0", state_.eta0},
          {"eta0_calibrated", !(config_.eta0 > 0)},
          {"eta0_clamped", eta0_clamped_},
          {"bias", config_.bias},
          {"seed", config_.seed},
          {"rows", m_},
          {"steps", state_.t},
          {"lambda", lambda_},
          {"t0", t0_},
          {"renorm_threshold", config_.renorm_threshold},
          {"renormalisations", state_.renorms},
          {"step_size", "eta0 * (1 + lambda * eta0 * t)^(-3/4)"},
          {"pairing", config_.pairing == Pairing::kNextRow
                          ? "j = the next row of the shuffled window"
                          : "j by a seeded permutation of each window"}};
}

}  // namespace polymargin::engine
