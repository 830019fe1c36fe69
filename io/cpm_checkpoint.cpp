#include "io/cpm_checkpoint.h"

#include <charconv>
#include <memory>
#include <span>
#include <stdexcept>
#include <type_traits>

#include "engine/cpm_assign.h"
#include "engine/errors.h"

namespace polymargin::io {
namespace {

constexpr const char* kCpmKind = "cpm_checkpoint";
constexpr const char* kCpmWhat = "CPM training checkpoint";

std::string array_name(const char* what, std::size_t side) {
  return std::string(what) + "_" + std::to_string(side);
}

// A side's ASSIGN history keys or faces, produced a chunk at a time as the writer asks for them
// (in order, from offset 0): the table's entries are not copied beside it (12 bytes an outer row).
template <typename T>
ModelArrayView history_array(std::string name, const engine::AssignHistory& history) {
  struct Cursor {
    std::uint64_t offset = 0, slot = 0;
  };
  auto cursor = std::make_shared<Cursor>();
  return {std::move(name),
          ModelArray::dtype_of<T>(),
          {history.size()},
          history.size() * sizeof(T),
          [&history, cursor](std::uint64_t offset, std::span<char> out) {
            if (offset == 0) *cursor = {};
            if (offset != cursor->offset || out.size() % sizeof(T) != 0)
              throw std::logic_error("ASSIGN history asked for out of order");
            // The writer's chunk buffer comes from operator new: aligned for any element type.
            const std::span<T> elements(reinterpret_cast<T*>(out.data()), out.size() / sizeof(T));
            if constexpr (std::is_same_v<T, std::uint64_t>)
              cursor->slot = history.copy_keys(cursor->slot, elements);
            else
              cursor->slot = history.copy_faces(cursor->slot, elements);
            cursor->offset += out.size();
          }};
}

}  // namespace

void write_cpm_checkpoint(const std::string& path, const nlohmann::json& config,
                          const nlohmann::json& data, CpmPosition position,
                          const engine::CpmTrainer& trainer) {
  const bool dbl = trainer.config().precision == engine::CpmPrecision::kDouble;
  const auto faces = static_cast<std::uint64_t>(trainer.config().faces);
  // The side states own the small arrays while the views below point into them.
  std::vector<engine::CpmTrainer::SideState> states;
  for (std::size_t i = 0; i < trainer.sides(); ++i)
    states.push_back(trainer.side_state(i, /*history=*/false));
  nlohmann::json sides = nlohmann::json::array();
  std::vector<ModelArrayView> arrays;
  for (std::size_t i = 0; i < states.size(); ++i) {
    const engine::CpmTrainer::SideState& s = states[i];
    sides.push_back({{"steps", s.steps},
                     {"updates", s.updates},
                     {"adjusted", s.adjusted},
                     {"seconds", s.seconds},
                     {"history_capacity", s.history_capacity}});
    // A replicated run's steps of all replicas (docs/algorithms.md §2.8); absent for one trainer.
    if (s.run_steps > 0) sides.back()["run_steps"] = s.run_steps;
    const std::string_view u = trainer.side_weights(i);
    arrays.push_back({array_name("weights", i),
                      dbl ? "f64" : "f32",
                      {u.size() / (dbl ? 8 : 4) / faces, faces},
                      u});
    arrays.push_back(view_of(array_name("intercept_sums", i), s.intercept_sums));
    arrays.push_back(view_of(array_name("face_counts", i), s.face_counts));
    const engine::AssignHistory& history = trainer.side_history(i);
    arrays.push_back(history_array<std::uint64_t>(array_name("history_keys", i), history));
    arrays.push_back(history_array<std::int32_t>(array_name("history_faces", i), history));
  }
  const nlohmann::json header = {
      {"kind", kCpmKind},
      {"checkpoint_version", kCpmCheckpointVersion},
      {"algorithm", "cpm"},
      {"config", config},
      {"data", data},
      {"position",
       {{"pass", position.pass}, {"batches", position.batches}, {"rows", position.rows}}},
      {"batches", trainer.batches()},
      {"sides", sides}};
  write_model_container(path, header, arrays);
}

nlohmann::json read_cpm_checkpoint_header(const std::string& path) {
  return read_checkpoint_header(path, kCpmKind, kCpmCheckpointVersion, kCpmWhat);
}

CpmCheckpoint read_cpm_checkpoint(const std::string& path, const CpmWeightsPlace& place) {
  ArrayPlace weights_place;
  if (place)
    weights_place = [&](const nlohmann::json&, const ModelArray& array,
                        std::uint64_t bytes) -> std::span<char> {
      constexpr std::string_view kPrefix = "weights_";
      std::size_t side = 0;
      const char* last = array.name.data() + array.name.size();
      if (!array.name.starts_with(kPrefix) ||
          std::from_chars(array.name.data() + kPrefix.size(), last, side).ptr != last ||
          array.name != array_name("weights", side))  // "weights_01" is not side 1's
        return std::span<char>{};
      return place(side, array.dtype, bytes);
    };
  ModelContainer file =
      read_checkpoint_file(path, kCpmKind, kCpmCheckpointVersion, kCpmWhat, weights_place);
  const nlohmann::json& h = file.header;
  auto fail = [&](const std::string& message) { throw DataError(path, 0, 0, message); };
  CpmCheckpoint c;
  try {
    c.config = h.at("config");
    c.data = h.at("data");
    const nlohmann::json& p = h.at("position");
    c.position = {header_integer<std::uint64_t>(p.at("pass"), path, "pass"),
                  header_integer<std::uint64_t>(p.at("batches"), path, "batches"),
                  header_integer<std::uint64_t>(p.at("rows"), path, "rows")};
    c.batches = header_integer<std::uint64_t>(h.at("batches"), path, "batches");
    for (const nlohmann::json& js : h.at("sides")) {
      engine::CpmTrainer::SideState s;
      s.steps = header_integer<std::uint64_t>(js.at("steps"), path, "steps");
      s.updates = header_integer<std::uint64_t>(js.at("updates"), path, "updates");
      s.adjusted = header_integer<std::uint64_t>(js.at("adjusted"), path, "adjusted");
      s.seconds = js.at("seconds").get<double>();
      s.history_capacity =
          header_integer<std::uint64_t>(js.at("history_capacity"), path, "history_capacity");
      if (js.contains("run_steps"))
        s.run_steps = header_integer<std::uint64_t>(js.at("run_steps"), path, "run_steps");
      c.sides.push_back(std::move(s));
    }
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("malformed checkpoint header: ") + e.what());
  }
  for (std::size_t i = 0; i < c.sides.size(); ++i) {
    engine::CpmTrainer::SideState& s = c.sides[i];
    s.intercept_sums = file.array(array_name("intercept_sums", i), path).as<double>(path);
    s.face_counts = file.array(array_name("face_counts", i), path).as<std::int64_t>(path);
    s.history_keys = file.array(array_name("history_keys", i), path).as<std::uint64_t>(path);
    s.history_faces = file.array(array_name("history_faces", i), path).as<std::int32_t>(path);
    // U is the largest array by far: placed where the reader said, or moved out of the
    // container, not copied.
    for (ModelArray& a : file.arrays)
      if (a.name == array_name("weights", i)) {
        c.weights.push_back(std::move(a.data));
        c.weights_placed.push_back(a.is_placed());
      }
    if (c.weights.size() != i + 1)
      fail("checkpoint lacks the weights of side " + std::to_string(i));
  }
  return c;
}

}  // namespace polymargin::io
