// Hot sparse kernels of the linear learners: dot, axpy (single and fused pair) and prefetch, each
// for a row given as (indices, values, nnz). Everything here is inline and allocation-free, with no
// bounds check, virtual call or branch per non-zero; the caller guarantees every index is inside
// the dense vector. Rows whose values are all 1 (CsrView::values == nullptr) take the kValues =
// false instantiation, which never touches a value array.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/csr.h"

namespace polymargin::engine::sparse {

/// One sparse row: nnz (index, value) pairs; value == nullptr means every value is 1.
struct Row {
  const std::uint32_t* index = nullptr;
  const float* value = nullptr;
  std::uint32_t nnz = 0;
};

/// Row r of a batch.
inline Row row(const CsrView& rows, std::size_t r) {
  const std::uint32_t b = rows.offsets[r];
  return {rows.indices + b, rows.values ? rows.values + b : nullptr, rows.offsets[r + 1] - b};
}

template <bool kValues>
inline double value_at(const Row& x, std::uint32_t k) {
  if constexpr (kValues) {
    return x.value[k];
  } else {
    return 1.0;
  }
}

/// w·x. Two accumulators let consecutive gathers overlap; the summation order is fixed, so the
/// result is a deterministic function of the row and w.
template <bool kValues>
inline double dot(const double* __restrict w, const Row& x) {
  double s0 = 0, s1 = 0;
  std::uint32_t k = 0;
  for (; k + 2 <= x.nnz; k += 2) {
    s0 += w[x.index[k]] * value_at<kValues>(x, k);
    s1 += w[x.index[k + 1]] * value_at<kValues>(x, k + 1);
  }
  if (k < x.nnz) s0 += w[x.index[k]] * value_at<kValues>(x, k);
  return s0 + s1;
}

/// w += alpha·x.
template <bool kValues>
inline void axpy(double alpha, const Row& x, double* __restrict w) {
  for (std::uint32_t k = 0; k < x.nnz; ++k) w[x.index[k]] += alpha * value_at<kValues>(x, k);
}

/// w += alpha·x and v += beta·x in one pass over the row (the indices and values are read once).
template <bool kValues>
inline void axpy2(double alpha, double* __restrict w, double beta, double* __restrict v,
                  const Row& x) {
  for (std::uint32_t k = 0; k < x.nnz; ++k) {
    const std::uint32_t f = x.index[k];
    const double xv = value_at<kValues>(x, k);
    w[f] += alpha * xv;
    v[f] += beta * xv;
  }
}

/// Runtime dispatch on values == nullptr, for code off the hot path.
inline double dot(const double* w, const Row& x) {
  return x.value ? dot<true>(w, x) : dot<false>(w, x);
}
inline void axpy(double alpha, const Row& x, double* w) {
  x.value ? axpy<true>(alpha, x, w) : axpy<false>(alpha, x, w);
}

/// Hints the cache lines of w at the row's indices; kWrite when the next touch is a store. Issued
/// one step ahead, it overlaps the random weight misses of the next row with the current step.
template <bool kWrite = false>
inline void prefetch(const double* w, const Row& x) {
  for (std::uint32_t k = 0; k < x.nnz; ++k) __builtin_prefetch(w + x.index[k], kWrite ? 1 : 0, 3);
}

}  // namespace polymargin::engine::sparse
