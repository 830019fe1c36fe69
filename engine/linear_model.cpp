#include "engine/linear_model.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <sstream>

namespace polymargin::engine {

std::uint64_t LinearModel::score_batch(const CsrView& rows, double* scores) const {
  // Scoring is a random gather over the weights: rows are independent, so they split across
  // threads; sums that must be reproducible are left to the caller, in row order. A row's gathers
  // are few (tens), so the weight of the non-zero kAhead entries further on, in this row or a
  // later one, is requested before it is needed: the misses on a table of hundreds of MB overlap
  // instead of each stalling its row.
  constexpr std::uint32_t kAhead = 32;
  const double* const w = weights.data();
  std::atomic<std::uint64_t> ignored{0};
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, rows.rows, 1024),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      std::uint64_t skipped = 0;
                      const std::uint32_t end = rows.offsets[range.end()];
                      for (std::size_t r = range.begin(); r != range.end(); ++r) {
                        const std::uint32_t last = std::min(rows.offsets[r + 1] + kAhead, end);
                        for (std::uint32_t k = rows.offsets[r] + kAhead; k < last; ++k)
                          if (rows.indices[k] <= max_index) __builtin_prefetch(w + rows.indices[k]);
                        scores[r] = score(rows, r, &skipped);
                      }
                      if (skipped) ignored += skipped;
                    });
  return ignored.load();
}

// Weights are listed by feature id as written in the data files (raw ids), non-zeros only.
nlohmann::json LinearModel::to_json() const {
  nlohmann::json j = info_json();
  j["bias_value"] = bias_value;
  j["bias_weight"] = bias_weight;
  j["scaled"] = !scale.empty();
  if (normalize_l2) j["normalize"] = "l2";
  nlohmann::json w = nlohmann::json::object();
  for (std::size_t f = 0; f < weights.size(); ++f)
    if (weights[f] != 0) w[std::to_string(f)] = weights[f];
  j["weights"] = std::move(w);
  // The multipliers s_f, non-zero ones (absent: 0). A normalised row's length counts features of
  // weight 0 too, so the scores need every one of them, not only those of the weights.
  if (!scale.empty()) {
    nlohmann::json s = nlohmann::json::object();
    for (std::size_t f = 0; f < scale.size(); ++f)
      if (scale[f] != 0) s[std::to_string(f)] = scale[f];
    j["scale"] = std::move(s);
  }
  return j;
}

std::string LinearModel::to_text() const {
  std::ostringstream out;
  char bias[64];
  std::snprintf(bias, sizeof bias, "bias %.17g %.17g\n", bias_value, bias_weight);
  out << info_text() << bias << (normalize_l2 ? "normalize l2\n" : "") << "# feature_id weight"
      << (scale.empty() ? "" : " scale") << "\n";
  char buf[64];
  // A feature is listed when it has a weight or, in a scaled model, a multiplier (which a
  // normalised row's length counts even where the weight is 0).
  const std::size_t features = std::max(weights.size(), scale.size());
  for (std::size_t f = 0; f < features; ++f) {
    const double w = f < weights.size() ? weights[f] : 0.0;
    const float s = f < scale.size() ? scale[f] : 0.0f;
    if (w == 0 && s == 0) continue;
    std::snprintf(buf, sizeof buf, "%zu %.17g", f, w);
    out << buf;
    if (!scale.empty()) out << " " << s;
    out << "\n";
  }
  return out.str();
}

}  // namespace polymargin::engine
