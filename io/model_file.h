// Model files: a versioned, checksummed container of a JSON header plus named typed arrays, so that
// every learner (linear LDM/SVM now; CPM's K × features weights later) shares one format.
//
// Layout (little-endian):
//   0   "PMMODEL\0"                   magic
//   8   u32 format version            kModelFormatVersion; other versions are refused
//   12  u32 reserved (0)
//   16  u64 header bytes              length of the JSON header
//   24  u64 file bytes                total length, so truncation is named as such
//   32  JSON header, zero-padded to a multiple of 8:
//         {"kind": "linear", ..., "arrays": [{"name", "dtype": "f64"|"f32", "shape": [...],
//                                              "offset", "bytes"}, ...]}
//   …   the arrays, each 8-byte aligned, at the offsets the header gives
//   end u64 xxh64 (seed 0) of every byte before it
// Files are written under a temporary name in the target's directory, fsync'ed and renamed.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/classifier.h"
#include "engine/errors.h"
#include "engine/linear_model.h"
#include "io/atomic_file.h"
#include "io/json_integer.h"

namespace polymargin::io {

inline constexpr std::uint32_t kModelFormatVersion = 1;

/// One named array of a model file; data holds shape-product elements of dtype, little-endian.
struct ModelArray {
  std::string name;
  std::string dtype;  // "f64", "f32"; checkpoints also "u64", "i64", "i32"
  std::vector<std::uint64_t> shape;
  std::string data;
  std::span<char>
      placed;  // the buffer a reader's ArrayPlace gave, which holds its bytes (not data)

  bool is_placed() const { return !placed.empty(); }
  /// Its bytes, wherever they were read to.
  std::string_view bytes() const {
    return is_placed() ? std::string_view(placed.data(), placed.size()) : std::string_view(data);
  }

  /// "f64" for double, "f32" for float, "u64" / "i64" / "i32" for those integers.
  template <typename T>
  static constexpr const char* dtype_of() {
    if constexpr (std::is_same_v<T, double>) return "f64";
    else if constexpr (std::is_same_v<T, float>) return "f32";
    else if constexpr (std::is_same_v<T, std::uint64_t>) return "u64";
    else if constexpr (std::is_same_v<T, std::int64_t>) return "i64";
    else {
      static_assert(std::is_same_v<T, std::int32_t>, "f64, f32, u64, i64 or i32 only");
      return "i32";
    }
  }

  template <typename T, typename Alloc>
  static ModelArray of(std::string name, const std::vector<T, Alloc>& values) {
    ModelArray array;
    array.name = std::move(name);
    array.dtype = dtype_of<T>();
    array.shape = {values.size()};
    array.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
    return array;
  }
  /// The elements as T, in a vector with any allocator (weights go on huge pages); throws
  /// DataError (naming `file`) if the dtype does not match.
  template <typename T, typename Alloc = std::allocator<T>>
  std::vector<T, Alloc> as(const std::string& file) const {
    check_dtype(dtype_of<T>(), file);
    std::vector<T, Alloc> values(data.size() / sizeof(T));
    if (!values.empty()) std::memcpy(values.data(), data.data(), values.size() * sizeof(T));
    return values;
  }
  /// As as(), the bytes freed once copied: a loader that converts each array once holds the
  /// model once plus the array in hand, not twice.
  template <typename T, typename Alloc = std::allocator<T>>
  std::vector<T, Alloc> take(const std::string& file) {
    std::vector<T, Alloc> values = as<T, Alloc>(file);
    std::string().swap(data);
    return values;
  }

 private:
  void check_dtype(const char* expected, const std::string& file) const;
};

/// A model file's content: the header (its "arrays" entry is managed by the writer) and the arrays.
struct ModelContainer {
  nlohmann::json header = nlohmann::json::object();
  std::vector<ModelArray> arrays;

  /// The array called `name`; throws DataError naming `file` when it is missing.
  const ModelArray& array(const std::string& name, const std::string& file) const;
  ModelArray& array(const std::string& name, const std::string& file);
};

/// Writes atomically; throws IoError.
void write_model_container(const std::string& path, const ModelContainer& model,
                           bool durable = true);

/// An array written straight from memory, without a copy (a checkpoint's weights), or, when `fill`
/// is set, produced a chunk at a time as it is written (a CPM's float weights from its training
/// accumulators): `fill(offset, out)` writes the array's bytes [offset, offset + out.size()) into
/// `out`, and `bytes` is the array's length.
struct ModelArrayView {
  using Fill = std::function<void(std::uint64_t offset, std::span<char> out)>;
  ModelArrayView(std::string name, std::string dtype, std::vector<std::uint64_t> shape,
                 std::string_view data)
      : name(std::move(name)), dtype(std::move(dtype)), shape(std::move(shape)), data(data) {}
  ModelArrayView(std::string name, std::string dtype, std::vector<std::uint64_t> shape,
                 std::uint64_t bytes, Fill fill)
      : name(std::move(name)),
        dtype(std::move(dtype)),
        shape(std::move(shape)),
        bytes(bytes),
        fill(std::move(fill)) {}

  std::string name;
  std::string dtype;  // as ModelArray::dtype
  std::vector<std::uint64_t> shape;
  std::string_view data;
  std::uint64_t bytes = 0;  // with fill only
  Fill fill;

  std::uint64_t size() const { return fill ? bytes : data.size(); }
};
/// A view of `values` as the array `name`.
template <typename T, typename Alloc>
ModelArrayView view_of(std::string name, const std::vector<T, Alloc>& values) {
  return {std::move(name), ModelArray::dtype_of<T>(), {values.size()},
          std::string_view(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T))};
}
/// write_model_container from views: same file. Not `durable`: no fsync (AtomicFile's), for a
/// file its writer reads back at once and removes.
void write_model_container(const std::string& path, const nlohmann::json& header,
                           const std::vector<ModelArrayView>& arrays, bool durable = true);
/// The same file, written and synced under its temporary name: it appears at `path` when the
/// returned file is committed, and is removed if it is dropped instead. Throws IoError.
std::unique_ptr<AtomicFile> stage_model_container(const std::string& path,
                                                  const nlohmann::json& header,
                                                  const std::vector<ModelArrayView>& arrays,
                                                  bool durable = true);
/// Where an array's bytes go as a file is read, asked once the header is parsed and checked: a
/// loader that keeps an array in a buffer of its own (a linear model's weights, hundreds of MB)
/// sizes that buffer to `bytes` and returns it, so that the array is held once; an empty span
/// keeps the bytes in ModelArray::data.
using ArrayPlace = std::function<std::span<char>(const nlohmann::json& header,
                                                 const ModelArray& array, std::uint64_t bytes)>;
/// Reads and validates (magic, version, length, checksum, header, array bounds, names unique);
/// throws DataError naming the file for a foreign, other-version, truncated or corrupt file,
/// IoError if unreadable. Reads no more than the preamble from a file or stream that is not a
/// model file, and no more than the length the preamble declares (plus one byte) from one that is.
/// An array that `place` gives a buffer is read into it and marked `placed`.
ModelContainer read_model_container(const std::string& path, const ArrayPlace& place = {});
/// The header of the model file `path`, after a pass over the whole file for its checksum (as
/// read_model_container makes first), without reading the arrays: DataError naming the file for a
/// foreign, truncated or corrupt file, IoError if unreadable. A stream is read whole.
nlohmann::json read_model_header(const std::string& path);
/// The "kind" of the model file `path` ("linear", "checkpoint", ...) read from its header alone,
/// or "" when `path` is not a polymargin model file; DataError for a malformed header, IoError when
/// it cannot be read.
std::string model_file_kind(const std::string& path);

/// An integer field of a model or checkpoint header: DataError naming `path` and `field` unless
/// `j` is a JSON integer within T's range.
template <typename T>
T header_integer(const nlohmann::json& j, const std::string& path, const std::string& field) {
  if (const std::optional<T> v = json_integer<T>(j)) return *v;
  throw DataError(path, 0, 0,
                  "malformed header: " + field + " is not an integer in range (" + j.dump() + ")");
}

/// A real-valued field of a model file: DataError naming `path` and `field` unless `value` is
/// finite (the checksum only proves the bytes are those written: a NaN weight predicted nan for
/// every row, and eval scored it with exit 0).
inline void require_finite(double value, const std::string& path, const std::string& field) {
  if (std::isfinite(value)) return;
  const char* what = std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
  throw DataError(path, 0, 0, field + " is not finite (" + what + ")");
}
/// The same for every element of an array field, named field[i].
template <typename Range>
void require_finite_all(const Range& values, const std::string& path, const std::string& field) {
  std::size_t i = 0;
  for (const auto value : values) {
    if (!std::isfinite(value))
      require_finite(static_cast<double>(value), path, field + "[" + std::to_string(i) + "]");
    ++i;
  }
}

/// The header fields every model kind shares (engine::ModelInfo), under the given kind.
nlohmann::json model_header(const std::string& kind, const engine::ModelInfo& info);
/// Reads them back; throws DataError naming `path` when one is missing or malformed.
void read_model_info(const ModelContainer& file, const std::string& path, engine::ModelInfo& info);

/// A linear model (kind "linear"): header = model_header + bias; arrays "weights" (f64) and, when
/// the model scales its input, "scale" (f32).
void save_model(const engine::LinearModel& model, const std::string& path);
/// save_model staged as stage_model_container does (train writes it while its final pass runs).
std::unique_ptr<AtomicFile> stage_model(const engine::LinearModel& model, const std::string& path,
                                        bool durable = true);
engine::LinearModel load_model(const std::string& path);

/// Any model file, whatever its kind; throws DataError for a corrupt file or an unknown kind.
std::unique_ptr<engine::Classifier> load_classifier(const std::string& path);

/// The checkpoint `path`, read and checked to be of `kind` and `version`: DataError naming the
/// file for another kind (a model file, another learner's checkpoint; `what` names the expected
/// one: "training checkpoint") or another version, or for a real number that is not finite;
/// IoError when unreadable. An array that `place` gives a buffer is read into it (and checked
/// there), once the header is known to be such a checkpoint's.
ModelContainer read_checkpoint_file(const std::string& path, const std::string& kind, int version,
                                    const std::string& what, const ArrayPlace& place = {});
/// The header of the checkpoint `path` (read_model_header: the file's checksum checked first),
/// its kind and version checked as read_checkpoint_file checks them: what a run decides before it
/// allocates, and a damaged or wrong file refused before any data are opened.
nlohmann::json read_checkpoint_header(const std::string& path, const std::string& kind, int version,
                                      const std::string& what);

}  // namespace polymargin::io
