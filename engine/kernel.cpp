#include "engine/kernel.h"

#include <tbb/blocked_range.h>
#include <tbb/blocked_range2d.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>

#include "engine/errors.h"
#include "engine/random.h"
#include "engine/setup.h"

namespace polymargin::engine {

namespace {

constexpr std::size_t kTile = 128;

void scatter(const CsrView& rows, std::size_t i, double* dense, bool clear) {
  for (std::uint32_t k = rows.offsets[i]; k < rows.offsets[i + 1]; ++k)
    dense[rows.indices[k]] = clear ? 0.0 : rows.value(k);
}

}  // namespace

KernelType parse_kernel(const std::string& name) {
  if (name == "linear") return KernelType::kLinear;
  if (name == "rbf") return KernelType::kRbf;
  if (name == "poly" || name == "polynomial") return KernelType::kPolynomial;
  throw ConfigError("kernel", "must be linear, rbf or poly (got '" + name + "')");
}

std::string kernel_name(KernelType type) {
  switch (type) {
    case KernelType::kLinear:
      return "linear";
    case KernelType::kRbf:
      return "rbf";
    case KernelType::kPolynomial:
      return "poly";
  }
  return "?";
}

double KernelSpec::operator()(double dot, double norm2_u, double norm2_v) const {
  double k = 0;
  switch (type) {
    case KernelType::kLinear:
      k = dot;
      break;
    case KernelType::kRbf:
      k = std::exp(-gamma * std::max(0.0, norm2_u + norm2_v - 2 * dot));
      break;
    case KernelType::kPolynomial: {
      const double base = gamma * dot + coef0;
      k = 1;
      for (int d = 0; d < degree; ++d) k *= base;
      break;
    }
  }
  return k + bias * bias;
}

nlohmann::json KernelSpec::json() const {
  nlohmann::json j = {{"kernel", kernel_name(type)}, {"bias", bias}};
  if (type != KernelType::kLinear) j["gamma"] = gamma;
  if (type == KernelType::kPolynomial) {
    j["degree"] = degree;
    j["coef0"] = coef0;
  }
  return j;
}

void KernelSpec::validate() const {
  if (type != KernelType::kLinear && !(gamma > 0 && std::isfinite(gamma)))
    throw ConfigError("gamma", "must be positive and finite (got " + message_number(gamma) + ")");
  if (type == KernelType::kPolynomial && (degree < 1 || degree > 20))
    throw ConfigError("degree", "must be in 1..20 (got " + std::to_string(degree) + ")");
  if (!std::isfinite(coef0)) throw ConfigError("coef0", "must be finite");
  if (!(bias >= 0) || !std::isfinite(bias))
    throw ConfigError("bias", "must be ≥ 0 and finite (got " + std::to_string(bias) + ")");
}

void RowSet::finish() {
  const CsrView v = rows.view();
  norm2.assign(v.rows, 0.0);
  max_index = 0;
  for (std::size_t i = 0; i < v.rows; ++i) {
    double s = 0;
    for (std::uint32_t k = v.offsets[i]; k < v.offsets[i + 1]; ++k) {
      const double x = v.value(k);
      s += x * x;
      max_index = std::max(max_index, v.indices[k]);
    }
    norm2[i] = s;
  }
}

CsrView RowSet::row(std::size_t i) const {
  CsrView v = rows.view();
  CsrView r;
  r.rows = 1;
  r.labels = v.labels + i;
  r.offsets = v.offsets + i;
  r.indices = v.indices;
  r.values = v.values;
  return r;
}

double mean_pairwise_distance(const RowSet& x, std::uint64_t seed, std::uint64_t max_pairs) {
  const std::size_t m = x.size();
  if (m < 2) return 0;
  const CsrView v = x.rows.view();
  const std::size_t dim = std::size_t{x.max_index} + 1;
  tbb::enumerable_thread_specific<std::vector<double>> dense([&] {
    return std::vector<double>(dim, 0.0);
  });
  const auto pairs_all = static_cast<std::uint64_t>(m) * (m - 1) / 2;
  const bool exact = pairs_all <= max_pairs;
  // Per-row (or per-chunk) partial sums, added up serially in order afterwards.
  const std::size_t chunks = exact ? m : 256;
  std::vector<double> partial(chunks, 0.0);
  const std::uint64_t per_chunk = exact ? 0 : (max_pairs + chunks - 1) / chunks;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, chunks, 1),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      std::vector<double>& d = dense.local();
                      for (std::size_t c = range.begin(); c != range.end(); ++c) {
                        double s = 0;
                        if (exact) {
                          scatter(v, c, d.data(), false);
                          for (std::size_t j = 0; j < c; ++j) {
                            const double sq =
                                x.norm2[c] + x.norm2[j] - 2 * gather_dot(d.data(), v, j);
                            s += std::sqrt(std::max(0.0, sq));
                          }
                          scatter(v, c, d.data(), true);
                        } else {
                          SplitMix64 rng(derive_seed(seed, 0x64656c7461ull, c));
                          for (std::uint64_t p = 0; p < per_chunk; ++p) {
                            const std::size_t i = rng.below(m);
                            std::size_t j = rng.below(m - 1);
                            if (j >= i) ++j;
                            scatter(v, i, d.data(), false);
                            const double sq =
                                x.norm2[i] + x.norm2[j] - 2 * gather_dot(d.data(), v, j);
                            scatter(v, i, d.data(), true);
                            s += std::sqrt(std::max(0.0, sq));
                          }
                        }
                        partial[c] = s;
                      }
                    });
  double total = 0;
  for (const double s : partial) total += s;
  return total / static_cast<double>(exact ? pairs_all : per_chunk * chunks);
}

Eigen::MatrixXd gram_matrix(const RowSet& x, const KernelSpec& kernel, const Watch& watch) {
  const std::size_t m = x.size();
  Eigen::MatrixXd g(m, m);
  const CsrView v = x.rows.view();
  const std::size_t dim = std::size_t{x.max_index} + 1;
  tbb::enumerable_thread_specific<std::vector<double>> dense([&] {
    return std::vector<double>(dim, 0.0);
  });
  const std::size_t tiles = (m + kTile - 1) / kTile;
  // Lower-triangle tiles (ti ≥ tj), numbered row by row: row j's non-zeros of a column tile stay
  // in cache while the tile's rows are scattered one after the other.
  std::vector<std::pair<std::size_t, std::size_t>> work;
  for (std::size_t ti = 0; ti < tiles; ++ti)
    for (std::size_t tj = 0; tj <= ti; ++tj) work.emplace_back(ti, tj);
  // In batches of tiles, with the watch between them: each entry is computed alone, so the
  // batching changes nothing of the result.
  const double row_nnz =
      static_cast<double>(x.rows.indices.size()) / static_cast<double>(std::max<std::size_t>(m, 1));
  const double tile_cost = static_cast<double>(kTile * kTile) * (2 * row_nnz + 16);
  parallel_batches(work.size(), batch_units(tile_cost), watch, "kernel matrix",
                   [&](std::size_t begin, std::size_t end) {
                     std::vector<double>& d = dense.local();
                     for (std::size_t w = begin; w != end; ++w) {
                       const auto [ti, tj] = work[w];
                       const std::size_t i_end = std::min(m, (ti + 1) * kTile);
                       const std::size_t j_end = std::min(m, (tj + 1) * kTile);
                       for (std::size_t i = ti * kTile; i < i_end; ++i) {
                         scatter(v, i, d.data(), false);
                         const std::size_t j_last = std::min(j_end, i + 1);
                         for (std::size_t j = tj * kTile; j < j_last; ++j)
                           g(i, j) = kernel(gather_dot(d.data(), v, j), x.norm2[i], x.norm2[j]);
                         scatter(v, i, d.data(), true);
                       }
                     }
                   });
  // Mirror: exact symmetry. Column-major, so column j's lower part is read contiguously.
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, m, 64),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      for (std::size_t j = range.begin(); j != range.end(); ++j)
                        for (std::size_t i = j + 1; i < m; ++i) g(j, i) = g(i, j);
                    });
  return g;
}

}  // namespace polymargin::engine
