#include "io/text_reader.h"

#include <sys/mman.h>
#include <tbb/info.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "engine/errors.h"
#include "engine/sparse.h"
#include "io/byte_source.h"
#include "io/libsvm_parser.h"

namespace polymargin::io {

IndexBase parse_index_base(const std::string& text) {
  if (text == "auto") return IndexBase::kAuto;
  if (text == "0") return IndexBase::kZero;
  if (text == "1") return IndexBase::kOne;
  throw UsageError("bad index base '" + text + "' (expected auto, 0 or 1)");
}

int index_base_value(IndexBase base) {
  switch (base) {
    case IndexBase::kZero:
      return 0;
    case IndexBase::kOne:
      return 1;
    case IndexBase::kAuto:
      break;
  }
  throw std::logic_error("index_base_value: the automatic index base has not been resolved");
}

namespace {

// Parse tasks in flight per thread: enough to keep every thread busy while the serial stages
// read and deliver, few enough to bound memory at a handful of chunks per thread.
constexpr int kTokensPerThread = 3;

// Growable bytes that, unlike std::vector<char>, do not zero memory about to be overwritten by
// a read (a 4 MiB memset per chunk is a measurable share of the parse time).
class ByteBuffer {
 public:
  char* data() { return data_.get(); }
  const char* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  void clear() { size_ = 0; }
  void shrink_to(std::size_t size) { size_ = size; }

  /// Room for `n` more bytes after size(); commit() what was written there.
  char* reserve_tail(std::size_t n) {
    if (size_ + n > capacity_) {
      const std::size_t capacity = std::max(size_ + n, capacity_ * 2);
      std::unique_ptr<char[]> data(new char[capacity]);
      if (size_ > 0) std::memcpy(data.get(), data_.get(), size_);
      data_ = std::move(data);
      capacity_ = capacity;
    }
    return data_.get() + size_;
  }
  void commit(std::size_t n) { size_ += n; }
  void append(const char* bytes, std::size_t n) {
    if (n == 0) return;
    std::memcpy(reserve_tail(n), bytes, n);
    size_ += n;
  }

 private:
  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

// One unit of pipeline work: whole lines of one input, and what they parsed to.
struct Chunk {
  ByteBuffer text;         // the lines, read from a stream...
  std::string_view piece;  // ...or, for a mapped file, where they lie in the mapping
  std::shared_ptr<const ByteSource> mapping;  // keeps `piece` mapped while the chunk is in flight
  std::size_t skip = 0;    // bytes of a UTF-8 byte-order mark at the start of an input
  std::size_t input = 0;   // which input the lines come from
  // The lines are followed by one longer than max_line_bytes that the reader left out (it may not
  // fit any chunk, or never end): a bad line like one the parser finds, counted in its place.
  bool long_line = false;
  std::uint64_t long_line_bytes = 0;  // its bytes, line end included
  // Reading the input failed after these lines: raised once they are delivered, so that an
  // earlier bad line is still the error reported.
  std::exception_ptr read_error;
  ParsedChunk parsed;

  std::string_view bytes() const {
    return piece.data() ? piece : std::string_view(text.data(), text.size());
  }
  std::string_view lines() const { return bytes().substr(skip); }
};

constexpr std::uintptr_t kPage = 4096;

// Starts reading a piece of a mapped file that is not in the page cache ahead of its parse.
void read_ahead(std::string_view piece) {
  const auto begin = reinterpret_cast<std::uintptr_t>(piece.data()) & ~(kPage - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(piece.data() + piece.size());
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

// Recycles chunks and their buffers; the pipeline's token limit bounds how many ever exist.
class ChunkPool {
 public:
  Chunk* take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) {
      all_.push_back(std::make_unique<Chunk>());
      return all_.back().get();
    }
    Chunk* chunk = free_.back();
    free_.pop_back();
    return chunk;
  }
  void give(Chunk* chunk) {
    std::lock_guard lock(mutex_);
    free_.push_back(chunk);
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<Chunk>> all_;
  std::vector<Chunk*> free_;
};

// Cuts the inputs, one after another, into chunks of about chunk_bytes that end at a line end.
// The bytes after a chunk's last '\n' are carried over to the next chunk of the same input.
class ChunkReader {
 public:
  ChunkReader(const std::vector<std::string>& inputs, std::size_t chunk_bytes,
              std::uint64_t max_line_bytes, std::uint64_t max_bad_lines)
      : inputs_(inputs),
        chunk_bytes_(std::max<std::size_t>(chunk_bytes, 1)),
        max_line_bytes_(std::clamp<std::uint64_t>(max_line_bytes, 1,
                                                  std::numeric_limits<std::uint64_t>::max() - 1)),
        max_bad_lines_(max_bad_lines) {}

  /// Fills `chunk` with the next lines; false when every input is read or one has failed.
  bool next(Chunk& chunk) {
    chunk.text.clear();
    chunk.piece = {};
    chunk.mapping.reset();
    chunk.skip = 0;
    chunk.long_line = false;
    chunk.long_line_bytes = 0;
    chunk.read_error = nullptr;
    while (!failed_ && input_ < inputs_.size()) {
      chunk.input = input_;
      try {
        if (!source_) {
          source_ = open_byte_source(inputs_[input_]);
          at_input_start_ = true;
          source_done_ = false;
        }
        read_lines(chunk);
      } catch (...) {
        // Keep the whole lines read before the failure; the cut-off tail is not a line.
        chunk.read_error = std::current_exception();
        failed_ = true;
        carry_.clear();
        const char* data = chunk.text.data();
        const void* last = data ? memrchr(data, '\n', chunk.text.size()) : nullptr;
        chunk.text.shrink_to(last ? static_cast<const char*>(last) - data + 1 : 0);
        if (binary_) {  // nothing of binary data is delivered
          chunk.text.clear();
          chunk.piece = {};
        }
      }
      const std::string_view bytes = chunk.bytes();
      if (at_input_start_ && (!bytes.empty() || chunk.long_line)) {
        at_input_start_ = false;
        if (bytes.starts_with("\xEF\xBB\xBF")) chunk.skip = 3;
      }
      if (failed_) return true;
      if (source_done_ && carry_.size() == 0) {
        // Chunks of a mapped input may still be in the pipeline: they hold the mapping, which goes
        // with the last of them.
        source_.reset();
        mapped_pos_ = 0;
        ++input_;
      }
      if (!bytes.empty() || chunk.long_line) return true;
    }
    return false;
  }

 private:
  // A NUL in an input's first line (within its first bytes): binary data, refused at once. A later
  // line with a NUL is left to the parser, so that an earlier bad line is still the error named.
  void refuse_binary(std::string_view bytes) {
    const std::string_view head = bytes.substr(0, kBinarySniffBytes);
    const std::size_t nul = head.substr(0, head.find('\n')).find('\0');
    if (nul == std::string_view::npos) return;
    binary_ = true;
    throw DataError(display_name(inputs_[input_]), 1, nul + 1,
                    "binary data (a NUL byte), not LIBSVM text");
  }

  // A line longer than max_line_bytes follows the chunk's lines. Beyond max_bad_lines of them the
  // run fails there anyway: reading stops rather than look for the end of a line that may have
  // none (a stream of digits); the collector reports it.
  bool take_long_line(Chunk& chunk) {
    chunk.long_line = true;
    if (++long_lines_ <= max_bad_lines_) return true;
    failed_ = true;
    return false;
  }

  void read_lines(Chunk& chunk) {
    if (const std::string_view file = source_->mapped(); !file.empty()) {
      if (mapped_pos_ == 0) refuse_binary(file);
      // About chunk_bytes, to the end of the line that crosses that mark; `next` is where the
      // next chunk starts (after a line too long to keep, which ends the chunk).
      std::size_t end = std::min(file.size(), mapped_pos_ + chunk_bytes_);
      std::size_t next = end;
      if (end < file.size()) {
        const std::size_t from = end - 1;
        const std::size_t span = std::min<std::uint64_t>(file.size() - from, max_line_bytes_ + 1);
        const void* nl = std::memchr(file.data() + from, '\n', span);
        if (nl) {
          end = next = static_cast<const char*>(nl) - file.data() + 1;
        } else if (span == file.size() - from) {
          end = next = file.size();  // the last line, without '\n': the parser judges its length
        } else {
          // No line end within max_line_bytes + 1 bytes: the line crossing the mark is too long.
          // The chunk ends before it (after the last line end before the mark).
          const void* last = memrchr(file.data() + mapped_pos_, '\n', from - mapped_pos_);
          end = last ? static_cast<const char*>(last) - file.data() + 1 : mapped_pos_;
          next = file.size();
          if (take_long_line(chunk)) {
            const std::size_t after = from + span;
            const void* line_end = std::memchr(file.data() + after, '\n', file.size() - after);
            if (line_end) next = static_cast<const char*>(line_end) - file.data() + 1;
          }
          chunk.long_line_bytes = next - end;
        }
      }
      chunk.piece = file.substr(mapped_pos_, end - mapped_pos_);
      chunk.mapping = source_;
      if (!chunk.piece.empty()) read_ahead(chunk.piece);
      mapped_pos_ = next;
      source_done_ = next == file.size();
      return;
    }
    ByteBuffer& text = chunk.text;
    text.append(carry_.data(), carry_.size());
    carry_.clear();
    std::size_t target = chunk_bytes_;
    std::size_t searched = 0;  // text before this holds no '\n'
    for (;;) {
      while (text.size() < target && !source_done_) {
        const std::size_t want = target - text.size();
        const std::size_t got = source_->read(text.reserve_tail(want), want);
        if (got == 0) source_done_ = true;
        text.commit(got);
      }
      if (at_input_start_ && searched == 0) refuse_binary({text.data(), text.size()});
      const void* found = text.size() > searched
                              ? memrchr(text.data() + searched, '\n', text.size() - searched)
                              : nullptr;
      if (found) {
        const std::size_t cut = static_cast<const char*>(found) - text.data() + 1;
        carry_.append(text.data() + cut, text.size() - cut);
        text.shrink_to(cut);
        return;
      }
      // A line longer than a chunk: read on until it ends, or until it is too long to be a row.
      if (text.size() > max_line_bytes_) return skip_long_line(chunk);
      if (source_done_) return;  // the input's last line has no '\n' (or nothing is left)
      searched = text.size();
      target *= 2;
    }
  }

  // The text is the start of a line longer than max_line_bytes (no '\n' in it): dropped, and the
  // rest of the line read past a block at a time, so that memory stays bounded.
  void skip_long_line(Chunk& chunk) {
    ByteBuffer& text = chunk.text;
    chunk.long_line_bytes = text.size();
    text.clear();
    if (!take_long_line(chunk)) return;
    const std::size_t block = std::max<std::size_t>(chunk_bytes_, std::size_t{64} << 10);
    while (!source_done_) {
      const std::size_t got = source_->read(text.reserve_tail(block), block);
      if (got == 0) {
        source_done_ = true;
        break;
      }
      const void* nl = std::memchr(text.data(), '\n', got);
      const std::size_t used = nl ? static_cast<const char*>(nl) - text.data() + 1 : got;
      chunk.long_line_bytes += used;
      if (nl) {
        carry_.append(text.data() + used, got - used);
        break;
      }
    }
  }

  const std::vector<std::string>& inputs_;
  const std::size_t chunk_bytes_;
  const std::uint64_t max_line_bytes_;
  const std::uint64_t max_bad_lines_;
  std::uint64_t long_lines_ = 0;  // lines too long to keep, so far
  std::size_t input_ = 0;
  std::shared_ptr<ByteSource> source_;
  std::size_t mapped_pos_ = 0;  // where the next chunk of a mapped input starts
  bool at_input_start_ = true;
  bool source_done_ = false;
  bool failed_ = false;
  bool binary_ = false;  // the failure is refuse_binary's
  ByteBuffer carry_;
};

// The serial, in-order end of the pipeline: numbers lines, enforces max_bad_lines, raises the
// first error in input order and hands rows to the sink.
class Collector {
 public:
  Collector(const std::vector<std::string>& inputs, const TextOptions& options, const RowSink& sink)
      : options_(options), sink_(sink) {
    for (const std::string& input : inputs) names_.push_back(display_name(input));
  }

  void consume(const Chunk& chunk) {
    if (chunk.input != input_) {
      input_ = chunk.input;
      line_base_ = 0;
    }
    const ParsedChunk& parsed = chunk.parsed;
    if (stats_.bad_lines + parsed.bad_lines > options_.max_bad_lines) {
      // The limit falls among lines this chunk skipped. Parse it again, stopping at the first line
      // over the limit, to get that line's message and exactly the rows before it.
      ParsedChunk again;
      const ParseOptions limited{options_.index_base, options_.max_bad_lines - stats_.bad_lines,
                                 options_.max_line_bytes, options_.max_row_nnz};
      parse_libsvm_lines(chunk.lines(), limited, again);
      deliver(again.rows);
      throw too_many_bad_lines(*again.fatal);
    }
    keep_messages(parsed);
    stats_.bad_lines += parsed.bad_lines;
    deliver(parsed.rows);
    if (parsed.fatal) throw too_many_bad_lines(*parsed.fatal);
    stats_.lines += parsed.lines;
    stats_.bytes += chunk.bytes().size();
    stats_.max_index = std::max(stats_.max_index, parsed.max_index);
    stats_.saw_index_zero |= parsed.saw_index_zero;
    line_base_ += parsed.lines;
    if (chunk.long_line) {
      // The same line, message and column as when the parser finds a long line in its chunk.
      const BadLine bad{1, options_.max_line_bytes + 1, long_line_message(options_.max_line_bytes)};
      if (stats_.bad_lines >= options_.max_bad_lines) throw too_many_bad_lines(bad);
      keep_message(bad);
      ++stats_.bad_lines;
      ++stats_.lines;
      stats_.bytes += chunk.long_line_bytes;
      ++line_base_;
    }
    if (chunk.read_error) std::rethrow_exception(chunk.read_error);
  }

  TextStats finish() {
    if (stats_.rows == 0) {
      std::string name;
      for (const std::string& n : names_) name += (name.empty() ? "" : ", ") + n;
      if (stats_.bad_lines == 0) throw DataError(name, 0, 0, "no data rows");
      // Every data line was skipped under --max-bad-lines: say so, and why the first was.
      throw DataError(name, 0, 0,
                      "no data rows: all " + std::to_string(stats_.bad_lines) +
                          " data lines were skipped as bad (--max-bad-lines)" +
                          (stats_.bad_line_messages.empty()
                               ? std::string()
                               : ", the first: " + stats_.bad_line_messages.front()));
    }
    stats_.any_index = stats_.nnz > 0;
    if (options_.index_base == IndexBase::kAuto)
      stats_.resolved_base = stats_.saw_index_zero ? IndexBase::kZero : IndexBase::kOne;
    else
      stats_.resolved_base = options_.index_base;
    return std::move(stats_);
  }

 private:
  DataError located(const BadLine& bad, const std::string& message) const {
    return DataError(names_[input_], line_base_ + bad.line, bad.column, message);
  }
  DataError too_many_bad_lines(const BadLine& bad) const {
    if (options_.max_bad_lines == 0) return located(bad, bad.message);
    return located(bad, bad.message + " (more bad lines than --max-bad-lines " +
                            std::to_string(options_.max_bad_lines) + " allows)");
  }
  void keep_messages(const ParsedChunk& parsed) {
    for (const BadLine& bad : parsed.first_bad_lines) keep_message(bad);
  }
  void keep_message(const BadLine& bad) {
    if (stats_.bad_line_messages.size() < kKeptBadLineMessages)
      stats_.bad_line_messages.push_back(located(bad, bad.message).what());
  }
  void deliver(const CsrBuffer& rows) {
    if (rows.rows() == 0) return;
    stats_.rows += rows.rows();
    stats_.nnz += rows.nnz();
    if (sink_) sink_(rows.view());
  }

  const TextOptions& options_;
  const RowSink& sink_;
  std::vector<std::string> names_;
  std::size_t input_ = 0;
  std::uint64_t line_base_ = 0;  // lines of the current input before the chunk at hand
  TextStats stats_;
};

}  // namespace

TextStats read_libsvm_text(const std::vector<std::string>& inputs, const TextOptions& options,
                           const RowSink& sink) {
  if (inputs.empty()) throw UsageError("no input files given");
  const int threads = options.threads > 0 ? options.threads : tbb::info::default_concurrency();
  const ParseOptions parse_options{options.index_base, options.max_bad_lines,
                                   options.max_line_bytes, options.max_row_nnz};
  ChunkReader reader(inputs, options.chunk_bytes, options.max_line_bytes, options.max_bad_lines);
  ChunkPool pool;
  Collector collector(inputs, options, sink);

  // serial read → parallel parse → serial, in-order delivery; chunks are recycled, so memory
  // stays at a few chunks per thread whatever the input size.
  const auto read = [&](tbb::flow_control& control) -> Chunk* {
    Chunk* chunk = pool.take();
    if (reader.next(*chunk)) return chunk;
    pool.give(chunk);
    control.stop();
    return nullptr;
  };
  const auto parse = [&](Chunk* chunk) {
    parse_libsvm_lines(chunk->lines(), parse_options, chunk->parsed);
    return chunk;
  };
  const auto collect = [&](Chunk* chunk) {
    collector.consume(*chunk);
    // Pages holding only delivered lines leave this process's resident memory, which then stays
    // at a few chunks whatever the file size (the page cache keeps them).
    if (chunk->piece.data())
      engine::sparse::discard_pages(chunk->piece.data(), chunk->piece.size());
    chunk->mapping.reset();  // an input's last chunk unmaps it
    pool.give(chunk);
  };
  tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::parallel_pipeline(
        static_cast<std::size_t>(threads) * kTokensPerThread,
        tbb::make_filter<void, Chunk*>(tbb::filter_mode::serial_in_order, read) &
            tbb::make_filter<Chunk*, Chunk*>(tbb::filter_mode::parallel, parse) &
            tbb::make_filter<Chunk*, void>(tbb::filter_mode::serial_in_order, collect));
  });
  return collector.finish();
}

}  // namespace polymargin::io
