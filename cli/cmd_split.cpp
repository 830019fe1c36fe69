// polymargin split: seeded out-of-core train/test split or k-fold assignment of LIBSVM text.
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/output.h"
#include "engine/errors.h"
#include "io/split.h"
#include "io/text_reader.h"

namespace polymargin::cli {
namespace {

int run_split(const std::vector<std::string>& args) {
  po::options_description options("split options");
  auto add = options.add_options();
  add("input", po::value<std::vector<std::string>>()->required(),
      "LIBSVM text (plain, gzip, bzip2, zstd; several files in sequence; - for stdin)");
  add("output,o", po::value<std::string>()->required(),
      "PREFIX: writes PREFIX.train.svm and PREFIX.test.svm, or PREFIX.fold<i>.svm");
  add("test-fraction", po::value<double>()->default_value(0.2, "0.2"), "share of rows sent to test");
  add("folds", po::value<int>(), "write K fold files instead of train/test (K >= 2)");
  add("seed", po::value<std::uint64_t>()->default_value(1), "random seed of the assignment");
  add("compress", po::value<std::string>()->default_value("none"),
      "output compression: none | zstd | gzip (adds .zst / .gz)");
  add("threads", po::value<int>()->default_value(0), "parser threads (0: all cores)");
  add("json", "print the counts as JSON");
  po::positional_options_description positional;
  positional.add("input", -1);
  po::variables_map vm;
  if (!parse_options("split", "INPUT... -o PREFIX [--test-fraction F | --folds K] [--seed S]",
                     options, positional, args, vm))
    return kExitOk;

  io::SplitOptions split;
  split.test_fraction = vm["test-fraction"].as<double>();
  split.seed = vm["seed"].as<std::uint64_t>();
  split.compression = io::parse_compression(vm["compress"].as<std::string>());
  if (vm.count("folds")) {
    if (!vm["test-fraction"].defaulted())
      throw UsageError("split: --folds and --test-fraction exclude each other");
    split.folds = vm["folds"].as<int>();
    if (split.folds < 2) throw UsageError("split: --folds must be at least 2");
  }
  try {
    io::validate_split_options(split);
  } catch (const ConfigError& e) {  // said with its flag
    throw UsageError("split: " + flag_of(e.field()) + " " + e.rule());
  } catch (const UsageError& e) {
    throw UsageError(std::string("split: ") + e.what());
  }

  std::vector<io::OutputPath> outputs;
  for (const std::string& path : io::split_output_paths(vm["output"].as<std::string>(), split))
    outputs.push_back({"-o", path, false, ""});
  io::check_outputs(input_paths(vm, {"input"}), outputs);
  io::TextOptions text;
  text.threads = resolve_threads(vm["threads"].as<int>());
  io::Splitter splitter(vm["output"].as<std::string>(), split);
  const io::TextStats stats =
      io::read_libsvm_text(vm["input"].as<std::vector<std::string>>(), text,
                           [&](const CsrView& rows) { splitter.append(rows); });
  const io::SplitCounts counts = splitter.finish();
  // The parts keep the ids as written, but text does not say its base: a part of a 0-based source
  // without an index 0 would read as 1-based, and its model would refuse another part's index 0.
  const bool zero_based = stats.resolved_base == io::IndexBase::kZero;
  if (zero_based)
    err_printf(
        "note: the input is 0-based (index 0 occurs); a part without index 0 reads as 1-based: "
        "train on them with --index-base 0 (or convert them with it)\n");

  if (vm.count("json")) {
    nlohmann::json j = {{"rows", counts.rows},
                        {"seed", split.seed},
                        {"index_base", zero_based ? 0 : 1},
                        {"outputs", counts.outputs}};
    if (split.folds > 0) {
      j["fold_rows"] = counts.fold_rows;
    } else {
      j["train_rows"] = counts.train_rows;
      j["test_rows"] = counts.test_rows;
      j["test_fraction"] = split.test_fraction;
    }
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  const auto share = [&](std::uint64_t n) {
    return counts.rows ? 100.0 * static_cast<double>(n) / static_cast<double>(counts.rows) : 0.0;
  };
  std::cout << std::fixed << std::setprecision(1) << "split: " << counts.rows << " rows\n";
  const auto print = [&](const std::string& path, std::uint64_t n) {
    std::cout << "  " << path << ": " << n << " rows (" << share(n) << "%)\n";
  };
  if (split.folds > 0) {
    for (std::size_t i = 0; i < counts.fold_rows.size(); ++i)
      print(counts.outputs[i], counts.fold_rows[i]);
  } else {
    print(counts.outputs[0], counts.train_rows);
    print(counts.outputs[1], counts.test_rows);
  }
  return kExitOk;
}

const CommandRegistration registration("split", "seeded out-of-core train/test or k-fold split",
                                       run_split);

}  // namespace
}  // namespace polymargin::cli
