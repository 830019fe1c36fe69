#include "io/cell_cache.h"

#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "engine/errors.h"
#include "io/atomic_file.h"
#include "io/shards.h"

namespace polymargin::io {
namespace fs = std::filesystem;

int for_each_batch(const std::vector<std::string>& inputs, int threads, const RowSink& sink) {
  if (inputs.size() == 1 && is_shard_dir(inputs[0])) {
    const Dataset dataset = Dataset::open(inputs, ConvertOptions{}, threads);
    ReadOptions read;
    read.shuffle = false;
    read.threads = threads;
    dataset.shards().scan(read, sink);
    return dataset.shards().manifest().index_base;
  }
  TextOptions text;
  text.threads = threads;
  return index_base_value(read_libsvm_text(inputs, text, sink).resolved_base);
}

namespace {

std::string hex(const XXH128_hash_t& h) {
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return text;
}

}  // namespace

std::string hash_text(const std::string& text) { return hex(XXH3_128bits(text.data(), text.size())); }

std::string data_checksum(const std::string& path) {
  const std::string file = is_shard_dir(path) ? path + "/manifest.json" : path;
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError("cannot open data " + path);
  const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                      &XXH3_freeState);
  XXH3_128bits_reset(state.get());
  std::vector<char> buffer(std::size_t{1} << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    XXH3_128bits_update(state.get(), buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw IoError("cannot read data " + path);
  return hex(XXH3_128bits_digest(state.get()));
}

CellCache::CellCache(std::string directory) : directory_(std::move(directory)) {
  fs::create_directories(directory_);
}

std::string CellCache::file_for(const nlohmann::json& key) const {
  return directory_ + "/" + hash_text(key.dump()) + ".json";
}

std::string CellCache::side_file(const nlohmann::json& key, const std::string& suffix) const {
  return directory_ + "/" + hash_text(key.dump()) + suffix;
}

nlohmann::json CellCache::find(const nlohmann::json& key) const {
  std::ifstream in(file_for(key));
  if (!in) return nullptr;
  try {
    nlohmann::json cell = nlohmann::json::parse(in);
    if (cell.value("key", nlohmann::json()) == key && cell.contains("result")) return cell["result"];
  } catch (const nlohmann::json::exception&) {
    // Unreadable (cannot happen with atomic writes unless edited by hand): recompute.
  }
  return nullptr;
}

void CellCache::store(const nlohmann::json& key, const nlohmann::json& result) const {
  write_file_atomically(file_for(key), nlohmann::json{{"key", key}, {"result", result}}.dump(1));
}

}  // namespace polymargin::io
