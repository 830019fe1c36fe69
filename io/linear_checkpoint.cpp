#include "io/linear_checkpoint.h"

#include <cstring>
#include <string_view>
#include <vector>

#include "engine/errors.h"
#include "io/model_file.h"

namespace polymargin::io {
namespace {

constexpr const char* kKind = "checkpoint";
constexpr const char* kWhat = "training checkpoint";

// The doubles of the state travel as an f64 array, not as JSON text, so they come back bit for bit.
enum Scalar { kA, kB, kC, kEta0, kProgressSum, kProgressSumSq, kProgressHinge, kScalarCount };

}  // namespace

void write_linear_checkpoint(const std::string& path, const nlohmann::json& config,
                             const nlohmann::json& data, TrainPosition position,
                             const engine::LdmTrainer& trainer) {
  const engine::LdmState& s = trainer.state();
  const engine::MarginStats& p = trainer.progress();
  std::vector<double> scalars(kScalarCount);
  scalars[kA] = s.a;
  scalars[kB] = s.b;
  scalars[kC] = s.c;
  scalars[kEta0] = s.eta0;
  scalars[kProgressSum] = p.sum;
  scalars[kProgressSumSq] = p.sum_sq;
  scalars[kProgressHinge] = p.hinge;
  nlohmann::json where = {{"epoch", position.epoch}, {"rows", position.rows}};
  if (position.windows > 0) where["windows"] = position.windows;
  const nlohmann::json header = {{"kind", kKind},
                                 {"checkpoint_version", kCheckpointVersion},
                                 {"algorithm", trainer.config().algorithm()},
                                 {"config", config},
                                 {"data", data},
                                 {"position", where},
                                 {"state",
                                  {{"steps", s.t},
                                   {"rng", s.rng},
                                   {"renormalisations", s.renorms},
                                   {"average_is_zero", s.avg_is_zero},
                                   {"eta0_clamped", trainer.eta0_clamped()},
                                   {"progress_rows", p.rows},
                                   {"progress_correct", p.correct}}}};
  write_model_container(path, header,
                        {view_of("scalars", scalars), view_of("weights_and_averages", s.wa)});
}

nlohmann::json read_linear_checkpoint_header(const std::string& path) {
  return read_checkpoint_header(path, kKind, kCheckpointVersion, kWhat);
}

LinearCheckpoint read_linear_checkpoint(const std::string& path, const LinearWeightsPlace& place) {
  LinearCheckpoint c;
  // W and A (the largest part by far) are read straight to where `place` says, else into the
  // state's vector: held once either way.
  const ModelContainer file = read_checkpoint_file(
      path, kKind, kCheckpointVersion, kWhat,
      [&](const nlohmann::json&, const ModelArray& array, std::uint64_t bytes) -> std::span<char> {
        if (array.name != "weights_and_averages" || array.dtype != "f64" ||
            bytes % sizeof(double) != 0)
          return {};
        std::span<double> into = place ? place(bytes / sizeof(double)) : std::span<double>{};
        if (into.size() != bytes / sizeof(double)) {
          c.state.wa.resize(bytes / sizeof(double));
          into = {c.state.wa.data(), c.state.wa.size()};
        }
        return {reinterpret_cast<char*>(into.data()), bytes};
      });
  const nlohmann::json& h = file.header;
  auto fail = [&](const std::string& message) { throw DataError(path, 0, 0, message); };
  std::vector<double> scalars;
  try {
    c.config = h.at("config");
    c.data = h.at("data");
    c.position.epoch = header_integer<std::uint64_t>(h.at("position").at("epoch"), path, "epoch");
    c.position.rows = header_integer<std::uint64_t>(h.at("position").at("rows"), path, "rows");
    if (h.at("position").contains("windows"))
      c.position.windows =
          header_integer<std::uint64_t>(h.at("position").at("windows"), path, "windows");
    const nlohmann::json& s = h.at("state");
    c.state.t = header_integer<std::uint64_t>(s.at("steps"), path, "steps");
    c.state.rng = header_integer<std::uint64_t>(s.at("rng"), path, "rng");
    c.state.renorms =
        header_integer<std::uint64_t>(s.at("renormalisations"), path, "renormalisations");
    c.state.avg_is_zero = s.at("average_is_zero").get<bool>();
    c.eta0_clamped = s.at("eta0_clamped").get<bool>();
    c.progress.rows = header_integer<std::uint64_t>(s.at("progress_rows"), path, "progress_rows");
    c.progress.correct =
        header_integer<std::uint64_t>(s.at("progress_correct"), path, "progress_correct");
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("malformed checkpoint header: ") + e.what());
  }
  scalars = file.array("scalars", path).as<double>(path);
  if (scalars.size() != kScalarCount) fail("checkpoint has a malformed 'scalars' array");
  c.state.a = scalars[kA];
  c.state.b = scalars[kB];
  c.state.c = scalars[kC];
  c.state.eta0 = scalars[kEta0];
  c.progress.sum = scalars[kProgressSum];
  c.progress.sum_sq = scalars[kProgressSumSq];
  c.progress.hinge = scalars[kProgressHinge];
  const ModelArray& weights = file.array("weights_and_averages", path);
  if (weights.dtype != "f64") fail("checkpoint weights are not f64");
  if (weights.data.empty() && !weights.is_placed()) fail("checkpoint has no weights");
  if (!weights.is_placed()) {  // a size that is no whole number of doubles
    c.state.wa.resize(weights.data.size() / sizeof(double));
    std::memcpy(c.state.wa.data(), weights.data.data(), c.state.wa.size() * sizeof(double));
  }
  return c;
}

}  // namespace polymargin::io
