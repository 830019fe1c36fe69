#include "io/atomic_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "engine/errors.h"

namespace polymargin::io {

namespace {
std::atomic<unsigned> temp_counter{0};

std::string errno_text() { return std::strerror(errno); }
}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  temp_path_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(temp_counter++);
  file_ = std::fopen(temp_path_.c_str(), "wb");
  if (!file_) throw IoError("cannot create " + temp_path_ + ": " + errno_text());
  pending_ = true;
}

AtomicFile::~AtomicFile() {
  if (file_) std::fclose(file_);
  if (pending_) std::remove(temp_path_.c_str());
}

void AtomicFile::write(std::string_view bytes) {
  if (bytes.empty()) return;
  if (!file_) throw std::logic_error("AtomicFile::write after sync()");
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size())
    throw IoError("cannot write " + path_ + ": " + errno_text());
}

void AtomicFile::sync() {
  if (!file_) return;
  if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0)
    throw IoError("cannot write " + path_ + ": " + errno_text());
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (closed != 0) throw IoError("cannot write " + path_ + ": " + errno_text());
}

void AtomicFile::commit() {
  sync();
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0)
    throw IoError("cannot rename " + temp_path_ + " to " + path_ + ": " + errno_text());
  pending_ = false;
}

void write_file_atomically(const std::string& path, std::string_view content) {
  AtomicFile file(path);
  file.write(content);
  file.commit();
}

}  // namespace polymargin::io
