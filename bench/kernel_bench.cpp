// Kernel LDM at regular scale: Gram matrix construction (oneTBB, 128 × 128 tiles), the O(m³)
// set-up (Cholesky of B = I + (4λ1/m)G, the blocked solves for A = P⁻¹Y, Sherman–Morrison) and the
// dual coordinate descent, at m = 2,000 / 5,000 / 10,000 rows of 30 dense features in [0, 1]
// (labels from a noisy linear rule, RBF width = δ). Counters: the m² bytes kernel LDM holds at its
// peak (3 matrices) and the process's peak RSS so far: run one size per process for it to be that
// size's peak. The Gram baseline is the same pass with the linear kernel (dot products only).
//   for m in 2000 5000 10000; do build/bench/kernel_bench --benchmark_filter=/$m; done
// (m = 10,000 needs ~2.4 GB and minutes on two cores).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <map>
#include <vector>

#include "engine/kernel.h"
#include "engine/kldm.h"
#include "engine/ldm.h"
#include "engine/random.h"

namespace {

using namespace polymargin;
using namespace polymargin::engine;

struct Data {
  RowSet x;
  Eigen::VectorXd y;
};

const Data& data(std::size_t m) {
  static std::map<std::size_t, Data> cache;
  auto it = cache.find(m);
  if (it != cache.end()) return it->second;
  Data& d = cache[m];
  SplitMix64 rng(m);
  auto uniform = [&] { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; };
  constexpr int kFeatures = 30;
  std::vector<double> w(kFeatures);
  for (double& v : w) v = uniform() * 2 - 1;
  d.y.resize(static_cast<Eigen::Index>(m));
  d.x.rows.has_values = true;
  for (std::size_t i = 0; i < m; ++i) {
    double s = 0;
    for (int f = 0; f < kFeatures; ++f) {
      const auto v = static_cast<float>(uniform());
      s += w[f] * (v - 0.5);
      d.x.rows.indices.push_back(static_cast<std::uint32_t>(f + 1));
      d.x.rows.values.push_back(v);
    }
    d.x.rows.offsets.push_back(static_cast<std::uint32_t>(d.x.rows.indices.size()));
    d.y(static_cast<Eigen::Index>(i)) = s + 0.3 * (uniform() - 0.5) > 0 ? 1 : -1;
    d.x.rows.labels.push_back(static_cast<float>(d.y(static_cast<Eigen::Index>(i))));
  }
  d.x.finish();
  return d;
}

KernelSpec rbf_for(const Data& d) {
  KernelSpec k;
  k.type = KernelType::kRbf;
  k.gamma = rbf_gamma_for_width(mean_pairwise_distance(d.x, 1));
  return k;
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

void counters(benchmark::State& state, std::size_t m) {
  state.counters["m"] = static_cast<double>(m);
  state.counters["kldm_peak_MiB"] = kldm_peak_bytes(m) / (1 << 20);
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

// Baseline: the m(m+1)/2 dot products alone (scatter + gather, no kernel, no write).
void BM_DotPairs(benchmark::State& state) {
  const auto m = static_cast<std::size_t>(state.range(0));
  const Data& d = data(m);
  KernelSpec linear;
  linear.type = KernelType::kLinear;
  for (auto _ : state) benchmark::DoNotOptimize(gram_matrix(d.x, linear).data());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * m * (m + 1) / 2));
  counters(state, m);
}

void BM_Gram(benchmark::State& state) {
  const auto m = static_cast<std::size_t>(state.range(0));
  const Data& d = data(m);
  const KernelSpec k = rbf_for(d);
  for (auto _ : state) benchmark::DoNotOptimize(gram_matrix(d.x, k).data());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * m * (m + 1) / 2));
  counters(state, m);
}

// A = P⁻¹Y and diag(H): the O(m³) part.
void BM_KldmSetup(benchmark::State& state) {
  const auto m = static_cast<std::size_t>(state.range(0));
  const Data& d = data(m);
  const Eigen::MatrixXd g = gram_matrix(d.x, rbf_for(d));
  const double lambda1 = kDefaultLambda1Rel * m * kDefaultC;
  for (auto _ : state) benchmark::DoNotOptimize(ldm_dual_operator(g, d.y, lambda1).a.data());
  counters(state, m);
}

// Dual coordinate descent to the default tolerance (0.01), with shrinking.
void BM_KldmSolve(benchmark::State& state) {
  const auto m = static_cast<std::size_t>(state.range(0));
  const Data& d = data(m);
  const Eigen::MatrixXd g = gram_matrix(d.x, rbf_for(d));
  KldmConfig config;
  config.lambda1 = kDefaultLambda1Rel * m * config.c;
  config.lambda2 = kDefaultLambda2Rel * m * config.c;
  const LdmDualOperator op = ldm_dual_operator(g, d.y, config.lambda1);
  int sweeps = 0;
  for (auto _ : state) {
    const KldmResult r = solve_kldm(g, d.y, config, op);
    sweeps = r.sweeps;
    benchmark::DoNotOptimize(r.alpha.data());
  }
  state.counters["sweeps"] = sweeps;
  counters(state, m);
}

#define KERNEL_SIZES \
  ->Arg(2000)->Arg(5000)->Arg(10000)->Unit(benchmark::kMillisecond)->UseRealTime()
BENCHMARK(BM_DotPairs) KERNEL_SIZES->Iterations(1);
BENCHMARK(BM_Gram) KERNEL_SIZES->Iterations(1);
BENCHMARK(BM_KldmSetup) KERNEL_SIZES->Iterations(1);
BENCHMARK(BM_KldmSolve) KERNEL_SIZES->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
