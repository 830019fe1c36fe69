// `polymargin train --algo cpm`: the Convex Polytope Machine's summary (its options are the table's,
// driver/options.h; the library trains it: driver/train.h, driver/cpm_job.cpp).

#include <algorithm>
#include <cstdint>
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

namespace polymargin::cli {
namespace {

// The run's summary on stdout (--json prints it as JSON instead).
void print_summary(const nlohmann::ordered_json& s) {
  const nlohmann::ordered_json& sides = s["side_details"];
  std::uint64_t all_steps = 0;
  for (const auto& side : sides) all_steps += side["steps"].get<std::uint64_t>();
  const std::size_t machines = s["machines"].get<std::size_t>();
  const double train_seconds = s["train_seconds"].get<double>();
  out_printf(
      "trained cpm (%zu machine%s, %zu sides, K = %d) in %.2f s: %llu steps, %.2f M steps/s "
      "over all sides; open/convert %.2f s\n",
      machines, machines == 1 ? "" : "s", sides.size(), s["faces"].get<int>(), train_seconds,
      static_cast<unsigned long long>(all_steps),
      static_cast<double>(all_steps) / 1e6 / std::max(train_seconds, 1e-9),
      s["open_seconds"].get<double>());
  if (s["classes"].get<std::size_t>() <= 2)
    for (const auto& side : sides)
      out_printf(
          "side outer=%+d: %llu steps, %.2f M steps/s, %llu updates, assignment perplexity "
          "%.2f, %llu adjusted\n",
          side["outer"].get<int>(), side["steps"].get<unsigned long long>(),
          side["steps_per_second"].get<double>() / 1e6, side["updates"].get<unsigned long long>(),
          side["assignment_perplexity"].get<double>(),
          side["adjusted_assignments"].get<unsigned long long>());
  if (s.contains("convergence"))
    print_convergence(s["convergence"], "pass", "more --epochs or --iterations");
  if (s.contains("validation")) {
    const nlohmann::ordered_json& v = s["validation"];
    out_printf("validation: %llu rows, accuracy %.4f", v["rows"].get<unsigned long long>(),
               v["accuracy"].get<double>());
    if (v.contains("auc")) out_printf(", AUC %.4f", v["auc"].get<double>());
    out_printf("\n");
  }
  out_printf("model written to %s\n", s["model_path"].get<std::string>().c_str());
}

const TrainAlgorithmRegistration cpm_registration(
    {"cpm", "Convex Polytope Machine: K faces, SGD, double-sided, one-vs-one",
     "-d TRAIN... -o MODEL [options]",
     "Memory: K x (features + 1) weights per side in double (8 bytes; float, 4 bytes, when\n"
     "double does not fit), two sides per machine, plus (with --entropy above 1) 32-64 bytes\n"
     "per outer-class row for ASSIGN's history, and 256 MiB. It is computed before anything is\n"
     "allocated; a run that would not fit is refused: use --hash-bits B (2^B slots per face).\n"
     "\n",
     print_summary});

}  // namespace
}  // namespace polymargin::cli
