// Hot sparse kernels of the linear learners: dot, axpy (single and fused pair) and prefetch, each
// for a row given as (indices, values, nnz). Everything here is inline and allocation-free, with no
// bounds check, virtual call or branch per non-zero; the caller guarantees every index is inside
// the dense vector. Rows whose values are all 1 (CsrView::values == nullptr) take the kValues =
// false instantiation, which never touches a value array.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

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
template <bool kValues, std::size_t kStride = 1>
inline double dot(const double* __restrict w, const Row& x) {
  double s0 = 0, s1 = 0;
  std::uint32_t k = 0;
  for (; k + 2 <= x.nnz; k += 2) {
    s0 += w[kStride * x.index[k]] * value_at<kValues>(x, k);
    s1 += w[kStride * x.index[k + 1]] * value_at<kValues>(x, k + 1);
  }
  if (k < x.nnz) s0 += w[kStride * x.index[k]] * value_at<kValues>(x, k);
  return s0 + s1;
}

/// w += alpha·x.
template <bool kValues, std::size_t kStride = 1>
inline void axpy(double alpha, const Row& x, double* __restrict w) {
  for (std::uint32_t k = 0; k < x.nnz; ++k)
    w[kStride * x.index[k]] += alpha * value_at<kValues>(x, k);
}

/// w += alpha·x and v += beta·x in one pass over the row (the indices and values are read once).
template <bool kValues, std::size_t kStride = 1>
inline void axpy2(double alpha, double* __restrict w, double beta, double* __restrict v,
                  const Row& x) {
  for (std::uint32_t k = 0; k < x.nnz; ++k) {
    const std::size_t f = kStride * x.index[k];
    const double xv = value_at<kValues>(x, k);
    w[f] += alpha * xv;
    v[f] += beta * xv;
  }
}

/// Runtime dispatch on values == nullptr, for code off the hot path.
template <std::size_t kStride = 1>
inline double dot_any(const double* w, const Row& x) {
  return x.value ? dot<true, kStride>(w, x) : dot<false, kStride>(w, x);
}
template <std::size_t kStride = 1>
inline void axpy_any(double alpha, const Row& x, double* w) {
  x.value ? axpy<true, kStride>(alpha, x, w) : axpy<false, kStride>(alpha, x, w);
}

/// Hints the cache lines of w at the row's indices; kWrite when the next touch is a store. Issued
/// one step ahead, it overlaps the random weight misses of the next row with the current step.
template <std::size_t kStride = 1, bool kWrite = false>
inline void prefetch(const double* w, const Row& x) {
  for (std::uint32_t k = 0; k < x.nnz; ++k)
    __builtin_prefetch(w + kStride * x.index[k], kWrite ? 1 : 0, 3);
}

/// Hints the cache lines of the row's own indices (and values): for rows read out of order, issued
/// a few steps before prefetch() needs those indices to compute its addresses.
template <bool kValues>
inline void prefetch_row(const Row& x) {
  constexpr std::uint32_t kPerLine = 64 / sizeof(std::uint32_t);  // indices and floats alike
  for (std::uint32_t k = 0; k < x.nnz; k += kPerLine) {
    __builtin_prefetch(x.index + k, 0, 3);
    if constexpr (kValues) __builtin_prefetch(x.value + k, 0, 3);
  }
}

/// Allocates on 2 MiB boundaries and asks Linux for transparent huge pages (MADV_HUGEPAGE; THP is
/// often in "madvise" mode). Random access to a weight vector of hundreds of MB otherwise misses
/// the TLB on almost every non-zero; with 2 MiB pages the whole vector fits the TLB. An array of
/// less than a huge page gains nothing from one and is allocated as it is (cache-line aligned):
/// rounded up, a small model's weights cost 2 MiB each (a replica of --workers).
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(std::size_t n) {
    if (n * sizeof(T) < kHugePage) {
      void* p = std::aligned_alloc(64, std::max<std::size_t>(64, (n * sizeof(T) + 63) / 64 * 64));
      if (!p) throw std::bad_alloc();
      return static_cast<T*>(p);
    }
    const std::size_t bytes = (n * sizeof(T) + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, bytes);
    if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: failure only costs speed
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

/// Moves an already filled array of hundreds of MB onto 2 MB pages, now (MADV_COLLAPSE, Linux
/// 6.1+): for tables read at random that were not allocated with HugePageAllocator because their
/// type is a plain std::vector. A hint: on older kernels, or without free huge pages, nothing
/// happens and only speed is lost.
inline void collapse_to_huge_pages(const void* p, std::size_t bytes) {
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end <= begin) return;
#ifdef MADV_HUGEPAGE
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#endif
  // MADV_COLLAPSE is in the kernel's headers, not glibc's; its value is the kernel ABI's.
  constexpr int kMadvCollapse = 25;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, kMadvCollapse);
}

/// Drops the whole pages inside [p, p + bytes) from this process (MADV_DONTNEED). Anonymous
/// memory reads as zero afterwards; a file mapping reads the file again (its pages stay in the
/// page cache, but stop counting in this process's resident memory).
inline void discard_pages(const void* p, std::size_t bytes) {
  constexpr std::uintptr_t kPage = 4096;
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(kPage - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

/// discard_pages for n doubles: memory about to be freed whose content is no longer needed, to
/// lower a peak.
inline void discard_pages(double* p, std::size_t n) {
  discard_pages(static_cast<const void*>(p), n * sizeof(double));
}

/// A dense weight vector of the hot loops.
using WeightVector = std::vector<double, HugePageAllocator<double>>;

}  // namespace polymargin::engine::sparse
