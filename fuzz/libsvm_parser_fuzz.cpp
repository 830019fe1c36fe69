// libFuzzer target: the LIBSVM line parser on arbitrary bytes. Byte 0 picks the index base and
// whether bad lines are skipped; the rest is the text. Beyond "no crash, no sanitizer report", the
// parsed rows must satisfy what every consumer trusts: consistent offsets, strictly increasing
// indices (≥ 1 under index base 1), finite labels and values, max_index the largest index.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "io/libsvm_parser.h"

namespace {
void require(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace polymargin::io;
  if (size == 0) return 0;
  ParseOptions options;
  options.index_base = data[0] % 3 == 0 ? IndexBase::kAuto
                       : data[0] % 3 == 1 ? IndexBase::kZero
                                          : IndexBase::kOne;
  options.max_bad_lines = (data[0] & 8) ? 1000 : 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  ParsedChunk out;
  parse_libsvm_lines(text, options, out);

  const polymargin::CsrBuffer& rows = out.rows;
  require(rows.offsets.size() == rows.rows() + 1 && rows.offsets.front() == 0);
  require(rows.offsets.back() == rows.nnz());
  require(!rows.has_values || rows.values.size() == rows.nnz());
  std::uint32_t max_index = 0;
  for (std::size_t r = 0; r < rows.rows(); ++r) {
    require(std::isfinite(rows.labels[r]));
    require(rows.offsets[r] <= rows.offsets[r + 1]);
    for (std::uint32_t k = rows.offsets[r]; k < rows.offsets[r + 1]; ++k) {
      if (k > rows.offsets[r]) require(rows.indices[k] > rows.indices[k - 1]);
      if (options.index_base == IndexBase::kOne) require(rows.indices[k] >= 1);
      if (rows.has_values) require(std::isfinite(rows.values[k]));
      max_index = std::max(max_index, rows.indices[k]);
    }
  }
  require(rows.rows() == 0 || max_index == out.max_index);
  require(out.first_bad_lines.size() <= kKeptBadLineMessages);
  require(options.max_bad_lines > 0 || out.bad_lines == 0);
  return 0;
}
