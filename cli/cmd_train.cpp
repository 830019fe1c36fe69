// `polymargin train`: the command line of every learner's training (it dispatches on --algo), and
// of the linear LDM and SVM, which the training library trains (driver/train.h): their options
// become a driver::TrainJob, whose run's notes and summary are printed here.

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "cli/train.h"
#include "cli/train_jobs.h"
#include "cli/tune.h"
#include "driver/mpi_job.h"
#include "driver/train.h"
#include "engine/errors.h"
#include "engine/ldm.h"

namespace polymargin::cli {
namespace {

// The options of `train --algo ldm|svm` into a job; nullopt when --help was shown.
std::optional<driver::TrainJob> parse_linear(const std::vector<std::string>& args, bool& json) {
  po::variables_map vm;
  driver::TrainJob job;
  driver::LinearParams& p = job.linear;
  int epochs = 5;
  std::string pairing;
  bool no_final_pass = false;
  po::options_description opts("train options");
  opts.add_options()("algo", po::value(&job.algo)->default_value("ldm"),
                     "ldm | svm (svm: the hinge-loss SVM, λ1 = λ2 = 0)")(
      "data,d", po::value(&job.inputs)->multitoken(),
      "training data: LIBSVM text (plain, gzip, bzip2, zstd; several files; - for stdin) or a "
      "shard directory")("output,o", po::value(&job.output)->required(), "model file to write")(
      "cost,c", po::value(&p.c)->default_value(engine::kDefaultC), "C, weight of the hinge loss")(
      "epochs", po::value(&epochs)->default_value(5),
      "passes over the data (T); by default also at least 50000 SGD steps (a small set gets more "
      "passes)")(
      "avg-start-epochs", po::value<int>(),
      "averaging starts after this many epochs (t0 = this × m); default 2, or epochs - 1 for a "
      "shorter run")("eta0", po::value(&p.eta0)->default_value("auto"),
                     "initial step size, or auto: calibrated on 1000 seeded pairs")(
      "bias", po::value(&p.bias)->default_value(1),
      "value B of a constant (regularised) bias feature; 0: no bias (the papers' protocol)")(
      "scale", po::value(&p.scale)->default_value("maxabs"),
      "maxabs: divide each feature by its max |value| (the papers' [0,1] protocol) | none")(
      "normalize", po::value(&p.normalize)->default_value("none"),
      "l2: divide each row by its Euclidean norm after --scale (the model does it when it scores) "
      "| none")("seed", po::value(&p.seed)->default_value(1),
                "seed of shuffling, pairing, calibration")(
      "threads", po::value(&job.threads)->default_value(0),
      "decode/convert threads (0: all cores); the model does not depend on it")(
      "window-blocks", po::value(&job.window_blocks)->default_value(8),
      "rows are shuffled (and paired) within windows of this many blocks")(
      "no-final-pass", po::bool_switch(&no_final_pass),
      "skip the exact pass over the training data after training (seconds at KDD size); the "
      "summary "
      "then gives the last epoch's progressive estimates")("json", po::bool_switch(&json),
                                                           "print the summary as JSON on stdout")(
      "feature-order", po::value(&p.feature_order)->default_value("given"),
      "where the weights of each feature id lie while learning: given (by id) | frequency (the "
      "most frequent features first, counted on a sample of the blocks: fewer cache misses for "
      "the learner, a look-up a non-zero for the reader; the same model)")(
      "warm-start", po::value(&p.warm_start),
      "start from this model (same algorithm and labels; new features start at 0)");
  // The LDM's own options: the SVM's help leaves them out, and the SVM refuses them (below).
  po::options_description ldm_only("ldm options");
  ldm_only.add_options()("lambda1", po::value<double>(),
                         "weight of the margin variance (paper units, eq. 14); default 1e-4·m·C")(
      "lambda2", po::value<double>(), "weight of the margin mean (paper units); default 3e-3·m·C")(
      "lambda1-rel", po::value<double>(), "λ1/(m·C) instead of --lambda1 (scale-free)")(
      "lambda2-rel", po::value<double>(), "λ2/(m·C) instead of --lambda2 (scale-free)")(
      "pairing", po::value(&pairing)->default_value("next"),
      "the second row j of a step: next (the next row of the shuffled window: x_j's weights stay "
      "in cache for the next step, about 2x faster at KDD size) | permuted (an independent seeded "
      "permutation, as the LDM reference code)");
  const bool svm = peek_option(args, "algo", "ldm") == "svm";
  if (!svm) opts.add(ldm_only);
  add_parallel_options(opts, job.parallel);
  add_job_options(opts, job.job, "epoch");
  po::positional_options_description positional;
  positional.add("data", -1);
  if (!parse_options("train", "--algo ldm|svm -d TRAIN... -o MODEL [options]", opts, positional,
                     args, vm, svm ? &ldm_only : nullptr))
    return std::nullopt;
  if (!vm["epochs"].defaulted()) p.epochs = epochs;
  if (vm.count("avg-start-epochs")) p.avg_start_epochs = vm["avg-start-epochs"].as<int>();
  if (!vm["pairing"].defaulted()) p.pairing = pairing;
  p.final_pass = !no_final_pass;
  take_lambda_options(vm, p);
  job.tune = tune_record();
  add_config_input(vm, job);
  return job;
}

// The run's summary on stdout (--json prints it as JSON instead).
void print_summary(const nlohmann::ordered_json& s) {
  // A resumed run's times are its own part's, which the line says.
  std::string resumed;
  if (s.contains("resumed_from")) {
    const auto epoch = s["resumed_from"]["epoch"].get<unsigned long long>() + 1;
    const auto row = s["resumed_from"]["rows"].get<unsigned long long>();
    resumed = row == s["rows"].get<unsigned long long>()
                  ? strprintf(" (resumed after epoch %llu)", epoch)
                  : strprintf(" (resumed in epoch %llu, after its row %llu)", epoch, row);
  }
  out_printf(
      "trained %s on %llu rows x %d epochs%s in %.2f s (%.2f M rows/s): learning %.2f s, "
      "waiting for data %.2f s; open/convert %.2f s, final pass %.2f s\n",
      s["algorithm"].get<std::string>().c_str(), s["rows"].get<unsigned long long>(),
      s["epochs"].get<int>(), resumed.c_str(), s["train_seconds"].get<double>(),
      s["rows_per_second"].get<double>() / 1e6, s["learn_seconds"].get<double>(),
      s["read_wait_seconds"].get<double>(), s["open_seconds"].get<double>(),
      s.value("eval_seconds", 0.0));
  out_printf("objective %.6g, margin mean %.4g, margin variance %.4g, training accuracy %.4f\n",
             s["objective"].get<double>(), s["margin_mean"].get<double>(),
             s["margin_variance"].get<double>(), s["train_accuracy"].get<double>());
  if (s.contains("validation")) {
    const nlohmann::ordered_json& v = s["validation"];
    out_printf("validation: %llu rows, accuracy %.4f, AUC %.4f\n",
               v["rows"].get<unsigned long long>(), v["accuracy"].get<double>(),
               v["auc"].get<double>());
  }
  out_printf("model written to %s\n", s["model_path"].get<std::string>().c_str());
}

// Dispatches on --algo; each learner parses the arguments itself.
int run_train(const std::vector<std::string>& args) {
  const std::string algo = peek_option(args, "algo", "ldm");
  // The streamed learners average replicas across ranks; the kernel learners hold the whole set
  // in one process, and every rank would train (and write) the same model. Their --tune shares its
  // cells out between the ranks, and rank 0 alone trains the final model (run_tuned).
  if (driver::mpi_job() && !trains_replicated(algo) && !tune_requested(args))
    throw UsageError("train --algo " + algo +
                     ": only ldm, svm and cpm run as an MPI job (the others with --tune, for its "
                     "cells); run it without mpirun");
  const TrainAlgorithm& a = train_algorithm(algo);
  const auto run = [&a](const std::vector<std::string>& args) {
    return run_train_algorithm(a, args);
  };
  const bool help = std::find(args.begin(), args.end(), "--help") != args.end() ||
                    std::find(args.begin(), args.end(), "-h") != args.end();
  if (!help && tune_requested(args)) return run_tuned(args, algo, run);
  std::vector<std::string> plain = args;  // --help with --tune: the learner's help, then tune's
  std::erase(plain, std::string("--tune"));
  const int code = run(plain);
  if (help) {
    std::cout << "learners (--algo):\n";
    for (const TrainAlgorithm& other : train_algorithms())
      std::cout << "  " << other.name
                << std::string(8 - std::min<std::size_t>(7, other.name.size()), ' ')
                << other.summary << "\n";
    std::cout << "(polymargin train --algo NAME --help: the options of NAME)\n\n" << tune_help();
  }
  return code;
}

const TrainAlgorithmRegistration ldm_registration(
    {"ldm", "Large Margin Distribution Machine, linear, averaged SGD", parse_linear,
     print_summary});
const TrainAlgorithmRegistration svm_registration(
    {"svm", "linear SVM (hinge loss): LDM with lambda1 = lambda2 = 0", parse_linear,
     print_summary});
const CommandRegistration registration("train", "train a model (--algo ldm, svm, ...)", run_train);

}  // namespace
}  // namespace polymargin::cli
