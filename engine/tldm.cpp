#include "engine/tldm.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "engine/limits.h"
#include "engine/setup.h"

namespace polymargin::engine {

namespace {

Eigen::MatrixXd select_rows(const Eigen::MatrixXd& m, const std::vector<Eigen::Index>& rows) {
  Eigen::MatrixXd out(static_cast<Eigen::Index>(rows.size()), m.cols());
  for (std::size_t r = 0; r < rows.size(); ++r) out.row(static_cast<Eigen::Index>(r)) = m.row(rows[r]);
  return out;
}

// A failure of the in-place factorisation (no second (q+1)² matrix) names the likely cause: ε too
// small for the matrix, or λ1 so large that its term swamps ε in floating point.
void check_factored(bool factored, const char* name, const TldmConfig& config) {
  if (!factored)
    throw NumericalError(
        std::string("Twin LDM: the Cholesky factorisation of ") + name +
        " failed (not positive definite): raise --epsilon (ε = " + message_number(config.epsilon) +
        "), or lower --lambda1 (λ1 = " + message_number(config.lambda1) +
        ") if it is far beyond the data's scale");
}

// (h + hᵀ)/2 in place, without a temporary the size of h.
void symmetrise(Eigen::MatrixXd& h) {
  for (Eigen::Index j = 0; j < h.cols(); ++j)
    for (Eigen::Index i = 0; i < j; ++i) h(i, j) = h(j, i) = 0.5 * (h(i, j) + h(j, i));
}

}  // namespace

void TldmConfig::validate() const {
  if (!cost_in_range(c))
    throw ConfigError("c",
                      "must be a positive number in [1e-30, 1e30] (got " + message_number(c) + ")");
  if (!(lambda1 >= 0) || !std::isfinite(lambda1))
    throw ConfigError("lambda1", "must be ≥ 0 (got " + message_number(lambda1) + ")");
  if (!(lambda2 >= 0) || !std::isfinite(lambda2))
    throw ConfigError("lambda2", "must be ≥ 0 (got " + message_number(lambda2) + ")");
  if (!(epsilon > 0) || !std::isfinite(epsilon))
    throw ConfigError("epsilon", "must be > 0 (got " + message_number(epsilon) + ")");
  if (!(omega > 0 && omega < 2))
    throw ConfigError("omega", "must be in (0, 2) (got " + message_number(omega) + ")");
  if (!(tolerance > 0) || !std::isfinite(tolerance))
    throw ConfigError("tolerance", "must be > 0 (got " + message_number(tolerance) + ")");
  if (max_sweeps < 1)
    throw ConfigError("max_sweeps", "must be at least 1 (got " + std::to_string(max_sweeps) + ")");
}

BoxQpResult solve_box_qp_sor(const Eigen::MatrixXd& h, const Eigen::VectorXd& f, double upper,
                             double omega, double tolerance, int max_sweeps,
                             const StopRequest& stop) {
  const Eigen::Index n = h.rows();
  BoxQpResult r;
  r.z = Eigen::VectorXd::Zero(n);
  Eigen::VectorXd grad = -f;  // Hz − f at z = 0
  for (r.sweeps = 0; r.sweeps < max_sweeps;) {
    poll(stop);
    ++r.sweeps;
    double violation = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
      const double zi = r.z(i), g = grad(i);
      const double pg = zi <= 0 ? std::min(g, 0.0) : zi >= upper ? std::max(g, 0.0) : g;
      violation = std::max(violation, std::abs(pg));
      if (pg == 0) continue;
      const double next = std::clamp(zi - omega * g / h(i, i), 0.0, upper);
      if (next != zi) grad.noalias() += (next - zi) * h.col(i);
      r.z(i) = next;
    }
    r.max_violation = violation;
    if (violation <= tolerance) {
      r.converged = true;
      break;
    }
  }
  return r;
}

double tldm_primal_objective(const Eigen::MatrixXd& basis, const Eigen::VectorXd& y,
                             const Eigen::VectorXd& w, double b, int k, const TldmConfig& config) {
  const Eigen::VectorXd f = (basis * w).array() + b;  // f(x_i) for every row
  const double l = static_cast<double>(y.size());
  double near = 0, slack = 0, sum = 0, sum_sq = 0;
  for (Eigen::Index i = 0; i < y.size(); ++i) {
    const bool positive = y(i) > 0;
    const double margin = y(i) * f(i);
    sum += margin;
    sum_sq += margin * margin;
    if (positive == (k == 0))
      near += f(i) * f(i);
    else  // plane 1: −f(x) ≥ 1 on the negatives; plane 2: f(x) ≥ 1 on the positives
      slack += std::max(0.0, 1 - (k == 0 ? -f(i) : f(i)));
  }
  // μ̂ = (1/l²)(l·Σf² − (Σyf)²) with Σf² = Σ(yf)²; μ̄ = Σyf / l.
  const double variance_hat = (l * sum_sq - sum * sum) / (l * l);
  return 0.5 * near + 0.5 * config.lambda1 * variance_hat - config.lambda2 * sum / l +
         config.c * slack + 0.5 * config.epsilon * (w.squaredNorm() + b * b);
}

double tldm_peak_bytes(std::uint64_t l, std::uint64_t q) {
  const double rows = static_cast<double>(l), cols = static_cast<double>(q) + 1;
  return 8.0 * (2 * rows * cols + 3 * cols * cols + rows * rows);
}

TldmResult solve_tldm(const Eigen::MatrixXd& basis, const Eigen::VectorXd& y,
                      const TldmConfig& config, const SetupProgress& progress) {
  config.validate();
  // The set-up's dense products are single calls; the watch sits between them, and inside the
  // factorisations.
  const Watch watch{config.stop, progress};
  const Eigen::Index l = basis.rows(), q = basis.cols();
  std::vector<Eigen::Index> positives, negatives;
  for (Eigen::Index i = 0; i < l; ++i) (y(i) > 0 ? positives : negatives).push_back(i);
  if (positives.empty() || negatives.empty())
    throw DataError("", 0, 0, "Twin LDM needs rows of both classes");
  // M = [basis e], split by class into H (positives) and G (negatives); M itself is freed once
  // its products are made, so that the planes' solves run beside H and G only.
  Eigen::MatrixXd m(l, q + 1);
  m.leftCols(q) = basis;
  m.col(q).setOnes();
  const Eigen::MatrixXd hm = select_rows(m, positives), gm = select_rows(m, negatives);

  // (λ1/l²)·DM = (λ1/l²)(l·MᵀM − (MᵀY)(MᵀY)ᵀ) and Q = (λ2/l)·MᵀY.
  const double ld = static_cast<double>(l);
  const Eigen::VectorXd mty = m.transpose() * y;
  watch.at("products", 0);
  Eigen::MatrixXd distribution = m.transpose() * m;
  m.resize(0, 0);
  watch.at("products", 1.0 / 7);
  distribution = (config.lambda1 / (ld * ld)) * (ld * distribution - mty * mty.transpose());
  const Eigen::VectorXd qv = (config.lambda2 / ld) * mty;

  TldmResult result;
  for (int k = 0; k < 2; ++k) {
    // Plane 1 (k = 0): near H (positives), constraints on G (negatives); plane 2 the reverse.
    const Eigen::MatrixXd& near = k == 0 ? hm : gm;
    const Eigen::MatrixXd& far = k == 0 ? gm : hm;
    Eigen::MatrixXd p = distribution + near.transpose() * near;
    p.diagonal().array() += config.epsilon;
    watch.at("products", (1 + 3.0 * k + 1) / 7);
    check_factored(
        cholesky_in_place(p, watch, k == 0 ? "Cholesky factor of P" : "Cholesky factor of S"),
        k == 0 ? "P" : "S", config);
    Eigen::MatrixXd solved_far = far.transpose();  // P⁻¹Gᵀ or S⁻¹Hᵀ
    cholesky_solve_in_place(p, solved_far);
    watch.at("products", (1 + 3.0 * k + 2) / 7);
    Eigen::VectorXd solved_q = qv;
    cholesky_solve_in_place(p, solved_q);
    Eigen::MatrixXd hessian = far * solved_far;
    symmetrise(hessian);
    watch.at("products", (1 + 3.0 * k + 3) / 7);
    // (11): f = e + GP⁻¹Q, v1 = P⁻¹Q − P⁻¹Gᵀα;  (12): f = e − HS⁻¹Q, v2 = S⁻¹Q + S⁻¹Hᵀγ.
    const double sign = k == 0 ? 1.0 : -1.0;
    const Eigen::VectorXd f =
        Eigen::VectorXd::Ones(far.rows()) + sign * (far * solved_q);
    TldmPlane& plane = result.plane[k];
    plane.solver = solve_box_qp_sor(hessian, f, config.c, config.omega, config.tolerance,
                                    config.max_sweeps, config.stop);
    plane.dual = plane.solver.z;
    const Eigen::VectorXd v = solved_q - sign * (solved_far * plane.dual);
    if (!v.allFinite()) throw NumericalError("Twin LDM: non-finite plane weights");
    plane.w = v.head(q);
    plane.b = v(q);
  }
  return result;
}

}  // namespace polymargin::engine
