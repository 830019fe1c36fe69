#include "engine/normalize.h"

namespace polymargin::engine {

void normalize_rows_l2(CsrBuffer& rows) {
  rows.ensure_values();
  float* const v = rows.values.data();
  const std::uint32_t* const offsets = rows.offsets.data();
  for (std::size_t r = 0; r < rows.rows(); ++r) {
    const std::uint32_t b = offsets[r], e = offsets[r + 1];
    const double norm = l2_norm(v + b, e - b);
    if (norm > 0)
      for (std::uint32_t k = b; k < e; ++k) v[k] = static_cast<float>(v[k] / norm);
  }
}

}  // namespace polymargin::engine
