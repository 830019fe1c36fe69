// `polymargin train --algo cpm`: the Convex Polytope Machine's options into a driver::TrainJob
// (the library trains it: driver/train.h, driver/cpm_job.cpp), and its summary printed.

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

// The options of `train --algo cpm` into a job; nullopt when --help was shown.
std::optional<driver::TrainJob> parse_cpm(const std::vector<std::string>& args, bool& json) {
  driver::TrainJob job;
  job.algo = "cpm";
  driver::CpmParams& p = job.cpm;
  double epochs = driver::kCpmDefaultEpochs;
  po::variables_map vm;
  po::options_description opts(
      "Memory: K x (features + 1) weights per side in double (8 bytes; float, 4 bytes, when\n"
      "double does not fit), two sides per machine, plus (with --entropy above 1) 32-64 bytes\n"
      "per outer-class row for ASSIGN's history, and 256 MiB. It is computed before anything is\n"
      "allocated; a run that would not fit is refused: use --hash-bits B (2^B slots per face).\n"
      "\n"
      "train --algo cpm options");
  opts.add_options()("algo", po::value(&job.algo)->default_value("cpm"), "cpm")(
      "data,d", po::value(&job.inputs)->multitoken(),
      "training data: LIBSVM text (plain, gzip, bzip2, zstd; several files) or a shard directory")(
      "output,o", po::value(&job.output)->required(), "model file to write")(
      "faces,k", po::value(&p.faces)->default_value(10), "K, faces (sub-classifiers) per side")(
      "iterations", po::value<std::int64_t>(), "T, SGD steps per side (default: --epochs)")(
      "epochs", po::value(&epochs)->default_value(10),
      "T = this x the side's rows, when --iterations is not given; by default also at least "
      "50000 steps per side (a small set gets more passes)")(
      "cost,c", po::value(&p.cost)->default_value("auto"),
      "C: regularisation lambda = 1/(C T) (the paper's grid: 1, 0.1, ..., 1e-4); auto: 3/sqrt(m) "
      "within [0.01, 1] for m rows (lambda shrinks as 1/sqrt(m)), and T that of the epochs "
      "alone: the 50000-step floor does not weaken lambda")(
      "entropy", po::value(&p.entropy)->default_value(1),
      "ASSIGN's entropy floor as a perplexity P in [1, K] (effective number of faces): the "
      "paper's h = ln P; 1 = off (h = 0). The paper's grid h = log(jK/10) is P = jK/10")(
      "cost-ratio", po::value(&p.cost_ratio)->default_value(1),
      "r: cost r/(1+r) of an inner (enclosed) row, 1/(1+r) of an outer one, on each side")(
      "sides", po::value(&p.sides)->default_value("double"),
      "double (D = F+ - F-) | outer=+1 (one CPM, +1 outside) | outer=-1")(
      "classes", po::value<std::string>(),
      "comma-separated labels the data must have, each with rows (multiclass check)")(
      "scale", po::value(&p.scale)->default_value("maxabs"),
      "maxabs: divide each feature by its max |value| (stored in the model) | none")(
      "normalize", po::value(&p.normalize)->default_value("none"),
      "l2: divide each row by its Euclidean norm after --scale (the model does it when it scores) "
      "| none")("hash-bits", po::value(&p.hash_bits)->default_value(0),
                "B: signed feature hashing into 2^B slots per face; 0 = off (as the paper)")(
      "precision", po::value(&p.precision)->default_value("auto"),
      "weight accumulators: auto (double when it fits in memory, else float) | double | float")(
      "seed", po::value(&p.seed)->default_value(1), "seed of shuffling and tie-breaking")(
      "threads", po::value(&job.threads)->default_value(0),
      "threads (0: all cores); the model does not depend on it")(
      "window-blocks", po::value(&job.window_blocks)->default_value(8),
      "the reader shuffles rows within windows of this many blocks")(
      "json", po::bool_switch(&json), "print the summary as JSON on stdout")(
      "warm-start", po::value(&p.warm_start),
      "not for the CPM (refused): use --resume FILE to continue an interrupted run");
  add_parallel_options(opts, job.parallel);
  add_job_options(opts, job.job, "pass");
  po::positional_options_description positional;
  positional.add("data", -1);
  if (!parse_options("train", "--algo cpm -d TRAIN... -o MODEL [options]", opts, positional, args,
                     vm))
    return std::nullopt;
  if (!vm["epochs"].defaulted()) p.epochs = epochs;
  if (vm.count("iterations")) p.iterations = vm["iterations"].as<std::int64_t>();
  if (vm.count("classes")) p.classes = vm["classes"].as<std::string>();
  job.tune = tune_record();
  add_config_input(vm, job);
  return job;
}

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
    {"cpm", "Convex Polytope Machine: K faces, SGD, double-sided, one-vs-one", parse_cpm,
     print_summary});

}  // namespace
}  // namespace polymargin::cli
