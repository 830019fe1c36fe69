#include "io/byte_source.h"

#include <bzlib.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "engine/errors.h"
#include "io/atomic_file.h"

namespace polymargin::io {

namespace {

// Compressed input is read in blocks of this size; large enough that syscalls do not matter.
constexpr std::size_t kInputBlock = std::size_t{256} << 10;
// The longest magic we recognise (zstd).
constexpr std::size_t kMagicBytes = 4;

// A file descriptor read sequentially. The first few bytes are read ahead to detect the
// compression (stdin cannot be rewound) and handed out again before the rest.
class FdInput {
 public:
  explicit FdInput(const std::string& path) : name_(display_name(path)) {
    if (path == "-") {
      fd_ = STDIN_FILENO;
    } else {
      struct stat st {};
      const bool fifo = ::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
      // A FIFO's open waits for its writer, where no stop request is polled.
      fd_ = fifo ? open_waiting(path, O_RDONLY | O_CLOEXEC, false)
                 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) throw IoError("cannot open '" + path + "': " + std::strerror(errno));
      owned_ = true;
      // A hint only: the kernel may read ahead more aggressively.
      ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
    }
    try {
      while (head_size_ < kMagicBytes) {
        const std::size_t n = read_fd(head_ + head_size_, kMagicBytes - head_size_);
        if (n == 0) break;
        head_size_ += n;
      }
    } catch (...) {
      close_fd();
      throw;
    }
  }
  ~FdInput() { close_fd(); }
  FdInput(const FdInput&) = delete;
  FdInput& operator=(const FdInput&) = delete;

  std::string_view head() const { return {head_, head_size_}; }
  const std::string& name() const { return name_; }
  int fd() const { return owned_ ? fd_ : -1; }  // -1 for stdin

  std::size_t read(char* out, std::size_t size) {
    if (head_pos_ < head_size_) {
      const std::size_t n = std::min(size, head_size_ - head_pos_);
      std::memcpy(out, head_ + head_pos_, n);
      head_pos_ += n;
      return n;
    }
    return read_fd(out, size);
  }

 private:
  std::size_t read_fd(char* out, std::size_t size) {
    for (;;) {
      const ssize_t n = ::read(fd_, out, size);
      if (n >= 0) return static_cast<std::size_t>(n);
      if (errno != EINTR) throw IoError("cannot read '" + name_ + "': " + std::strerror(errno));
    }
  }
  void close_fd() {
    if (owned_) ::close(fd_);
    owned_ = false;
  }

  std::string name_;
  int fd_ = -1;
  bool owned_ = false;
  char head_[kMagicBytes];
  std::size_t head_size_ = 0;
  std::size_t head_pos_ = 0;
};

class PlainSource final : public ByteSource {
 public:
  explicit PlainSource(std::unique_ptr<FdInput> input)
      : ByteSource(input->name(), SourceCompression::kNone), input_(std::move(input)) {
    map_regular_file();
    // The mapping outlives its descriptor: closed now, so that a run of many inputs, whose
    // mappings are kept while their chunks are parsed, is not bounded by the descriptor limit.
    if (!map_.empty()) input_.reset();
  }
  ~PlainSource() override {
    if (!map_.empty()) ::munmap(const_cast<char*>(map_.data()), map_.size());
  }
  std::size_t read(char* out, std::size_t size) override {
    if (input_) return input_->read(out, size);
    const std::size_t n = std::min(size, map_.size() - map_pos_);
    std::memcpy(out, map_.data() + map_pos_, n);
    map_pos_ += n;
    return n;
  }
  std::string_view mapped() const override { return map_; }

 private:
  // A regular file is parsed straight from the page cache: read() would copy every byte once more,
  // in the pipeline's serial stage. Pipes, stdin and empty files are read as a stream. (A file cut
  // short by another program while mapped raises SIGBUS, which the command line reports as an I/O
  // error, exit 4.)
  void map_regular_file() {
    struct stat st;
    if (input_->fd() < 0 || ::fstat(input_->fd(), &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size <= 0)
      return;
    const auto size = static_cast<std::size_t>(st.st_size);
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, input_->fd(), 0);
    if (p == MAP_FAILED) return;  // read() still works
    ::madvise(p, size, MADV_SEQUENTIAL);
    map_ = {static_cast<const char*>(p), size};
  }

  std::unique_ptr<FdInput> input_;  // null once the file is mapped
  std::string_view map_;
  std::size_t map_pos_ = 0;  // what read() has served of a mapped file
};

// What one call into a decompression library did.
struct DecodeStep {
  std::size_t consumed = 0;  // input bytes used
  std::size_t produced = 0;  // output bytes written
  bool stream_end = false;   // a member / stream / frame is complete
};

// The loop every decoder shares: feed blocks of the file, restart the codec for each concatenated
// member, and call an input that ends inside a member truncated. Once the file is exhausted the
// codec is still called, because it may hold decoded output it had no room for; only a call that
// yields nothing proves the member was cut short.
class DecoderSource : public ByteSource {
 public:
  std::size_t read(char* out, std::size_t size) final {
    std::size_t produced = 0;
    while (produced == 0 && size > 0) {
      if (block_pos_ == block_size_ && !at_eof_) {
        block_size_ = input_->read(block_.get(), kInputBlock);
        block_pos_ = 0;
        at_eof_ = block_size_ == 0;
      }
      const bool input_done = at_eof_ && block_pos_ == block_size_;
      if (input_done && !in_stream_) break;
      if (!in_stream_) start_stream();
      in_stream_ = true;
      const DecodeStep step =
          decode(block_.get() + block_pos_, block_size_ - block_pos_, out, size);
      block_pos_ += step.consumed;
      produced = step.produced;
      if (step.stream_end) {
        in_stream_ = false;
      } else if (input_done && produced == 0) {
        fail(truncated_message_);
      }
    }
    return produced;
  }

 protected:
  DecoderSource(std::unique_ptr<FdInput> input, SourceCompression compression,
                const char* truncated_message)
      : ByteSource(input->name(), compression),
        input_(std::move(input)),
        block_(new char[kInputBlock]),
        truncated_message_(truncated_message) {}

  /// Prepares the codec for a new member (every member after the first needs a reset).
  virtual void start_stream() = 0;
  /// Decodes from `in` into `out`; throws DataError when the data are corrupt.
  virtual DecodeStep decode(const char* in, std::size_t in_size, char* out,
                            std::size_t out_size) = 0;

  [[noreturn]] void fail(const std::string& message) const {
    throw DataError(name(), 0, 0, message);
  }

 private:
  std::unique_ptr<FdInput> input_;
  std::unique_ptr<char[]> block_;
  std::size_t block_size_ = 0;
  std::size_t block_pos_ = 0;
  bool at_eof_ = false;
  bool in_stream_ = false;
  const char* truncated_message_;
};

// z_stream and bz_stream name their buffer fields alike, so one helper points them at the buffers
// and measures what `call` (which returns whether a stream ended) consumed and produced. Both count
// in unsigned int; larger reads are simply served in parts.
template <typename Stream, typename Call>
DecodeStep run_stream(Stream& stream, const char* in, std::size_t in_size, char* out,
                      std::size_t out_size, Call call) {
  const auto clamp = [](std::size_t n) {
    return static_cast<unsigned>(std::min<std::size_t>(n, std::size_t{1} << 30));
  };
  stream.next_in = reinterpret_cast<decltype(stream.next_in)>(const_cast<char*>(in));
  stream.avail_in = clamp(in_size);
  stream.next_out = reinterpret_cast<decltype(stream.next_out)>(out);
  stream.avail_out = clamp(out_size);
  const unsigned avail_in = stream.avail_in, avail_out = stream.avail_out;
  const bool stream_end = call();
  return {avail_in - stream.avail_in, avail_out - stream.avail_out, stream_end};
}

// gzip (and zlib) members, several in a row as `cat a.gz b.gz` produces.
class GzipSource final : public DecoderSource {
 public:
  explicit GzipSource(std::unique_ptr<FdInput> input)
      : DecoderSource(std::move(input), SourceCompression::kGzip,
                      "truncated gzip stream (the file ends inside a member)") {
    std::memset(&stream_, 0, sizeof stream_);
    // 15 + 32: the largest window, and accept either a gzip or a zlib header.
    if (inflateInit2(&stream_, 15 + 32) != Z_OK) throw std::bad_alloc();
  }
  ~GzipSource() override { inflateEnd(&stream_); }

 private:
  void start_stream() override {
    if (started_) inflateReset(&stream_);
    started_ = true;
  }
  DecodeStep decode(const char* in, std::size_t in_size, char* out, std::size_t out_size) override {
    return run_stream(stream_, in, in_size, out, out_size, [&] {
      const int ret = inflate(&stream_, Z_NO_FLUSH);
      if (ret == Z_MEM_ERROR) throw std::bad_alloc();
      if (ret != Z_OK && ret != Z_BUF_ERROR && ret != Z_STREAM_END)
        fail(std::string("corrupt gzip data (") + (stream_.msg ? stream_.msg : "zlib error") + ")");
      return ret == Z_STREAM_END;
    });
  }

  z_stream stream_;
  bool started_ = false;
};

// bzip2 streams, several in a row as pbzip2 and `cat` produce.
class Bzip2Source final : public DecoderSource {
 public:
  explicit Bzip2Source(std::unique_ptr<FdInput> input)
      : DecoderSource(std::move(input), SourceCompression::kBzip2,
                      "truncated bzip2 stream (the file ends inside a stream)") {
    std::memset(&stream_, 0, sizeof stream_);
  }
  ~Bzip2Source() override {
    if (open_) BZ2_bzDecompressEnd(&stream_);
  }

 private:
  // libbz2 has no reset: each stream gets a fresh decoder.
  void start_stream() override {
    if (open_) BZ2_bzDecompressEnd(&stream_);
    open_ = false;
    const int ret = BZ2_bzDecompressInit(&stream_, 0, 0);
    if (ret == BZ_MEM_ERROR) throw std::bad_alloc();
    if (ret != BZ_OK) fail("cannot start the bzip2 decoder");
    open_ = true;
  }
  DecodeStep decode(const char* in, std::size_t in_size, char* out, std::size_t out_size) override {
    return run_stream(stream_, in, in_size, out, out_size, [&] {
      const int ret = BZ2_bzDecompress(&stream_);
      if (ret == BZ_MEM_ERROR) throw std::bad_alloc();
      if (ret != BZ_OK && ret != BZ_STREAM_END)
        fail("corrupt bzip2 data (libbz2 error " + std::to_string(ret) + ")");
      return ret == BZ_STREAM_END;
    });
  }

  bz_stream stream_;
  bool open_ = false;
};

// zstd frames, several in a row (zstd -T, pzstd or `cat` produce them). The streaming decoder
// moves on to the next frame by itself; a return of 0 means a frame is complete and flushed.
class ZstdSource final : public DecoderSource {
 public:
  explicit ZstdSource(std::unique_ptr<FdInput> input)
      : DecoderSource(std::move(input), SourceCompression::kZstd, "truncated zstd frame"),
        context_(ZSTD_createDCtx()) {
    if (!context_) throw std::bad_alloc();
  }
  ~ZstdSource() override { ZSTD_freeDCtx(context_); }

 private:
  void start_stream() override {}
  DecodeStep decode(const char* in, std::size_t in_size, char* out, std::size_t out_size) override {
    ZSTD_inBuffer input{in, in_size, 0};
    ZSTD_outBuffer output{out, out_size, 0};
    const std::size_t ret = ZSTD_decompressStream(context_, &output, &input);
    if (ZSTD_isError(ret)) fail(std::string("corrupt zstd data (") + ZSTD_getErrorName(ret) + ")");
    return {input.pos, output.pos, ret == 0};
  }

  ZSTD_DCtx* context_;
};

}  // namespace

SourceCompression detect_compression(std::string_view head) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(head[i]); };
  if (head.size() >= 2 && byte(0) == 0x1f && byte(1) == 0x8b) return SourceCompression::kGzip;
  if (head.size() >= 3 && head.substr(0, 3) == "BZh") return SourceCompression::kBzip2;
  if (head.size() >= 4) {
    if (byte(0) == 0x28 && byte(1) == 0xb5 && byte(2) == 0x2f && byte(3) == 0xfd)
      return SourceCompression::kZstd;
    // Skippable frames (magic 0x184D2A50..5F, little-endian) may precede the data frames.
    if ((byte(0) & 0xf0) == 0x50 && byte(1) == 0x2a && byte(2) == 0x4d && byte(3) == 0x18)
      return SourceCompression::kZstd;
  }
  return SourceCompression::kNone;
}

const char* compression_name(SourceCompression compression) {
  switch (compression) {
    case SourceCompression::kGzip:
      return "gzip";
    case SourceCompression::kBzip2:
      return "bzip2";
    case SourceCompression::kZstd:
      return "zstd";
    case SourceCompression::kNone:
      break;
  }
  return "plain";
}

std::string display_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

std::unique_ptr<ByteSource> open_byte_source(const std::string& path) {
  auto input = std::make_unique<FdInput>(path);
  switch (detect_compression(input->head())) {
    case SourceCompression::kGzip:
      return std::make_unique<GzipSource>(std::move(input));
    case SourceCompression::kBzip2:
      return std::make_unique<Bzip2Source>(std::move(input));
    case SourceCompression::kZstd:
      return std::make_unique<ZstdSource>(std::move(input));
    case SourceCompression::kNone:
      break;
  }
  return std::make_unique<PlainSource>(std::move(input));
}

}  // namespace polymargin::io
