// Test helpers for io/: a temporary directory, files written into it, in-memory gzip / bzip2 /
// zstd compression (so that fixtures need no external tools), and stdin redirected to a file.
#pragma once

#include <bzlib.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "engine/csr.h"

namespace polymargin::io::testing {

/// A fresh directory under the test temp dir, removed with everything in it at destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "polymargin_io_XXXXXX";
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// Writes `bytes` to `name` inside the directory and returns the file's path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string path = (path_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path);
    return path;
  }
  /// Path of `name` inside the directory.
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  /// Number of entries in the directory.
  std::size_t entries() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(path_)) ++n;
    return n;
  }

 private:
  std::filesystem::path path_;
};

/// One gzip member holding `text`.
inline std::string gzip(const std::string& text) {
  z_stream stream{};
  if (deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  std::string out(deflateBound(&stream, text.size()) + 64, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int ret = deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  if (ret != Z_STREAM_END) throw std::runtime_error("deflate failed");
  return out;
}

/// One bzip2 stream holding `text`.
inline std::string bzip2(const std::string& text) {
  unsigned size = static_cast<unsigned>(text.size() + text.size() / 100 + 600);
  std::string out(size, '\0');
  if (BZ2_bzBuffToBuffCompress(out.data(), &size, const_cast<char*>(text.data()),
                               static_cast<unsigned>(text.size()), 9, 0, 0) != BZ_OK)
    throw std::runtime_error("BZ2_bzBuffToBuffCompress failed");
  out.resize(size);
  return out;
}

/// One zstd frame holding `text`.
inline std::string zstd(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const std::size_t size = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  if (ZSTD_isError(size)) throw std::runtime_error("ZSTD_compress failed");
  out.resize(size);
  return out;
}

/// `bytes` without its last `n` bytes.
inline std::string cut(const std::string& bytes, std::size_t n) {
  return bytes.substr(0, bytes.size() - n);
}

/// Rows as canonical text, one "label idx:value ..." line each (shortest round-trip floats), so
/// that batches can be compared whatever their boundaries and value storage.
inline std::string dump_rows(const CsrView& rows) {
  std::string out;
  char number[32];
  const auto put = [&](float v) {
    out.append(number, std::to_chars(number, number + sizeof number, v).ptr);
  };
  for (std::size_t r = 0; r < rows.rows; ++r) {
    put(rows.labels[r]);
    for (std::uint32_t k = rows.offsets[r]; k < rows.offsets[r + 1]; ++k) {
      out += ' ' + std::to_string(rows.indices[k]) + ':';
      put(rows.value(k));
    }
    out += '\n';
  }
  return out;
}

/// Points stdin at a file for the lifetime of the object, then restores it.
class StdinFrom {
 public:
  explicit StdinFrom(const std::string& path) : saved_(dup(STDIN_FILENO)) {
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (!file || saved_ < 0) throw std::runtime_error("cannot redirect stdin");
    dup2(fileno(file), STDIN_FILENO);
    std::fclose(file);
  }
  ~StdinFrom() {
    dup2(saved_, STDIN_FILENO);
    close(saved_);
  }
  StdinFrom(const StdinFrom&) = delete;
  StdinFrom& operator=(const StdinFrom&) = delete;

 private:
  int saved_;
};

}  // namespace polymargin::io::testing
