// LIBSVM text parsing speed on KDD-Cup-like text (about 36 non-zeros a row, indices up to 2e7,
// mostly ":1" values): the line parser alone on one thread, and the whole reader (read, parallel
// parse, in-order delivery) on 1 and 2 threads from a file in the page cache. Reports bytes/s and
// rows/s of wall time, and MB_per_cpu_s: bytes per second of CPU time summed over every thread of
// the process, which is the per-core speed and stays meaningful on a machine shared with others.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/libsvm_parser.h"
#include "io/text_reader.h"

namespace {

using polymargin::CsrView;
namespace io = polymargin::io;

constexpr std::size_t kTextBytes = std::size_t{128} << 20;
constexpr std::uint32_t kMaxIndex = 20'000'000;

// Rows like kdda's: a handful of real-valued features first, then binary ones spread over 2e7.
std::string make_kdd_like_text(std::size_t bytes) {
  std::mt19937_64 random(2010);
  std::uniform_int_distribution<std::uint32_t> index(1, kMaxIndex);
  std::poisson_distribution<int> nnz(36);
  std::uniform_real_distribution<float> real(0.0f, 1.0f);
  std::string text;
  text.reserve(bytes + 4096);
  std::vector<std::uint32_t> row;
  char number[32];
  while (text.size() < bytes) {
    text += random() % 8 ? "1" : "0";
    row.clear();
    const int n = std::max(1, nnz(random));
    for (int k = 0; k < n; ++k) row.push_back(index(random));
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    for (std::size_t k = 0; k < row.size(); ++k) {
      text += ' ';
      text.append(number, std::to_chars(number, number + sizeof number, row[k]).ptr);
      if (k < 3) {
        text += ':';
        text.append(number, std::to_chars(number, number + sizeof number, real(random)).ptr);
      } else {
        text += ":1";
      }
    }
    text += '\n';
  }
  return text;
}

const std::string& kdd_text() {
  static const std::string text = make_kdd_like_text(kTextBytes);
  return text;
}

// The same text as a file, so the whole reader can be measured; in /dev/shm where there is one.
// Written on first use, removed by main.
std::string kdd_file_path;

const std::string& kdd_file() {
  if (kdd_file_path.empty()) {
    const std::string dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    kdd_file_path = dir + "/polymargin_parse_bench_" + std::to_string(getpid()) + ".svm";
    std::ofstream out(kdd_file_path, std::ios::binary);
    out.write(kdd_text().data(), static_cast<std::streamsize>(kdd_text().size()));
  }
  return kdd_file_path;
}

// User + system CPU seconds of every thread of the process so far.
double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Sets the throughput counters for `iterations` passes over `bytes` of text.
void report(benchmark::State& state, std::size_t bytes, double cpu_seconds) {
  const auto total = static_cast<double>(state.iterations()) * static_cast<double>(bytes);
  state.SetBytesProcessed(static_cast<std::int64_t>(total));
  state.counters["MB_per_cpu_s"] = total / cpu_seconds / 1e6;
}

std::size_t count_rows(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// The line parser alone, over 4 MiB line-aligned chunks, on the calling thread.
void BM_ParseLines(benchmark::State& state) {
  const std::string& text = kdd_text();
  const std::size_t chunk = static_cast<std::size_t>(state.range(0));
  io::ParsedChunk parsed;
  const io::ParseOptions options{io::IndexBase::kOne, 0};
  const double cpu_start = process_cpu_seconds();
  for (auto _ : state) {
    std::size_t begin = 0;
    while (begin < text.size()) {
      std::size_t end = std::min(begin + chunk, text.size());
      end = text.rfind('\n', end - 1) + 1;
      if (end <= begin) end = text.find('\n', begin) + 1;
      io::parse_libsvm_lines(std::string_view(text).substr(begin, end - begin), options, parsed);
      benchmark::DoNotOptimize(parsed.rows.indices.data());
      begin = end;
    }
  }
  report(state, text.size(), process_cpu_seconds() - cpu_start);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * count_rows(text)));
}
BENCHMARK(BM_ParseLines)->Arg(4 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();

// The whole reader from a page-cached file: serial read, parallel parse, in-order sink.
void BM_ReadLibsvmText(benchmark::State& state) {
  const std::string& path = kdd_file();
  io::TextOptions options;
  options.threads = static_cast<int>(state.range(0));
  options.index_base = io::IndexBase::kOne;
  std::uint64_t nnz = 0;
  const double cpu_start = process_cpu_seconds();
  for (auto _ : state) {
    const io::TextStats stats =
        io::read_libsvm_text({path}, options, [&](const CsrView& rows) { nnz += rows.nnz(); });
    benchmark::DoNotOptimize(stats.rows);
  }
  report(state, kdd_text().size(), process_cpu_seconds() - cpu_start);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * count_rows(kdd_text())));
  state.counters["nnz/row"] =
      static_cast<double>(nnz) / static_cast<double>(state.iterations() * count_rows(kdd_text()));
}
BENCHMARK(BM_ReadLibsvmText)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (!kdd_file_path.empty()) std::remove(kdd_file_path.c_str());
  return 0;
}
