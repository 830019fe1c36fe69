#include "io/model_file.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "engine/errors.h"
#include "io/atomic_file.h"
#include "io/cpm_model_file.h"
#include "io/kernel_model_file.h"

namespace polymargin::io {

static_assert(std::endian::native == std::endian::little,
              "model files are little-endian; add byte swapping for this platform");

namespace {

constexpr char kMagic[8] = {'P', 'M', 'M', 'O', 'D', 'E', 'L', '\0'};
constexpr std::size_t kPreambleBytes = 32;
constexpr std::size_t kChecksumBytes = 8;

std::size_t dtype_size(const std::string& dtype) {
  if (dtype == "f64") return 8;
  if (dtype == "f32") return 4;
  if (dtype == "u64" || dtype == "i64") return 8;
  if (dtype == "i32") return 4;
  return 0;
}

std::uint64_t padded(std::uint64_t bytes) { return (bytes + 7) / 8 * 8; }

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
T get(const std::string& in, std::size_t offset) {
  T value;
  std::memcpy(&value, in.data() + offset, sizeof value);
  return value;
}

[[noreturn]] void corrupt(const std::string& path, const std::string& message) {
  throw DataError(path, 0, 0, message);
}

// Writes through an AtomicFile while hashing, so nothing is assembled twice in memory.
class HashedWriter {
 public:
  HashedWriter(const std::string& path, bool durable)
      : file_(std::make_unique<AtomicFile>(path, durable)),
        state_(XXH64_createState(), &XXH64_freeState) {
    XXH64_reset(state_.get(), 0);
  }
  void write(std::string_view bytes) {
    file_->write(bytes);
    XXH64_update(state_.get(), bytes.data(), bytes.size());
  }
  void pad_to(std::uint64_t& position, std::uint64_t target) {
    static const char zeros[8] = {};
    write(std::string_view(zeros, target - position));
    position = target;
  }
  /// Appends the checksum and syncs; the file is then ready to be committed.
  std::unique_ptr<AtomicFile> finish() {
    std::string sum;
    put(sum, static_cast<std::uint64_t>(XXH64_digest(state_.get())));
    file_->write(sum);
    file_->sync();
    return std::move(file_);
  }

 private:
  std::unique_ptr<AtomicFile> file_;
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state_;
};

}  // namespace

void ModelArray::check_dtype(const char* expected, const std::string& file) const {
  if (dtype != expected)
    corrupt(file, "array '" + name + "' has dtype " + dtype + ", expected " + expected);
}

const ModelArray& ModelContainer::array(const std::string& name, const std::string& file) const {
  for (const ModelArray& a : arrays)
    if (a.name == name) return a;
  corrupt(file, "model file has no array '" + name + "'");
}

ModelArray& ModelContainer::array(const std::string& name, const std::string& file) {
  return const_cast<ModelArray&>(std::as_const(*this).array(name, file));
}

void write_model_container(const std::string& path, const ModelContainer& model, bool durable) {
  std::vector<ModelArrayView> views;
  for (const ModelArray& a : model.arrays) views.push_back({a.name, a.dtype, a.shape, a.data});
  write_model_container(path, model.header, views, durable);
}

void write_model_container(const std::string& path, const nlohmann::json& header,
                           const std::vector<ModelArrayView>& arrays, bool durable) {
  stage_model_container(path, header, arrays, durable)->commit();
}

std::unique_ptr<AtomicFile> stage_model_container(const std::string& path,
                                                  const nlohmann::json& header_fields,
                                                  const std::vector<ModelArrayView>& model_arrays,
                                                  bool durable) {
  // The header lists every array's place, so it is laid out first: the offsets depend on its
  // padded length and its length on the offsets' digits; iterate to the fixed point (≤ 3 rounds).
  nlohmann::json header = header_fields;
  std::string text;
  for (std::uint64_t assumed = 0;; assumed = padded(text.size())) {
    std::uint64_t offset = kPreambleBytes + assumed;
    nlohmann::json arrays = nlohmann::json::array();
    for (const ModelArrayView& a : model_arrays) {
      arrays.push_back({{"name", a.name},
                        {"dtype", a.dtype},
                        {"shape", a.shape},
                        {"offset", offset},
                        {"bytes", a.size()}});
      offset += padded(a.size());
    }
    header["arrays"] = arrays;
    text = header.dump();
    if (padded(text.size()) == assumed) break;
  }
  std::uint64_t file_bytes = kPreambleBytes + padded(text.size());
  for (const ModelArrayView& a : model_arrays) file_bytes += padded(a.size());
  file_bytes += kChecksumBytes;

  HashedWriter out(path, durable);
  std::string preamble(kMagic, sizeof kMagic);
  put(preamble, kModelFormatVersion);
  put(preamble, std::uint32_t{0});
  put(preamble, static_cast<std::uint64_t>(text.size()));
  put(preamble, file_bytes);
  out.write(preamble);
  out.write(text);
  std::uint64_t position = kPreambleBytes + text.size();
  out.pad_to(position, padded(position));
  std::vector<char> chunk;  // a produced array's next bytes
  for (const ModelArrayView& a : model_arrays) {
    if (a.fill) {
      constexpr std::uint64_t kChunkBytes = std::uint64_t{8} << 20;
      chunk.resize(std::min(kChunkBytes, a.bytes));
      for (std::uint64_t o = 0; o < a.bytes; o += kChunkBytes) {
        const std::span<char> part(chunk.data(), std::min(kChunkBytes, a.bytes - o));
        a.fill(o, part);
        out.write(std::string_view(part.data(), part.size()));
      }
    } else {
      out.write(a.data);
    }
    position += a.size();
    out.pad_to(position, padded(position));
  }
  return out.finish();
}

namespace {

// The preamble of the model file `path` read from `in`, checked (magic, version, a declared length
// that can hold a file): DataError naming the file otherwise. Nothing past it has been read.
std::string read_preamble(std::istream& in, const std::string& path) {
  std::string bytes(kPreambleBytes, '\0');
  in.read(bytes.data(), kPreambleBytes);
  bytes.resize(static_cast<std::size_t>(in.gcount()));
  if (in.bad()) throw IoError("cannot read model file " + path);
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    corrupt(path, "not a polymargin model file (bad magic)");
  if (bytes.size() < kPreambleBytes)
    corrupt(path, "model file is truncated (" + std::to_string(bytes.size()) + " bytes)");
  const auto version = get<std::uint32_t>(bytes, 8);
  if (version != kModelFormatVersion)
    corrupt(path, "model format version " + std::to_string(version) +
                      " is not supported (this build reads version " +
                      std::to_string(kModelFormatVersion) + ")");
  if (get<std::uint64_t>(bytes, 24) < kPreambleBytes + kChecksumBytes)
    corrupt(path, "model file is truncated (it declares " +
                      std::to_string(get<std::uint64_t>(bytes, 24)) + " bytes)");
  return bytes;
}

std::ifstream open_model_file(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw IoError("cannot read model file " + path + ": it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open model file " + path + ": " + std::strerror(errno));
  return in;
}

// A regular file's size against the `file_bytes` its preamble declares: DataError when it is
// shorter, or (`exact`) longer. False for a stream, which has no size to check.
bool check_declared_size(const std::string& path, std::uint64_t file_bytes, bool exact) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return false;
  const std::uint64_t size = std::filesystem::file_size(path, error);
  if (error) throw IoError("cannot read model file " + path + ": " + error.message());
  if (size < file_bytes)
    corrupt(path, "model file is truncated: " + std::to_string(size) + " of " +
                      std::to_string(file_bytes) + " bytes");
  if (exact && size > file_bytes)
    corrupt(path,
            "model file has " + std::to_string(size - file_bytes) + " unexpected trailing bytes");
  return true;
}

}  // namespace

std::string model_file_kind(const std::string& path) {
  std::ifstream in = open_model_file(path);
  std::string preamble;
  try {
    preamble = read_preamble(in, path);
  } catch (const DataError&) {
    return "";
  }
  const auto header_bytes = get<std::uint64_t>(preamble, 16);
  const auto file_bytes = get<std::uint64_t>(preamble, 24);
  if (header_bytes > file_bytes - kPreambleBytes - kChecksumBytes)
    corrupt(path, "model header length out of range");
  // The lengths are only what the file says: nothing is allocated beyond what it holds (a
  // 32-byte file declaring a 6 GiB header was read into a 6 GiB string first).
  check_declared_size(path, file_bytes, false);
  // A stream has no size: its header grows a piece at a time, as its bytes arrive.
  constexpr std::uint64_t kPiece = std::uint64_t{1} << 20;
  std::string header;
  while (header.size() < header_bytes) {
    const std::size_t at = header.size();
    const std::size_t want = std::min<std::uint64_t>(kPiece, header_bytes - at);
    header.resize(at + want);
    if (!in.read(header.data() + at, static_cast<std::streamsize>(want)))
      corrupt(path, "model file is truncated (in its header)");
  }
  try {
    return nlohmann::json::parse(header).value("kind", std::string("?"));
  } catch (const nlohmann::json::exception& e) {
    corrupt(path, std::string("malformed model header: ") + e.what());
  }
}

namespace {

// An array as the header places it: its name, dtype and shape (data still empty), and its bytes.
struct PlacedArray {
  ModelArray array;
  std::uint64_t offset = 0, bytes = 0;
};

// The header's text parsed: its fields and its arrays, each checked to lie within the `body`
// bytes the checksum covers, after the header, and apart from the others.
std::vector<PlacedArray> parse_header(const std::string& text, std::uint64_t body,
                                      const std::string& path, ModelContainer& model) {
  std::vector<PlacedArray> placed;
  try {
    model.header = nlohmann::json::parse(text);
    for (const nlohmann::json& a : model.header.at("arrays")) {
      PlacedArray p;
      p.array.name = a.at("name").get<std::string>();
      p.array.dtype = a.at("dtype").get<std::string>();
      if (!a.at("shape").is_array())
        corrupt(path, "array '" + p.array.name + "' has no shape list");
      for (const nlohmann::json& n : a.at("shape"))
        p.array.shape.push_back(header_integer<std::uint64_t>(n, path, "a shape"));
      p.offset = header_integer<std::uint64_t>(a.at("offset"), path, "offset");
      p.bytes = header_integer<std::uint64_t>(a.at("bytes"), path, "bytes");
      std::uint64_t elements = 1;
      for (const std::uint64_t n : p.array.shape) elements *= n;
      if (dtype_size(p.array.dtype) == 0 || elements * dtype_size(p.array.dtype) != p.bytes ||
          p.offset < kPreambleBytes + text.size() || p.offset > body || p.bytes > body - p.offset)
        corrupt(path, "array '" + p.array.name + "' is malformed or out of range");
      placed.push_back(std::move(p));
    }
  } catch (const nlohmann::json::exception& e) {
    corrupt(path, std::string("malformed model header: ") + e.what());
  }
  model.header.erase("arrays");
  std::unordered_set<std::string_view> names;
  for (const PlacedArray& p : placed)
    if (!names.insert(p.array.name).second)
      corrupt(path, "model file has two arrays named '" + p.array.name + "'");
  // An empty array (a one-vs-one CPM's ASSIGN history without an entropy floor) holds no bytes:
  // it may sit where another begins.
  std::vector<const PlacedArray*> by_offset;
  for (const PlacedArray& p : placed)
    if (p.bytes > 0) by_offset.push_back(&p);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const PlacedArray* a, const PlacedArray* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->offset < by_offset[i - 1]->offset + by_offset[i - 1]->bytes)
      corrupt(path, "arrays '" + by_offset[i - 1]->array.name + "' and '" +
                        by_offset[i]->array.name + "' overlap");
  return placed;
}

// The next `n` bytes of `in` fed to `state`, a megabyte at a time; false when the stream ends
// first.
bool hash_through(std::istream& in, std::uint64_t n, XXH64_state_t& state) {
  std::vector<char> buffer(std::min<std::uint64_t>(n, std::uint64_t{1} << 20));
  while (n > 0) {
    const auto want = static_cast<std::streamsize>(std::min<std::uint64_t>(n, buffer.size()));
    if (!in.read(buffer.data(), want)) return false;
    XXH64_update(&state, buffer.data(), static_cast<std::size_t>(want));
    n -= static_cast<std::uint64_t>(want);
  }
  return true;
}

struct Xxh64StateDeleter {
  void operator()(XXH64_state_t* state) const { XXH64_freeState(state); }
};
using Xxh64State = std::unique_ptr<XXH64_state_t, Xxh64StateDeleter>;

Xxh64State new_hash(const std::string& preamble) {
  Xxh64State state(XXH64_createState());
  if (!state) throw std::bad_alloc();
  XXH64_reset(state.get(), 0);
  XXH64_update(state.get(), preamble.data(), preamble.size());
  return state;
}

// The buffer `place` gives an array, or its own data, `bytes` long.
std::span<char> destination(PlacedArray& p, const nlohmann::json& header, const ArrayPlace& place,
                            const std::string& path) {
  if (place) {
    const std::span<char> into = place(header, p.array, p.bytes);
    if (into.size() == p.bytes && !into.empty()) {
      p.array.placed = into;
      return into;
    }
    if (!into.empty())
      throw std::logic_error("a buffer of the wrong size for array '" + p.array.name + "' of " +
                             path);
  }
  p.array.data.resize(p.bytes);
  return {p.array.data.data(), p.array.data.size()};
}

std::uint64_t read_checksum(std::ifstream& in, const std::string& path) {
  std::string bytes(kChecksumBytes, '\0');
  if (!in.read(bytes.data(), kChecksumBytes)) throw IoError("cannot read model file " + path);
  return get<std::uint64_t>(bytes, 0);
}

// The first pass over a regular file (after its preamble): the checksum over every byte, a
// megabyte at a time, before anything in the file is believed; then the header's text, with the
// stream left just after it. `checksum`: the file's.
std::string checked_header_text(std::ifstream& in, const std::string& preamble,
                                const std::string& path, std::uint64_t& checksum) {
  const auto header_bytes = get<std::uint64_t>(preamble, 16);
  const std::uint64_t body = get<std::uint64_t>(preamble, 24) - kChecksumBytes;
  const Xxh64State state = new_hash(preamble);
  if (!hash_through(in, body - kPreambleBytes, *state))
    throw IoError("cannot read model file " + path);
  checksum = read_checksum(in, path);
  if (XXH64_digest(state.get()) != checksum)
    corrupt(path, "model file is corrupt (checksum mismatch)");
  if (header_bytes > body - kPreambleBytes) corrupt(path, "model header length out of range");
  in.clear();
  in.seekg(static_cast<std::streamoff>(kPreambleBytes));
  std::string text(header_bytes, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(header_bytes)))
    throw IoError("cannot read model file " + path);
  return text;
}

// A regular file read in two passes, so that it is held once, not twice (the whole file, then
// each array copied out of it: a KDD-size CPM is GBs). The first pass checks the checksum over
// every byte, a megabyte at a time, before anything in the file is believed; the second reads
// the header, then each array straight into its own buffer, hashing again: a file that changed
// between the passes is an error, never a model.
ModelContainer read_regular_model_file(std::ifstream& in, const std::string& preamble,
                                       const std::string& path, const ArrayPlace& place) {
  const std::uint64_t body = get<std::uint64_t>(preamble, 24) - kChecksumBytes;
  std::uint64_t checksum = 0;
  const std::string text = checked_header_text(in, preamble, path, checksum);
  ModelContainer model;
  std::vector<PlacedArray> placed = parse_header(text, body, path, model);
  std::vector<std::size_t> order(placed.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return placed[a].offset < placed[b].offset; });
  const Xxh64State state = new_hash(preamble);
  XXH64_update(state.get(), text.data(), text.size());
  std::uint64_t position = kPreambleBytes + text.size();
  bool read = true;
  for (const std::size_t i : order) {
    PlacedArray& p = placed[i];
    if (p.bytes == 0) continue;  // nothing to read, and maybe at an offset already passed
    read = read && hash_through(in, p.offset - position, *state);
    const std::span<char> into = destination(p, model.header, place, path);
    read = read && in.read(into.data(), static_cast<std::streamsize>(into.size()));
    XXH64_update(state.get(), into.data(), into.size());
    position = p.offset + p.bytes;
  }
  read = read && hash_through(in, body - position, *state);
  if (!read || XXH64_digest(state.get()) != checksum || read_checksum(in, path) != checksum)
    throw IoError("model file " + path + " changed while it was read");
  for (PlacedArray& p : placed) model.arrays.push_back(std::move(p.array));
  return model;
}

// A stream without a size (a pipe) after its preamble (`bytes`): read in pieces as they come, up
// to the declared length, then each array copied out of it.
ModelContainer read_model_stream(std::ifstream& in, std::string bytes, const std::string& path,
                                 const ArrayPlace& place) {
  const auto header_bytes = get<std::uint64_t>(bytes, 16);
  const auto file_bytes = get<std::uint64_t>(bytes, 24);
  constexpr std::uint64_t kPiece = std::uint64_t{64} << 20;
  while (bytes.size() <= file_bytes && in) {
    const std::size_t at = bytes.size();
    const std::uint64_t want = std::min<std::uint64_t>(kPiece, file_bytes + 1 - at);
    bytes.resize(at + want);
    in.read(bytes.data() + at, static_cast<std::streamsize>(want));
    bytes.resize(at + static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw IoError("cannot read model file " + path);
  if (bytes.size() < file_bytes)
    corrupt(path, "model file is truncated: " + std::to_string(bytes.size()) + " of " +
                      std::to_string(file_bytes) + " bytes");
  if (bytes.size() > file_bytes) corrupt(path, "model file has unexpected trailing bytes");
  const std::size_t body = bytes.size() - kChecksumBytes;
  if (XXH64(bytes.data(), body, 0) != get<std::uint64_t>(bytes, body))
    corrupt(path, "model file is corrupt (checksum mismatch)");
  if (header_bytes > body - kPreambleBytes) corrupt(path, "model header length out of range");
  ModelContainer model;
  for (PlacedArray& p :
       parse_header(bytes.substr(kPreambleBytes, header_bytes), body, path, model)) {
    const std::span<char> into = destination(p, model.header, place, path);
    if (!into.empty()) std::memcpy(into.data(), bytes.data() + p.offset, into.size());
    model.arrays.push_back(std::move(p.array));
  }
  return model;
}

}  // namespace

ModelContainer read_model_container(const std::string& path, const ArrayPlace& place) {
  std::ifstream in = open_model_file(path);
  // The preamble first: a stream that is not a model file (/dev/urandom) is refused after 32
  // bytes, and no more than the declared length (plus one byte, to tell trailing bytes) is read.
  std::string bytes = read_preamble(in, path);
  const auto file_bytes = get<std::uint64_t>(bytes, 24);
  if (check_declared_size(path, file_bytes, true))
    return read_regular_model_file(in, bytes, path, place);
  return read_model_stream(in, std::move(bytes), path, place);
}

nlohmann::json read_model_header(const std::string& path) {
  std::ifstream in = open_model_file(path);
  const std::string preamble = read_preamble(in, path);
  const auto file_bytes = get<std::uint64_t>(preamble, 24);
  // A stream cannot be read twice: read whole.
  if (!check_declared_size(path, file_bytes, true))
    return read_model_stream(in, preamble, path, {}).header;
  std::uint64_t checksum = 0;
  ModelContainer model;
  // The arrays' bounds are checked, as a whole read checks them.
  parse_header(checked_header_text(in, preamble, path, checksum), file_bytes - kChecksumBytes, path,
               model);
  return model.header;
}

nlohmann::json model_header(const std::string& kind, const engine::ModelInfo& info) {
  nlohmann::json h = {{"kind", kind},
                      {"algorithm", info.algorithm},
                      {"config", info.config},
                      {"labels", {{"negative", info.labels.negative}, {"positive", info.labels.positive}}},
                      {"index_base", info.index_base},
                      {"max_index", info.max_index},
                      {"features", info.features}};
  if (info.multiclass()) h["classes"] = info.classes;
  return h;
}

void read_model_info(const ModelContainer& file, const std::string& path, engine::ModelInfo& info) {
  try {
    const nlohmann::json& h = file.header;
    info.algorithm = h.at("algorithm").get<std::string>();
    info.config = h.at("config");
    info.labels.negative = h.at("labels").at("negative").get<double>();
    info.labels.positive = h.at("labels").at("positive").get<double>();
    if (h.contains("classes")) info.classes = h.at("classes").get<std::vector<double>>();
    info.index_base = header_integer<int>(h.at("index_base"), path, "index_base");
    info.max_index = header_integer<std::uint32_t>(h.at("max_index"), path, "max_index");
    info.features = header_integer<std::uint64_t>(h.at("features"), path, "features");
  } catch (const nlohmann::json::exception& e) {
    corrupt(path, std::string("malformed model header: ") + e.what());
  }
  if (info.index_base != 0 && info.index_base != 1)
    corrupt(path, "index_base must be 0 or 1 (got " + std::to_string(info.index_base) + ")");
  require_finite(info.labels.negative, path, "labels.negative");
  require_finite(info.labels.positive, path, "labels.positive");
  require_finite_all(info.classes, path, "classes");
}

void save_model(const engine::LinearModel& model, const std::string& path) {
  stage_model(model, path)->commit();
}

std::unique_ptr<AtomicFile> stage_model(const engine::LinearModel& model, const std::string& path,
                                        bool durable) {
  nlohmann::json header = model_header("linear", model);
  header["bias"] = {{"value", model.bias_value}, {"weight", model.bias_weight}};
  if (model.normalize_l2) header["normalize"] = "l2";  // absent: none (files before it too)
  // Views, not copies: the weights are hundreds of MB at KDD size.
  std::vector<ModelArrayView> arrays{view_of("weights", model.weights)};
  if (!model.scale.empty()) arrays.push_back(view_of("scale", model.scale));
  return stage_model_container(path, header, arrays, durable);
}

namespace {

std::string model_kind(const ModelContainer& file, const std::string& path) {
  if (!file.header.contains("kind") || !file.header["kind"].is_string())
    corrupt(path, "malformed model header: no 'kind'");
  return file.header["kind"].get<std::string>();
}

// A linear model's weights and scale, read straight into the vectors the model keeps (the weights
// on huge pages): a KDD-size model is held once while it loads, not twice.
struct LinearArrays {
  engine::sparse::WeightVector weights;
  std::vector<float> scale;

  ArrayPlace place() {
    return [this](const nlohmann::json& header, const ModelArray& array,
                  std::uint64_t bytes) -> std::span<char> {
      if (header.value("kind", std::string()) != "linear") return {};
      if (array.name == "weights" && array.dtype == "f64") return into(weights, bytes);
      if (array.name == "scale" && array.dtype == "f32") return into(scale, bytes);
      return {};
    };
  }

 private:
  template <typename Vector>
  static std::span<char> into(Vector& v, std::uint64_t bytes) {
    v.resize(bytes / sizeof(typename Vector::value_type));
    return {reinterpret_cast<char*>(v.data()), bytes};
  }
};

engine::LinearModel linear_from(ModelContainer&& file, const std::string& path,
                                LinearArrays&& read) {
  engine::LinearModel model;
  read_model_info(file, path, model);
  try {
    model.bias_value = file.header.at("bias").at("value").get<double>();
    model.bias_weight = file.header.at("bias").at("weight").get<double>();
    const std::string normalize = file.header.value("normalize", std::string("none"));
    if (normalize != "none" && normalize != "l2")
      corrupt(path, "malformed linear model header: normalize '" + normalize + "'");
    model.normalize_l2 = normalize == "l2";
  } catch (const nlohmann::json::exception& e) {
    corrupt(path, std::string("malformed linear model header: ") + e.what());
  }
  ModelArray& weights = file.array("weights", path);
  model.weights = weights.is_placed()
                      ? std::move(read.weights)
                      : weights.take<double, engine::sparse::HugePageAllocator<double>>(path);
  for (ModelArray& a : file.arrays)
    if (a.name == "scale")
      model.scale = a.is_placed() ? std::move(read.scale) : a.take<float>(path);
  const std::size_t slots = std::size_t{model.max_index} + 1;
  if (model.weights.size() != slots || (!model.scale.empty() && model.scale.size() != slots))
    corrupt(path,
            "weight or scale count does not match max_index " + std::to_string(model.max_index));
  require_finite(model.bias_value, path, "bias.value");
  require_finite(model.bias_weight, path, "bias.weight");
  require_finite_all(model.weights, path, "weights");
  require_finite_all(model.scale, path, "scale");
  return model;
}

// A training checkpoint given where a model is expected: said so, with what to do with it.
void refuse_checkpoint(const std::string& path, const std::string& kind) {
  if (kind == "checkpoint" || kind == "cpm_checkpoint")
    corrupt(path,
            "is a training checkpoint, not a model: finish its run with `train ... --resume " +
                path + "` (the options of the interrupted run), which writes the model");
}

}  // namespace

engine::LinearModel load_model(const std::string& path) {
  LinearArrays read;
  ModelContainer file = read_model_container(path, read.place());
  const std::string kind = model_kind(file, path);
  refuse_checkpoint(path, kind);
  if (kind != "linear") corrupt(path, "holds a '" + kind + "' model, not a linear one");
  return linear_from(std::move(file), path, std::move(read));
}

std::unique_ptr<engine::Classifier> load_classifier(const std::string& path) {
  LinearArrays read;
  ModelContainer file = read_model_container(path, read.place());
  const std::string kind = model_kind(file, path);
  // One line per model kind: its loader lives beside its save function.
  if (kind == "linear")
    return std::make_unique<engine::LinearModel>(
        linear_from(std::move(file), path, std::move(read)));
  if (kind == "cpm") return std::make_unique<engine::CpmModel>(cpm_from(std::move(file), path));
  if (kind == "kernel") return std::make_unique<engine::KernelModel>(kernel_model_from(file, path));
  refuse_checkpoint(path, kind);
  corrupt(path, "holds a model of kind '" + kind + "', which this build does not know");
}

namespace {

// require_finite_all over an array's bytes, read a value at a time (the bytes need not be
// aligned for T).
template <typename T>
void require_finite_bytes(std::string_view bytes, const std::string& path,
                          const std::string& field) {
  for (std::size_t i = 0; i < bytes.size() / sizeof(T); ++i) {
    T value;
    std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
    if (!std::isfinite(value)) require_finite(value, path, field + "[" + std::to_string(i) + "]");
  }
}

// The kind and version of a checkpoint's header against those asked for.
void check_checkpoint_header(const std::string& path, const nlohmann::json& header,
                             const std::string& kind, int version, const std::string& what) {
  const std::string found = header.value("kind", std::string("?"));
  if (found != kind)
    throw DataError(path, 0, 0,
                    "not a " + what + " (a file of kind '" + found +
                        "'); --resume takes the file that --checkpoint wrote");
  const nlohmann::json& saved_json = header.value("checkpoint_version", nlohmann::json(0));
  const int saved = saved_json.is_number_integer() ? saved_json.get<int>() : 0;
  if (saved != version)
    throw DataError(path, 0, 0,
                    "checkpoint version " + std::to_string(saved) +
                        " is not supported (this build reads " + std::to_string(version) + ")");
}

void require_checkpoint_exists(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw IoError("cannot open the checkpoint " + path + " (--resume): no such file");
}

}  // namespace

ModelContainer read_checkpoint_file(const std::string& path, const std::string& kind, int version,
                                    const std::string& what, const ArrayPlace& place) {
  require_checkpoint_exists(path);
  // The header is checked before any array is placed.
  const ArrayPlace checked_place = [&](const nlohmann::json& header, const ModelArray& array,
                                       std::uint64_t bytes) {
    check_checkpoint_header(path, header, kind, version, what);
    return place(header, array, bytes);
  };
  ModelContainer file = read_model_container(path, place ? checked_place : ArrayPlace{});
  check_checkpoint_header(path, file.header, kind, version, what);
  // Every real number of the state is finite: the checksum proves only that the bytes are those
  // written, and a NaN weight would be learnt on and end in a model that every loader refuses.
  for (const ModelArray& a : file.arrays) {
    if (a.dtype == "f64") require_finite_bytes<double>(a.bytes(), path, a.name);
    if (a.dtype == "f32") require_finite_bytes<float>(a.bytes(), path, a.name);
  }
  return file;
}

nlohmann::json read_checkpoint_header(const std::string& path, const std::string& kind, int version,
                                      const std::string& what) {
  require_checkpoint_exists(path);
  const nlohmann::json header = read_model_header(path);
  check_checkpoint_header(path, header, kind, version, what);
  return header;
}

}  // namespace polymargin::io
