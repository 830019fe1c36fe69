// The CPM's learning loop against its memory floor, at KDD Cup 2010 size (K = 10 faces over
// 20.2 M features, 36 non-zeros a row): no reading or decoding, items = SGD steps of all sides.
//
//   build/bench/cpm_bench [--benchmark_filter=...]
//
// BM_CpmFloor is what a step cannot avoid: per row, gather the K doubles (80 bytes, two cache
// lines) of each of its 36 features from a 1.6 GB feature-major array, take the best of the K
// sums, and write the rows back on every third step (about the share of updating steps at KDD
// size); the next row's lines are requested one row ahead, as the trainer does. `threads:2` runs
// two such sides at once, each on its own array, as a double-sided CPM does.
// BM_CpmTrain is the trainer (CpmTrainer, double-sided, both sides in parallel on 2 threads) on
// the same rows; the ratio of the two is how far the step is from the floor.
// Timed in process CPU time: items_per_second = steps per CPU second of all threads.
// Argument /ids: 0: ids uniform over the features (no locality at all); 1: Zipf-like (frequency ∝
// 1/rank) with ranks scattered over the ids, as `gen --like kdda` makes them.
#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/cpm.h"
#include "engine/csr.h"
#include "engine/random.h"

namespace {

using polymargin::CsrBuffer;
using polymargin::CsrView;
using namespace polymargin::engine;
using polymargin::SplitMix64;
using polymargin::splitmix64_next;

constexpr std::uint32_t kFeatures = 20'216'830;
constexpr std::uint32_t kNnz = 36;
constexpr std::size_t kFaces = 10;
constexpr std::size_t kRows = 1 << 18;
constexpr std::size_t kWindowRows = 8 * 4096;  // the reader's default window

CsrBuffer make_rows(bool zipf) {
  SplitMix64 rng(2014);
  CsrBuffer rows;
  rows.has_values = true;
  std::vector<std::uint32_t> ids;
  for (std::size_t r = 0; r < kRows; ++r) {
    ids.clear();
    while (ids.size() < kNnz) {
      std::uint32_t id;
      if (zipf) {
        const double u = static_cast<double>(rng.below(1u << 30)) / double(1u << 30);
        std::uint64_t rank = static_cast<std::uint64_t>(std::pow(double{kFeatures}, u)) - 1;
        id = static_cast<std::uint32_t>(splitmix64_next(rank) % kFeatures);
      } else {
        id = static_cast<std::uint32_t>(rng.below(kFeatures));
      }
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    float score = 0;
    for (const std::uint32_t id : ids) {
      const float v = 0.1f + 0.9f * static_cast<float>(rng.below(1000)) / 1000.0f;
      rows.indices.push_back(id);
      rows.values.push_back(v);
      score += (id % 7 < 3 ? v : -v);
    }
    rows.offsets.push_back(static_cast<std::uint32_t>(rows.indices.size()));
    rows.labels.push_back(score > 0 ? 1.0f : -1.0f);
  }
  return rows;
}

const CsrBuffer& rows_for(bool zipf) {
  static const CsrBuffer uniform = make_rows(false), skewed = make_rows(true);
  return zipf ? skewed : uniform;
}

// A zeroed, huge-page-advised array of K doubles per feature, as the trainer's U.
struct Weights {
  std::size_t bytes = std::size_t{kFeatures} * kFaces * sizeof(double);
  double* data = nullptr;
  Weights() {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, bytes, MADV_HUGEPAGE);
    data = static_cast<double*>(p);
  }
  ~Weights() { munmap(data, bytes); }
};

void BM_CpmFloor(benchmark::State& state) {
  const CsrBuffer& rows = rows_for(state.range(0) != 0);
  Weights w;
  const auto request = [&](std::size_t r) {
    for (std::uint32_t j = rows.offsets[r]; j < rows.offsets[r + 1]; ++j) {
      const double* p = w.data + std::size_t{rows.indices[j]} * kFaces;
      __builtin_prefetch(p, 1);
      __builtin_prefetch(p + kFaces - 1, 1);
    }
  };
  std::size_t r = 0, steps = 0;
  double best_sum = 0;
  // One pass first: the pages are faulted in outside the timing.
  for (std::size_t i = 0; i < rows.indices.size(); ++i) w.data[std::size_t{rows.indices[i]} * kFaces] += 1e-9;
  for (auto _ : state) {
    for (std::size_t n = 0; n < kWindowRows; ++n, ++steps, r = (r + 1) % kRows) {
      request((r + 1) % kRows);
      double acc[kFaces] = {};
      for (std::uint32_t j = rows.offsets[r]; j < rows.offsets[r + 1]; ++j) {
        const double* p = w.data + std::size_t{rows.indices[j]} * kFaces;
        for (std::size_t k = 0; k < kFaces; ++k) acc[k] += rows.values[j] * p[k];
      }
      best_sum += *std::max_element(acc, acc + kFaces);
      if (steps % 3 == 0)
        for (std::uint32_t j = rows.offsets[r]; j < rows.offsets[r + 1]; ++j) {
          double* p = w.data + std::size_t{rows.indices[j]} * kFaces;
          for (std::size_t k = 0; k < kFaces; ++k) p[k] += 1e-12 * rows.values[j];
        }
    }
  }
  benchmark::DoNotOptimize(best_sum);
  state.SetItemsProcessed(static_cast<std::int64_t>(steps));
}

void BM_CpmTrain(benchmark::State& state) {
  const CsrBuffer& rows = rows_for(state.range(0) != 0);
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, 2);
  CpmConfig config;  // K = 10, C = 0.01, h = 0, double-sided: the KDD benchmark's setting
  config.faces = static_cast<int>(kFaces);
  config.iterations = 32'000'000;
  CpmProblem problem;
  problem.max_index = kFeatures - 1;
  const auto positives = static_cast<std::uint64_t>(std::count(rows.labels.begin(), rows.labels.end(), 1.0f));
  problem.label_counts = {{-1.0, kRows - positives}, {1.0, positives}};
  CpmTrainer trainer(config, problem);
  const CsrView all = rows.view();
  std::vector<CsrView> windows;
  for (std::size_t begin = 0; begin < kRows; begin += kWindowRows) {
    CsrView v = all;
    v.rows = std::min(kWindowRows, kRows - begin);
    v.labels = all.labels + begin;
    v.offsets = all.offsets + begin;
    windows.push_back(v);
  }
  for (const CsrView& v : windows) trainer.learn(v);  // faults the weights in, outside the timing
  std::size_t next = 0, steps = 0;
  for (auto _ : state) {
    trainer.learn(windows[next]);
    steps += 2 * windows[next].rows;  // both sides step on every row
    next = (next + 1) % windows.size();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(steps));
}

// Process CPU time (all threads): on a machine shared with other jobs the wall time mostly says
// how much of the cores the benchmark got; items_per_second is steps per CPU second.
BENCHMARK(BM_CpmFloor)->ArgName("ids")->Arg(0)->Arg(1)->Threads(1)->Threads(2)
    ->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_CpmTrain)->ArgName("ids")->Arg(0)->Arg(1)->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
