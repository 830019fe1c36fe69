// `polymargin train`: the command line of every learner's training (it dispatches on --algo), and
// the linear LDM's and SVM's summary. Their options (driver/options.h) become a driver::TrainJob,
// which the training library trains (driver/train.h).

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

// Where --epochs auto stopped, and why.
void print_epochs_auto(const nlohmann::ordered_json& a) {
  const auto run = a["epochs_run"].get<unsigned long long>();
  const char* why = a["stopped"].get<bool>() ? "stopped" : "ran to --max-epochs";
  if (!a["early_stopping"].get<bool>()) {
    out_printf("epochs auto: %s after epoch %llu (nothing held out: judged on the training "
               "objective from epoch %llu)\n",
               why, run, a["judged_from_epoch"].get<unsigned long long>());
    return;
  }
  const auto best = a["best_epoch"].get<unsigned long long>();
  out_printf("epochs auto: %s after epoch %llu; kept epoch %llu: held-out loss %.6g, accuracy "
             "%.4f on %llu rows\n",
             why, run, best, a["scores"][best - 1].get<double>(),
             a["accuracies"][best - 1].get<double>(),
             a["held_out_rows"].get<unsigned long long>());
}

// The run's summary on stdout (--json prints it as JSON instead).
void print_summary(const nlohmann::ordered_json& s) {
  // A resumed run's times are its own part's, which the line says, as it says the rows held out.
  std::string resumed;
  if (s.contains("resumed_from")) {
    const auto epoch = s["resumed_from"]["epoch"].get<unsigned long long>() + 1;
    const auto row = s["resumed_from"]["rows"].get<unsigned long long>();
    resumed = row == s["rows"].get<unsigned long long>()
                  ? strprintf(" (resumed after epoch %llu)", epoch)
                  : strprintf(" (resumed in epoch %llu, after its row %llu)", epoch, row);
  }
  if (s.contains("epochs_auto") && s["epochs_auto"].contains("held_out_rows"))
    resumed += strprintf(" (%llu of them held out)",
                         s["epochs_auto"]["held_out_rows"].get<unsigned long long>());
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
  print_convergence(s["convergence"], "epoch", "more --epochs, or another --eta0,");
  if (s.contains("epochs_auto")) print_epochs_auto(s["epochs_auto"]);
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
  if (!help && tune_requested(args)) return run_tuned(args, a);
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
    {"ldm", "Large Margin Distribution Machine, linear, averaged SGD",
     "-d TRAIN... -o MODEL [options]", "", print_summary});
const TrainAlgorithmRegistration svm_registration(
    {"svm", "linear SVM (hinge loss): LDM with lambda1 = lambda2 = 0",
     "-d TRAIN... -o MODEL [options]", "", print_summary});
const CommandRegistration registration("train", "train a model (--algo ldm, svm, ...)", run_train);

}  // namespace
}  // namespace polymargin::cli
