// Model files of kind "cpm" (io/model_file.h's container): the header holds the shared model info,
// the feature hashing, the vote seed and the layout of every machine and side; the arrays hold
// each side's feature-major weights (f32, shape [slots, K]) and intercepts (f64), and the
// per-feature input scaling when the model was trained on scaled data.
#pragma once

#include <string>

#include "engine/cpm.h"
#include "io/model_file.h"

namespace polymargin::io {

/// Takes the model by value and gives each side's weights back once they are copied into the
/// file's arrays (pass std::move(model) where memory counts: KDD size is gigabytes).
void save_cpm_model(engine::CpmModel model, const std::string& path);
engine::CpmModel load_cpm_model(const std::string& path);
/// The model in an already read container (load_classifier's dispatch); DataError naming `path`
/// when a field or array is missing or does not match the layout.
engine::CpmModel cpm_from(const ModelContainer& file, const std::string& path);

}  // namespace polymargin::io
