// Kernel Large Margin Distribution Machine by dual coordinate descent (Zhang & Zhou, KDD 2014,
// §3.2.1, Algorithm 1). Specification: docs/algorithms.md §3 (section numbers below).
//
// Primal in the expansion w = Σ α_i φ(x_i) (Theorem 1, eq. 8), G the kernel matrix, Y = diag(y):
//   min_α ½αᵀQα + pᵀα + C Σ_i [1 − y_i (Gα)_i]_+ ,
//   Q = (4λ1/m²)(m·GG − (Gy)(Gy)ᵀ) + G,   p = −(λ2/m) G y,
// i.e. ½‖w‖² + λ1·γ̂ − λ2·γ̄ + C Σ hinge with the paper's un-normalised λ1, λ2, C (γ̂ = 2·Var(γ)).
// Dual (eq. 12):  min_{0 ≤ β ≤ C} f(β) = ½βᵀHβ + ((λ2/m)He − e)ᵀβ,  H = Y G Q⁻¹ G Y,
// primal recovery (eq. 10):  α = A(β + (λ2/m)e),  A = Q⁻¹GY,   ∇f(β)_i = y_i (Gα)_i − 1.
//
// Better-conditioned form (§3.2): Q = G·P with P = I + (4λ1/m)G − (4λ1/m²) y (Gy)ᵀ, so
// A = P⁻¹Y and H = YGA, valid even where G (and so Q) is singular. P = B − u vᵀ with the SPD
// B = I + (4λ1/m)G (Cholesky, Eigen::LLT), u = (4λ1/m²) y, v = Gy, and Sherman–Morrison:
//   P⁻¹r = B⁻¹r + B⁻¹u · (vᵀB⁻¹r) / (1 − vᵀB⁻¹u)      (the denominator is det P / det B > 0).
// GG is never formed and nothing is pseudo-inverted. Only diag(H) is needed:
// h_ii = y_i (G_{:,i} · A_{:,i}).
//
// Solver (§3.3, LIBLINEAR-style): cyclic coordinate descent over a seeded permutation of the active
// set, β_i ← clip(β_i − ∇_i f / h_ii, 0, C), α += Δβ_i A_{:,i}; shrinking of coordinates at a
// bound whose gradient points outwards beyond last sweep's extreme projected gradients; stop when
// max PG − min PG ≤ tolerance over all coordinates (LDM-ref: 0.01).
// Cost: O(m³) set-up, O(m) per coordinate step; memory 3m² doubles at the peak (G, the Cholesky
// factor, A), 2m² while solving.
#pragma once

#include <Eigen/Dense>
#include <cstddef>
#include <cstdint>

#include "engine/stop.h"

namespace polymargin::engine {

/// Hyper-parameters, in the paper's units (eq. 8).
struct KldmConfig {
  double lambda1 = 0;       // weight of the margin variance γ̂
  double lambda2 = 0;       // weight of the margin mean γ̄
  double c = 10;            // box of the dual, weight of the hinge loss
  double tolerance = 0.01;  // stop when max PG − min PG ≤ this
  int max_sweeps = 1000;    // outer iterations
  bool shrinking = true;
  std::uint64_t seed = 1;   // coordinate order
  StopRequest stop;         // polled once a sweep: throws Stopped

  /// Throws UsageError naming the first invalid value.
  void validate() const;
};

/// A = P⁻¹Y and diag(H) = y_i G_{:,i}·A_{:,i} (§3.2).
struct LdmDualOperator {
  Eigen::MatrixXd a;
  Eigen::VectorXd h_diag;
};

/// Builds A and diag(H) from G, y (±1) and λ1 by Cholesky of B plus the Sherman–Morrison
/// correction. Allocates two m × m matrices besides G (one is freed before returning).
/// Deterministic: the triangular solves run over fixed 64-column blocks in parallel. `watch` is
/// called between the factorisation's blocks ("Cholesky factor") and batches of solves
/// ("solves"): a stop request ends the set-up within about a second of work.
LdmDualOperator ldm_dual_operator(const Eigen::MatrixXd& g, const Eigen::VectorXd& y,
                                  double lambda1, const Watch& watch = {});

/// Bytes kernel LDM holds at its peak for m rows (G, the factor, A, plus vectors).
double kldm_peak_bytes(std::uint64_t m);

struct KldmResult {
  Eigen::VectorXd alpha;   // expansion coefficients: f(x) = Σ α_i k(x_i, x)
  Eigen::VectorXd beta;    // dual variables, 0 ≤ β ≤ C
  Eigen::VectorXd scores;  // Gα: the decision values of the training rows
  int sweeps = 0;
  bool converged = false;
  double pg_gap = 0;           // max PG − min PG of the last full check
  double dual_objective = 0;   // the dual of (8) at β: −f(β) − ½(λ2/m)²eᵀHe ≤ the primal
  double primal_objective = 0; // ½‖w‖² + λ1γ̂ − λ2γ̄ + C Σ hinge at α
  std::size_t free_vectors = 0;   // 0 < β_i < C
  std::size_t bound_vectors = 0;  // β_i = C
};

/// Solves the dual for kernel matrix g and labels y (±1).
KldmResult solve_kldm(const Eigen::MatrixXd& g, const Eigen::VectorXd& y, const KldmConfig& config);

/// The same with A and diag(H) given (tests and callers that re-solve for several C, λ2).
KldmResult solve_kldm(const Eigen::MatrixXd& g, const Eigen::VectorXd& y, const KldmConfig& config,
                      const LdmDualOperator& op);

/// ½‖w‖² + λ1γ̂ − λ2γ̄ + C Σ [1 − γ_i]_+ from the training scores s = Gα, the labels and ‖w‖² = αᵀGα
/// (eq. 5/14 in the paper's units; γ̂ = (2/m²)(mΣγ² − (Σγ)²)).
double ldm_primal_objective(const Eigen::VectorXd& scores, const Eigen::VectorXd& y, double norm2,
                            double lambda1, double lambda2, double c);

}  // namespace polymargin::engine
