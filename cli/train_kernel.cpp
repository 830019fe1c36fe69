// `polymargin train --algo kldm|tldm|cmm`: the regular-scale learners' summary (their options are
// the table's, driver/options.h; the library trains them: driver/train.h, driver/kernel_job.cpp).

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/train.h"
#include "cli/train_jobs.h"
#include "cli/tune.h"
#include "driver/train.h"
#include "engine/errors.h"
#include "engine/ldm.h"

namespace polymargin::cli {
namespace {

// The run's summary on stdout (--json prints it as JSON instead).
void print_summary(const nlohmann::ordered_json& s) {
  out_printf(
      "trained %s on %s rows in %.2f s (load %.2f s, kernel matrix %.2f s, set-up %.2f s, "
      "solve %.2f s, save %.2f s)\n",
      s["algorithm"].get<std::string>().c_str(), s["rows"].dump().c_str(),
      s["total_seconds"].get<double>(), s["open_seconds"].get<double>(),
      s["gram_seconds"].get<double>(), s["setup_seconds"].get<double>(),
      s["solve_seconds"].get<double>(), s["save_seconds"].get<double>());
  out_printf("objective %.6g, margin mean %.4g, margin variance %.4g, training accuracy %.4f\n",
             s["objective"].get<double>(), s["margin_mean"].get<double>(),
             s["margin_variance"].get<double>(), s["train_accuracy"].get<double>());
  if (s.contains("validation")) {
    const nlohmann::ordered_json& v = s["validation"];
    out_printf("validation: %s rows, accuracy %.4f, AUC %.4f\n", v["rows"].dump().c_str(),
               v["accuracy"].get<double>(), v["auc"].get<double>());
  }
  out_printf("model written to %s\n", s["model_path"].get<std::string>().c_str());
}

const TrainAlgorithmRegistration kldm_registration(
    {"kldm", "kernel LDM (linear, RBF, polynomial), dual coordinate descent; regular scale",
     "-d TRAIN -o MODEL [options]", "", print_summary});
const TrainAlgorithmRegistration cmm_registration(
    {"cmm", "Compact Margin Machine, semi-supervised (label 0 = unlabelled), CCCP",
     "-d TRAIN -o MODEL [--unlabeled FILE] [options]", "", print_summary});
const TrainAlgorithmRegistration tldm_registration(
    {"tldm", "Twin LDM: two non-parallel planes (linear, RBF), SOR; regular scale",
     "-d TRAIN -o MODEL [options]", "", print_summary});

}  // namespace
}  // namespace polymargin::cli
