// Compact Margin Machine (engine/cmm.h): each convex round's coordinate-descent solution against
// its primal by strong duality (dual derived from problem (8) with the CCCP linearisation), the
// CCCP objective never increasing over the rounds, variant (9) as one convex problem, and the
// error paths.
#include "engine/cmm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/errors.h"
#include "engine/random.h"

namespace polymargin::engine {
namespace {

struct Problem {
  Eigen::MatrixXd k;  // RBF + 1 (the bias feature)
  Eigen::VectorXd y;  // ±1, 0 = unlabelled
  Eigen::VectorXd truth;
};

// Two Gaussian-ish clouds in 2-D; every `stride`-th row keeps its label.
Problem make_problem(int n, int stride, std::uint64_t seed) {
  Problem p;
  SplitMix64 rng(seed);
  auto uniform = [&] { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; };
  Eigen::MatrixXd x(n, 2);
  p.y.resize(n);
  p.truth.resize(n);
  for (int i = 0; i < n; ++i) {
    const double label = i % 2 ? 1 : -1;
    const double s = uniform() + uniform() + uniform() - 1.5;
    const double t = uniform() + uniform() + uniform() - 1.5;
    x(i, 0) = label * 0.8 + 0.6 * s;
    x(i, 1) = 1.5 * t;
    p.truth(i) = label;
    p.y(i) = i % stride == 0 || i % stride == 1 ? label : 0;
  }
  p.k.resize(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) p.k(i, j) = std::exp(-0.5 * (x.row(i) - x.row(j)).squaredNorm()) + 1;
  return p;
}

CmmConfig tight() {
  CmmConfig c;
  c.c1 = 5;
  c.c2 = 0.5;
  c.c3 = 0.3;
  c.epsilon = 0.6;
  c.tolerance = 1e-10;
  c.max_sweeps = 200000;
  return c;
}

TEST(Cmm, ConvexRoundsMeetTheirPrimalByStrongDuality) {
  const Problem p = make_problem(60, 6, 1);
  for (const bool variant : {false, true}) {
    CmmConfig c = tight();
    c.rmm_variant = variant;
    CmmDual d;
    solve_cmm_round(p.k, p.y, c, true, d);  // the supervised SVM
    ASSERT_TRUE(d.converged);
    double primal = cmm_round_primal(d, p.y, c, true), dual = cmm_round_dual(d, c);
    EXPECT_NEAR(primal, -dual, 1e-7 * (1 + std::abs(primal)));
    // A CCCP round with some copies linearised (β = C2 on every third unlabelled row).
    for (int i = 0; i < 60; ++i)
      if (p.y(i) == 0 && i % 3 == 0) (i % 2 ? d.beta_plus : d.beta_minus)(i) = variant ? 0 : c.c2;
    solve_cmm_round(p.k, p.y, c, false, d);
    ASSERT_TRUE(d.converged);
    primal = cmm_round_primal(d, p.y, c, false);
    dual = cmm_round_dual(d, c);
    EXPECT_GE(primal, -dual - 1e-9 * std::abs(primal));
    EXPECT_NEAR(primal, -dual, 1e-7 * (1 + std::abs(primal))) << "variant " << variant;
    // The class-balance constraint holds in the CCCP rounds (variant (9) has none).
    EXPECT_EQ(d.balanced, !variant);
    if (!variant) {
      double mean_f = 0, unlabelled = 0;
      for (int i = 0; i < 60; ++i)
        if (p.y(i) == 0) {
          mean_f += d.f(i);
          ++unlabelled;
        }
      EXPECT_NEAR(mean_f / unlabelled, cmm_balance_target(p.y, c), 1e-7);
      EXPECT_NE(d.mu, 0);  // the SVM start was not balanced: the multiplier is active
    }
    // Box constraints of the dual.
    EXPECT_GE(d.alpha_label.minCoeff(), 0);
    EXPECT_LE(d.alpha_label.maxCoeff(), c.c1);
    EXPECT_LE(d.alpha_plus.maxCoeff(), c.c2);
    EXPECT_LE(d.t.cwiseAbs().maxCoeff(), variant ? c.c2 : c.c3);
    EXPECT_GT(d.t.cwiseAbs().maxCoeff(), 0);  // the tube is active somewhere
  }
}

TEST(Cmm, CccpNeverIncreasesItsObjective) {
  const Problem p = make_problem(120, 10, 2);
  for (const bool balance : {false, true}) {
    CmmConfig c = tight();
    c.balance = balance;
    const CmmResult r = solve_cmm(p.k, p.y, c);
    ASSERT_GE(r.objectives.size(), 3u);
    // With the balance constraint the SVM start is outside the feasible set, so the descent
    // starts at the first CCCP round.
    for (std::size_t i = balance ? 2 : 1; i < r.objectives.size(); ++i)
      EXPECT_LE(r.objectives[i], r.objectives[i - 1] * (1 + 1e-9)) << "round " << i;
    EXPECT_TRUE(r.converged);
  }
  const CmmResult r = solve_cmm(p.k, p.y, tight());
  // The decision values are those of the expansion: f = Kc.
  EXPECT_LT((p.k * r.c - r.scores).cwiseAbs().maxCoeff(), 1e-9);
  // Unlabelled rows mostly end up on their true side.
  int correct = 0, unlabelled = 0;
  for (int i = 0; i < 120; ++i)
    if (p.y(i) == 0) {
      ++unlabelled;
      correct += (r.scores(i) > 0) == (p.truth(i) > 0);
    }
  EXPECT_GT(correct, 0.8 * unlabelled);
}

// A target r away from the labelled mean moves the unlabelled mean of f to it, at the end of the
// whole procedure (every round keeps it), and --no-balance leaves it free.
TEST(Cmm, BalanceTargetSetsTheUnlabelledMean) {
  const Problem p = make_problem(120, 10, 4);
  for (const double target : {-0.4, 0.4}) {
    CmmConfig c = tight();
    c.balance_mean = target;
    const CmmResult r = solve_cmm(p.k, p.y, c);
    double mean_f = 0, unlabelled = 0;
    for (int i = 0; i < 120; ++i)
      if (p.y(i) == 0) {
        mean_f += r.scores(i);
        ++unlabelled;
      }
    EXPECT_NEAR(mean_f / unlabelled, target, 1e-6);
    c.balance = false;
    const CmmResult free = solve_cmm(p.k, p.y, c);
    mean_f = 0;
    for (int i = 0; i < 120; ++i)
      if (p.y(i) == 0) mean_f += free.scores(i);
    EXPECT_GT(std::abs(mean_f / unlabelled - target), 0.05);
  }
}

TEST(Cmm, DeterministicForASeed) {
  const Problem p = make_problem(80, 8, 3);
  CmmConfig c;
  const CmmResult a = solve_cmm(p.k, p.y, c), b = solve_cmm(p.k, p.y, c);
  EXPECT_TRUE((a.c.array() == b.c.array()).all());
}

TEST(Cmm, BadOptionsAreUsageErrors) {
  CmmConfig c;
  c.delta = 0.5;
  EXPECT_THROW(c.validate(), UsageError);
  c = {};
  c.delta = -1;
  EXPECT_THROW(c.validate(), UsageError);
  c = {};
  c.c1 = 0;
  EXPECT_THROW(c.validate(), UsageError);
  c = {};
  c.epsilon = -1;
  EXPECT_THROW(c.validate(), UsageError);
  c = {};
  c.max_rounds = 0;
  EXPECT_THROW(c.validate(), UsageError);
  c = {};
  c.balance_mean = 1;
  EXPECT_THROW(c.validate(), UsageError);
}

TEST(Cmm, AStopRequestEndsTheSolveAtASweep) {
  const Problem p = make_problem(60, 5, 2);
  CmmConfig c = tight();
  int polls = 0;
  c.stop = [&] { return ++polls == 4; };
  EXPECT_THROW(solve_cmm(p.k, p.y, c), Stopped);
  EXPECT_EQ(polls, 4);
}

}  // namespace
}  // namespace polymargin::engine
