#include "engine/setup.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>

namespace polymargin::engine {

void parallel_batches(std::size_t n, std::size_t batch, const Watch& watch, const char* step,
                      const std::function<void(std::size_t begin, std::size_t end)>& body) {
  batch = std::max<std::size_t>(batch, 1);
  for (std::size_t begin = 0; begin < n; begin += batch) {
    const std::size_t end = std::min(n, begin + batch);
    tbb::parallel_for(tbb::blocked_range<std::size_t>(begin, end, 1),
                      [&](const tbb::blocked_range<std::size_t>& r) { body(r.begin(), r.end()); });
    watch.at(step, static_cast<double>(end) / static_cast<double>(n));
  }
}

std::size_t batch_units(double unit_cost, double target) {
  const auto threads =
      static_cast<std::size_t>(std::max(1, tbb::this_task_arena::max_concurrency()));
  const double per_thread = unit_cost > 0 ? std::floor(target / unit_cost) : 16.0;
  return threads * static_cast<std::size_t>(std::clamp(per_thread, 1.0, 16.0));
}

bool cholesky_in_place(Eigen::Ref<Eigen::MatrixXd> a, const Watch& watch, const char* step) {
  using Eigen::Index;
  using Llt = Eigen::internal::llt_inplace<double, Eigen::Lower>;
  // Eigen 3.4's LLT::compute, i.e. llt_inplace::blocked (Eigen/src/Cholesky/LLT.h), unrolled here
  // so that the watch is called between its blocks: the same block size, the same three calls on
  // the same blocks, so the same bits (tests/engine/setup_test.cpp compares them with LLT's).
  const Index size = a.rows();
  if (size < 32) return Llt::unblocked(a) < 0;
  Index block = size / 8;
  block = (block / 16) * 16;
  block = std::min(std::max(block, Index{8}), Index{128});
  for (Index k = 0; k < size; k += block) {
    const Index bs = std::min(block, size - k);
    const Index rs = size - k - bs;
    Eigen::Block<Eigen::Ref<Eigen::MatrixXd>> a11(a, k, k, bs, bs), a21(a, k + bs, k, rs, bs),
        a22(a, k + bs, k + bs, rs, rs);
    if (Llt::unblocked(a11) >= 0) return false;
    if (rs > 0) {
      a11.adjoint().triangularView<Eigen::Upper>().solveInPlace<Eigen::OnTheRight>(a21);
      a22.selfadjointView<Eigen::Lower>().rankUpdate(a21, -1.0);
    }
    // The work left is the factorisation of the trailing rs × rs block: ∝ rs³.
    const double left = static_cast<double>(rs) / static_cast<double>(size);
    watch.at(step, 1 - left * left * left);
  }
  return true;
}

}  // namespace polymargin::engine
