// Compressed sparse rows: the one currency between io/ (which produces rows) and engine/ (which
// learns from them). A CsrView is non-owning (it may point into a memory-mapped raw shard); a
// CsrBuffer owns recycled storage and hands out views.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

namespace polymargin {

/// A non-owning batch of sparse rows. Row r has non-zeros [offsets[r], offsets[r+1]) in
/// indices/values. Indices are the file's raw feature ids (see the manifest's index_base), strictly
/// increasing within a row. values == nullptr means every stored value is 1.
struct CsrView {
  std::size_t rows = 0;
  const float* labels = nullptr;           // rows entries, raw labels as in the file
  const std::uint32_t* offsets = nullptr;  // rows + 1 entries; offsets[0] may be non-zero
  const std::uint32_t* indices = nullptr;
  const float* values = nullptr;  // nullptr: all ones

  std::size_t nnz() const { return rows == 0 ? 0 : offsets[rows] - offsets[0]; }
  std::size_t row_nnz(std::size_t r) const { return offsets[r + 1] - offsets[r]; }
  float value(std::size_t k) const { return values ? values[k] : 1.0f; }
};

/// Owning CSR storage; clear() keeps capacity so buffers can be recycled without allocation.
struct CsrBuffer {
  std::vector<float> labels;
  std::vector<std::uint32_t> offsets{0};
  std::vector<std::uint32_t> indices;
  std::vector<float> values;  // empty when has_values is false
  bool has_values = false;

  std::size_t rows() const { return labels.size(); }
  std::size_t nnz() const { return indices.size(); }

  void clear() {
    labels.clear();
    offsets.assign(1, 0);
    indices.clear();
    values.clear();
    has_values = false;
  }

  /// Materialises explicit values (all ones so far) so that a non-unit value can be appended.
  void ensure_values() {
    if (!has_values) {
      values.assign(indices.size(), 1.0f);
      has_values = true;
    }
  }

  /// Appends row r of `src`.
  void append_row(const CsrView& src, std::size_t r) {
    const std::uint32_t b = src.offsets[r], e = src.offsets[r + 1];
    // The offsets are 32-bit: the callers cap what they gather (with the limit in their message).
    if (indices.size() + (e - b) > std::numeric_limits<std::uint32_t>::max())
      throw std::length_error("CsrBuffer: more than 4294967295 non-zeros");
    if (src.values && !has_values) ensure_values();
    labels.push_back(src.labels[r]);
    indices.insert(indices.end(), src.indices + b, src.indices + e);
    if (has_values) {
      if (src.values)
        values.insert(values.end(), src.values + b, src.values + e);
      else
        values.insert(values.end(), e - b, 1.0f);
    }
    offsets.push_back(static_cast<std::uint32_t>(indices.size()));
  }

  CsrView view() const {
    CsrView v;
    v.rows = labels.size();
    v.labels = labels.data();
    v.offsets = offsets.data();
    v.indices = indices.data();
    v.values = has_values ? values.data() : nullptr;
    return v;
  }
};

}  // namespace polymargin
