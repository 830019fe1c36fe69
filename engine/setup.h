// The pieces of the kernel learners' O(m³) set-ups that a caller can stop and follow
// (engine/stop.h): a parallel loop run in batches, and the Cholesky factorisation and solve, each
// checking its Watch between pieces of work. The results are bit-identical to the single calls they
// replace (a parallel_for over the whole range, Eigen::LLT): the batches only cut the work where
// its parts are independent, and the factorisation is Eigen's own blocked algorithm, step by step.
#pragma once

#include <Eigen/Dense>
#include <cstddef>
#include <functional>

#include "engine/stop.h"

namespace polymargin::engine {

/// Runs body(begin, end) over the units [0, n) in parallel (oneTBB, one unit a task), `batch`
/// units at a time, with watch.at(step, share done) after each batch. The units must be
/// independent of each other: the result is then that of one parallel loop over them all.
void parallel_batches(std::size_t n, std::size_t batch, const Watch& watch, const char* step,
                      const std::function<void(std::size_t begin, std::size_t end)>& body);

/// Units per batch such that a batch is about `target` operations when a unit costs
/// `unit_cost`: at least one unit for each thread of the arena, so that no thread waits.
std::size_t batch_units(double unit_cost, double target = 2e8);

/// Factors the symmetric positive-definite `a` in place, its lower triangle becoming L with
/// a = LLᵀ, exactly as Eigen::LLT<Eigen::Ref<Eigen::MatrixXd>> does (the same bits: its blocked
/// algorithm, block by block), with watch.at(step, share done) after each block of columns.
/// Returns false when `a` is not positive definite (as LLT::info() != Success).
bool cholesky_in_place(Eigen::Ref<Eigen::MatrixXd> a, const Watch& watch, const char* step);

/// x ← (LLᵀ)⁻¹x for a factor made by cholesky_in_place (its lower triangle), as LLT::solve does it:
/// L, then Lᵀ, solved in place. `x`: a vector or a matrix of right-hand sides.
template <typename Rhs>
void cholesky_solve_in_place(const Eigen::MatrixXd& factor, Eigen::MatrixBase<Rhs>& x) {
  factor.triangularView<Eigen::Lower>().solveInPlace(x);
  factor.adjoint().triangularView<Eigen::Upper>().solveInPlace(x);
}

}  // namespace polymargin::engine
