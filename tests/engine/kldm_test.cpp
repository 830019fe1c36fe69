// Kernel LDM (engine/kldm.h) against dense float64 references of the paper's formulas: the
// better-conditioned P-form against the Q-form of eq. 8-12, the DCD solution against a brute-force
// projected-gradient solve of the dual, its KKT conditions, and the linear-kernel optimum against
// the linear learner's averaged SGD on the same problem. Also the kernels and their determinism.
#include "engine/kldm.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <Eigen/LU>
#include <cmath>
#include <vector>

#include "engine/errors.h"
#include "engine/kernel.h"
#include "engine/ldm.h"
#include "engine/random.h"

namespace polymargin::engine {
namespace {

// m rows of d dense features in [0, 1], labels from a noisy linear rule.
struct Problem {
  RowSet x;
  Eigen::VectorXd y;
  Eigen::MatrixXd dense;  // m × d
};

Problem make_problem(int m, int d, std::uint64_t seed, double noise = 0.15) {
  Problem p;
  SplitMix64 rng(seed);
  auto uniform = [&] { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; };
  std::vector<double> w(d);
  for (int f = 0; f < d; ++f) w[f] = uniform() * 2 - 1;
  p.dense.resize(m, d);
  p.y.resize(m);
  for (int i = 0; i < m; ++i) {
    double s = 0;
    for (int f = 0; f < d; ++f) {
      p.dense(i, f) = static_cast<float>(uniform());  // exactly representable in the CSR floats
      s += w[f] * (p.dense(i, f) - 0.5);
    }
    p.y(i) = (s + noise * (uniform() - 0.5) > 0) ? 1 : -1;
    p.x.rows.labels.push_back(static_cast<float>(p.y(i)));
    for (int f = 0; f < d; ++f) {
      p.x.rows.indices.push_back(static_cast<std::uint32_t>(f + 1));
      p.x.rows.values.push_back(static_cast<float>(p.dense(i, f)));
    }
    p.x.rows.offsets.push_back(static_cast<std::uint32_t>(p.x.rows.indices.size()));
  }
  p.x.rows.has_values = true;
  p.x.finish();
  return p;
}

KernelSpec rbf(double gamma) {
  KernelSpec k;
  k.type = KernelType::kRbf;
  k.gamma = gamma;
  return k;
}

KernelSpec linear() {
  KernelSpec k;
  k.type = KernelType::kLinear;
  return k;
}

// Q = (4λ1/m²)(m·GG − (Gy)(Gy)ᵀ) + G and A = Q⁻¹GY, straight from eq. 8 and 10.
Eigen::MatrixXd q_form_a(const Eigen::MatrixXd& g, const Eigen::VectorXd& y, double lambda1) {
  const double m = static_cast<double>(g.rows());
  const Eigen::VectorXd gy = g * y;
  const Eigen::MatrixXd q = 4 * lambda1 / (m * m) * (m * g * g - gy * gy.transpose()) + g;
  return q.fullPivLu().solve(g * y.asDiagonal());
}

TEST(Kernel, GramMatchesDirectFormulas) {
  const Problem p = make_problem(30, 4, 1);
  KernelSpec poly;
  poly.type = KernelType::kPolynomial;
  poly.gamma = 0.5;
  poly.coef0 = 1;
  poly.degree = 3;
  poly.bias = 0.5;
  for (const KernelSpec& k : {linear(), rbf(0.7), poly}) {
    const Eigen::MatrixXd g = gram_matrix(p.x, k);
    for (int i = 0; i < 30; ++i)
      for (int j = 0; j < 30; ++j) {
        const Eigen::VectorXd u = p.dense.row(i), v = p.dense.row(j);
        double expected = 0;
        if (k.type == KernelType::kLinear) expected = u.dot(v);
        if (k.type == KernelType::kRbf) expected = std::exp(-0.7 * (u - v).squaredNorm());
        if (k.type == KernelType::kPolynomial) expected = std::pow(0.5 * u.dot(v) + 1, 3) + 0.25;
        EXPECT_NEAR(g(i, j), expected, 1e-12) << kernel_name(k.type) << " " << i << "," << j;
        EXPECT_EQ(g(i, j), g(j, i));
      }
  }
}

TEST(Kernel, GramAndDistanceDoNotDependOnThreads) {
  const Problem p = make_problem(300, 7, 2);
  Eigen::MatrixXd one, many;
  double d1, dn, s1, sn;
  {
    tbb::global_control c(tbb::global_control::max_allowed_parallelism, 1);
    one = gram_matrix(p.x, rbf(1.3));
    d1 = mean_pairwise_distance(p.x, 5);
    s1 = mean_pairwise_distance(p.x, 5, 1000);
  }
  {
    tbb::global_control c(tbb::global_control::max_allowed_parallelism, 4);
    many = gram_matrix(p.x, rbf(1.3));
    dn = mean_pairwise_distance(p.x, 5);
    sn = mean_pairwise_distance(p.x, 5, 1000);
  }
  EXPECT_TRUE((one.array() == many.array()).all());
  EXPECT_EQ(d1, dn);
  EXPECT_EQ(s1, sn);
  // δ over all pairs, by brute force; the sampled estimate is close to it.
  double sum = 0;
  for (int i = 0; i < 300; ++i)
    for (int j = 0; j < i; ++j) sum += (p.dense.row(i) - p.dense.row(j)).norm();
  EXPECT_NEAR(d1, sum / (300.0 * 299 / 2), 1e-12);
  EXPECT_NEAR(s1, d1, 0.05 * d1);
}

TEST(Kldm, PFormEqualsQFormOnInvertibleKernels) {
  const Problem p = make_problem(25, 3, 3);
  const Eigen::MatrixXd g = gram_matrix(p.x, rbf(2.0));  // distinct rows: G is positive definite
  for (const double lambda1 : {0.0, 0.01, 1.0, 50.0}) {
    const LdmDualOperator op = ldm_dual_operator(g, p.y, lambda1);
    const Eigen::MatrixXd a = q_form_a(g, p.y, lambda1);
    EXPECT_LT((op.a - a).cwiseAbs().maxCoeff(), 1e-9 * (1 + a.cwiseAbs().maxCoeff()))
        << "lambda1 " << lambda1;
    const Eigen::MatrixXd h = p.y.asDiagonal() * g * a;
    EXPECT_LT((op.h_diag - h.diagonal()).cwiseAbs().maxCoeff(), 1e-9) << "lambda1 " << lambda1;
    EXPECT_LT((h - h.transpose()).cwiseAbs().maxCoeff(), 1e-8);  // H is symmetric
  }
}

TEST(Kldm, SingularLinearKernelStillSolves) {
  // d = 3 < m: G is singular, Q⁻¹ does not exist, the P-form does (eig(P) ≥ 1).
  const Problem p = make_problem(40, 3, 4);
  const Eigen::MatrixXd g = gram_matrix(p.x, linear());
  const LdmDualOperator op = ldm_dual_operator(g, p.y, 2.0);
  // A = P⁻¹Y: check P·A = Y directly.
  const double m = 40;
  const Eigen::MatrixXd pm = Eigen::MatrixXd::Identity(40, 40) + 4 * 2.0 / m * g -
                             4 * 2.0 / (m * m) * p.y * (g * p.y).transpose();
  EXPECT_LT((pm * op.a - Eigen::MatrixXd(p.y.asDiagonal())).cwiseAbs().maxCoeff(), 1e-10);
}

TEST(Kldm, KktConditionsHoldAtConvergence) {
  const Problem p = make_problem(80, 5, 5, 0.6);
  const Eigen::MatrixXd g = gram_matrix(p.x, rbf(1.0));
  KldmConfig config;
  config.lambda1 = 0.5;
  config.lambda2 = 2.0;
  config.c = 3;
  config.tolerance = 1e-9;
  for (const bool shrinking : {true, false}) {
    config.shrinking = shrinking;
    const KldmResult r = solve_kldm(g, p.y, config);
    ASSERT_TRUE(r.converged);
    const LdmDualOperator op = ldm_dual_operator(g, p.y, config.lambda1);
    // α = A(β + (λ2/m)e) and ∇f = y∘(Gα) − 1.
    const Eigen::VectorXd alpha = op.a * (r.beta.array() + config.lambda2 / 80).matrix();
    EXPECT_LT((alpha - r.alpha).cwiseAbs().maxCoeff(), 1e-9);
    int free = 0, bound = 0;
    for (int i = 0; i < 80; ++i) {
      const double grad = p.y(i) * (g.row(i).dot(r.alpha)) - 1;
      ASSERT_GE(r.beta(i), 0);
      ASSERT_LE(r.beta(i), config.c);
      if (r.beta(i) == 0) {
        EXPECT_GE(grad, -1e-8) << i;
      } else if (r.beta(i) == config.c) {
        EXPECT_LE(grad, 1e-8) << i;
        ++bound;
      } else {
        EXPECT_NEAR(grad, 0, 1e-8) << i;
        ++free;
      }
    }
    // Strong duality: the primal (eq. 8) and its dual meet at the optimum.
    EXPECT_GE(r.primal_objective, r.dual_objective - 1e-9 * r.primal_objective);
    EXPECT_LT(r.primal_objective - r.dual_objective, 1e-7 * r.primal_objective);
    EXPECT_EQ(free, static_cast<int>(r.free_vectors));
    EXPECT_EQ(bound, static_cast<int>(r.bound_vectors));
    EXPECT_GT(free + bound, 0);
  }
}

TEST(Kldm, MatchesBruteForceDualSolve) {
  // Projected gradient descent on f(β) = ½βᵀHβ + ((λ2/m)He − e)ᵀβ with H from the Q-form.
  const Problem p = make_problem(12, 3, 6, 0.8);
  const Eigen::MatrixXd g = gram_matrix(p.x, rbf(3.0));
  const double lambda1 = 0.3, lambda2 = 1.5, c = 2, m = 12;
  const Eigen::MatrixXd h = p.y.asDiagonal() * g * q_form_a(g, p.y, lambda1);
  const Eigen::VectorXd linear_term = lambda2 / m * h * Eigen::VectorXd::Ones(12) -
                                      Eigen::VectorXd::Ones(12);
  const double step = 1.0 / h.eigenvalues().real().maxCoeff();
  Eigen::VectorXd beta = Eigen::VectorXd::Zero(12);
  for (int it = 0; it < 200000; ++it)
    beta = (beta - step * (h * beta + linear_term)).cwiseMax(0.0).cwiseMin(c);
  KldmConfig config;
  config.lambda1 = lambda1;
  config.lambda2 = lambda2;
  config.c = c;
  config.tolerance = 1e-10;
  const KldmResult r = solve_kldm(g, p.y, config);
  EXPECT_LT((r.beta - beta).cwiseAbs().maxCoeff(), 1e-6);
  const double f = 0.5 * beta.dot(h * beta) + linear_term.dot(beta);
  const double constant = 0.5 * (lambda2 / m) * (lambda2 / m) * h.sum();
  EXPECT_NEAR(r.dual_objective, -f - constant, 1e-8 * (1 + std::abs(f)));
}

TEST(Kldm, LinearKernelMatchesAveragedSgdObjective) {
  // The same problem, λ1, λ2 and C in paper units for both: kernel LDM with the linear kernel is
  // the exact minimiser of g(w) (eq. 14); averaged SGD gets within 1% of it.
  const int m = 400, d = 5;
  const Problem p = make_problem(m, d, 7, 0.4);
  const double c = 1, lambda1 = 1e-2 * m * c, lambda2 = 1e-2 * m * c;
  KldmConfig config;
  config.lambda1 = lambda1;
  config.lambda2 = lambda2;
  config.c = c;
  config.tolerance = 1e-6;
  const KldmResult exact = solve_kldm(gram_matrix(p.x, linear()), p.y, config);
  ASSERT_TRUE(exact.converged);

  LdmConfig sgd;
  sgd.lambda1 = lambda1;
  sgd.lambda2 = lambda2;
  sgd.c = c;
  sgd.epochs = 60;
  sgd.seed = 3;
  LdmTrainer trainer(sgd, m, d, LabelMap{});
  SplitMix64 rng(11);
  std::vector<std::uint32_t> order(m);
  for (int e = 0; e < sgd.epochs; ++e) {
    for (int i = 0; i < m; ++i) order[i] = i;
    seeded_shuffle(order.data(), order.size(), rng);
    CsrBuffer epoch;
    const CsrView all = p.x.rows.view();
    for (const std::uint32_t i : order) epoch.append_row(all, i);
    trainer.learn(epoch.view());
  }
  const std::vector<double> w = trainer.averaged_weights();
  Eigen::VectorXd scores(m);
  double norm2 = 0;
  for (int f = 0; f < d; ++f) norm2 += w[f + 1] * w[f + 1];
  for (int i = 0; i < m; ++i) {
    double s = 0;
    for (int f = 0; f < d; ++f) s += w[f + 1] * p.dense(i, f);
    scores(i) = s;
  }
  const double asgd = ldm_primal_objective(scores, p.y, norm2, lambda1, lambda2, c);
  EXPECT_LE(exact.primal_objective, asgd * (1 + 1e-6));  // the exact solver is the minimum
  EXPECT_LT(std::abs(asgd - exact.primal_objective), 0.01 * std::abs(exact.primal_objective))
      << "ASGD " << asgd << " vs DCD " << exact.primal_objective;
}

TEST(Kldm, DeterministicWhateverTheThreads) {
  const Problem p = make_problem(200, 6, 8, 0.5);
  KldmConfig config;
  config.lambda1 = 1;
  config.lambda2 = 5;
  KldmResult one, many;
  {
    tbb::global_control c(tbb::global_control::max_allowed_parallelism, 1);
    one = solve_kldm(gram_matrix(p.x, rbf(1.0)), p.y, config);
  }
  {
    tbb::global_control c(tbb::global_control::max_allowed_parallelism, 4);
    many = solve_kldm(gram_matrix(p.x, rbf(1.0)), p.y, config);
  }
  EXPECT_TRUE((one.alpha.array() == many.alpha.array()).all());
  config.seed = 2;  // another coordinate order: the same optimum, not the same bits
  const KldmResult other = solve_kldm(gram_matrix(p.x, rbf(1.0)), p.y, config);
  EXPECT_NEAR(other.primal_objective, one.primal_objective, 1e-3 * one.primal_objective);
}

TEST(Kldm, BadOptionsAreUsageErrors) {
  KldmConfig config;
  config.c = 0;
  EXPECT_THROW(config.validate(), UsageError);
  config = {};
  config.lambda1 = -1;
  EXPECT_THROW(config.validate(), UsageError);
  config = {};
  config.tolerance = 0;
  EXPECT_THROW(config.validate(), UsageError);
  config = {};
  config.max_sweeps = 0;
  EXPECT_THROW(config.validate(), UsageError);
  EXPECT_THROW(parse_kernel("sigmoid"), UsageError);
  KernelSpec k = rbf(-1);
  EXPECT_THROW(k.validate(), UsageError);
}

TEST(Kldm, AStopRequestEndsTheSolveAtASweep) {
  const Problem p = make_problem(30, 3, 6, 0.8);
  const Eigen::MatrixXd g = gram_matrix(p.x, rbf(1.0));
  KldmConfig config;
  config.tolerance = 1e-300;  // not reached: the stop ends it
  config.max_sweeps = 1000;
  int polls = 0;
  config.stop = [&] { return ++polls == 3; };
  EXPECT_THROW(solve_kldm(g, p.y, config), Stopped);
  EXPECT_EQ(polls, 3);  // once a sweep: two sweeps ran
}

}  // namespace
}  // namespace polymargin::engine
