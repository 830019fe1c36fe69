// Ranges the learners accept for their cost constants: outside them the step sizes, the
// regularisation weights (λ = 1e-4·m·C and the like) or the margins underflow to zero or overflow
// double precision, and a run would end with an all-zero or non-finite model.
#pragma once

namespace polymargin::engine {

inline constexpr double kMinCost = 1e-30;
inline constexpr double kMaxCost = 1e30;

/// True for a cost C in [kMinCost, kMaxCost] (false for NaN).
inline bool cost_in_range(double c) { return c >= kMinCost && c <= kMaxCost; }

}  // namespace polymargin::engine
