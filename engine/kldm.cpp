#include "engine/kldm.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "engine/limits.h"
#include "engine/random.h"
#include "engine/setup.h"

namespace polymargin::engine {

namespace {

// Right-hand-side columns per parallel triangular solve: fixed, so the result does not depend
// on the thread count.
constexpr Eigen::Index kSolveBlock = 64;

// Columns c0… of Z = B⁻¹Y (at most kSolveBlock of them) from B's factor, in place in `z`, which
// holds Y's columns there.
void solve_block(const Eigen::MatrixXd& factor, Eigen::Index c0, Eigen::MatrixXd& z) {
  const Eigen::Index m = factor.rows();
  const Eigen::Index n = std::min(kSolveBlock, m - c0);
  auto lower = factor.bottomRightCorner(m - c0, m - c0).triangularView<Eigen::Lower>();
  auto rhs = z.block(c0, c0, m - c0, n);
  lower.solveInPlace(rhs);
  auto all = z.middleCols(c0, n);
  factor.triangularView<Eigen::Lower>().transpose().solveInPlace(all);
}

}  // namespace

void KldmConfig::validate() const {
  if (!(lambda1 >= 0) || !std::isfinite(lambda1))
    throw ConfigError("lambda1", "must be ≥ 0 (got " + message_number(lambda1) + ")");
  if (!(lambda2 >= 0) || !std::isfinite(lambda2))
    throw ConfigError("lambda2", "must be ≥ 0 (got " + message_number(lambda2) + ")");
  if (!cost_in_range(c))
    throw ConfigError("c",
                      "must be a positive number in [1e-30, 1e30] (got " + message_number(c) + ")");
  if (!(tolerance > 0) || !std::isfinite(tolerance))
    throw ConfigError("tolerance", "must be > 0 (got " + message_number(tolerance) + ")");
  if (max_sweeps < 1)
    throw ConfigError("max_sweeps", "must be at least 1 (got " + std::to_string(max_sweeps) + ")");
}

double kldm_peak_bytes(std::uint64_t m) {
  return 3 * 8.0 * static_cast<double>(m) * static_cast<double>(m) + 64.0 * m;
}

LdmDualOperator ldm_dual_operator(const Eigen::MatrixXd& g, const Eigen::VectorXd& y,
                                  double lambda1, const Watch& watch) {
  const Eigen::Index m = g.rows();
  LdmDualOperator op;
  op.a = Eigen::MatrixXd::Zero(m, m);
  for (Eigen::Index i = 0; i < m; ++i) op.a(i, i) = y(i);
  if (lambda1 > 0) {
    const double md = static_cast<double>(m);
    // B = I + (4λ1/m)G, factored in place: B = LLᵀ.
    Eigen::MatrixXd b = (4 * lambda1 / md) * g;
    b.diagonal().array() += 1.0;
    if (!cholesky_in_place(b, watch, "Cholesky factor"))
      throw NumericalError(
          "kernel LDM: the Cholesky factorisation of I + (4·lambda1/m)·G failed; the kernel "
          "matrix is not positive semi-definite (a polynomial kernel with negative coef0?)");
    // Z = B⁻¹Y in blocks of columns. Column j of Y is y_j e_j, so the forward solve L X = Y of a
    // block starting at column c0 only involves rows c0…m−1 (the rows above stay zero). The
    // blocks are independent: run in batches, with the watch between them.
    const auto blocks = static_cast<std::size_t>((m + kSolveBlock - 1) / kSolveBlock);
    const double block_cost = 2.0 * md * md * static_cast<double>(kSolveBlock);
    parallel_batches(blocks, batch_units(block_cost, 5e8), watch, "solves",
                     [&](std::size_t begin, std::size_t end) {
                       for (auto k = static_cast<Eigen::Index>(begin);
                            k != static_cast<Eigen::Index>(end); ++k)
                         solve_block(b, k * kSolveBlock, op.a);
                     });
    // Sherman–Morrison: A = Z + z_u (vᵀZ) / (1 − vᵀz_u), z_u = B⁻¹u, u = (4λ1/m²)y, v = Gy.
    Eigen::VectorXd zu = (4 * lambda1 / (md * md)) * y;
    cholesky_solve_in_place(b, zu);
    const Eigen::VectorXd v = g * y;
    const double denominator = 1.0 - v.dot(zu);
    if (!(denominator > 0) || !std::isfinite(denominator))
      throw NumericalError("kernel LDM: the Sherman–Morrison denominator 1 − vᵀB⁻¹u is " +
                           message_number(denominator) +
                           " (should be > 0): λ1 = " + message_number(lambda1) +
                           " is too large next to the kernel's values (lower -c or --lambda1), or "
                           "G is not a kernel matrix");
    tbb::parallel_for(tbb::blocked_range<Eigen::Index>(0, m, 16),
                      [&](const tbb::blocked_range<Eigen::Index>& range) {
                        for (Eigen::Index j = range.begin(); j != range.end(); ++j) {
                          const double r = op.a.col(j).dot(v) / denominator;
                          op.a.col(j) += r * zu;
                        }
                      });
  }
  op.h_diag.resize(m);
  tbb::parallel_for(tbb::blocked_range<Eigen::Index>(0, m, 64),
                    [&](const tbb::blocked_range<Eigen::Index>& range) {
                      for (Eigen::Index i = range.begin(); i != range.end(); ++i)
                        op.h_diag(i) = y(i) * g.col(i).dot(op.a.col(i));
                    });
  return op;
}

double ldm_primal_objective(const Eigen::VectorXd& scores, const Eigen::VectorXd& y, double norm2,
                            double lambda1, double lambda2, double c) {
  const double m = static_cast<double>(scores.size());
  double sum = 0, sum_sq = 0, hinge = 0;
  for (Eigen::Index i = 0; i < scores.size(); ++i) {
    const double margin = y(i) * scores(i);
    sum += margin;
    sum_sq += margin * margin;
    hinge += margin < 1 ? 1 - margin : 0;
  }
  const double variance_hat = 2.0 / (m * m) * (m * sum_sq - sum * sum);
  return 0.5 * norm2 + lambda1 * variance_hat - lambda2 * sum / m + c * hinge;
}

KldmResult solve_kldm(const Eigen::MatrixXd& g, const Eigen::VectorXd& y, const KldmConfig& config) {
  return solve_kldm(g, y, config, ldm_dual_operator(g, y, config.lambda1, {config.stop, {}}));
}

KldmResult solve_kldm(const Eigen::MatrixXd& g, const Eigen::VectorXd& y, const KldmConfig& config,
                      const LdmDualOperator& op) {
  config.validate();
  const Eigen::Index m = g.rows();
  const double md = static_cast<double>(m);
  const double c = config.c;
  KldmResult r;
  r.beta = Eigen::VectorXd::Zero(m);
  // β = 0: α = (λ2/m) A e; (λ2/m)He = y∘(Gα) there, kept for the dual objective.
  r.alpha = (config.lambda2 / md) * op.a.rowwise().sum();
  const Eigen::VectorXd mean_term = y.cwiseProduct(g * r.alpha);

  std::vector<Eigen::Index> active(static_cast<std::size_t>(m));
  std::iota(active.begin(), active.end(), Eigen::Index{0});
  std::size_t active_size = active.size();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double pg_max_old = kInf, pg_min_old = -kInf;
  SplitMix64 rng(derive_seed(config.seed, 0x6b6c646dull));
  double* beta = r.beta.data();
  for (r.sweeps = 0; r.sweeps < config.max_sweeps;) {
    poll(config.stop);
    ++r.sweeps;
    seeded_shuffle(active.data(), active_size, rng);
    double pg_max = -kInf, pg_min = kInf;
    for (std::size_t s = 0; s < active_size; ++s) {
      const Eigen::Index i = active[s];
      const double grad = y(i) * g.col(i).dot(r.alpha) - 1;
      double pg = 0;
      if (beta[i] == 0) {
        if (config.shrinking && grad > pg_max_old) {
          std::swap(active[s--], active[--active_size]);
          continue;
        }
        if (grad < 0) pg = grad;
      } else if (beta[i] == c) {
        if (config.shrinking && grad < pg_min_old) {
          std::swap(active[s--], active[--active_size]);
          continue;
        }
        if (grad > 0) pg = grad;
      } else {
        pg = grad;
      }
      pg_max = std::max(pg_max, pg);
      pg_min = std::min(pg_min, pg);
      if (std::abs(pg) > 1e-12) {
        const double old = beta[i];
        const double h = op.h_diag(i);
        // h_ii = 0 (a row with a zero kernel column): f is linear in β_i, go to the bound.
        beta[i] = h > 0 ? std::clamp(old - grad / h, 0.0, c) : (grad < 0 ? c : 0.0);
        if (beta[i] != old) r.alpha.noalias() += (beta[i] - old) * op.a.col(i);
      }
    }
    r.pg_gap = pg_max - pg_min;
    if (pg_max - pg_min <= config.tolerance) {
      if (active_size == active.size()) {
        r.converged = true;
        break;
      }
      active_size = active.size();  // check every coordinate before stopping
      pg_max_old = kInf;
      pg_min_old = -kInf;
      continue;
    }
    pg_max_old = pg_max <= 0 ? kInf : pg_max;
    pg_min_old = pg_min >= 0 ? -kInf : pg_min;
  }
  if (!r.alpha.allFinite())
    throw NumericalError("kernel LDM: non-finite coefficients after " + std::to_string(r.sweeps) +
                         " sweeps");
  r.scores = g * r.alpha;
  // f(β) = ½βᵀ(∇f + (λ2/m)He − e); the Lagrangian dual of (8) is −f(β) − ½(λ2/m)²eᵀHe.
  double f = 0, constant = 0;
  for (Eigen::Index i = 0; i < m; ++i) {
    f += 0.5 * beta[i] * (y(i) * r.scores(i) - 1 + mean_term(i) - 1);
    constant += 0.5 * (config.lambda2 / md) * mean_term(i);
    if (beta[i] == c)
      ++r.bound_vectors;
    else if (beta[i] > 0)
      ++r.free_vectors;
  }
  r.dual_objective = -f - constant;
  r.primal_objective = ldm_primal_objective(r.scores, y, r.alpha.dot(r.scores), config.lambda1,
                                            config.lambda2, c);
  return r;
}

}  // namespace polymargin::engine
