// `polymargin train`: linear LDM or SVM by averaged SGD over streamed, shuffled shards. Text input
// is converted on the fly into a temporary shard directory through the same pipeline.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/progress.h"
#include "cli/train.h"
#include "engine/errors.h"
#include "engine/ldm.h"
#include "io/model_file.h"
#include "io/shards.h"

namespace polymargin::cli {
namespace {

// One of --lambdaN (paper units) or --lambdaN-rel (λN/(mC)); unset: the engine's default ratio.
std::optional<double> lambda_option(const po::variables_map& vm, const std::string& name,
                                    double rows, double c) {
  const bool paper = vm.count(name) > 0, rel = vm.count(name + "-rel") > 0;
  if (paper && rel)
    throw UsageError("train: --" + name + " and --" + name + "-rel exclude each other");
  const double value = paper ? vm[name].as<double>() : rel ? vm[name + "-rel"].as<double>() : 0;
  if (!(value >= 0) || !std::isfinite(value))
    throw UsageError("train: --" + name + (rel ? "-rel" : "") + " must be ≥ 0 (got " +
                     number(value) + ")");
  if (paper) return value;
  if (rel) return value * rows * c;
  return std::nullopt;
}

double eta0_option(const std::string& text) {
  if (text == "auto") return 0;
  std::size_t used = 0;
  double eta0 = -1;
  try {
    eta0 = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || !(eta0 > 0) || !std::isfinite(eta0))
    throw UsageError("train: --eta0 must be 'auto' or a positive number (got '" + text + "')");
  return eta0;
}

int run_linear(const std::vector<std::string>& args) {
  std::vector<std::string> inputs;
  std::string algo, output, eta0_text, scale, pairing;
  engine::LdmConfig config;
  int threads = 0;
  std::uint32_t window_blocks = 0;
  bool json = false, no_final_pass = false;
  po::options_description opts("train options");
  opts.add_options()("algo", po::value(&algo)->default_value("ldm"),
                     "ldm | svm (svm: the hinge-loss SVM, λ1 = λ2 = 0)")(
      "data,d", po::value(&inputs)->multitoken(),
      "training data: LIBSVM text (plain, gzip, bzip2, zstd; several files; - for stdin) or a "
      "shard directory")("output,o", po::value(&output)->required(), "model file to write")(
      "lambda1", po::value<double>(),
      "weight of the margin variance (paper units, eq. 14); default 1e-4·m·C")(
      "lambda2", po::value<double>(), "weight of the margin mean (paper units); default 3e-3·m·C")(
      "lambda1-rel", po::value<double>(), "λ1/(m·C) instead of --lambda1 (scale-free)")(
      "lambda2-rel", po::value<double>(), "λ2/(m·C) instead of --lambda2 (scale-free)")(
      "cost,c", po::value(&config.c)->default_value(engine::kDefaultC),
      "C, weight of the hinge loss")("epochs", po::value(&config.epochs)->default_value(5),
                                     "passes over the data (T)")(
      "avg-start-epochs", po::value(&config.avg_start_epochs)->default_value(2),
      "averaging starts after this many epochs (t0 = this × m)")(
      "eta0", po::value(&eta0_text)->default_value("auto"),
      "initial step size, or auto: calibrated on 1000 seeded pairs")(
      "bias", po::value(&config.bias)->default_value(0),
      "value B of a constant (regularised) bias feature; 0: no bias")(
      "scale", po::value(&scale)->default_value("maxabs"),
      "maxabs: divide each feature by its max |value| (the papers' [0,1] protocol) | none")(
      "seed", po::value(&config.seed)->default_value(1), "seed of shuffling, pairing, calibration")(
      "threads", po::value(&threads)->default_value(0),
      "decode/convert threads (0: all cores); the model does not depend on it")(
      "window-blocks", po::value(&window_blocks)->default_value(8),
      "rows are shuffled (and paired) within windows of this many blocks")(
      "pairing", po::value(&pairing)->default_value("next"),
      "ldm: the second row j of a step: next (the next row of the shuffled window: x_j's weights "
      "stay in cache for the next step, about 2x faster at KDD size) | permuted (an independent "
      "seeded permutation, as the LDM reference code)")(
      "no-final-pass", po::bool_switch(&no_final_pass),
      "skip the exact pass over the training data after training (KDD-size: 6 s); the summary "
      "then gives the last epoch's progressive estimates")("json", po::bool_switch(&json),
                                                           "print the summary as JSON on stdout");
  po::positional_options_description positional;
  positional.add("data", -1);
  po::variables_map vm;
  if (!parse_options("train", "--algo ldm|svm -d TRAIN... -o MODEL [options]", opts, positional,
                     args, vm))
    return kExitOk;
  if (inputs.empty()) throw UsageError("train: no training data given (-d TRAIN)");
  if (scale != "maxabs" && scale != "none")
    throw UsageError("train: --scale must be maxabs or none (got '" + scale + "')");
  if (window_blocks == 0) throw UsageError("train: --window-blocks must be at least 1");
  if (pairing != "next" && pairing != "permuted")
    throw UsageError("train: --pairing must be next or permuted (got '" + pairing + "')");
  config.pairing = pairing == "next" ? engine::Pairing::kNextRow : engine::Pairing::kPermutation;
  config.eta0 = eta0_option(eta0_text);
  if (algo == "svm" && (vm.count("lambda1") || vm.count("lambda2") || vm.count("lambda1-rel") ||
                        vm.count("lambda2-rel")))
    throw UsageError("train: --algo svm takes no λ1, λ2 (it is LDM with λ1 = λ2 = 0)");
  try {
    config.validate();
  } catch (const UsageError& e) {
    throw UsageError(std::string("train: ") + e.what());
  }
  check_output_directory(output);
  threads = resolve_threads(threads);
  const std::string data = data_name(inputs);
  const Clock::time_point start = Clock::now();

  io::ConvertOptions convert;
  convert.text.threads = threads;
  const io::Dataset dataset = io::Dataset::open(inputs, convert, threads);
  const double open_seconds = seconds_since(start);
  const io::ShardSet& shards = dataset.shards();
  const io::Manifest& manifest = shards.manifest();
  if (manifest.rows == 0) throw DataError(data, 0, 0, "no training rows");
  const engine::LabelMap labels = binary_labels(manifest, data);
  const double rows = static_cast<double>(manifest.rows);
  if (algo == "svm") {
    config.lambda1 = config.lambda2 = 0;
  } else {
    config.lambda1 = lambda_option(vm, "lambda1", rows, config.c);
    config.lambda2 = lambda_option(vm, "lambda2", rows, config.c);
  }
  engine::LdmTrainer trainer(config, manifest.rows, manifest.max_index, labels);
  const engine::LdmConfig& used = trainer.config();

  std::fprintf(stderr, "train %s: %s: %llu rows, %llu features, %llu non-zeros%s\n", algo.c_str(),
               data.c_str(), static_cast<unsigned long long>(manifest.rows),
               static_cast<unsigned long long>(manifest.features),
               static_cast<unsigned long long>(manifest.nnz),
               dataset.converted() ? " (converted from text)" : "");
  std::fprintf(stderr, "labels: %s -> -1 (%llu rows), %s -> +1 (%llu rows)\n",
               number(labels.negative).c_str(),
               static_cast<unsigned long long>(manifest.label_counts.begin()->second),
               number(labels.positive).c_str(),
               static_cast<unsigned long long>(manifest.label_counts.rbegin()->second));
  std::fprintf(stderr, "lambda1 %g  lambda2 %g  C %g  epochs %d  avg-start %d  bias %g  scale %s\n",
               *used.lambda1, *used.lambda2, used.c, used.epochs, used.avg_start_epochs, used.bias,
               scale.c_str());
  if (trainer.eta0() > 0)
    std::fprintf(stderr, "eta0 %g%s\n", trainer.eta0(),
                 trainer.eta0_clamped() ? " (clamped to 0.5/λ)" : "");

  io::ReadOptions read;
  read.seed = config.seed;
  read.threads = threads;
  read.window_blocks = window_blocks;
  read.scale_maxabs = scale == "maxabs";
  EpochProgress progress(manifest.rows, used.epochs);
  engine::MarginStats margins;  // the last epoch's progressive margins, then the final pass's
  double learn_seconds = 0, wait_seconds = 0;
  const Clock::time_point train_start = Clock::now();
  try {
    for (int epoch = 0; epoch < used.epochs; ++epoch) {
      read.epoch = static_cast<std::uint64_t>(epoch);
      std::uint64_t done = 0;
      const Clock::time_point epoch_start = Clock::now();
      const io::ScanStats stats = shards.scan(read, [&](const CsrView& batch) {
        if (trainer.eta0() <= 0) {  // calibrate on the first window, and say what was found
          trainer.calibrate(batch);
          progress.clear();
          std::fprintf(stderr, "eta0 %g (calibrated)\n", trainer.eta0());
        }
        trainer.learn(batch);
        done += batch.rows;
        progress.batch(epoch, done);
      });
      learn_seconds += stats.sink_seconds;
      wait_seconds += stats.wait_seconds;
      // Progressive estimate: each row's margin at its pre-step w, plus ‖w̄‖²; the exact F(w̄)
      // comes from the final pass.
      margins = trainer.take_progress();
      progress.clear();
      std::fprintf(stderr,
                   "epoch %d/%d: %.2f s, %.2f M rows/s, objective ≈ %.6g, accuracy ≈ %.4f\n",
                   epoch + 1, used.epochs, seconds_since(epoch_start),
                   rows / 1e6 / std::max(seconds_since(epoch_start), 1e-9),
                   trainer.objective(margins), margins.accuracy());
    }
  } catch (...) {
    progress.clear();
    throw;
  }
  const double train_seconds = seconds_since(train_start);

  engine::LinearModel model =
      trainer.finish_and_release(read.scale_maxabs ? &shards.feature_maxabs() : nullptr);

  // One unshuffled pass for F(w̄), the margin distribution and the training accuracy. The model
  // has the scaling folded in, so it reads the rows raw (no scaling work) with one dense dot each.
  const Clock::time_point eval_start = Clock::now();
  if (!no_final_pass) {
    margins = {};
    read.shuffle = false;
    read.epoch = 0;
    read.scale_maxabs = false;
    std::vector<double> scores;
    shards.scan(read, [&](const CsrView& batch) {
      scores.resize(batch.rows);
      model.score_batch(batch, scores.data());  // parallel; the sums below stay in row order
      for (std::size_t r = 0; r < batch.rows; ++r)
        margins.add(labels.sign(batch.labels[r]), scores[r]);
    });
  }
  const double objective = trainer.objective(margins);  // ‖w̄‖² in the trained (scaled) space
  const double eval_seconds = seconds_since(eval_start);

  model.index_base = manifest.index_base;
  model.features = manifest.features;
  model.config["scale"] = scale;
  model.config["window_blocks"] = window_blocks;
  model.config["label_map"] = {{"negative", labels.negative}, {"positive", labels.positive}};
  model.config["index_base"] = manifest.index_base;
  model.config["max_index"] = manifest.max_index;
  model.config["features"] = manifest.features;
  model.config["data"] = inputs;
  io::save_model(model, output);
  const double total_seconds = seconds_since(start);

  nlohmann::ordered_json summary = {
      {"algorithm", algo},
      {"rows", manifest.rows},
      {"features", manifest.features},
      {"nnz", manifest.nnz},
      {"epochs", used.epochs},
      {"lambda1", *used.lambda1},
      {"lambda2", *used.lambda2},
      {"c", used.c},
      {"bias", used.bias},
      {"seed", used.seed},
      {"scale", scale},
      {"eta0", trainer.eta0()},
      {"label_map", {{"negative", labels.negative}, {"positive", labels.positive}}},
      {"open_seconds", open_seconds},
      {"train_seconds", train_seconds},
      {"learn_seconds", learn_seconds},
      {"read_wait_seconds", wait_seconds},
      {"rows_per_second", train_seconds > 0 ? rows * used.epochs / train_seconds : 0.0},
      {"eval_seconds", eval_seconds},
      {"total_seconds", total_seconds},
      {"objective", objective},
      {"objective_kind", no_final_pass ? "progressive" : "exact"},
      {"margin_mean", margins.mean()},
      {"margin_variance", margins.variance()},
      {"train_accuracy", margins.accuracy()},
      {"renormalisations", trainer.state().renorms},
      {"model_path", output}};
  if (json) {
    std::cout << summary.dump(2) << "\n";
    return kExitOk;
  }
  std::printf(
      "trained %s on %llu rows x %d epochs in %.2f s (%.2f M rows/s): learning %.2f s, "
      "waiting for data %.2f s; open/convert %.2f s, final pass %.2f s\n",
      algo.c_str(), static_cast<unsigned long long>(manifest.rows), used.epochs, train_seconds,
      rows * used.epochs / 1e6 / std::max(train_seconds, 1e-9), learn_seconds, wait_seconds,
      open_seconds, eval_seconds);
  std::printf("objective %.6g, margin mean %.4g, margin variance %.4g, training accuracy %.4f\n",
              objective, margins.mean(), margins.variance(), margins.accuracy());
  std::printf("model written to %s\n", output.c_str());
  return kExitOk;
}

std::string algorithm_list() {
  std::string list;
  for (const Command& a : train_algorithms()) list += (list.empty() ? "" : "|") + a.name;
  return list;
}

// Dispatches on --algo; each learner parses the arguments itself.
int run_train(const std::vector<std::string>& args) {
  const std::string algo = peek_option(args, "algo", "ldm");
  for (const Command& a : train_algorithms())
    if (a.name == algo) {
      const bool help = std::find(args.begin(), args.end(), "--help") != args.end() ||
                        std::find(args.begin(), args.end(), "-h") != args.end();
      const int code = a.run(args);
      if (help) {
        std::cout << "learners (--algo):\n";
        for (const Command& other : train_algorithms())
          std::cout << "  " << other.name << std::string(8 - std::min<std::size_t>(7, other.name.size()), ' ')
                    << other.summary << "\n";
        std::cout << "(polymargin train --algo NAME --help: the options of NAME)\n";
      }
      return code;
    }
  throw UsageError("train: --algo must be one of " + algorithm_list() + " (got '" + algo + "')");
}

const TrainAlgorithmRegistration ldm_registration(
    "ldm", "Large Margin Distribution Machine, linear, averaged SGD", run_linear);
const TrainAlgorithmRegistration svm_registration(
    "svm", "linear SVM (hinge loss): LDM with lambda1 = lambda2 = 0", run_linear);
const CommandRegistration registration("train", "train a model (--algo ldm, svm, ...)", run_train);

}  // namespace
}  // namespace polymargin::cli
