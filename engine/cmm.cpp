#include "engine/cmm.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/errors.h"
#include "engine/limits.h"
#include "engine/random.h"

namespace polymargin::engine {

namespace {

double hinge(double z) { return z < 1 ? 1 - z : 0; }

// One coordinate of the round's dual: which variable, of which row.
enum class Coordinate : std::uint8_t { kLabel, kPlus, kMinus, kTube, kBalance };

// The compactness bound: C3, or C2 in the variant (9).
double tube_bound(const CmmConfig& c) { return c.rmm_variant ? c.c2 : c.c3; }

bool has_copies(const CmmConfig& c, bool supervised_only) {
  return !supervised_only && !c.rmm_variant;
}

}  // namespace

void CmmConfig::validate() const {
  if (!cost_in_range(c1))
    throw ConfigError(
        "c1", "must be a positive number in [1e-30, 1e30] (got " + message_number(c1) + ")");
  if (c2 != 0 && !cost_in_range(c2))
    throw ConfigError("c2", "must be 0 or in [1e-30, 1e30] (got " + message_number(c2) + ")");
  if (c3 != 0 && !cost_in_range(c3))
    throw ConfigError("c3", "must be 0 or in [1e-30, 1e30] (got " + message_number(c3) + ")");
  if (!(epsilon >= 0) || !std::isfinite(epsilon))
    throw ConfigError("epsilon", "must be ≥ 0 (got " + message_number(epsilon) + ")");
  if (!(delta > -1 && delta <= 0))
    throw ConfigError("delta", "must be in (-1, 0] (got " + message_number(delta) + ")");
  if (max_rounds < 1)
    throw ConfigError("max_rounds", "must be at least 1 (got " + std::to_string(max_rounds) + ")");
  if (!(tolerance > 0) || !std::isfinite(tolerance))
    throw ConfigError("tolerance", "must be > 0 (got " + message_number(tolerance) + ")");
  if (max_sweeps < 1)
    throw ConfigError("max_sweeps", "must be at least 1 (got " + std::to_string(max_sweeps) + ")");
  if (!std::isnan(balance_mean) && !(balance_mean > -1 && balance_mean < 1))
    throw ConfigError("balance_mean",
                      "must be in (-1, 1) (got " + message_number(balance_mean) + ")");
}

double cmm_balance_target(const Eigen::VectorXd& y, const CmmConfig& config) {
  if (!std::isnan(config.balance_mean)) return config.balance_mean;
  double sum = 0, count = 0;
  for (Eigen::Index p = 0; p < y.size(); ++p)
    if (y(p) != 0) {
      sum += y(p);
      ++count;
    }
  return count > 0 ? sum / count : 0;
}

void solve_cmm_round(const Eigen::MatrixXd& k, const Eigen::VectorXd& y, const CmmConfig& config,
                     bool supervised_only, CmmDual& d) {
  const Eigen::Index n = k.rows();
  auto sized = [&](Eigen::VectorXd& v) {
    if (v.size() != n) v = Eigen::VectorXd::Zero(n);
  };
  for (Eigen::VectorXd* v : {&d.alpha_label, &d.alpha_plus, &d.alpha_minus, &d.t, &d.beta_plus,
                             &d.beta_minus})
    sized(*v);
  const bool copies = has_copies(config, supervised_only);
  const bool tube = !supervised_only;
  const double bound = tube_bound(config);
  Eigen::Index unlabelled = 0;
  for (Eigen::Index p = 0; p < n; ++p) unlabelled += y(p) == 0;
  // The balance constraint belongs to the rounds that can move unlabelled rows across (copies).
  d.balanced = copies && config.balance && unlabelled > 0;
  double mean_kernel = 0;  // (1/u²) 1ᵀK_uu 1: the curvature of the dual along μ
  if (d.balanced) {
    d.balance_target = cmm_balance_target(y, config);
    if (d.unlabelled_mean_kernel.size() != n) {
      Eigen::VectorXd indicator(n);
      for (Eigen::Index p = 0; p < n; ++p) indicator(p) = y(p) == 0 ? 1.0 / unlabelled : 0.0;
      d.unlabelled_mean_kernel = k * indicator;
    }
    for (Eigen::Index p = 0; p < n; ++p)
      if (y(p) == 0) mean_kernel += d.unlabelled_mean_kernel(p) / unlabelled;
    if (!(mean_kernel > 0)) d.balanced = false;  // the unlabelled mean is the origin: no constraint
  }
  if (!d.balanced) d.mu = 0;
  const double mu_share = unlabelled > 0 ? d.mu / unlabelled : 0.0;
  // c from the variables (β may have changed since the last round), then f = Kc.
  d.c.resize(n);
  for (Eigen::Index p = 0; p < n; ++p)
    d.c(p) = y(p) * d.alpha_label(p) + (d.alpha_plus(p) - d.beta_plus(p)) -
             (d.alpha_minus(p) - d.beta_minus(p)) + d.t(p) + (y(p) == 0 ? mu_share : 0.0);
  d.f = k * d.c;

  std::vector<std::pair<Coordinate, Eigen::Index>> coordinates;
  for (Eigen::Index p = 0; p < n; ++p) {
    if (k(p, p) <= 0) continue;  // a zero row: f does not depend on its coefficient
    if (y(p) != 0) coordinates.emplace_back(Coordinate::kLabel, p);
    if (y(p) == 0 && copies) {
      coordinates.emplace_back(Coordinate::kPlus, p);
      coordinates.emplace_back(Coordinate::kMinus, p);
    }
    if (tube && bound > 0) coordinates.emplace_back(Coordinate::kTube, p);
  }
  if (d.balanced) coordinates.emplace_back(Coordinate::kBalance, 0);
  SplitMix64 rng(derive_seed(config.seed, 0x636d6dull, supervised_only));
  d.converged = false;
  for (d.sweeps = 0; d.sweeps < config.max_sweeps;) {
    poll(config.stop);
    ++d.sweeps;
    seeded_shuffle(coordinates.data(), coordinates.size(), rng);
    double largest = 0;
    for (const auto& [kind, p] : coordinates) {
      if (kind == Coordinate::kBalance) {
        // The free multiplier: an exact Newton step on ½cᵀKc − μr along μ sets the unlabelled
        // mean of f to r.
        double mean_f = 0;
        for (Eigen::Index q = 0; q < n; ++q)
          if (y(q) == 0) mean_f += d.f(q);
        mean_f /= static_cast<double>(unlabelled);
        const double step = -(mean_f - d.balance_target) / mean_kernel;
        d.mu += step;
        const double share = step / static_cast<double>(unlabelled);
        for (Eigen::Index q = 0; q < n; ++q)
          if (y(q) == 0) d.c(q) += share;
        d.f.noalias() += step * d.unlabelled_mean_kernel;
        largest = std::max(largest, std::abs(step) * mean_kernel);
        continue;
      }
      const double a = k(p, p), fp = d.f(p);
      double dc = 0;  // change of c_p
      switch (kind) {
        case Coordinate::kLabel: {
          const double old = d.alpha_label(p);
          const double next = std::clamp(old - (y(p) * fp - 1) / a, 0.0, config.c1);
          d.alpha_label(p) = next;
          dc = y(p) * (next - old);
          break;
        }
        case Coordinate::kPlus: {
          const double old = d.alpha_plus(p);
          const double next = std::clamp(old - (fp - 1) / a, 0.0, config.c2);
          d.alpha_plus(p) = next;
          dc = next - old;
          break;
        }
        case Coordinate::kMinus: {
          const double old = d.alpha_minus(p);
          const double next = std::clamp(old - (-fp - 1) / a, 0.0, config.c2);
          d.alpha_minus(p) = next;
          dc = -(next - old);
          break;
        }
        case Coordinate::kBalance:
          break;  // handled above
        case Coordinate::kTube: {
          // min ½a(t − t0)² + f_p(t − t0) + ε|t| on [−bound, bound]: a soft-thresholded step.
          const double old = d.t(p);
          const double u = old - fp / a;
          const double shrunk = std::max(std::abs(u) - config.epsilon / a, 0.0);
          const double next = std::clamp(u < 0 ? -shrunk : shrunk, -bound, bound);
          d.t(p) = next;
          dc = next - old;
          break;
        }
      }
      if (dc != 0) {
        d.c(p) += dc;
        d.f.noalias() += dc * k.col(p);
        largest = std::max(largest, std::abs(dc) * a);
      }
    }
    if (largest <= config.tolerance) {
      d.converged = true;
      break;
    }
  }
  if (!d.f.allFinite()) throw NumericalError("CMM: non-finite decision values");
}

double cmm_round_dual(const CmmDual& d, const CmmConfig& config) {
  return 0.5 * d.c.dot(d.f) - d.alpha_label.sum() - d.alpha_plus.sum() - d.alpha_minus.sum() +
         config.epsilon * d.t.cwiseAbs().sum() - (d.balanced ? d.mu * d.balance_target : 0.0);
}

double cmm_round_primal(const CmmDual& d, const Eigen::VectorXd& y, const CmmConfig& config,
                        bool supervised_only) {
  const bool copies = has_copies(config, supervised_only);
  double j = 0.5 * d.c.dot(d.f);
  for (Eigen::Index p = 0; p < y.size(); ++p) {
    const double fp = d.f(p);
    if (y(p) != 0) j += config.c1 * hinge(y(p) * fp);
    if (y(p) == 0 && copies)
      j += config.c2 * (hinge(fp) + hinge(-fp)) + d.beta_plus(p) * fp - d.beta_minus(p) * fp;
    if (!supervised_only) j += tube_bound(config) * std::max(0.0, std::abs(fp) - config.epsilon);
  }
  return j;
}

double cmm_objective(const Eigen::VectorXd& c, const Eigen::VectorXd& f, const Eigen::VectorXd& y,
                     const CmmConfig& config) {
  const double ramp_cap = 1 - config.delta;
  double j = 0.5 * c.dot(f);
  for (Eigen::Index p = 0; p < y.size(); ++p) {
    const double fp = f(p);
    if (y(p) != 0) j += config.c1 * hinge(y(p) * fp);
    if (y(p) == 0 && !config.rmm_variant)
      j += config.c2 * (std::min(ramp_cap, hinge(fp)) + std::min(ramp_cap, hinge(-fp)));
    j += tube_bound(config) * std::max(0.0, std::abs(fp) - config.epsilon);
  }
  return j;
}

CmmResult solve_cmm(const Eigen::MatrixXd& k, const Eigen::VectorXd& y, const CmmConfig& config) {
  config.validate();
  CmmResult r;
  CmmDual d;
  // Line 1: the standard SVM on the labelled rows.
  solve_cmm_round(k, y, config, true, d);
  r.sweeps += d.sweeps;
  r.objectives.push_back(cmm_objective(d.c, d.f, y, config));
  if (config.rmm_variant) {
    solve_cmm_round(k, y, config, false, d);
    r.sweeps += d.sweeps;
    r.rounds = 1;
    r.converged = d.converged;
    r.objectives.push_back(cmm_objective(d.c, d.f, y, config));
  } else {
    for (r.rounds = 0; r.rounds < config.max_rounds; ++r.rounds) {
      // Lines 2 and 6: β_j = C2 where the copy's margin y_j f(x_j) is below δ.
      bool changed = false;
      for (Eigen::Index p = 0; p < y.size(); ++p) {
        if (y(p) != 0) continue;
        const double plus = d.f(p) < config.delta ? config.c2 : 0.0;
        const double minus = -d.f(p) < config.delta ? config.c2 : 0.0;
        changed |= plus != d.beta_plus(p) || minus != d.beta_minus(p);
        d.beta_plus(p) = plus;
        d.beta_minus(p) = minus;
      }
      if (r.rounds > 0 && !changed) {
        r.converged = true;
        break;
      }
      solve_cmm_round(k, y, config, false, d);
      r.sweeps += d.sweeps;
      r.objectives.push_back(cmm_objective(d.c, d.f, y, config));
    }
  }
  r.c = d.c;
  r.scores = d.f;
  return r;
}

}  // namespace polymargin::engine
