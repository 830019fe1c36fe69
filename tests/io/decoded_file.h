// Test helpers for the writers of io/: a whole file read back, decompressed
// by its name (.zst: every concatenated zstd frame; .gz: gzip members), independently of io/'s
// own readers.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tests/io/test_files.h"

namespace polymargin::io::testing {

/// The bytes of a file as stored.
inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Every frame of a zstd stream, decompressed; throws on a truncated or corrupt stream.
inline std::string unzstd(const std::string& bytes) {
  ZSTD_DStream* d = ZSTD_createDStream();
  std::string out;
  std::string buf(ZSTD_DStreamOutSize(), '\0');
  ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
  std::size_t last = 0;
  while (in.pos < in.size) {
    ZSTD_outBuffer o{buf.data(), buf.size(), 0};
    last = ZSTD_decompressStream(d, &o, &in);
    if (ZSTD_isError(last)) {
      ZSTD_freeDStream(d);
      throw std::runtime_error(ZSTD_getErrorName(last));
    }
    out.append(buf.data(), o.pos);
  }
  ZSTD_freeDStream(d);
  if (last != 0) throw std::runtime_error("truncated zstd frame");
  return out;
}

/// A gzip stream (every member), decompressed.
inline std::string gunzip(const std::string& bytes) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) throw std::runtime_error("inflateInit2 failed");
  std::string out;
  std::string buf(1 << 16, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  int rc = Z_OK;
  while (z.avail_in > 0 || rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buf.data());
    z.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      throw std::runtime_error("corrupt gzip stream");
    }
    out.append(buf.data(), buf.size() - z.avail_out);
    if (rc == Z_STREAM_END && z.avail_in > 0) inflateReset(&z);
    if (rc == Z_STREAM_END && z.avail_in == 0) break;
  }
  inflateEnd(&z);
  return out;
}

/// The text of a file, decompressed according to its name.
inline std::string decoded_file(const std::string& path) {
  const std::string bytes = file_bytes(path);
  if (path.ends_with(".zst")) return unzstd(bytes);
  if (path.ends_with(".gz")) return gunzip(bytes);
  return bytes;
}

}  // namespace polymargin::io::testing
