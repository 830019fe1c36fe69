#include "io/cpm_model_file.h"

#include "engine/errors.h"
#include "io/model_file.h"

namespace polymargin::io {

namespace {

std::string array_name(const char* what, std::size_t machine, std::size_t side) {
  return std::string(what) + "_" + std::to_string(machine) + "_" + std::to_string(side);
}

[[noreturn]] void corrupt(const std::string& path, const std::string& message) {
  throw DataError(path, 0, 0, message);
}

}  // namespace

void save_cpm_model(engine::CpmModel model, const std::string& path) {
  save_cpm_model(std::move(model), path, nullptr);
}

void save_cpm_model(engine::CpmModel model, const std::string& path, const CpmWeightSource& weights,
                    bool durable) {
  nlohmann::json header = model_header("cpm", model);
  header["hash_bits"] = model.hash.bits;
  header["vote_seed"] = model.vote_seed;
  if (model.normalize_l2) header["normalize"] = "l2";  // absent: none (files before it too)
  // The arrays are written from the model's own vectors (views): at KDD size each side's weights
  // are 0.8 GB, which a copy would allocate, fault in and fill again before the write.
  const auto bytes = [](const auto& v) {
    return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
  };
  std::vector<ModelArrayView> arrays;
  nlohmann::json machines = nlohmann::json::array();
  std::size_t side_index = 0;  // over all machines
  for (std::size_t m = 0; m < model.machines.size(); ++m) {
    const engine::CpmModel::Binary& b = model.machines[m];
    nlohmann::json sides = nlohmann::json::array();
    for (std::size_t s = 0; s < b.sides.size(); ++s, ++side_index) {
      const engine::CpmFaces& f = b.sides[s];
      sides.push_back({{"outer", f.outer}, {"faces", f.faces}, {"slots", f.slots}});
      const std::uint64_t count = f.slots * static_cast<std::uint64_t>(f.faces);
      const std::vector<std::uint64_t> shape{f.slots, static_cast<std::uint64_t>(f.faces)};
      if (weights && f.weights.empty() && count > 0) {
        arrays.emplace_back(
            array_name("weights", m, s), "f32", shape, count * sizeof(float),
            [&weights, side_index](std::uint64_t offset, std::span<char> out) {
              // Whole floats: the writer's chunks are multiples of 4 bytes.
              weights(side_index, offset / sizeof(float),
                      std::span<float>(reinterpret_cast<float*>(out.data()),
                                       out.size() / sizeof(float)));
            });
      } else if (f.weights.size() != count) {
        throw std::invalid_argument("CPM side " + std::to_string(side_index) + " has " +
                                    std::to_string(f.weights.size()) + " weights for " +
                                    std::to_string(count) + " slots x faces");
      } else {
        arrays.emplace_back(array_name("weights", m, s), "f32", shape, bytes(f.weights));
      }
      arrays.push_back({array_name("intercepts", m, s), "f64", {f.intercepts.size()},
                        bytes(f.intercepts)});
    }
    machines.push_back({{"positive", b.positive}, {"negative", b.negative}, {"sides", sides}});
  }
  header["machines"] = machines;
  if (!model.maxabs.empty())
    arrays.push_back({"maxabs", "f32", {model.maxabs.size()}, bytes(model.maxabs)});
  write_model_container(path, header, arrays, durable);
}

engine::CpmModel cpm_from(ModelContainer&& file, const std::string& path) {
  engine::CpmModel model;
  read_model_info(file, path, model);
  const std::uint64_t features_slots = std::uint64_t{model.max_index} + 1;
  try {
    model.hash.bits = header_integer<int>(file.header.at("hash_bits"), path, "hash_bits");
    model.vote_seed = header_integer<std::uint64_t>(file.header.at("vote_seed"), path, "vote_seed");
    const std::string normalize = file.header.value("normalize", std::string("none"));
    if (normalize != "none" && normalize != "l2")
      corrupt(path, "malformed cpm model header: normalize '" + normalize + "'");
    model.normalize_l2 = normalize == "l2";
    if (model.hash.bits < 0 || model.hash.bits > 31)
      corrupt(path, "hash_bits out of range: " + std::to_string(model.hash.bits));
    const std::uint64_t slots =
        model.hash.bits ? std::uint64_t{1} << model.hash.bits : features_slots;
    for (const nlohmann::json& jm : file.header.at("machines")) {
      engine::CpmModel::Binary b;
      b.positive = jm.at("positive").get<double>();
      b.negative = jm.at("negative").get<double>();
      const std::string machine = "machines[" + std::to_string(model.machines.size()) + "]";
      require_finite(b.positive, path, machine + ".positive");
      require_finite(b.negative, path, machine + ".negative");
      for (const nlohmann::json& js : jm.at("sides")) {
        engine::CpmFaces f;
        f.outer = header_integer<int>(js.at("outer"), path, "outer");
        f.faces = header_integer<int>(js.at("faces"), path, "faces");
        f.slots = header_integer<std::uint64_t>(js.at("slots"), path, "slots");
        const std::size_t m = model.machines.size(), s = b.sides.size();
        f.weights = file.array(array_name("weights", m, s), path).take<float>(path);
        f.intercepts = file.array(array_name("intercepts", m, s), path).take<double>(path);
        if ((f.outer != 1 && f.outer != -1) || f.faces < 1 || f.slots != slots ||
            f.weights.size() != f.slots * static_cast<std::uint64_t>(f.faces) ||
            f.intercepts.size() != static_cast<std::size_t>(f.faces))
          corrupt(path, "CPM side " + std::to_string(s) + " of machine " + std::to_string(m) +
                            " does not match its layout (outer, faces, slots, array sizes)");
        require_finite_all(f.weights, path, array_name("weights", m, s));
        require_finite_all(f.intercepts, path, array_name("intercepts", m, s));
        b.sides.push_back(std::move(f));
      }
      if (b.sides.empty()) corrupt(path, "CPM machine " + std::to_string(model.machines.size()) + " has no side");
      model.machines.push_back(std::move(b));
    }
  } catch (const nlohmann::json::exception& e) {
    corrupt(path, std::string("malformed cpm model header: ") + e.what());
  }
  const std::size_t classes = model.classes.size();
  const std::size_t expected = model.multiclass() ? classes * (classes - 1) / 2 : 1;
  if (model.machines.size() != expected)
    corrupt(path, "a CPM over " + std::to_string(model.multiclass() ? classes : 2) +
                      " classes needs " + std::to_string(expected) + " machines, the file has " +
                      std::to_string(model.machines.size()));
  for (ModelArray& a : file.arrays)
    if (a.name == "maxabs") model.maxabs = a.take<float>(path);
  if (!model.maxabs.empty() && model.maxabs.size() != features_slots)
    corrupt(path, "maxabs count does not match max_index " + std::to_string(model.max_index));
  require_finite_all(model.maxabs, path, "maxabs");
  return model;
}

engine::CpmModel load_cpm_model(const std::string& path) {
  ModelContainer file = read_model_container(path);
  const auto kind = file.header.value("kind", std::string());
  if (kind != "cpm") corrupt(path, "holds a '" + kind + "' model, not a cpm one");
  return cpm_from(std::move(file), path);
}

}  // namespace polymargin::io
