// Kernels of the regular-scale learners (kernel LDM, Twin LDM, CMM) and the in-memory row set they
// train on. docs/algorithms.md §3.4:
//   linear      k(u, v) = u·v
//   rbf         k(u, v) = exp(−γ‖u − v‖²),  γ = 1/(2σ²), σ = width (the LDM paper's grid gives σ
//               relative to δ, the mean distance between training rows: σ ∈ {2^−2 δ, …, 2^2 δ})
//   polynomial  k(u, v) = (γ u·v + c0)^degree
// plus an optional constant B² (a regularised bias feature of value B appended to every row).
// ‖u − v‖² is u·u + v·v − 2u·v from sparse dots with cached squared norms, clamped at 0.
//
// Reproducibility: every Gram entry is one dot product summed in a fixed order (row i scattered
// into a dense vector, row j's non-zeros gathered in index order), so the matrix is the same
// whatever the tiling or the thread count; the upper triangle is a copy of the lower one, so G is
// exactly symmetric.
#pragma once

#include <Eigen/Dense>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/csr.h"
#include "engine/stop.h"

namespace polymargin::engine {

enum class KernelType { kLinear, kRbf, kPolynomial };

/// "linear" | "rbf" | "poly"; UsageError otherwise.
KernelType parse_kernel(const std::string& name);
std::string kernel_name(KernelType type);

/// A kernel with its parameters resolved (the RBF γ is absolute here, not relative to δ).
struct KernelSpec {
  KernelType type = KernelType::kRbf;
  double gamma = 1;   // rbf: exp(−γ‖u−v‖²); poly: (γ u·v + c0)^degree
  double coef0 = 0;   // poly
  int degree = 3;     // poly
  double bias = 0;    // B: adds B² to every kernel value (0: none)

  /// k from the dot product and the squared norms of the two rows.
  double operator()(double dot, double norm2_u, double norm2_v) const;
  nlohmann::json json() const;
  /// Throws UsageError naming the first invalid parameter.
  void validate() const;
};

/// RBF γ for a width σ: 1/(2σ²).
inline double rbf_gamma_for_width(double width) { return 1.0 / (2.0 * width * width); }

/// Rows held in memory (CSR, raw feature ids) with their squared norms: the training set of a
/// regular-scale learner, or a model's support vectors.
struct RowSet {
  CsrBuffer rows;               // labels unused by the kernels
  std::vector<double> norm2;    // ‖x_i‖², summed in index order
  std::uint32_t max_index = 0;  // largest feature id present (dense scatter vectors have +1 slots)

  std::size_t size() const { return rows.rows(); }
  /// Recomputes norm2 and max_index from rows.
  void finish();
  /// Row i as a view of one row.
  CsrView row(std::size_t i) const;
};

/// Exact mean Euclidean distance over all pairs i < j when there are at most `max_pairs` of them,
/// else over `max_pairs` seeded random pairs i ≠ j (a function of the seed only). Parallel, with a
/// reduction in a fixed order: the result does not depend on the thread count.
double mean_pairwise_distance(const RowSet& x, std::uint64_t seed,
                              std::uint64_t max_pairs = 2'000'000);

/// The m × m Gram matrix G_ij = k(x_i, x_j), in parallel over 128 × 128 tiles of the lower
/// triangle (oneTBB); bit-identical whatever the thread count. `watch` is called between batches of
/// tiles (step "kernel matrix").
Eigen::MatrixXd gram_matrix(const RowSet& x, const KernelSpec& kernel, const Watch& watch = {});

/// Row j of `rows` dotted with a dense copy of another row, its non-zeros gathered in index order
/// with two accumulators: the one dot product every kernel value is made of, in training and in
/// prediction alike.
inline double gather_dot(const double* dense, const CsrView& rows, std::size_t j) {
  const std::uint32_t b = rows.offsets[j], e = rows.offsets[j + 1];
  double s0 = 0, s1 = 0;
  std::uint32_t k = b;
  if (rows.values) {
    for (; k + 2 <= e; k += 2) {
      s0 += dense[rows.indices[k]] * rows.values[k];
      s1 += dense[rows.indices[k + 1]] * rows.values[k + 1];
    }
    if (k < e) s0 += dense[rows.indices[k]] * rows.values[k];
  } else {
    for (; k + 2 <= e; k += 2) {
      s0 += dense[rows.indices[k]];
      s1 += dense[rows.indices[k + 1]];
    }
    if (k < e) s0 += dense[rows.indices[k]];
  }
  return s0 + s1;
}

/// Bytes of an m × m double matrix.
inline double square_matrix_bytes(std::uint64_t m) { return 8.0 * static_cast<double>(m) * m; }

}  // namespace polymargin::engine
