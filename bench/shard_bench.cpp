// Shard format micro-benchmarks on synthetic KDD Cup 2010-like rows (about 36 non-zeros a row over
// 20.2 M features, most values 1, a few numeric ones at low indices):
//   BM_EncodeBlock / BM_DecodeBlock   one 4096-row block, bytes/s of CSR data (raw and zstd)
//   BM_Scan                           one shuffled epoch over a shard directory, rows/s, with 1
//                                     and 2 threads; the sink only touches each batch
// The scanned data set is generated once per codec into $SHARD_BENCH_DIR (default: a temporary
// directory, removed at exit) with $SHARD_BENCH_ROWS rows (default 500,000; 8,407,752 is KDD size).
// Each BM_Scan also reports the CPU seconds of an epoch over all threads, the peak RSS of the scan
// alone (peak reset before it, Linux only) and the size of the shards relative to the LIBSVM text
// of the same rows.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "engine/csr.h"
#include "io/shard_format.h"
#include "engine/random.h"
#include "io/shards.h"

namespace {

namespace fs = std::filesystem;
using namespace polymargin;
using io::Codec;

constexpr std::uint32_t kFeatures = 20'216'830;  // kdda's feature count
constexpr std::uint32_t kBlockRows = 4096;

unsigned digits(std::uint64_t v) {
  unsigned d = 1;
  while (v >= 10) v /= 10, ++d;
  return d;
}

// Rows shaped like kdda: 20–52 non-zeros, three numeric features among the first 24 indices, the
// rest binary with a skewed index distribution (low ids frequent), labels ±1 with 85% positive.
class KddLike {
 public:
  explicit KddLike(std::uint64_t seed) : rng_(seed) {}

  /// Appends `rows` rows to `out`; returns the bytes the same rows take as LIBSVM text.
  std::uint64_t append(CsrBuffer& out, std::size_t rows) {
    std::uint64_t text = 0;
    out.ensure_values();
    for (std::size_t r = 0; r < rows; ++r) {
      const bool positive = rng_.below(100) < 85;
      out.labels.push_back(positive ? 1.0f : -1.0f);
      text += positive ? 1 : 2;
      const std::size_t n = 20 + rng_.below(33);
      entries_.clear();
      for (int k = 0; k < 3; ++k) {
        const auto thousandths = static_cast<std::uint32_t>(1 + rng_.below(999));
        entries_.push_back({static_cast<std::uint32_t>(1 + rng_.below(24)), thousandths / 1000.0f});
      }
      while (entries_.size() < n) {
        const double u = static_cast<double>(rng_.next() >> 11) * 0x1.0p-53;
        entries_.push_back({25 + static_cast<std::uint32_t>((kFeatures - 25) * u * u * u), 1.0f});
      }
      std::sort(entries_.begin(), entries_.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      std::uint32_t last = 0;
      for (const auto& [index, value] : entries_) {
        if (index == last) continue;  // one value per feature
        last = index;
        out.indices.push_back(index);
        out.values.push_back(value);
        text += 2 + digits(index) + (value == 1.0f ? 1 : 5);  // " idx:1" or " idx:0.123"
      }
      out.offsets.push_back(static_cast<std::uint32_t>(out.indices.size()));
      text += 1;  // newline
    }
    return text;
  }

 private:
  SplitMix64 rng_;
  std::vector<std::pair<std::uint32_t, float>> entries_;
};

std::size_t csr_bytes(const CsrView& v) {
  return 4 * (v.rows + (v.rows + 1) + v.nnz() + (v.values ? v.nnz() : 0));
}

// --- single blocks ---

struct Block {
  CsrBuffer rows;
  std::vector<std::uint8_t> bytes;
};

const Block& sample_block(Codec codec) {
  static std::map<Codec, Block> blocks;
  Block& b = blocks[codec];
  if (b.bytes.empty()) {
    KddLike(7).append(b.rows, kBlockRows);
    io::shard::BlockEncoder(codec, 3).encode(b.rows.view(), 0, 0, b.bytes);
  }
  return b;
}

void BM_EncodeBlock(benchmark::State& state) {
  const auto codec = static_cast<Codec>(state.range(0));
  const Block& b = sample_block(codec);
  io::shard::BlockEncoder encoder(codec, 3);
  std::vector<std::uint8_t> out;
  for (auto _ : state) {
    encoder.encode(b.rows.view(), 0, 0, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * csr_bytes(b.rows.view()));
  state.counters["block_bytes"] = static_cast<double>(b.bytes.size());
  state.SetLabel(io::codec_name(codec));
}

void BM_DecodeBlock(benchmark::State& state) {
  const auto codec = static_cast<Codec>(state.range(0));
  const Block& b = sample_block(codec);
  const std::string file = "bench.pms";
  const io::shard::BlockName name{file, 0, 0};
  const io::shard::IndexEntry entry{0, b.bytes.size(), static_cast<std::uint32_t>(b.rows.rows()),
                                    static_cast<std::uint32_t>(b.rows.nnz())};
  io::shard::BlockDecoder decoder;
  CsrBuffer out;
  for (auto _ : state) {
    io::shard::check_block(b.bytes.data(), entry, codec, name);  // checksum included
    out.clear();
    io::shard::decode_block_append(decoder, b.bytes.data(), codec, name, out);
    benchmark::DoNotOptimize(out.indices.data());
  }
  state.SetBytesProcessed(state.iterations() * csr_bytes(b.rows.view()));
  state.SetItemsProcessed(state.iterations() * b.rows.rows());
  state.SetLabel(io::codec_name(codec));
}

BENCHMARK(BM_EncodeBlock)->Arg(static_cast<int>(Codec::kRaw))->Arg(static_cast<int>(Codec::kZstd));
BENCHMARK(BM_DecodeBlock)->Arg(static_cast<int>(Codec::kRaw))->Arg(static_cast<int>(Codec::kZstd));

// --- whole epochs ---

struct DataDir {
  fs::path root;
  bool owned = false;
  std::map<Codec, std::uint64_t> text_bytes;
  ~DataDir() {
    if (owned) {
      std::error_code ec;
      fs::remove_all(root, ec);
    }
  }
};

std::uint64_t bench_rows() {
  const char* env = std::getenv("SHARD_BENCH_ROWS");
  return env ? std::strtoull(env, nullptr, 10) : 500'000;
}

DataDir& data_dir() {
  static DataDir dir = [] {
    DataDir d;
    if (const char* env = std::getenv("SHARD_BENCH_DIR")) {
      d.root = env;
    } else {
      d.root = fs::temp_directory_path() / ("pm_shard_bench_" + std::to_string(::getpid()));
      d.owned = true;
    }
    fs::create_directories(d.root);
    return d;
  }();
  return dir;
}

// The shard directory of `codec`, written on first use (or reused from $SHARD_BENCH_DIR).
std::string shards_for(Codec codec, std::uint64_t* text_bytes) {
  DataDir& d = data_dir();
  const std::uint64_t rows = bench_rows();
  const fs::path dir =
      d.root / ("kdd-like-" + std::to_string(rows) + "." + io::codec_name(codec) + ".shards");
  const fs::path text_size = dir.string() + ".text-bytes";
  if (!io::is_shard_dir(dir.string()) || !fs::exists(text_size)) {
    io::ConvertOptions options;
    options.codec = codec;
    io::ShardWriter writer(dir.string(), options, 2);
    KddLike gen(2010);
    CsrBuffer batch;
    std::uint64_t text = 0;
    for (std::uint64_t done = 0; done < rows; done += kBlockRows) {
      batch.clear();
      text += gen.append(batch, std::min<std::uint64_t>(kBlockRows, rows - done));
      writer.append(batch.view());
    }
    writer.set_text_bytes(text);
    writer.finish(1, {}, 0);
    std::ofstream(text_size) << text;
  }
  std::ifstream(text_size) >> *text_bytes;
  return dir.string();
}

// Peak RSS since the last reset, in MiB (Linux: VmHWM, reset through /proc/self/clear_refs).
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }
double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  return 0;
}

// CPU seconds of the whole process (every thread), user + system.
double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

void BM_Scan(benchmark::State& state) {
  const auto codec = static_cast<Codec>(state.range(0));
  std::uint64_t text_bytes = 0;
  const io::ShardSet set = io::ShardSet::open(shards_for(codec, &text_bytes), false);
  io::ReadOptions read;
  read.threads = static_cast<int>(state.range(1));
  read.shuffle = state.range(2) != 0;
  std::uint64_t epoch = 0, touched = 0;
  io::ScanStats stats;
  reset_peak_rss();
  const double cpu_start = process_cpu_seconds();
  for (auto _ : state) {
    read.epoch = epoch++;
    stats = set.scan(read, [&](const CsrView& batch) {
      touched += batch.nnz() + batch.indices[batch.offsets[0]];  // the sink reads every batch
    });
  }
  benchmark::DoNotOptimize(touched);
  // All threads' CPU per epoch: on a shared machine, wall time says more about the neighbours.
  state.counters["cpu_s_per_epoch"] =
      (process_cpu_seconds() - cpu_start) / static_cast<double>(state.iterations());
  std::uint64_t bytes = 0;
  for (const auto& s : set.manifest().shards) bytes += s.bytes;
  state.SetItemsProcessed(state.iterations() * set.manifest().rows);
  state.counters["nnz_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * set.manifest().nnz), benchmark::Counter::kIsRate);
  state.counters["wait_s"] = stats.wait_seconds;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
  state.counters["shards_per_text"] = static_cast<double>(bytes) / static_cast<double>(text_bytes);
  state.SetLabel(std::string(io::codec_name(codec)) + (read.shuffle ? " shuffled" : " in order"));
}

BENCHMARK(BM_Scan)
    ->ArgNames({"codec", "threads", "shuffle"})
    ->ArgsProduct({{static_cast<int>(Codec::kRaw), static_cast<int>(Codec::kZstd)}, {1, 2}, {1}})
    ->Args({static_cast<int>(Codec::kRaw), 2, 0})
    ->Args({static_cast<int>(Codec::kZstd), 2, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
