// `polymargin export`: a trained model in a form people and other tools read.
#include <cstdio>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "engine/errors.h"
#include "engine/classifier.h"
#include "io/atomic_file.h"
#include "io/model_file.h"

namespace polymargin::cli {
namespace {

int run_export(const std::vector<std::string>& args) {
  std::string model_path, format, output;
  po::options_description opts("export options");
  opts.add_options()("model,m", po::value(&model_path)->required(), "trained model file")(
      "format", po::value(&format)->default_value("text"), "text | json")(
      "output,o", po::value(&output), "write here instead of stdout (-: stdout)");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse_options("export", "-m MODEL [--format text|json] [-o FILE]", opts, pos, args, vm))
    return 0;
  io::check_outputs(input_paths(vm, {"model"}), {{"--output", output, false, ""}});
  if (format != "text" && format != "json")
    throw UsageError("export: --format must be text or json, not '" + format + "'");
  const std::unique_ptr<engine::Classifier> model = io::load_classifier(model_path);
  const std::string text = format == "json" ? model->to_json().dump(2) + "\n" : model->to_text();
  if (output.empty() || output == "-")  // -: standard output
    std::cout << text;
  else
    io::write_file_atomically(output, text);
  return 0;
}

const CommandRegistration export_registration("export", "print a model as text or JSON",
                                              run_export);

}  // namespace
}  // namespace polymargin::cli
