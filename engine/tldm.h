// Twin Large Margin Distribution Machine (Cheng & Wang, "A novel twin large margin distribution
// machine", eqs. 9-16; docs/algorithms.md §4): two non-parallel planes
// f_k(x) = w_kᵀφ(x) + b_k, each close to one class and at least 1 away from the other (TWSVM),
// with LDM's margin mean and variance terms. With v = [w; b], M = [X e] (all l rows),
// H = [A e] (the l1 positive rows), G = [B e] (the l2 negative rows), Y the ±1 labels:
//   plane 1 (9):  min ½‖Hv‖² + (λ1/2)·μ̂(v) − λ2·μ̄(v) + c Σ ξ   s.t. −Gv + ξ ≥ 1, ξ ≥ 0
//   plane 2 (10): min ½‖Gv‖² + (λ1/2)·μ̂(v) − λ2·μ̄(v) + c Σ η   s.t.  Hv + η ≥ 1, η ≥ 0
//   μ̄ = (1/l) YᵀMv,  μ̂ = (1/l²) vᵀMᵀ(lI − YYᵀ)Mv   (margin mean and the paper's variance),
// i.e. ½vᵀPv − Qᵀv with P = (λ1/l²)·DM + HᵀH + εI, S = (λ1/l²)·DM + GᵀG + εI,
// D = Mᵀ(lI − YYᵀ), Q = (λ2/l)·MᵀY, and ε = 1e-6 as in TWSVM (the paper's λ3 = λ1, λ4 = λ2,
// c1 = c2 = c). Duals, derived again from (9)/(10):
//   (11)  min_{0 ≤ α ≤ c} ½αᵀ(GP⁻¹Gᵀ)α − (e + GP⁻¹Q)ᵀα,   v1 = P⁻¹(Q − Gᵀα)
//   (12)  min_{0 ≤ γ ≤ c} ½γᵀ(HS⁻¹Hᵀ)γ − (e − HS⁻¹Q)ᵀγ,   v2 = S⁻¹(Q + Hᵀγ)
// The paper prints (11)'s linear term as e − GP⁻¹Q and v2 = S⁻¹(Q − Hᵀγ); each contradicts the
// other formula of its pair (the Lagrangian of (9) gives Pv1 = Q − Gᵀα, whose substitution gives
// +GP⁻¹Q; that of (10) gives Sv2 = Q + Hᵀγ), so the signs above are the ones (9)/(10) imply; the
// tests check them by strong duality. Kernel version (13)-(16): the same with X replaced by the
// kernel matrix K(X, Xᵀ) (w ∈ R^l, f(x) = K(x, Xᵀ)w + b). Both boxes are solved by successive
// over-relaxation (Mangasarian & Musicant), as the paper does; P and S by Cholesky (Eigen::LLT).
// Prediction: the nearer plane, |f_k(x)| / ‖w_k‖ (kernel: / sqrt(w_kᵀ K w_k)).
#pragma once

#include <Eigen/Dense>
#include <cstdint>

#include "engine/stop.h"

namespace polymargin::engine {

struct TldmConfig {
  double c = 1;             // c1 = c2
  double lambda1 = 1;       // λ1 = λ3, weight of the margin variance
  double lambda2 = 1;       // λ2 = λ4, weight of the margin mean
  double epsilon = 1e-6;    // ε·I added to P and S (TWSVM)
  double omega = 1.0;       // SOR relaxation factor, in (0, 2)
  double tolerance = 1e-4;  // stop when every projected gradient is at most this
  int max_sweeps = 5000;
  StopRequest stop;  // polled once a sweep: throws Stopped

  /// Throws UsageError naming the first invalid value.
  void validate() const;
};

/// Result of min ½zᵀHz − fᵀz over 0 ≤ z ≤ upper.
struct BoxQpResult {
  Eigen::VectorXd z;
  int sweeps = 0;
  bool converged = false;
  double max_violation = 0;  // largest |projected gradient| at the end
};

/// Projected SOR: z_i ← clip(z_i − ω (Hz − f)_i / H_ii, 0, upper), in index order, gradient kept
/// up to date (O(n) per coordinate). H symmetric positive semi-definite with a positive diagonal.
/// `stop` is polled once a sweep (throws Stopped).
BoxQpResult solve_box_qp_sor(const Eigen::MatrixXd& h, const Eigen::VectorXd& f, double upper,
                             double omega, double tolerance, int max_sweeps,
                             const StopRequest& stop = {});

struct TldmPlane {
  Eigen::VectorXd w;     // weights on the basis columns
  double b = 0;          // intercept
  Eigen::VectorXd dual;  // α (plane 1, over the negatives) or γ (plane 2, over the positives)
  BoxQpResult solver;
};

struct TldmResult {
  TldmPlane plane[2];  // [0]: plane 1, near the positives; [1]: plane 2, near the negatives
};

/// basis: l × q (the data rows for the linear TLDM, the kernel matrix K(X, Xᵀ) for the kernel
/// one); y: ±1. Both classes must be present. The set-up (the dense products, the factorisations
/// of P and S) polls config.stop between its steps and the factorisations' blocks, and reports to
/// `progress` there.
TldmResult solve_tldm(const Eigen::MatrixXd& basis, const Eigen::VectorXd& y,
                      const TldmConfig& config, const SetupProgress& progress = {});

/// The primal objective of plane k (eq. 9 for k = 0, eq. 10 for k = 1) at v = [w; b], with the
/// optimal slacks and the ε/2·‖v‖² of the regularised P, S: ½‖near·v‖² + (λ1/2)μ̂ − λ2μ̄ + cΣξ.
double tldm_primal_objective(const Eigen::MatrixXd& basis, const Eigen::VectorXd& y,
                             const Eigen::VectorXd& w, double b, int k, const TldmConfig& config);

/// Bytes solve_tldm holds at its peak for l rows and q basis columns.
double tldm_peak_bytes(std::uint64_t l, std::uint64_t q);

}  // namespace polymargin::engine
