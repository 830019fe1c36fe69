// Compact Margin Machine (Dai & Niu, PAKDD 2010; docs/algorithms.md §5):
// semi-supervised S3VM plus an ε-insensitive "compactness" penalty on every point. Relaxed CMM,
// problem (8), with l labelled rows (y = ±1) and u unlabelled rows, f(x) = wᵀφ(x) (+ b):
//   min ½‖w‖² + C1 Σ_lab [1 − y f]_+ + C2 Σ_unl [1 − |f|]_+ + C3 Σ_all [|f| − ε]_+ .
// The symmetric hinge is non-convex; as in Algorithm 1 (after Collobert et al.'s large-scale
// TSVM) each unlabelled x is taken twice, with y = +1 and y = −1, and [1 − |f|]_+ is replaced by
// the sum over both copies of the ramp R(yf) = H_1(yf) − H_δ(yf) = min(1 − δ, [1 − yf]_+),
// H_s(z) = [s − z]_+, δ ∈ (−1, 0]: convex part H_1, concave part −H_δ. The concave-convex
// procedure (CCCP) then solves, round after round, the convex problem
//   J(w) = ½‖w‖² + C1 Σ_lab H_1(y f) + C2 Σ_copies H_1(y f) + C3 Σ_all [|f| − ε]_+ + Σ_copies β_j
//   y_j f_j
// with β_j = C2 where y_j f(x_j) < δ at the previous solution (else 0), from the supervised SVM
// on the labelled rows, until β stops changing. Each round's dual (Algorithm 1, line 4) is
//   min ½cᵀKc − Σα + ε Σ_p |t_p|,   c_p = Σ_{j copy or label of p} (α_j − β_j) y_j + t_p,
//   0 ≤ α ≤ C1 (labelled), 0 ≤ α ≤ C2 (copies), −C3 ≤ t_p ≤ C3  (t = γ̂ − γ of the paper),
// so that f = Kc. We solve it by coordinate descent (α: clipped Newton steps as in LIBLINEAR's
// DCD; t: a soft-thresholded step), in a seeded order. The paper's unregularised bias would add
// the equality (β − α)ᵀy + γᵀ1 − γ̂ᵀ1 = 0 to the dual, which coordinate descent cannot keep; the
// bias is instead a constant feature of value B (kernel + B², regularised; --bias, default 1),
// which leaves box constraints only.
// Class balance: without it, CCCP can push every unlabelled row to one side (the trivial solution
// that constraint (7)'s balance term, after Chapelle et al., is there to exclude). As Collobert et
// al. do for CCCP-TSVM, each CCCP round keeps the linear constraint
//   (1/u) Σ_unl f(x_i) = r      (r: --balance-mean, by default the mean label of the labelled rows)
// In the dual it is one free variable μ (the multiplier) on the mean of the unlabelled rows'
// features, i.e. μ/u added to every unlabelled row's c_p, with the linear term −μ r: one more
// coordinate, unbounded, which coordinate descent handles as the others (an exact Newton step).
// Special variant (9), the semi-supervised Relative Margin Machine: C2 = C3, no unlabelled hinge
// (the loss on an unlabelled point is max(1, |f|) − const, convex): one convex problem, no CCCP.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/stop.h"

namespace polymargin::engine {

struct CmmConfig {
  double c1 = 10;          // labelled hinge
  double c2 = 1;           // unlabelled (symmetric) hinge; in the variant (9) also C3
  double c3 = 1;           // compactness [|f| − ε]_+ on every row
  double epsilon = 1;      // width of the compactness tube
  double delta = -0.3;     // ramp threshold δ ∈ (−1, 0] of the CCCP split (Collobert et al.: −0.3)
  bool rmm_variant = false;  // problem (9) instead of (8)
  bool balance = true;     // keep the class-balance constraint in the CCCP rounds
  double balance_mean = std::numeric_limits<double>::quiet_NaN();  // r; NaN: labelled mean label
  int max_rounds = 30;     // CCCP rounds
  double tolerance = 1e-3;  // a round stops when no coordinate step exceeds this (× K_pp)
  int max_sweeps = 5000;   // per round
  std::uint64_t seed = 1;  // coordinate order
  StopRequest stop;        // polled once a sweep: throws Stopped

  /// Throws UsageError naming the first invalid value.
  void validate() const;
};

/// The state of one convex round: dual variables and f = Kc.
struct CmmDual {
  Eigen::VectorXd alpha_label;  // labelled rows (0 for unlabelled ones)
  Eigen::VectorXd alpha_plus;   // unlabelled rows' y = +1 copies
  Eigen::VectorXd alpha_minus;  // unlabelled rows' y = −1 copies
  Eigen::VectorXd t;            // compactness, every row
  Eigen::VectorXd beta_plus, beta_minus;  // the CCCP linearisation, fixed within a round
  double mu = 0;                // multiplier of the balance constraint (0 when it is off)
  double balance_target = 0;    // its r, in the rounds that keep it
  bool balanced = false;        // whether the last round kept it
  Eigen::VectorXd unlabelled_mean_kernel;  // K·1_unl / u: f's change per unit of μ
  Eigen::VectorXd c;            // expansion coefficients
  Eigen::VectorXd f;            // Kc
  int sweeps = 0;
  bool converged = false;
};

/// Solves one convex round in place (warm start from `dual`; β given). y: ±1, 0 = unlabelled.
void solve_cmm_round(const Eigen::MatrixXd& k, const Eigen::VectorXd& y, const CmmConfig& config,
                     bool supervised_only, CmmDual& dual);

/// The balance constraint's target r: config.balance_mean, or the labelled rows' mean label.
double cmm_balance_target(const Eigen::VectorXd& y, const CmmConfig& config);

/// The round's dual objective ½cᵀKc − Σα + εΣ|t| − μr (to be minimised), and its primal J(w) at the
/// same c (‖w‖² = cᵀKc): at the optimum J = −dual.
double cmm_round_dual(const CmmDual& dual, const CmmConfig& config);
double cmm_round_primal(const CmmDual& dual, const Eigen::VectorXd& y, const CmmConfig& config,
                        bool supervised_only);

/// The objective CCCP decreases, at f = Kc: (8) with the unlabelled loss as the two copies' ramps,
/// ½cᵀf + C1 Σ_lab H_1(yf) + C2 Σ_copies R(yf) + C3 Σ_all [|f| − ε]_+; variant: (9).
double cmm_objective(const Eigen::VectorXd& c, const Eigen::VectorXd& f, const Eigen::VectorXd& y,
                     const CmmConfig& config);

struct CmmResult {
  Eigen::VectorXd c;       // f(x) = Σ_p c_p k(x_p, x)
  Eigen::VectorXd scores;  // f on the training rows
  std::vector<double> objectives;  // problem (8)/(9) after the SVM start and after each round
  int rounds = 0;
  int sweeps = 0;          // over all rounds
  bool converged = false;  // β reached a fixed point (variant (9): the round converged)
};

/// The whole procedure: the supervised SVM start, then CCCP rounds (or the single convex problem
/// of the variant (9)). k: the kernel matrix over all rows, labelled and unlabelled.
CmmResult solve_cmm(const Eigen::MatrixXd& k, const Eigen::VectorXd& y, const CmmConfig& config);

}  // namespace polymargin::engine
