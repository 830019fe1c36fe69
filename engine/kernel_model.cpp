#include "engine/kernel_model.h"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "engine/normalize.h"

namespace polymargin::engine {

std::string decision_name(KernelModel::Decision decision) {
  return decision == KernelModel::Decision::kSign ? "sign" : "nearer_plane";
}

double KernelModel::score(const CsrView& rows, std::size_t r, std::vector<double>& dense,
                          std::uint64_t* ignored) const {
  // The row as the learner saw it: features beyond the model dropped, values divided by their
  // training max |value| in float (the reader's arithmetic), then widened. Under that scaling a
  // feature no training row had is dropped too (it has no max |value|): ignored, as beyond.
  const std::uint32_t b = rows.offsets[r], e = rows.offsets[r + 1];
  double norm2 = 0;
  std::uint64_t skipped = 0;
  for (std::uint32_t k = b; k < e; ++k) {
    const std::uint32_t f = rows.indices[k];
    if (!knows(f)) {
      ++skipped;
      continue;
    }
    const float v = maxabs_scaled(rows.value(k), maxabs, f);
    if (!maxabs.empty() && maxabs[f] == 0 && rows.value(k) != 0) ++skipped;
    dense[f] = v;
    norm2 += static_cast<double>(v) * v;
  }
  if (normalize_l2 && norm2 > 0) {  // normalize_rows_l2's arithmetic: v / norm in double, to float
    const double norm = std::sqrt(norm2);
    norm2 = 0;
    for (std::uint32_t k = b; k < e; ++k) {
      const std::uint32_t f = rows.indices[k];
      if (f > max_index) continue;
      const float v = static_cast<float>(static_cast<float>(dense[f]) / norm);
      dense[f] = v;
      norm2 += static_cast<double>(v) * v;
    }
  }
  const CsrView sv = vectors.rows.view();
  const std::size_t expansions = coefficients.size();
  double f[2] = {intercepts[0], expansions > 1 ? intercepts[1] : 0.0};
  for (std::size_t j = 0; j < sv.rows; ++j) {
    const double kv = kernel(gather_dot(dense.data(), sv, j), norm2, vectors.norm2[j]);
    for (std::size_t x = 0; x < expansions; ++x) f[x] += coefficients[x][j] * kv;
  }
  for (std::uint32_t k = b; k < e; ++k)
    if (rows.indices[k] <= max_index) dense[rows.indices[k]] = 0;
  if (ignored) *ignored += skipped;
  if (decision == Decision::kSign) return f[0];
  return std::abs(f[1]) / plane_norms[1] - std::abs(f[0]) / plane_norms[0];
}

std::uint64_t KernelModel::score_batch(const CsrView& rows, double* scores) const {
  std::atomic<std::uint64_t> ignored{0};
  tbb::enumerable_thread_specific<std::vector<double>> dense(
      [&] { return std::vector<double>(std::size_t{max_index} + 1, 0.0); });
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, rows.rows, 16),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      std::vector<double>& d = dense.local();
                      std::uint64_t skipped = 0;
                      for (std::size_t r = range.begin(); r != range.end(); ++r)
                        scores[r] = score(rows, r, d, &skipped);
                      if (skipped) ignored += skipped;
                    });
  return ignored.load();
}

void KernelModel::check() const {
  const std::size_t n = vectors.size();
  if (coefficients.empty() || coefficients.size() > 2 || intercepts.size() != coefficients.size())
    throw std::invalid_argument("a kernel model has one or two expansions, each with an intercept");
  for (const auto& c : coefficients)
    if (c.size() != n) throw std::invalid_argument("coefficient count differs from vector count");
  if (vectors.norm2.size() != n) throw std::invalid_argument("vector norms missing");
  if (n > 0 && vectors.max_index > max_index)
    throw std::invalid_argument("a vector has a feature beyond max_index");
  if (!maxabs.empty() && maxabs.size() != std::size_t{max_index} + 1)
    throw std::invalid_argument("scaling vector size differs from max_index + 1");
  if (decision == Decision::kNearerPlane &&
      (coefficients.size() != 2 || plane_norms.size() != 2 || !(plane_norms[0] > 0) ||
       !(plane_norms[1] > 0)))
    throw std::invalid_argument("a nearer-plane model needs two expansions with positive norms");
}

nlohmann::json KernelModel::to_json() const {
  nlohmann::json j = info_json();
  j["kernel"] = kernel.json();
  j["decision"] = decision_name(decision);
  j["scaled"] = !maxabs.empty();
  if (normalize_l2) j["normalize"] = "l2";
  if (!maxabs.empty()) j["maxabs"] = maxabs_json(maxabs);
  j["intercepts"] = intercepts;
  if (!plane_norms.empty()) j["plane_norms"] = plane_norms;
  nlohmann::json rows = nlohmann::json::array();
  const CsrView v = vectors.rows.view();
  for (std::size_t i = 0; i < v.rows; ++i) {
    nlohmann::json features = nlohmann::json::object();
    for (std::uint32_t k = v.offsets[i]; k < v.offsets[i + 1]; ++k)
      features[std::to_string(v.indices[k])] = v.value(k);
    nlohmann::json c = nlohmann::json::array();
    for (const auto& expansion : coefficients) c.push_back(expansion[i]);
    rows.push_back({{"coefficients", c}, {"features", features}});
  }
  j["vectors"] = std::move(rows);
  return j;
}

std::string KernelModel::to_text() const {
  std::ostringstream out;
  out << info_text() << "kernel " << kernel.json().dump() << "\n"
      << "decision " << decision_name(decision) << "\n"
      << "scaled " << (maxabs.empty() ? "no" : "yes") << "\n"
      << (normalize_l2 ? "normalize l2\n" : "");
  char buf[64];
  if (!maxabs.empty()) {  // the divisors other than 1, feature:max|x| (0: no training row had it)
    out << "maxabs";
    for (std::size_t f = static_cast<std::size_t>(index_base); f < maxabs.size(); ++f)
      if (maxabs[f] != 1.0f) {
        std::snprintf(buf, sizeof buf, " %zu:%.9g", f, static_cast<double>(maxabs[f]));
        out << buf;
      }
    out << "\n";
  }
  out << "intercepts";
  for (const double b : intercepts) {
    std::snprintf(buf, sizeof buf, " %.17g", b);
    out << buf;
  }
  out << "\n";
  if (!plane_norms.empty()) {
    out << "plane_norms";
    for (const double n : plane_norms) {
      std::snprintf(buf, sizeof buf, " %.17g", n);
      out << buf;
    }
    out << "\n";
  }
  out << "vectors " << vectors.size() << "\n# coefficient(s) then feature:value (scaled space)\n";
  const CsrView v = vectors.rows.view();
  for (std::size_t i = 0; i < v.rows; ++i) {
    for (std::size_t x = 0; x < coefficients.size(); ++x) {
      std::snprintf(buf, sizeof buf, "%s%.17g", x ? " " : "", coefficients[x][i]);
      out << buf;
    }
    for (std::uint32_t k = v.offsets[i]; k < v.offsets[i + 1]; ++k) {
      std::snprintf(buf, sizeof buf, " %u:%.9g", v.indices[k], static_cast<double>(v.value(k)));
      out << buf;  // a float's every digit
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace polymargin::engine
