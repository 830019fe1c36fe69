// Model files of kind "cpm" (io/model_file.h's container): the header holds the shared model info,
// the feature hashing, the vote seed and the layout of every machine and side; the arrays hold
// each side's feature-major weights (f32, shape [slots, K]) and intercepts (f64), and the
// per-feature input scaling when the model was trained on scaled data.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "engine/cpm_model.h"
#include "io/model_file.h"

namespace polymargin::io {

/// Takes the model by value and gives each side's weights back once they are copied into the
/// file's arrays (pass std::move(model) where memory counts: KDD size is gigabytes).
void save_cpm_model(engine::CpmModel model, const std::string& path);
/// Writes side `side`'s weights [first, first + out.size()) (sides counted over all machines, in
/// order) into `out`: CpmTrainer::export_weights.
using CpmWeightSource =
    std::function<void(std::size_t side, std::uint64_t first, std::span<float> out)>;
/// The same file for a model whose sides carry no weights (CpmTrainer::model_without_weights):
/// each side's weights array is produced by `weights` a chunk at a time as it is written, so a
/// model of gigabytes is saved without a second copy of its weights in memory.
/// Not `durable`: no fsync (AtomicFile's).
void save_cpm_model(engine::CpmModel model, const std::string& path, const CpmWeightSource& weights,
                    bool durable = true);
engine::CpmModel load_cpm_model(const std::string& path);
/// The model in an already read container (load_classifier's dispatch), whose arrays it takes
/// (their bytes freed as each is converted); DataError naming `path` when a field or array is
/// missing or does not match the layout.
engine::CpmModel cpm_from(ModelContainer&& file, const std::string& path);

}  // namespace polymargin::io
