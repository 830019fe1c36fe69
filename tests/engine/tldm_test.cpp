// Twin LDM (engine/tldm.h) against dense references: the SOR box-QP solver against brute-force
// projected gradient descent, and each plane's dual solution against its primal (9)/(10) by strong
// duality, with P, S and Q built here straight from the paper's definitions. This is also what
// pins the signs of (11) and v2, which the paper prints inconsistently.
#include "engine/tldm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/errors.h"
#include "engine/kernel.h"
#include "engine/random.h"

namespace polymargin::engine {
namespace {

struct Problem {
  Eigen::MatrixXd x;  // l × d
  Eigen::VectorXd y;
};

Problem make_problem(int l, int d, std::uint64_t seed, bool xor_labels = false) {
  Problem p;
  SplitMix64 rng(seed);
  auto uniform = [&] { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; };
  p.x.resize(l, d);
  p.y.resize(l);
  for (int i = 0; i < l; ++i) {
    for (int f = 0; f < d; ++f) p.x(i, f) = uniform();
    const double s = xor_labels ? (p.x(i, 0) - 0.5) * (p.x(i, 1) - 0.5)
                                : p.x(i, 0) + 0.5 * p.x(i, 1) - 0.75 + 0.3 * (uniform() - 0.5);
    p.y(i) = s > 0 ? 1 : -1;
  }
  return p;
}

TEST(Tldm, SorMatchesProjectedGradient) {
  SplitMix64 rng(1);
  auto uniform = [&] { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; };
  Eigen::MatrixXd a(15, 6);
  for (int i = 0; i < 15; ++i)
    for (int j = 0; j < 6; ++j) a(i, j) = uniform() - 0.5;
  Eigen::MatrixXd h = a * a.transpose();  // rank 6 of 15: semi-definite, as the duals are
  h.diagonal().array() += 1e-3;
  Eigen::VectorXd f(15);
  for (int i = 0; i < 15; ++i) f(i) = 2 * uniform() - 0.5;
  const double step = 1.0 / h.eigenvalues().real().maxCoeff();
  Eigen::VectorXd z = Eigen::VectorXd::Zero(15);
  for (int it = 0; it < 400000; ++it) z = (z - step * (h * z - f)).cwiseMax(0.0).cwiseMin(2.0);
  for (const double omega : {0.5, 1.0, 1.5}) {
    const BoxQpResult r = solve_box_qp_sor(h, f, 2.0, omega, 1e-11, 200000);
    ASSERT_TRUE(r.converged) << omega;
    EXPECT_LT((r.z - z).cwiseAbs().maxCoeff(), 1e-6) << omega;
  }
}

// Dual value of plane k from P (or S) and Q built from the paper's definitions.
double dual_value(const Problem& p, const Eigen::MatrixXd& basis, const TldmConfig& c, int k,
                  const Eigen::VectorXd& dual) {
  const Eigen::Index l = basis.rows(), q = basis.cols();
  Eigen::MatrixXd m(l, q + 1);
  m << basis, Eigen::VectorXd::Ones(l);
  std::vector<Eigen::Index> pos, neg;
  for (Eigen::Index i = 0; i < l; ++i) (p.y(i) > 0 ? pos : neg).push_back(i);
  Eigen::MatrixXd hm(pos.size(), q + 1), gm(neg.size(), q + 1);
  for (std::size_t i = 0; i < pos.size(); ++i) hm.row(i) = m.row(pos[i]);
  for (std::size_t i = 0; i < neg.size(); ++i) gm.row(i) = m.row(neg[i]);
  const double ld = static_cast<double>(l);
  const Eigen::MatrixXd d = m.transpose() * (ld * Eigen::MatrixXd::Identity(l, l) - p.y * p.y.transpose());
  const Eigen::MatrixXd near = k == 0 ? hm : gm, far = k == 0 ? gm : hm;
  const Eigen::MatrixXd pk = c.lambda1 / (ld * ld) * d * m + near.transpose() * near +
                             c.epsilon * Eigen::MatrixXd::Identity(q + 1, q + 1);
  const Eigen::VectorXd qv = c.lambda2 / ld * m.transpose() * p.y;
  // Plane 1: L = ½vᵀPv − Qᵀv + αᵀ(e + Gv) at v = P⁻¹(Q − Gᵀα); plane 2: −γᵀ(Hv − e) at
  // v = S⁻¹(Q + Hᵀγ). Both give −½ rᵀP⁻¹r + eᵀ(dual) with r = Q ∓ farᵀ·dual.
  const Eigen::VectorXd r = k == 0 ? Eigen::VectorXd(qv - far.transpose() * dual)
                                   : Eigen::VectorXd(qv + far.transpose() * dual);
  return -0.5 * r.dot(pk.ldlt().solve(r)) + dual.sum();
}

void expect_strong_duality(const Problem& p, const Eigen::MatrixXd& basis, const TldmConfig& c) {
  const TldmResult r = solve_tldm(basis, p.y, c);
  for (int k = 0; k < 2; ++k) {
    const TldmPlane& plane = r.plane[k];
    ASSERT_TRUE(plane.solver.converged) << k;
    EXPECT_GE(plane.dual.minCoeff(), 0);
    EXPECT_LE(plane.dual.maxCoeff(), c.c);
    const double primal = tldm_primal_objective(basis, p.y, plane.w, plane.b, k, c);
    const double dual = dual_value(p, basis, c, k, plane.dual);
    EXPECT_GE(primal, dual - 1e-7 * std::abs(primal)) << "plane " << k + 1;
    EXPECT_NEAR(primal, dual, 1e-6 * (1 + std::abs(primal))) << "plane " << k + 1;
  }
}

TEST(Tldm, LinearPlanesAreOptimalByStrongDuality) {
  const Problem p = make_problem(60, 3, 2);
  TldmConfig c;
  c.c = 2;
  c.lambda1 = 4;
  c.lambda2 = 0.5;
  c.epsilon = 1e-4;
  c.tolerance = 1e-10;
  c.max_sweeps = 200000;
  expect_strong_duality(p, p.x, c);
  c.lambda1 = c.lambda2 = 0;  // plain TWSVM
  expect_strong_duality(p, p.x, c);
}

TEST(Tldm, KernelPlanesAreOptimalByStrongDuality) {
  const Problem p = make_problem(40, 2, 3, true);
  Eigen::MatrixXd k(40, 40);
  for (int i = 0; i < 40; ++i)
    for (int j = 0; j < 40; ++j) k(i, j) = std::exp(-2.0 * (p.x.row(i) - p.x.row(j)).squaredNorm());
  TldmConfig c;
  c.c = 1;
  c.lambda1 = 2;
  c.lambda2 = 1;
  c.epsilon = 1e-3;
  c.tolerance = 1e-10;
  c.max_sweeps = 500000;
  expect_strong_duality(p, k, c);
}

TEST(Tldm, RbfPlanesSeparateXorAndLinearOnesCannot) {
  const Problem train = make_problem(200, 2, 4, true), test = make_problem(200, 2, 5, true);
  auto accuracy = [&](const Eigen::MatrixXd& basis_train, const Eigen::MatrixXd& basis_test,
                      bool kernel) {
    TldmConfig c;
    c.lambda1 = 0.5;
    c.lambda2 = 0.5;
    c.c = 4;
    c.epsilon = 1e-4;
    const TldmResult r = solve_tldm(basis_train, train.y, c);
    double n[2];
    for (int k = 0; k < 2; ++k)
      n[k] = std::sqrt(kernel ? r.plane[k].w.dot(basis_train * r.plane[k].w)
                              : r.plane[k].w.squaredNorm());
    int correct = 0;
    for (int i = 0; i < 200; ++i) {
      const double d0 = std::abs(basis_test.row(i).dot(r.plane[0].w) + r.plane[0].b) / n[0];
      const double d1 = std::abs(basis_test.row(i).dot(r.plane[1].w) + r.plane[1].b) / n[1];
      correct += (d0 < d1) == (test.y(i) > 0);
    }
    return correct / 200.0;
  };
  auto rbf = [&](const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
    Eigen::MatrixXd k(a.rows(), b.rows());
    for (Eigen::Index i = 0; i < a.rows(); ++i)
      for (Eigen::Index j = 0; j < b.rows(); ++j)
        k(i, j) = std::exp(-8.0 * (a.row(i) - b.row(j)).squaredNorm());
    return k;
  };
  EXPECT_GT(accuracy(rbf(train.x, train.x), rbf(test.x, train.x), true), 0.9);
  EXPECT_LT(accuracy(train.x, test.x, false), 0.75);
}

TEST(Tldm, BadOptionsAndDataAreErrors) {
  TldmConfig c;
  c.omega = 2;
  EXPECT_THROW(c.validate(), UsageError);
  c = {};
  c.epsilon = 0;
  EXPECT_THROW(c.validate(), UsageError);
  c = {};
  c.c = -1;
  EXPECT_THROW(c.validate(), UsageError);
  const Problem p = make_problem(10, 2, 6);
  EXPECT_THROW(solve_tldm(p.x, Eigen::VectorXd::Ones(10), TldmConfig{}), DataError);
}

TEST(Tldm, AStopRequestEndsTheSolveAtASweep) {
  const Problem p = make_problem(30, 3, 2);
  TldmConfig c;
  c.tolerance = 1e-300;  // not reached: the stop ends it
  int polls = 0;
  c.stop = [&] { return ++polls == 3; };
  EXPECT_THROW(solve_tldm(p.x, p.y, c), Stopped);
  EXPECT_EQ(polls, 3);
}

}  // namespace
}  // namespace polymargin::engine
