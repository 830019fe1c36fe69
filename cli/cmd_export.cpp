// `polymargin export`: a trained model in a form people and other tools read.
#include <cstdio>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "engine/errors.h"
#include "engine/linear_model.h"
#include "io/atomic_file.h"
#include "io/model_file.h"

namespace polymargin::cli {
namespace {

// Weights are listed by feature id as written in the data files (raw ids), non-zeros only.
std::string export_json(const engine::LinearModel& m) {
  nlohmann::json j;
  j["algorithm"] = m.algorithm;
  j["config"] = m.config;
  j["labels"] = {{"negative", m.labels.negative}, {"positive", m.labels.positive}};
  j["index_base"] = m.index_base;
  j["features"] = m.features;
  j["max_index"] = m.max_index;
  j["bias_value"] = m.bias_value;
  j["bias_weight"] = m.bias_weight;
  j["scaled"] = !m.scale.empty();
  nlohmann::json weights = nlohmann::json::object();
  for (std::size_t f = 0; f < m.weights.size(); ++f)
    if (m.weights[f] != 0) weights[std::to_string(f)] = m.weights[f];
  j["weights"] = std::move(weights);
  return j.dump(2) + "\n";
}

std::string export_text(const engine::LinearModel& m) {
  std::ostringstream out;
  out << "# polymargin model\n"
      << "algorithm " << m.algorithm << "\n"
      << "labels " << m.labels.negative << " " << m.labels.positive << "\n"
      << "index_base " << m.index_base << "\n"
      << "features " << m.features << "\n"
      << "max_index " << m.max_index << "\n"
      << "bias " << m.bias_value << " " << m.bias_weight << "\n"
      << "config " << m.config.dump() << "\n"
      << "# feature_id weight" << (m.scale.empty() ? "" : " scale") << "\n";
  char buf[64];
  for (std::size_t f = 0; f < m.weights.size(); ++f) {
    if (m.weights[f] == 0) continue;
    std::snprintf(buf, sizeof buf, "%zu %.17g", f, m.weights[f]);
    out << buf;
    if (!m.scale.empty()) out << " " << m.scale[f];
    out << "\n";
  }
  return out.str();
}

int run_export(const std::vector<std::string>& args) {
  std::string model_path, format, output;
  po::options_description opts("export options");
  opts.add_options()("model,m", po::value(&model_path)->required(), "trained model file")(
      "format", po::value(&format)->default_value("text"), "text | json")(
      "output,o", po::value(&output), "write here instead of stdout");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse_options("export", "-m MODEL [--format text|json] [-o FILE]", opts, pos, args, vm))
    return 0;
  if (format != "text" && format != "json")
    throw UsageError("export: --format must be text or json, not '" + format + "'");
  const engine::LinearModel model = io::load_model(model_path);
  const std::string text = format == "json" ? export_json(model) : export_text(model);
  if (output.empty())
    std::cout << text;
  else
    io::write_file_atomically(output, text);
  return 0;
}

const CommandRegistration export_registration("export", "print a model as text or JSON",
                                              run_export);

}  // namespace
}  // namespace polymargin::cli
