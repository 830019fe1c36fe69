#include "engine/linear_model.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <atomic>

namespace polymargin::engine {

std::uint64_t LinearModel::score_batch(const CsrView& rows, double* scores) const {
  // Scoring is a random gather over the weights: rows are independent, so they split across
  // threads; sums that must be reproducible are left to the caller, in row order.
  std::atomic<std::uint64_t> ignored{0};
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, rows.rows, 1024),
                    [&](const tbb::blocked_range<std::size_t>& range) {
                      std::uint64_t skipped = 0;
                      for (std::size_t r = range.begin(); r != range.end(); ++r)
                        scores[r] = score(rows, r, &skipped);
                      if (skipped) ignored += skipped;
                    });
  return ignored.load();
}

}  // namespace polymargin::engine
