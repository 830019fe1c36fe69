// Steps per second of the LDM and SVM trainers on synthetic in-memory KDD Cup 2010-like rows:
// 36 non-zeros a row over 20.2 M features with Zipf-like ids, labels from a planted linear model.
// Measures the learning loop alone (no reading or decoding): items = steps = rows learnt.
//
//   build/bench/ldm_bench [--benchmark_filter=...]
// Arguments of each benchmark: /values (0: all ones, 1: float values) /ids (0: hot features
// scattered at random over the weight vector, as in raw KDD ids; 1: numbered by decreasing
// frequency, hot weights share cache lines) /phase (0: before t0, one weight vector; 1: averaging,
// the accumulator is written too) /permuted (0: j = the next row, 1: j from a permutation).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/csr.h"
#include "engine/ldm.h"

namespace {

using polymargin::CsrBuffer;
using polymargin::CsrView;
using polymargin::engine::LabelMap;
using polymargin::engine::LdmConfig;
using polymargin::engine::LdmTrainer;

constexpr std::uint32_t kFeatures = 20'216'830;
constexpr std::uint32_t kNnz = 36;
constexpr std::size_t kRows = 1 << 19;
constexpr std::size_t kWindowRows = 8 * 4096;  // the reader's default window

std::uint64_t mix(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Rows whose feature ranks are log-uniform (frequency ∝ 1/rank, Zipf with s = 1); `scatter` maps
// ranks to ids by a fixed pseudo-random permutation-like hash so hot weights are far apart.
CsrBuffer make_rows(bool values, bool scatter) {
  std::mt19937_64 rng(2010);
  std::uniform_real_distribution<double> unit(0, 1);
  std::normal_distribution<double> noise(0, 0.5);
  CsrBuffer rows;
  rows.has_values = values;
  rows.labels.reserve(kRows);
  rows.indices.reserve(kRows * kNnz);
  std::vector<std::uint32_t> ids;
  for (std::size_t r = 0; r < kRows; ++r) {
    ids.clear();
    while (ids.size() < kNnz) {
      const auto rank = static_cast<std::uint32_t>(std::pow(double{kFeatures}, unit(rng))) - 1;
      const std::uint32_t id = scatter ? static_cast<std::uint32_t>(mix(rank) % kFeatures) : rank;
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    double score = noise(rng);
    for (const std::uint32_t id : ids) {
      const float v = values ? static_cast<float>(0.1 + 0.9 * unit(rng)) : 1.0f;
      rows.indices.push_back(id);
      if (values) rows.values.push_back(v);
      score += (mix(id * 7 + 1) & 1 ? 1.0 : -1.0) * v / 6;  // planted ±1 weights
    }
    rows.offsets.push_back(static_cast<std::uint32_t>(rows.indices.size()));
    rows.labels.push_back(score > 0 ? 1.0f : -1.0f);
  }
  return rows;
}

const CsrBuffer& rows_for(bool values, bool scatter) {
  static const CsrBuffer cache[2][2] = {{make_rows(false, false), make_rows(false, true)},
                                        {make_rows(true, false), make_rows(true, true)}};
  return cache[values][scatter];
}

void train(benchmark::State& state, bool svm) {
  const CsrBuffer& rows = rows_for(state.range(0) != 0, state.range(1) == 0);
  const bool averaging = state.range(2) != 0;
  LdmConfig config;
  if (svm) config.lambda1 = config.lambda2 = 0;
  config.pairing = state.range(3) != 0 ? polymargin::engine::Pairing::kPermutation
                                       : polymargin::engine::Pairing::kNextRow;
  config.avg_start_epochs = averaging ? 0 : 4;
  // m as in KDD, so λ, λ1', λ2' and the step sizes are those of the real run.
  LdmTrainer trainer(config, 8'407'752, kFeatures, LabelMap{});
  const CsrView all = rows.view();
  std::vector<CsrView> windows;
  for (std::size_t begin = 0; begin < kRows; begin += kWindowRows) {
    CsrView w = all;
    w.rows = std::min(kWindowRows, kRows - begin);
    w.labels = all.labels + begin;
    w.offsets = all.offsets + begin;
    windows.push_back(w);
  }
  trainer.calibrate(windows[0]);
  // One warm-up pass brings the weights of the data into a trained state (and past t0 = 0).
  for (const CsrView& w : windows) trainer.learn(w);
  std::size_t next = 0, steps = 0;
  for (auto _ : state) {
    trainer.learn(windows[next]);
    steps += windows[next].rows;
    next = (next + 1) % windows.size();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(steps));
  state.counters["eta0"] = trainer.eta0();
}

void BM_Ldm(benchmark::State& state) { train(state, false); }
void BM_Svm(benchmark::State& state) { train(state, true); }

// values × {scattered, frequency-ordered} × {before t0, averaging} × {next-row, permuted pairing}
#define PM_LDM_ARGS                                        \
  ArgNames({"values", "freq_ids", "averaging", "permuted"}) \
      ->ArgsProduct({{0, 1}, {0, 1}, {0, 1}, {0, 1}})       \
      ->Unit(benchmark::kMillisecond)                      \
      ->MinTime(1.0)

BENCHMARK(BM_Ldm)->PM_LDM_ARGS;
BENCHMARK(BM_Svm)->PM_LDM_ARGS;

}  // namespace

BENCHMARK_MAIN();
