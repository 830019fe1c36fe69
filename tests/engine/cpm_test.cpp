// The CPM trainer against dense float64 references of the same formulas (docs/testing.md, what the
// tests prove): K = 1 is Pegasos step by step, the O(1) entropies equal brute force, ASSIGN picks
// as docs/algorithms.md §2.4 says, and the model does not depend on the thread count.

#include "engine/cpm.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/cpm_assign.h"
#include "engine/cpm_replicas.h"
#include "engine/errors.h"
#include "engine/random.h"

namespace polymargin::engine {
namespace {

// A small sparse data set: rows of `nnz` distinct features out of `dim`, values in (0, 2].
// Labels: 1 / -1, or 0..classes-1 when classes > 2. Labels follow a planted polytope so that
// training has something to find.
CsrBuffer random_rows(std::size_t rows, std::uint32_t dim, std::uint32_t nnz, std::uint64_t seed,
                      int classes = 2) {
  SplitMix64 rng(seed);
  CsrBuffer b;
  b.has_values = true;
  for (std::size_t r = 0; r < rows; ++r) {
    std::set<std::uint32_t> ids;
    while (ids.size() < nnz) ids.insert(1 + static_cast<std::uint32_t>(rng.below(dim)));
    double s1 = 0, s2 = 0;
    for (const std::uint32_t f : ids) {
      const float v = static_cast<float>(1 + rng.below(1000)) / 500.0f;
      b.indices.push_back(f);
      b.values.push_back(v);
      s1 += (f % 3 == 0 ? v : -0.5 * v);
      s2 += (f % 4 == 1 ? v : -0.4 * v);
    }
    b.offsets.push_back(static_cast<std::uint32_t>(b.indices.size()));
    if (classes > 2)
      b.labels.push_back(static_cast<float>(rng.below(static_cast<std::uint64_t>(classes))));
    else
      b.labels.push_back(s1 > 0.3 || s2 > 0.3 ? 1.0f : -1.0f);
  }
  return b;
}

CpmProblem problem_of(const CsrBuffer& b) {
  std::map<double, std::uint64_t> counts;
  CpmProblem p;
  for (std::size_t r = 0; r < b.rows(); ++r) ++counts[b.labels[r]];
  for (const auto& [l, n] : counts) p.label_counts.emplace_back(l, n);
  p.max_index = *std::max_element(b.indices.begin(), b.indices.end());
  return p;
}

// Row r of `b` as a one-row batch (pointers into b).
CsrView one_row(const CsrBuffer& b, std::size_t r) {
  CsrView v = b.view();
  v.rows = 1;
  v.labels += r;
  v.offsets += r;
  return v;
}

// Dense float64 Pegasos with the CPM's conventions, K = 1: step 1/(λ(t+2)), λ = 1/(CT), costs
// c₋ = r/(1+r), c₊ = 1/(1+r), a regularised intercept, shrink after the gradient step.
struct DensePegasos {
  std::vector<double> w;
  double b = 0, lambda, c_pos, c_neg;
  std::uint64_t t = 0;
  double loss = 0;  // Σ over the steps of the cost-weighted hinge at the pre-step weights
  DensePegasos(std::size_t slots, double c, std::uint64_t T, double ratio)
      : w(slots, 0.0), lambda(1 / (c * double(T))), c_pos(1 / (1 + ratio)), c_neg(ratio / (1 + ratio)) {}
  void step(const CsrBuffer& rows, std::size_t r, int y) {
    const double eta = 1 / (lambda * (double(t) + 2));
    double s = b;
    for (std::uint32_t j = rows.offsets[r]; j < rows.offsets[r + 1]; ++j)
      s += w[rows.indices[j]] * double(rows.values[j]);
    const double g = y > 0 ? (s < 1 ? eta * c_pos : 0) : (s > -1 ? -eta * c_neg : 0);
    loss += y > 0 ? c_pos * std::max(0.0, 1 - s) : c_neg * std::max(0.0, 1 + s);
    for (std::uint32_t j = rows.offsets[r]; j < rows.offsets[r + 1]; ++j)
      w[rows.indices[j]] += g * double(rows.values[j]);
    b += g;
    const double shrink = 1 - eta * lambda;
    for (double& x : w) x *= shrink;
    b *= shrink;
    ++t;
  }
  // (λ/2) ‖(w, b)‖²
  double penalty() const {
    double sum = b * b;
    for (const double x : w) sum += x * x;
    return lambda / 2 * sum;
  }
};

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (const double x : a) m = std::max(m, std::abs(x));
  return m;
}

TEST(Cpm, OneFaceIsPegasosStepByStep) {
  const CsrBuffer data = random_rows(60, 40, 6, 3);
  CpmConfig config;
  config.faces = 1;
  config.iterations = 150;  // 2.5 passes over the rows, one row per batch
  config.c = 0.05;
  config.cost_ratio = 3;
  const CpmProblem problem = problem_of(data);
  CpmTrainer trainer(config, problem);  // double-sided: side 0 outer = +1, side 1 outer = −1
  const std::size_t slots = problem.max_index + 1;
  DensePegasos plus(slots, config.c, config.iterations, config.cost_ratio);
  DensePegasos minus(slots, config.c, config.iterations, config.cost_ratio);
  for (std::uint64_t t = 0; t < config.iterations; ++t) {
    const std::size_t r = t % data.rows();
    trainer.learn(one_row(data, r));
    const int y = data.labels[r] > 0 ? 1 : -1;
    plus.step(data, r, y);
    minus.step(data, r, -y);
    const double scale = std::max(1.0, max_abs(plus.w));
    ASSERT_LE(max_abs_diff(trainer.weights(0), plus.w), 1e-12 * scale) << "step " << t;
    ASSERT_NEAR(trainer.intercepts(0)[0], plus.b, 1e-12 * scale) << "step " << t;
    ASSERT_LE(max_abs_diff(trainer.weights(1), minus.w), 1e-12 * scale) << "step " << t;
    ASSERT_NEAR(trainer.intercepts(1)[0], minus.b, 1e-12 * scale) << "step " << t;
    // The progressive loss and the regulariser of the passes' convergence test.
    const std::vector<CpmTrainer::SideStatus> status = trainer.status();
    ASSERT_NEAR(status[0].loss, plus.loss, 1e-12 * std::max(1.0, plus.loss)) << "step " << t;
    ASSERT_NEAR(status[1].loss, minus.loss, 1e-12 * std::max(1.0, minus.loss)) << "step " << t;
    const std::vector<double> penalties = trainer.penalties();
    ASSERT_NEAR(penalties[0], plus.penalty(), 1e-12 * std::max(1.0, plus.penalty()));
    ASSERT_NEAR(penalties[1], minus.penalty(), 1e-12 * std::max(1.0, minus.penalty()));
  }
  EXPECT_GT(trainer.status()[0].loss, 0);
  EXPECT_GT(trainer.penalties()[0], 0);
  EXPECT_TRUE(trainer.done());
  EXPECT_GT(max_abs(plus.w), 0.01);  // it learnt something
  // The model: D = F₊ − F₋ from the float weights, on every row.
  const CpmModel model = trainer.finish(nullptr);
  std::vector<double> scores(data.rows());
  model.score_batch(data.view(), scores.data());
  for (std::size_t r = 0; r < data.rows(); ++r) {
    double sp = plus.b, sm = minus.b;
    for (std::uint32_t j = data.offsets[r]; j < data.offsets[r + 1]; ++j) {
      sp += plus.w[data.indices[j]] * double(data.values[j]);
      sm += minus.w[data.indices[j]] * double(data.values[j]);
    }
    EXPECT_NEAR(scores[r], sp - sm, 1e-5 * std::max(1.0, std::abs(sp - sm)));
  }
}

// The step floor (min_iterations) adds steps; with lambda_of_epochs (what -c auto sets) λ stays
// 1/(C·epochs·rows), else it is 1/(C·T) of the T run. K = 1 against Pegasos at that λ, to the end.
TEST(Cpm, TheStepFloorKeepsTheEpochsLambdaWhenAsked) {
  const CsrBuffer data = random_rows(60, 40, 6, 5);
  for (const bool of_epochs : {true, false}) {
    CpmConfig config;
    config.faces = 1;
    config.epochs = 2;            // 120 steps a side
    config.min_iterations = 300;  // the floor: 5 passes
    config.lambda_of_epochs = of_epochs;
    config.c = 0.05;
    const CpmProblem problem = problem_of(data);
    CpmTrainer trainer(config, problem);
    const std::size_t slots = problem.max_index + 1;
    DensePegasos plus(slots, config.c, of_epochs ? 120 : 300, config.cost_ratio);
    for (std::uint64_t t = 0; t < 300; ++t) {
      ASSERT_FALSE(trainer.done()) << "step " << t;
      const std::size_t r = t % data.rows();
      trainer.learn(one_row(data, r));
      plus.step(data, r, data.labels[r] > 0 ? 1 : -1);
    }
    EXPECT_TRUE(trainer.done());
    EXPECT_GT(max_abs(plus.w), 0.01);
    EXPECT_LE(max_abs_diff(trainer.weights(0), plus.w), 1e-12 * std::max(1.0, max_abs(plus.w)))
        << "lambda_of_epochs " << of_epochs;
    EXPECT_EQ(config.json().contains("lambda_of_epochs"), of_epochs);
  }
}

TEST(Cpm, FloatAccumulatorsFollowTheDoubleOnes) {
  const CsrBuffer data = random_rows(60, 40, 6, 4);
  CpmConfig config;
  config.faces = 3;
  config.iterations = 200;
  config.sides = CpmSides::kOuterPositive;
  CpmTrainer d(config, problem_of(data));
  config.precision = CpmPrecision::kFloat;
  CpmTrainer f(config, problem_of(data));
  for (std::size_t r = 0; r < data.rows(); ++r) {
    d.learn(one_row(data, r));
    f.learn(one_row(data, r));
  }
  const std::vector<double> wd = d.weights(0), wf = f.weights(0);
  EXPECT_LE(max_abs_diff(wd, wf), 1e-5 * max_abs(wd));
}

TEST(CpmAssign, IncrementalEntropyEqualsBruteForce) {
  SplitMix64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const int K = 1 + static_cast<int>(rng.below(12));
    FaceCounts counts(K);
    std::vector<std::int64_t> n(static_cast<std::size_t>(K), 0);
    const int entries = static_cast<int>(rng.below(60));
    for (int i = 0; i < entries; ++i) {
      const int k = static_cast<int>(rng.below(static_cast<std::uint64_t>(K)));
      counts.move(-1, k);
      ++n[static_cast<std::size_t>(k)];
    }
    ASSERT_NEAR(counts.entropy(), count_entropy(n), 1e-12);
    for (int k = 0; k < K; ++k) {
      std::vector<std::int64_t> added = n;
      ++added[static_cast<std::size_t>(k)];
      ASSERT_NEAR(counts.entropy_if(-1, k), count_entropy(added), 1e-12);
      for (int o = 0; o < K; ++o) {
        if (n[static_cast<std::size_t>(o)] == 0) continue;
        std::vector<std::int64_t> moved = n;
        --moved[static_cast<std::size_t>(o)];
        ++moved[static_cast<std::size_t>(k)];
        const double brute = count_entropy(moved);
        ASSERT_NEAR(counts.entropy_if(o, k), brute, 1e-12);
        // The exact criterion of §2.4 agrees with brute force wherever the entropies differ.
        const double h = count_entropy(n);
        if (std::abs(brute - h) > 1e-12) ASSERT_EQ(counts.move_raises_entropy(o, k), brute > h);
        else ASSERT_FALSE(counts.move_raises_entropy(o, k));
      }
    }
    // Moves keep the counts and the entropy consistent.
    if (entries > 0) {
      int o = 0;
      while (n[static_cast<std::size_t>(o)] == 0) ++o;
      const int k = static_cast<int>(rng.below(static_cast<std::uint64_t>(K)));
      counts.move(o, k);
      --n[static_cast<std::size_t>(o)];
      ++n[static_cast<std::size_t>(k)];
      ASSERT_NEAR(counts.entropy(), count_entropy(n), 1e-12);
      ASSERT_EQ(counts.total(), entries);
    }
  }
}

// ASSIGN as Algorithm 2 states it, with entropies recomputed from scratch.
Assignment brute_assign(const std::vector<std::int64_t>& n, int old_face,
                        const std::vector<double>& s, double h, bool* near_tie) {
  const int K = static_cast<int>(n.size());
  int natural = 0;
  for (int k = 1; k < K; ++k)
    if (s[static_cast<std::size_t>(k)] > s[static_cast<std::size_t>(natural)]) natural = k;
  std::int64_t total = 0;
  for (const auto x : n) total += x;
  const auto with = [&](int k) {
    std::vector<std::int64_t> m = n;
    if (old_face >= 0) --m[static_cast<std::size_t>(old_face)];
    ++m[static_cast<std::size_t>(k)];
    return count_entropy(m);
  };
  if (h <= 0 || total < 5 * K) return {natural, natural};
  const double h_nat = with(natural);
  if (std::abs(h_nat - h) < 1e-9) *near_tie = true;
  if (h_nat >= h) return {natural, natural};
  const double current = count_entropy(n);
  int best = -1;
  for (int k = 0; k < K; ++k) {
    const double hk = with(k);
    if (std::abs(hk - current) < 1e-9 && old_face < 0) *near_tie = true;
    if (hk > current + (old_face >= 0 ? 1e-12 : 0) &&
        (best < 0 || s[static_cast<std::size_t>(k)] > s[static_cast<std::size_t>(best)]))
      best = k;
  }
  return {best >= 0 ? best : natural, natural};
}

TEST(CpmAssign, PicksAsAlgorithmTwo) {
  SplitMix64 rng(11);
  int adjusted = 0, checked = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const int K = 2 + static_cast<int>(rng.below(9));
    FaceCounts counts(K);
    std::vector<std::int64_t> n(static_cast<std::size_t>(K), 0);
    // Skewed counts, sometimes with empty faces, sometimes below the 5K warm-up.
    const int entries = static_cast<int>(rng.below(static_cast<std::uint64_t>(12 * K)));
    const int favourite = static_cast<int>(rng.below(static_cast<std::uint64_t>(K)));
    for (int i = 0; i < entries; ++i) {
      const int k = rng.below(3) ? favourite : static_cast<int>(rng.below(static_cast<std::uint64_t>(K)));
      counts.move(-1, k);
      ++n[static_cast<std::size_t>(k)];
    }
    int old_face = -1;
    if (entries > 0 && rng.below(2)) {
      do old_face = static_cast<int>(rng.below(static_cast<std::uint64_t>(K)));
      while (n[static_cast<std::size_t>(old_face)] == 0);
    }
    std::vector<double> s(static_cast<std::size_t>(K));
    for (double& x : s) x = static_cast<double>(rng.below(1000)) / 100.0 - 5;
    const double h = std::log(1 + static_cast<double>(rng.below(100)) / 100.0 * (K - 1));
    bool near_tie = false;
    const Assignment want = brute_assign(n, old_face, s, h, &near_tie);
    if (near_tie) continue;
    const Assignment got = assign_face(counts, old_face, s.data(), h);
    ASSERT_EQ(got.natural, want.natural) << "trial " << trial;
    ASSERT_EQ(got.adjusted, want.adjusted) << "trial " << trial;
    ++checked;
    adjusted += got.adjusted != got.natural;
  }
  EXPECT_GT(checked, 15000);
  EXPECT_GT(adjusted, 1000);  // the adjusting branch was exercised
}

TEST(CpmAssign, HistoryKeepsOneEntryPerKey) {
  AssignHistory history(4);
  for (std::uint64_t key = 1; key <= 500; ++key) history.face_of(key * 0x9e3779b97f4a7c15ull) = int(key % 7);
  EXPECT_EQ(history.size(), 500u);  // grew past its planned 4 entries
  for (std::uint64_t key = 1; key <= 500; ++key)
    ASSERT_EQ(history.face_of(key * 0x9e3779b97f4a7c15ull), int(key % 7));
  EXPECT_EQ(history.face_of(12345), -1);
}

// With `lend`, every batch comes with 5 pieces of spare work (as a lockstep scan lends the next
// window's reading), which the trainer's threads must all take.
CpmModel train_with_threads(const CsrBuffer& data, const CpmConfig& config, int threads,
                            bool lend = false) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  CpmTrainer trainer(config, problem_of(data));
  const CsrView all = data.view();
  while (!trainer.done()) {
    for (std::size_t first = 0; first < data.rows(); first += 97) {  // uneven batches
      CsrView batch = all;
      batch.rows = std::min<std::size_t>(97, data.rows() - first);
      batch.labels += first;
      batch.offsets += first;
      if (!lend) {
        trainer.learn(batch);
        continue;
      }
      std::atomic<int> pieces{5};
      trainer.learn(batch, [&] { return pieces.fetch_sub(1) > 0; });
      EXPECT_LT(pieces.load(), 0);  // all 5 taken, and asked once more at least
    }
  }
  return trainer.finish(nullptr);
}

// ASSIGN's history (UNADJ) exists only for the entropy floor: with one (P > 1) the assignment
// counts hold one entry per distinct outer row, however many passes; without one (P = 1) the
// trainer keeps no history (nor plans memory for it) and every outer-row step counts once.
TEST(Cpm, HistoryOnlyWithAnEntropyFloor) {
  const CsrBuffer data = random_rows(200, 60, 5, 11);
  const CpmProblem problem = problem_of(data);
  std::uint64_t outer_rows = 0;  // of the side with outer = +1
  for (std::size_t r = 0; r < data.rows(); ++r) outer_rows += data.labels[r] > 0;
  ASSERT_GT(outer_rows, 20u);
  CpmConfig config;
  config.faces = 4;
  config.iterations = 3 * data.rows();  // three passes of one batch each
  config.sides = CpmSides::kOuterPositive;
  auto status = [&](double perplexity) {
    config.perplexity = perplexity;
    CpmTrainer trainer(config, problem);
    for (int pass = 0; pass < 3; ++pass) trainer.learn(data.view());
    return trainer.status().at(0);
  };
  const CpmTrainer::SideStatus off = status(1), floor = status(2);
  EXPECT_EQ(off.adjusted, 0u);
  EXPECT_EQ(off.assignments, 3 * outer_rows);
  EXPECT_EQ(floor.assignments, outer_rows);
  EXPECT_GT(floor.adjusted, 0u);  // all faces start equal: only the floor spreads the rows
  config.perplexity = 1;
  const std::uint64_t without = cpm_training_bytes(config, problem, CpmPrecision::kDouble);
  config.perplexity = 2;
  const std::uint64_t with = cpm_training_bytes(config, problem, CpmPrecision::kDouble);
  EXPECT_EQ(with - without, AssignHistory::bytes_for(outer_rows) - AssignHistory::bytes_for(0));
}

// U is mapped in full when the trainer is built (no page fault inside a step): the resident set
// grows by both sides' U before the first batch. 2^20 slots × 8 faces × 8 bytes = 64 MiB a side.
TEST(Cpm, WeightsAreMappedBeforeTheFirstStep) {
  const auto resident_bytes = [] {
    std::ifstream statm("/proc/self/statm");
    std::uint64_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  };
  const CsrBuffer data = random_rows(50, 30, 4, 3);
  CpmConfig config;
  config.faces = 8;
  config.iterations = 10;
  config.hash_bits = 20;
  const std::uint64_t u_bytes = 2 * (std::uint64_t{1} << 20) * 8 * sizeof(double);
  const std::uint64_t before = resident_bytes();
  CpmTrainer trainer(config, problem_of(data));
  const std::uint64_t after = resident_bytes();
  EXPECT_GE(after, before + u_bytes * 9 / 10) << "resident " << before << " -> " << after;
  trainer.learn(data.view());  // and it learns as before (the step-by-step tests check values)
  for (std::size_t side = 0; side < trainer.sides(); ++side) {
    std::vector<double> w = trainer.weights(side);
    EXPECT_TRUE(std::any_of(w.begin(), w.end(), [](double x) { return x != 0; }));
  }
}

// Bit for bit the same model on 1, 2 and 4 threads, and when the trainer's threads take spare work
// between batches.
TEST(Cpm, ModelDoesNotDependOnThreads) {
  for (const int classes : {2, 4}) {
    const CsrBuffer data = random_rows(1500, 200, 8, 5, classes);
    CpmConfig config;
    config.faces = 5;
    config.epochs = 3;
    config.perplexity = 3;
    config.c = 0.1;
    const CpmModel one = train_with_threads(data, config, 1);
    for (const auto& [threads, lend] :
         {std::pair{2, false}, std::pair{4, false}, std::pair{1, true}, std::pair{2, true},
          std::pair{4, true}}) {
      const CpmModel other = train_with_threads(data, config, threads, lend);
      ASSERT_EQ(one.machines.size(), other.machines.size());
      for (std::size_t m = 0; m < one.machines.size(); ++m)
        for (std::size_t s = 0; s < one.machines[m].sides.size(); ++s) {
          EXPECT_EQ(one.machines[m].sides[s].weights, other.machines[m].sides[s].weights);
          EXPECT_EQ(one.machines[m].sides[s].intercepts, other.machines[m].sides[s].intercepts);
        }
    }
    EXPECT_EQ(one.machines.size(), classes == 2 ? 1u : 6u);
  }
}

TEST(Cpm, EvalReportsAssignmentsPerPair) {
  // One-vs-one over 3 classes: per pair and side, the faces' shares of the side's outer-class
  // rows, counted here from the float weights by a dense argmax, and the aggregates over pairs.
  const CsrBuffer data = random_rows(900, 60, 6, 17, 3);
  CpmConfig config;
  config.faces = 4;
  config.epochs = 3;
  config.c = 0.1;
  const CpmModel model = train_with_threads(data, config, 2);
  ASSERT_EQ(model.machines.size(), 3u);
  const auto details = model.eval_details();
  ASSERT_NE(details, nullptr);
  details->add(data.view());
  const nlohmann::json j = details->json();
  ASSERT_EQ(j.at("pair_assignments").size(), 3u);
  std::map<std::string, std::vector<double>> entropies;
  for (std::size_t m = 0; m < 3; ++m) {
    const CpmModel::Binary& b = model.machines[m];
    const nlohmann::json& pj = j["pair_assignments"][m];
    EXPECT_EQ(pj.at("positive").get<double>(), b.positive);
    EXPECT_EQ(pj.at("negative").get<double>(), b.negative);
    for (const CpmFaces& f : b.sides) {
      const double outer_label = f.outer > 0 ? b.positive : b.negative;
      std::vector<std::int64_t> counts(4, 0);
      const std::string side = f.outer > 0 ? "plus" : "minus";
      for (std::size_t r = 0; r < data.rows(); ++r) {
        if (data.labels[r] != outer_label) continue;
        std::vector<double> s(f.intercepts);
        for (std::uint32_t i = data.offsets[r]; i < data.offsets[r + 1]; ++i)
          for (std::size_t k = 0; k < 4; ++k)
            s[k] += double(f.weights[data.indices[i] * 4 + k]) * double(data.values[i]);
        ++counts[static_cast<std::size_t>(std::max_element(s.begin(), s.end()) - s.begin())];
      }
      const std::int64_t total = counts[0] + counts[1] + counts[2] + counts[3];
      ASSERT_EQ(total, std::count(data.labels.begin(), data.labels.end(), float(outer_label)));
      const auto share = pj.at("face_share_" + side).get<std::vector<double>>();
      for (std::size_t k = 0; k < 4; ++k)
        EXPECT_NEAR(share[k], double(counts[k]) / double(total), 1e-12) << m << side << k;
      EXPECT_NEAR(pj.at("assignment_entropy_" + side).get<double>(), count_entropy(counts), 1e-12);
      entropies[side].push_back(count_entropy(counts));
    }
  }
  for (const auto& [side, h] : entropies) {
    ASSERT_EQ(h.size(), 3u);
    EXPECT_NEAR(j.at("assignment_entropy_mean_" + side).get<double>(), (h[0] + h[1] + h[2]) / 3, 1e-12);
    EXPECT_NEAR(j.at("assignment_entropy_min_" + side).get<double>(), *std::min_element(h.begin(), h.end()), 1e-12);
  }
  EXPECT_GT(j.at("assignment_entropy_mean_plus").get<double>(), 0.0);  // more than one face in use
}

// With --normalize l2, a feature the training data never had (max |x| = 0) is left out of the
// row's length as well as its score; one it had is not.
TEST(Cpm, UnseenFeaturesDoNotCountInTheRowLength) {
  const CsrBuffer data = random_rows(200, 40, 6, 11);
  CpmConfig config;
  config.faces = 3;
  config.epochs = 2;
  const CpmProblem problem = problem_of(data);
  CpmTrainer trainer(config, problem);
  trainer.learn(data.view());
  std::vector<float> maxabs(problem.max_index + 1, 2.0f);
  const std::uint32_t unseen = 7;
  maxabs[unseen] = 0;
  CpmModel model = trainer.finish(&maxabs);
  model.normalize_l2 = true;
  // Row 0 without feature 7, and with it (value 5) inserted in order.
  CsrBuffer rows;
  rows.has_values = true;
  for (int with = 0; with < 2; ++with) {
    bool placed = with == 0;
    for (std::uint32_t j = data.offsets[0]; j < data.offsets[1]; ++j) {
      if (data.indices[j] == unseen) continue;
      if (!placed && data.indices[j] > unseen)
        rows.indices.push_back(unseen), rows.values.push_back(5), placed = true;
      rows.indices.push_back(data.indices[j]);
      rows.values.push_back(data.values[j]);
    }
    if (!placed) rows.indices.push_back(unseen), rows.values.push_back(5);
    rows.offsets.push_back(static_cast<std::uint32_t>(rows.indices.size()));
    rows.labels.push_back(data.labels[0]);
  }
  std::vector<double> scores(2);
  model.score_batch(rows.view(), scores.data());
  EXPECT_NE(scores[0], 0.0);
  EXPECT_EQ(scores[0], scores[1]);
  model.maxabs[unseen] = 2;  // a feature it had: its value lengthens the row
  model.score_batch(rows.view(), scores.data());
  EXPECT_NE(scores[0], scores[1]);
}

TEST(Cpm, PolytopeBeatsOneFace) {
  // Positives = union of two half-spaces: one linear face cannot separate them, K = 4 faces can.
  const CsrBuffer data = random_rows(4000, 60, 10, 9);
  CpmConfig config;
  config.epochs = 20;
  config.c = 0.1;
  config.sides = CpmSides::kOuterPositive;
  const auto error = [&](int faces) {
    config.faces = faces;
    CpmTrainer trainer(config, problem_of(data));
    while (!trainer.done()) trainer.learn(data.view());
    const CpmModel model = trainer.finish(nullptr);
    std::vector<double> scores(data.rows()), predicted(data.rows());
    model.predict_batch(data.view(), scores.data(), predicted.data());
    int wrong = 0;
    for (std::size_t r = 0; r < data.rows(); ++r) wrong += predicted[r] != data.labels[r];
    return static_cast<double>(wrong) / static_cast<double>(data.rows());
  };
  const double linear = error(1), polytope = error(4);
  EXPECT_LT(polytope, 0.7 * linear) << "K=1 " << linear << ", K=4 " << polytope;
}

TEST(Cpm, VotesBreakTiesBySeedAndRow) {
  // Three classes, every machine's decision a constant: class 1 beats 2, 2 beats 3, 3 beats 1, so
  // every row is a three-way tie.
  CpmModel model;
  model.classes = {1, 2, 3};
  model.max_index = 4;
  const std::vector<std::pair<double, double>> pairs = {{1, 2}, {1, 3}, {2, 3}};
  const std::vector<double> intercept = {1, -1, 1};
  for (std::size_t m = 0; m < 3; ++m) {
    CpmModel::Binary b;
    b.positive = pairs[m].first;
    b.negative = pairs[m].second;
    CpmFaces f;
    f.faces = 1;
    f.slots = 5;
    f.weights.assign(5, 0.0f);
    f.intercepts = {intercept[m]};
    b.sides.push_back(f);
    model.machines.push_back(b);
  }
  const CsrBuffer data = random_rows(300, 4, 2, 13);
  std::vector<double> scores(data.rows()), first(data.rows()), again(data.rows());
  model.predict_batch(data.view(), scores.data(), first.data());
  model.predict_batch(data.view(), scores.data(), again.data());
  EXPECT_EQ(first, again);
  std::map<double, int> seen;
  for (const double p : first) ++seen[p];
  EXPECT_EQ(seen.size(), 3u);  // all three classes win some ties
  for (const auto& [label, n] : seen) EXPECT_GT(n, 10) << label;
  EXPECT_DOUBLE_EQ(scores[0], 0.5);  // one vote of two
}

TEST(Cpm, RefusesBadConfigurations) {
  const CsrBuffer data = random_rows(50, 10, 3, 1);
  const auto refuses = [&](CpmConfig c) {
    EXPECT_THROW(CpmTrainer(c, problem_of(data)), UsageError);
  };
  CpmConfig c;
  c.iterations = 10;
  c.faces = 0;
  refuses(c);
  c.faces = 3;
  c.c = 0;
  refuses(c);
  c.c = 1;
  c.perplexity = 3.5;
  refuses(c);
  c.perplexity = 0.5;
  refuses(c);
  c.perplexity = 1;
  c.iterations = 0;
  c.epochs = 0;
  refuses(c);
  c.iterations = 5;
  c.cost_ratio = -1;
  refuses(c);
  c.cost_ratio = 1;
  CpmProblem one_class = problem_of(data);
  one_class.label_counts.resize(1);
  EXPECT_THROW(CpmTrainer(c, one_class), UsageError);
  EXPECT_NO_THROW(CpmTrainer(c, problem_of(data)));
}

// Rows [begin, end) of `b` as one batch.
CsrView rows_of(const CsrBuffer& b, std::size_t begin, std::size_t end) {
  CsrView v = b.view();
  v.rows = end - begin;
  v.labels += begin;
  v.offsets += begin;
  return v;
}

// Data parallelism (docs/algorithms.md §2.8): two replicas' faces averaged are, face by face, the
// float64 mean of the weights W = σU and intercepts b = σB they represent; the steps become
// Σt/total, the face counts the sum of the increments, the counters the lead's.
void check_average(CpmPrecision precision, double tolerance) {
  const CsrBuffer data = random_rows(300, 50, 6, 11);
  CpmConfig config;
  config.faces = 4;
  config.iterations = 2000;
  config.c = 0.1;
  config.precision = precision;
  const CpmProblem problem = problem_of(data);
  CpmTrainer a(config, problem), b(config, problem);
  a.make_replica(0, 2);
  b.make_replica(1, 2);
  // Different rows and different numbers of steps: σ differs between the two.
  a.learn(rows_of(data, 0, 170));
  b.learn(rows_of(data, 170, 300));
  const auto sa = a.status(), sb = b.status();
  ASSERT_NE(sa[0].steps, sb[0].steps);
  std::vector<std::vector<double>> mean_w, mean_b;
  std::vector<std::vector<std::int64_t>> counts;
  for (std::size_t side = 0; side < a.sides(); ++side) {
    std::vector<double> w = a.weights(side), wb = b.weights(side);
    std::vector<double> i = a.intercepts(side), ib = b.intercepts(side);
    for (std::size_t k = 0; k < w.size(); ++k) w[k] = (w[k] + wb[k]) / 2;
    for (std::size_t k = 0; k < i.size(); ++k) i[k] = (i[k] + ib[k]) / 2;
    mean_w.push_back(w);
    mean_b.push_back(i);
    std::vector<std::int64_t> c = a.side_state(side).face_counts;
    const std::vector<std::int64_t> cb = b.side_state(side).face_counts;
    for (std::size_t k = 0; k < c.size(); ++k) c[k] += cb[k];
    counts.push_back(c);
  }
  CpmTrainer::average({&a, &b}, true, Peers{});
  for (std::size_t side = 0; side < a.sides(); ++side) {
    const double scale = std::max(1.0, max_abs(mean_w[side]));
    EXPECT_GT(max_abs(mean_w[side]), 1e-3);  // there is something to average
    for (const CpmTrainer* r : {&a, &b}) {
      EXPECT_LE(max_abs_diff(r->weights(side), mean_w[side]), tolerance * scale) << side;
      EXPECT_LE(max_abs_diff(r->intercepts(side), mean_b[side]), tolerance * scale) << side;
      EXPECT_EQ(r->side_state(side).face_counts, counts[side]) << side;
      EXPECT_EQ(r->status()[side].steps, (sa[side].steps + sb[side].steps) / 2) << side;
    }
    EXPECT_EQ(a.status()[side].updates, sa[side].updates + sb[side].updates);
    EXPECT_EQ(b.status()[side].updates, 0u);
    EXPECT_DOUBLE_EQ(a.status()[side].loss, sa[side].loss + sb[side].loss);
    // The regulariser of the mean, (λ/2) ‖(W, b)‖² with λ = 1/(C·T), in every replica.
    double squares = 0;
    for (const double x : a.weights(side)) squares += x * x;
    for (const double x : a.intercepts(side)) squares += x * x;
    const double penalty = squares / (2 * config.c * static_cast<double>(config.iterations));
    for (const CpmTrainer* r : {&a, &b})
      EXPECT_NEAR(r->penalties()[side], penalty, 1e-12 * penalty) << side;
  }
  // The next interval counts only the increments since this average.
  const auto before = a.side_state(0).face_counts;
  b.learn(rows_of(data, 0, 100));
  const auto after_b = b.side_state(0).face_counts;
  CpmTrainer::average({&a, &b}, true, Peers{});
  EXPECT_EQ(a.side_state(0).face_counts, after_b);
  EXPECT_NE(after_b, before);
}

TEST(CpmReplicas, AverageIsTheMeanOfWhatTheyRepresent) {
  check_average(CpmPrecision::kDouble, 1e-12);
}

TEST(CpmReplicas, AverageOfFloatAccumulators) { check_average(CpmPrecision::kFloat, 1e-5); }

TEST(CpmReplicas, OneReplicaIsTheTrainer) {
  const CsrBuffer data = random_rows(200, 40, 5, 5);
  CpmConfig config;
  config.faces = 3;
  config.epochs = 3;
  const CpmProblem problem = problem_of(data);
  CpmTrainer plain(config, problem);
  CpmReplicas one(config, problem, 1, 1, 0);
  while (!plain.done()) {
    plain.learn(data.view());
    one.learn(data.view());
    one.average(Peers{});
  }
  EXPECT_TRUE(one.done());
  for (std::size_t side = 0; side < plain.sides(); ++side) {
    EXPECT_EQ(one.lead().side_weights(side), plain.side_weights(side));
    EXPECT_EQ(one.lead().intercepts(side), plain.intercepts(side));
  }
}

TEST(CpmReplicas, ShareTheStepsAndIgnoreTheThreadCount) {
  const CsrBuffer data = random_rows(240, 40, 5, 9);
  CpmConfig config;
  config.faces = 3;
  config.iterations = 1000;
  const CpmProblem problem = problem_of(data);
  std::vector<std::string> weights;
  for (const int threads : {1, 2}) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    CpmReplicas three(config, problem, 3, 3, 0);
    int windows = 0;
    while (!three.done()) {
      three.learn(rows_of(data, 0, 120));
      three.learn(rows_of(data, 120, 240));
      EXPECT_FALSE(three.done());  // done changes at averages only
      three.average(Peers{});
      ++windows;
    }
    // T steps in all (in T's pass each replica makes at most its third of what is left).
    for (const auto& s : three.status()) EXPECT_EQ(s.steps, config.iterations);
    EXPECT_GT(windows, 2);
    weights.emplace_back(three.lead().side_weights(0));
  }
  EXPECT_EQ(weights[0], weights[1]);
}

// Three replicas of one run, as three ranks hold them, averaged as the ranks' all-reduce does.
struct ThreeReplicas {
  CpmTrainer a, b, c;
  ThreeReplicas(const CpmConfig& config, const CpmProblem& problem)
      : a(config, problem), b(config, problem), c(config, problem) {
    a.make_replica(0, 3);
    b.make_replica(1, 3);
    c.make_replica(2, 3);
  }
  void average() { CpmTrainer::average({&a, &b, &c}, true, Peers{}); }
};

// A replica whose shares hold no rows (a rank with no part of small windows) leaves its steps to
// the others: the run still makes its T steps and ends.
TEST(CpmReplicas, ReplicasWithoutRowsLeaveTheirStepsToTheOthers) {
  const CsrBuffer data = random_rows(90, 30, 4, 4);
  CpmConfig config;
  config.faces = 2;
  config.iterations = 500;
  ThreeReplicas run(config, problem_of(data));
  auto [a, b, c] = std::tie(run.a, run.b, run.c);
  int averages = 0;
  for (; !a.run_done() && averages < 200; ++averages) {
    a.learn(data.view());
    b.learn(rows_of(data, 0, 0));
    c.learn(rows_of(data, 0, 0));
    run.average();
    // Every replica (every rank of an MPI job) ends at the same average, also when fewer steps
    // are left than replicas and some have none in the interval.
    EXPECT_EQ(b.run_done(), a.run_done());
    EXPECT_EQ(c.run_done(), a.run_done());
  }
  EXPECT_TRUE(a.done() && b.done() && c.done());
  EXPECT_LT(averages, 200);
  for (const auto& s : a.status()) EXPECT_EQ(s.run_steps, config.iterations);
}

// Replicas with unequal shares of each pass (ranks with unequal parts of the windows) step through
// all their rows while T reaches the pass's end: T = epochs × rows takes exactly `epochs` passes.
// Equal quotas left the shorter shares' steps to a fourth pass.
TEST(CpmReplicas, UnequalSharesMakeTheEpochsInAsManyPasses) {
  const CsrBuffer data = random_rows(90, 30, 4, 6);
  CpmConfig config;
  config.faces = 2;
  config.epochs = 3;
  ThreeReplicas run(config, problem_of(data));
  auto [a, b, c] = std::tie(run.a, run.b, run.c);
  int passes = 0;
  for (; !a.run_done() && passes < 10; ++passes) {
    for (const std::size_t start : {0, 30, 60}) {  // three windows a pass, each shared 20/8/2
      a.learn(rows_of(data, start, start + 20));
      b.learn(rows_of(data, start + 20, start + 28));
      c.learn(rows_of(data, start + 28, start + 30));
      run.average();
    }
  }
  EXPECT_EQ(passes, 3);
  for (const auto& s : a.status()) EXPECT_EQ(s.run_steps, 3u * 90u);
}

TEST(CpmReplicas, RefuseAnEntropyFloor) {
  const CsrBuffer data = random_rows(50, 20, 4, 2);
  CpmConfig config;
  config.faces = 4;
  config.iterations = 100;
  config.perplexity = 2;
  EXPECT_THROW(CpmReplicas(config, problem_of(data), 2, 2, 0), ConfigError);
  EXPECT_NO_THROW(CpmReplicas(config, problem_of(data), 1, 1, 0));
}

}  // namespace
}  // namespace polymargin::engine
