// libFuzzer target: the model-file loader (io::load_classifier) on arbitrary bytes. Byte 0 = 0: the
// rest is the file as is. Otherwise the target wraps the rest in a valid preamble (magic, version,
// lengths) and appends the true checksum, so that the fuzzer reaches the JSON header, the array
// table and the per-kind loaders. A file must load (and then score a row) or be refused with
// DataError; nothing else is allowed.
#include <unistd.h>
#include <xxhash.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "engine/errors.h"
#include "io/model_file.h"

namespace {

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace polymargin;
  if (size < 1) return 0;
  std::string file;
  if (data[0] == 0) {
    file.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  } else {
    // rest = u32 header length, then header and arrays.
    if (size < 5) return 0;
    std::uint32_t header_bytes;
    std::memcpy(&header_bytes, data + 1, 4);
    const std::string body(reinterpret_cast<const char*>(data + 5), size - 5);
    file.assign("PMMODEL\0", 8);
    put(file, io::kModelFormatVersion);
    put(file, std::uint32_t{0});
    put(file, static_cast<std::uint64_t>(header_bytes % (body.size() + 1)));
    put(file, static_cast<std::uint64_t>(32 + body.size() + 8));
    file += body;
    put(file, static_cast<std::uint64_t>(XXH64(file.data(), file.size(), 0)));
  }
  static const std::string path =
      (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : std::string("/tmp")) +
      "/pm_model_fuzz." + std::to_string(::getpid());
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(file.data(), file.size());
  try {
    const auto model = io::load_classifier(path);
    // A loaded model must score a row touching its last feature and one beyond it.
    const float label = 1;
    const std::uint32_t offsets[2] = {0, 2};
    const std::uint32_t indices[2] = {model->max_index, model->max_index + 1u};
    CsrView row;
    row.rows = 1;
    row.labels = &label;
    row.offsets = offsets;
    row.indices = indices;  // max_index + 1 may wrap to 0: the scorer needs no order
    double score = 0;
    model->score_batch(row, &score);
  } catch (const DataError&) {
  }
  return 0;
}
