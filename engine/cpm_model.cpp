// CpmModel: scoring, one-vs-one voting, export and the assignment statistics of `eval`.

#include "engine/cpm_model.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "engine/cpm_assign.h"
#include "engine/normalize.h"
#include "engine/random.h"

namespace polymargin::engine {

std::uint32_t FeatureHash::bucket(std::uint32_t f) const {
  std::uint64_t state = f;
  const std::uint64_t h = splitmix64_next(state);
  return static_cast<std::uint32_t>(h & ((std::uint64_t{1} << bits) - 1));
}

float FeatureHash::sign(std::uint32_t f) const {
  std::uint64_t state = f;
  return (splitmix64_next(state) >> 63) ? -1.0f : 1.0f;
}

int CpmModel::max_faces() const {
  int k = 1;
  for (const Binary& m : machines)
    for (const CpmFaces& s : m.sides) k = std::max(k, s.faces);
  return k;
}

double CpmModel::side_score(std::size_t m, std::size_t side, const CsrView& rows, std::size_t r,
                            double* work, int* face) const {
  const CpmFaces& s = machines[m].sides[side];
  const std::size_t K = static_cast<std::size_t>(s.faces);
  std::fill(work, work + K, 0.0);
  const auto scaled = [&](std::uint32_t j) {  // as the reader scales it (and in the row's length)
    return maxabs_scaled(rows.values ? rows.values[j] : 1.0f, maxabs, rows.indices[j]);
  };
  double norm = 0;  // --normalize l2: the reader's normalize_rows_l2, over the features known
  if (normalize_l2) {
    for (std::uint32_t j = rows.offsets[r]; j < rows.offsets[r + 1]; ++j)
      if (knows(rows.indices[j])) norm += static_cast<double>(scaled(j)) * scaled(j);
    norm = std::sqrt(norm);
  }
  for (std::uint32_t j = rows.offsets[r]; j < rows.offsets[r + 1]; ++j) {
    const std::uint32_t f = rows.indices[j];
    if (!knows(f)) continue;
    float x = scaled(j);
    if (norm > 0) x = static_cast<float>(x / norm);
    double v = x;
    const std::uint64_t slot = hash.slot(f, v);
    const float* w = &s.weights[slot * K];
    for (std::size_t k = 0; k < K; ++k) work[k] += v * static_cast<double>(w[k]);
  }
  std::size_t best = 0;
  for (std::size_t k = 0; k < K; ++k) {
    work[k] += s.intercepts[k];
    if (work[k] > work[best]) best = k;
  }
  if (face) *face = static_cast<int>(best);
  return work[best];
}

double CpmModel::machine_score(std::size_t m, const CsrView& rows, std::size_t r,
                               double* work) const {
  double d = 0;
  for (std::size_t i = 0; i < machines[m].sides.size(); ++i)
    d += machines[m].sides[i].outer * side_score(m, i, rows, r, work);
  return d;
}

namespace {

std::uint64_t ignored_in(const CsrView& rows, std::size_t r, const CpmModel& model) {
  std::uint64_t n = 0;
  for (std::uint32_t j = rows.offsets[r]; j < rows.offsets[r + 1]; ++j)
    n += !model.knows(rows.indices[j]);
  return n;
}

// Rows are independent: split across threads; each row's result is computed alone, so it does not
// depend on the split.
template <typename RowFn>
std::uint64_t for_rows(const CsrView& rows, const CpmModel& model, RowFn&& fn) {
  std::atomic<std::uint64_t> ignored{0};
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, rows.rows, 256),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      std::vector<double> work(static_cast<std::size_t>(model.max_faces()));
                      std::uint64_t skipped = 0;
                      for (std::size_t r = range.begin(); r != range.end(); ++r) {
                        skipped += ignored_in(rows, r, model);
                        fn(r, work.data());
                      }
                      if (skipped) ignored += skipped;
                    });
  return ignored.load();
}

}  // namespace

std::uint64_t CpmModel::score_batch(const CsrView& rows, double* scores) const {
  if (multiclass()) {
    std::vector<double> predicted(rows.rows);
    return predict_batch(rows, scores, predicted.data());
  }
  return for_rows(rows, *this, [&](std::size_t r, double* work) {
    scores[r] = machine_score(0, rows, r, work);
  });
}

std::uint64_t CpmModel::predict_batch(const CsrView& rows, double* scores,
                                      double* predicted) const {
  if (!multiclass()) {
    const std::uint64_t ignored = score_batch(rows, scores);
    for (std::size_t r = 0; r < rows.rows; ++r)
      predicted[r] = scores[r] > 0 ? labels.positive : labels.negative;
    return ignored;
  }
  const std::size_t L = classes.size();
  return for_rows(rows, *this, [&](std::size_t r, double* work) {
    std::vector<int> votes(L, 0);
    for (std::size_t m = 0; m < machines.size(); ++m) {
      const double winner =
          machine_score(m, rows, r, work) > 0 ? machines[m].positive : machines[m].negative;
      ++votes[static_cast<std::size_t>(std::lower_bound(classes.begin(), classes.end(), winner) -
                                       classes.begin())];
    }
    const int top = *std::max_element(votes.begin(), votes.end());
    std::vector<std::size_t> tied;
    for (std::size_t c = 0; c < L; ++c)
      if (votes[c] == top) tied.push_back(c);
    std::size_t pick = tied[0];
    if (tied.size() > 1) {
      // Ties broken uniformly at random, seeded by the model and the row's content, so a row
      // gets the same prediction wherever it appears and whatever the thread count: its non-zero
      // (id, value) pairs, whether or not its data stores values (a set whose values are all 1
      // stores none) and whatever explicit zeros it was written with.
      thread_local std::vector<std::uint32_t> content;  // kept from one tie to the next
      content.clear();
      for (std::uint32_t k = rows.offsets[r]; k < rows.offsets[r + 1]; ++k) {
        const float v = rows.value(k);
        if (v == 0.0f) continue;
        content.push_back(rows.indices[k]);
        content.push_back(std::bit_cast<std::uint32_t>(v));
      }
      SplitMix64 rng(
          XXH3_64bits_withSeed(content.data(), content.size() * sizeof(std::uint32_t), vote_seed));
      pick = tied[rng.below(tied.size())];
    }
    predicted[r] = classes[pick];
    scores[r] = static_cast<double>(top) / static_cast<double>(L - 1);
  });
}

nlohmann::json CpmModel::to_json() const {
  nlohmann::json j = info_json();
  j["hash_bits"] = hash.bits;
  j["scaled"] = !maxabs.empty();
  if (normalize_l2) j["normalize"] = "l2";
  if (!maxabs.empty()) j["maxabs"] = maxabs_json(maxabs);
  nlohmann::json ms = nlohmann::json::array();
  for (const Binary& m : machines) {
    nlohmann::json jm = {{"positive", m.positive}, {"negative", m.negative}};
    nlohmann::json sides = nlohmann::json::array();
    for (const CpmFaces& s : m.sides) {
      nlohmann::json w = nlohmann::json::object();
      const std::size_t K = static_cast<std::size_t>(s.faces);
      for (std::uint64_t slot = 0; slot < s.slots; ++slot) {
        const float* row = &s.weights[slot * K];
        if (std::all_of(row, row + K, [](float x) { return x == 0.0f; })) continue;
        w[std::to_string(slot)] = std::vector<float>(row, row + K);
      }
      sides.push_back({{"outer", s.outer},
                       {"faces", s.faces},
                       {"intercepts", s.intercepts},
                       {"weights", std::move(w)}});
    }
    jm["sides"] = std::move(sides);
    ms.push_back(std::move(jm));
  }
  j["machines"] = std::move(ms);
  return j;
}

std::string CpmModel::to_text() const {
  std::ostringstream out;
  out << info_text() << "hash_bits " << hash.bits << "\n"
      << "scaled " << (maxabs.empty() ? 0 : 1) << "\n";
  char buf[64];
  for (const Binary& m : machines) {
    for (const CpmFaces& s : m.sides) {
      out << "machine " << m.positive << " vs " << m.negative << " outer "
          << (s.outer > 0 ? "+1" : "-1") << " faces " << s.faces << "\n"
          << "intercepts";
      for (const double b : s.intercepts) {
        std::snprintf(buf, sizeof buf, " %.9g", b);
        out << buf;
      }
      out << "\n# " << (hash.bits ? "bucket" : "feature_id") << " weight per face"
          << (maxabs.empty() || hash.bits ? "" : " maxabs (values are divided by it)") << "\n";
      const std::size_t K = static_cast<std::size_t>(s.faces);
      for (std::uint64_t slot = 0; slot < s.slots; ++slot) {
        const float* row = &s.weights[slot * K];
        if (std::all_of(row, row + K, [](float x) { return x == 0.0f; })) continue;
        out << slot;
        for (std::size_t k = 0; k < K; ++k) {
          std::snprintf(buf, sizeof buf, " %.9g", row[k]);
          out << buf;
        }
        if (!maxabs.empty() && !hash.bits) out << " " << maxabs[slot];
        out << "\n";
      }
    }
  }
  return out.str();
}

namespace {

// Counts, per side of every machine, the face that scores each of the side's outer-class rows
// highest (a pair's sides see only the rows of its two classes).
class CpmAssignmentDetails : public EvalDetails {
 public:
  explicit CpmAssignmentDetails(const CpmModel& model) : model_(model) {
    for (const CpmModel::Binary& m : model.machines) {
      counts_.emplace_back();
      for (const CpmFaces& s : m.sides)
        counts_.back().emplace_back(static_cast<std::size_t>(s.faces), 0);
    }
  }

  void add(const CsrView& rows) override {
    std::vector<double> work(static_cast<std::size_t>(model_.max_faces()));
    for (std::size_t m = 0; m < model_.machines.size(); ++m) {
      const CpmModel::Binary& b = model_.machines[m];
      for (std::size_t i = 0; i < b.sides.size(); ++i) {
        const float outer_label =
            static_cast<float>(b.sides[i].outer > 0 ? b.positive : b.negative);
        for (std::size_t r = 0; r < rows.rows; ++r) {
          if (rows.labels[r] != outer_label) continue;
          int face = 0;
          model_.side_score(m, i, rows, r, work.data(), &face);
          ++counts_[m][i][static_cast<std::size_t>(face)];
        }
      }
    }
  }

  // Binary: the keys of one machine with suffix _plus / _minus. Multiclass: the same keys per
  // pair under `pair_assignments`, and per side sign their mean and minimum over the pairs
  // (`assignment_entropy_mean_plus`, `assignment_entropy_min_plus`, ...; the minimum points at
  // the pair whose faces are least used).
  nlohmann::json json() const override {
    if (!model_.multiclass()) return machine_json(0);
    nlohmann::json j = nlohmann::json::object();
    nlohmann::json pairs = nlohmann::json::array();
    for (const char* side : {"plus", "minus"}) {
      double sum = 0, least = 0;
      std::size_t n = 0;
      for (std::size_t m = 0; m < model_.machines.size(); ++m) {
        const nlohmann::json mj = machine_json(m);
        const std::string key = std::string("assignment_entropy_") + side;
        if (!mj.contains(key)) continue;
        const double h = mj[key].get<double>();
        least = n == 0 ? h : std::min(least, h);
        sum += h;
        ++n;
      }
      if (n == 0) continue;
      j[std::string("assignment_entropy_mean_") + side] = sum / static_cast<double>(n);
      j[std::string("assignment_entropy_min_") + side] = least;
      j[std::string("assignment_perplexity_mean_") + side] = std::exp(sum / static_cast<double>(n));
    }
    for (std::size_t m = 0; m < model_.machines.size(); ++m) {
      nlohmann::json mj = {{"positive", model_.machines[m].positive},
                           {"negative", model_.machines[m].negative}};
      mj.update(machine_json(m));
      pairs.push_back(std::move(mj));
    }
    j["pair_assignments"] = std::move(pairs);
    return j;
  }

 private:
  nlohmann::json machine_json(std::size_t m) const {
    nlohmann::json j = nlohmann::json::object();
    const CpmModel::Binary& b = model_.machines[m];
    for (std::size_t i = 0; i < b.sides.size(); ++i) {
      const std::string side = b.sides[i].outer > 0 ? "plus" : "minus";
      const std::vector<std::int64_t>& counts = counts_[m][i];
      std::int64_t total = 0;
      for (const std::int64_t n : counts) total += n;
      std::vector<double> share;
      share.reserve(counts.size());
      for (const std::int64_t n : counts)
        share.push_back(total ? static_cast<double>(n) / static_cast<double>(total) : 0.0);
      const double h = count_entropy(counts);
      j["assignment_entropy_" + side] = h;
      j["assignment_perplexity_" + side] = std::exp(h);
      j["face_share_" + side] = share;
    }
    return j;
  }

  const CpmModel& model_;
  std::vector<std::vector<std::vector<std::int64_t>>> counts_;  // machine, side, face
};

}  // namespace

std::unique_ptr<EvalDetails> CpmModel::eval_details() const {
  if (machines.empty()) return nullptr;
  return std::make_unique<CpmAssignmentDetails>(*this);
}

}  // namespace polymargin::engine
