// Kernel model files (kind "kernel": kernel LDM, Twin LDM, CMM) in the shared container of
// io/model_file.h. Header = model_header + "kernel" (engine::KernelSpec::json), "decision",
// "intercepts", "plane_norms"; arrays: "vector_offsets" (f64, n + 1 integers), "vector_indices"
// (f64 integers: raw feature ids), "vector_values" (f32, the scaled values the learner saw),
// "coefficients" (f64, shape [expansions, n]) and, for a scaled model, "maxabs" (f32,
// max_index + 1). Integer arrays are stored as f64 (exact below 2^53) and checked on load.
#pragma once

#include <string>

#include "engine/kernel_model.h"
#include "io/model_file.h"

namespace polymargin::io {

/// Not `durable`: no fsync (AtomicFile's).
void save_kernel_model(const engine::KernelModel& model, const std::string& path,
                       bool durable = true);
/// From an already read container (load_classifier's dispatch); DataError naming `path` when a
/// field or array is missing, malformed or inconsistent.
engine::KernelModel kernel_model_from(const ModelContainer& file, const std::string& path);

}  // namespace polymargin::io
