// `polymargin train --algo kldm|tldm|cmm`: the regular-scale learners' options into a
// driver::TrainJob (the library trains it: driver/train.h, driver/kernel_job.cpp), and the summary
// printed.

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

// The options every kernel learner shares, as parsed (the kernel's into `kernel`, the job's
// files into `job`).
struct CommonFlags {
  driver::TrainJob& job;
  driver::KernelOptions& kernel;
  double rbf_width = 1, gamma = 0, coef0 = 0, bias = 0;
  int degree = 3;
  bool json = false;
};

void add_common_options(po::options_description& opts, CommonFlags& o, const std::string& kernels,
                        double default_bias, double default_width, bool poly,
                        bool bias_applies = true) {
  opts.add_options()("data,d", po::value(&o.job.inputs)->multitoken(),
                     "training data: LIBSVM text (plain, gzip, bzip2, zstd; several files) or a "
                     "shard directory; held in memory (regular-scale data)")(
      "output,o", po::value(&o.job.output)->required(), "model file to write")(
      "kernel", po::value(&o.kernel.kernel)->default_value("rbf"), kernels.c_str())(
      "rbf-width", po::value(&o.rbf_width)->default_value(default_width),
      "RBF width σ as a multiple of δ, the mean distance between training rows (the LDM paper's "
      "grid: 0.25, 0.5, 1, 2, 4); k = exp(−‖u−v‖²/(2σ²))")(
      "gamma", po::value(&o.gamma)->default_value(0),
      poly ? "RBF: γ of exp(−γ‖u−v‖²) directly, instead of --rbf-width; poly: γ of (γu·v + "
             "c0)^degree (0: 1)"
           : "RBF: γ of exp(−γ‖u−v‖²) directly, instead of --rbf-width");
  if (poly)
    opts.add_options()("degree", po::value(&o.degree)->default_value(3), "poly: degree")(
        "coef0", po::value(&o.coef0)->default_value(0), "poly: c0");
  opts.add_options()(
      "bias", po::value(&o.bias)->default_value(default_bias),
      bias_applies
          ? "value B of a constant (regularised) bias feature: adds B² to the kernel; 0: none"
          : "not for this learner, which has intercepts of its own (only 0)")(
      "scale", po::value(&o.kernel.scale)->default_value("maxabs"),
      "maxabs: divide each feature by its max |value| (the papers' [0,1] protocol) | none")(
      "normalize", po::value(&o.kernel.normalize)->default_value("none"),
      "l2: divide each row by its Euclidean norm after --scale (the model does it when it scores) "
      "| none")(
      "max-memory", po::value(&o.kernel.max_memory)->default_value("auto"),
      "refuse to train when the m² matrices would need more than this many bytes (suffixes K, "
      "M, G; auto: half of the RAM, or less in a memory cgroup: what it leaves)")(
      "seed", po::value(&o.kernel.seed)->default_value(1),
      "seed of the coordinate order and δ's sample")(
      "threads", po::value(&o.job.threads)->default_value(0),
      "threads for the kernel matrix and the factorisation (0: all cores); the model does not "
      "depend on it")("json", po::bool_switch(&o.json), "print the summary as JSON on stdout")(
      "validation", po::value(&o.job.job.validation)->multitoken(),
      "holdout data scored with the written model: accuracy and AUC in the summary and in "
      "--metrics-json")("metrics-json", po::value(&o.job.job.metrics),
                        "write one JSON object of the run (data checksums, phase times, "
                        "objective, training and validation accuracy/AUC, model checksum, exit "
                        "status) to this file, whatever the outcome")(
      "data-name", po::value(&o.job.job.data_name), data_name_help())(
      "index-base", po::value(&o.job.job.index_base)->default_value("auto"), index_base_help());
}

// After the parse: the kernel's options given (not left at their defaults), and the --config file
// among the job's inputs.
void take_common(const po::variables_map& vm, CommonFlags& o) {
  const auto given = [&](const char* name) { return vm.count(name) > 0 && !vm[name].defaulted(); };
  if (given("rbf-width")) o.kernel.rbf_width = o.rbf_width;
  if (given("gamma")) o.kernel.gamma = o.gamma;
  if (given("degree")) o.kernel.degree = o.degree;
  if (given("coef0")) o.kernel.coef0 = o.coef0;
  if (given("bias")) o.kernel.bias = o.bias;
  o.job.tune = tune_record();
  add_config_input(vm, o.job);
}

// `args` parsed into `job` with `opts`: false when --help was shown.
bool parse_kernel_options(const std::string& algo, const std::string& usage,
                          po::options_description& opts, const std::vector<std::string>& args,
                          po::variables_map& vm, CommonFlags& o) {
  po::positional_options_description positional;
  positional.add("data", -1);
  if (!parse_options("train", "--algo " + algo + " " + usage, opts, positional, args, vm))
    return false;
  take_common(vm, o);
  return true;
}

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

// ---------------------------------------------------------------------------------------------
// Kernel LDM.

std::optional<driver::TrainJob> parse_kldm(const std::vector<std::string>& args, bool& json) {
  driver::TrainJob job;
  job.algo = "kldm";
  driver::KldmParams& p = job.kldm;
  CommonFlags o{job, p.kernel};
  bool no_shrinking = false;
  po::options_description opts("train --algo kldm options");
  opts.add_options()("algo", po::value(&job.algo)->default_value("kldm"), "kldm");
  add_common_options(opts, o, "linear | rbf | poly", 0, 1, /*poly=*/true);
  opts.add_options()("lambda1", po::value<double>(),
                     "weight of the margin variance (paper units, eq. 8); default 1e-4·m·C")(
      "lambda2", po::value<double>(), "weight of the margin mean (paper units); default 3e-3·m·C")(
      "lambda1-rel", po::value<double>(), "λ1/(m·C) instead of --lambda1 (scale-free)")(
      "lambda2-rel", po::value<double>(), "λ2/(m·C) instead of --lambda2 (scale-free)")(
      "cost,c", po::value(&p.c)->default_value(engine::kDefaultC),
      "C, weight of the hinge loss (the dual box [0, C])")(
      "tolerance", po::value(&p.tolerance)->default_value(0.01),
      "stop when the spread of the projected gradient is at most this (LDM-ref: 0.01)")(
      "max-sweeps", po::value(&p.max_sweeps)->default_value(1000),
      "at most this many passes of coordinate descent")(
      "no-shrinking", po::bool_switch(&no_shrinking), "visit every coordinate in every sweep");
  po::variables_map vm;
  if (!parse_kernel_options("kldm", "-d TRAIN -o MODEL [options]", opts, args, vm, o))
    return std::nullopt;
  p.shrinking = !no_shrinking;
  take_lambda_options(vm, p);
  json = o.json;
  return job;
}

// ---------------------------------------------------------------------------------------------
// Twin LDM.

std::optional<driver::TrainJob> parse_tldm(const std::vector<std::string>& args, bool& json) {
  driver::TrainJob job;
  job.algo = "tldm";
  driver::TldmParams& p = job.tldm;
  CommonFlags o{job, p.kernel};
  po::options_description opts("train --algo tldm options");
  opts.add_options()("algo", po::value(&job.algo)->default_value("tldm"), "tldm");
  // The defaults: width 4·δ and C = 1/8, the setting within 2 points of the best on the most of
  // 19 UCI sets (docs/accuracy.md, "The Twin LDM's defaults").
  add_common_options(opts, o, "linear (planes in feature space, eqs. 9-12) | rbf (eqs. 13-16)", 0,
                     4, /*poly=*/false, /*bias_applies=*/false);
  opts.add_options()("cost,c", po::value(&p.c)->default_value(0.125),
                     "c1 = c2, weight of the slacks (the paper's grid: 2^-8 … 2^8)")(
      "lambda1", po::value(&p.lambda1)->default_value(1),
      "λ1 = λ3, weight of the margin variance (paper's grid: 2^-8 … 2^8)")(
      "lambda2", po::value(&p.lambda2)->default_value(1),
      "λ2 = λ4, weight of the margin mean (paper's grid: 2^-8 … 2^8)")(
      "epsilon", po::value(&p.epsilon)->default_value(1e-6, "1e-06"),
      "ε of the ε·I that keeps P and S invertible (TWSVM: 1e-6)")(
      "sor-omega", po::value(&p.sor_omega)->default_value(1.0),
      "relaxation factor of the SOR solver, in (0, 2)")(
      "tolerance", po::value(&p.tolerance)->default_value(1e-4),
      "stop when every projected gradient of the dual is at most this")(
      "max-sweeps", po::value(&p.max_sweeps)->default_value(5000), "at most this many SOR sweeps");
  po::variables_map vm;
  if (!parse_kernel_options("tldm", "-d TRAIN -o MODEL [options]", opts, args, vm, o))
    return std::nullopt;
  json = o.json;
  return job;
}

// ---------------------------------------------------------------------------------------------
// Compact Margin Machine.

std::optional<driver::TrainJob> parse_cmm(const std::vector<std::string>& args, bool& json) {
  driver::TrainJob job;
  job.algo = "cmm";
  driver::CmmParams& p = job.cmm;
  CommonFlags o{job, p.kernel};
  double c3 = 1, balance_mean = 0;
  bool no_balance = false;
  po::options_description opts("train --algo cmm options");
  opts.add_options()("algo", po::value(&job.algo)->default_value("cmm"), "cmm");
  add_common_options(opts, o, "linear | rbf | poly", 1, 1, /*poly=*/true);
  opts.add_options()(
      "unlabeled", po::value(&p.unlabeled)->multitoken(),
      "unlabelled rows (their labels are ignored); rows labelled 0 in --data are unlabelled too")(
      "c1", po::value(&p.c1)->default_value(10), "C1, weight of the labelled hinge loss")(
      "c2", po::value(&p.c2)->default_value(1),
      "C2, weight of the unlabelled symmetric hinge loss (variant rmm: of the compactness)")(
      "c3", po::value(&c3)->default_value(1),
      "C3, weight of the compactness [|f| − ε]_+ on every row (variant cmm; rmm takes C2)")(
      "epsilon", po::value(&p.epsilon)->default_value(1), "ε, half-width of the compact tube")(
      "delta", po::value(&p.delta)->default_value(-0.3, "-0.3"),
      "δ ∈ (-1, 0], the ramp threshold of the CCCP split of the symmetric hinge")(
      "variant", po::value(&p.variant)->default_value("cmm"),
      "cmm: relaxed CMM (8) by CCCP | rmm: the special variant (9), C3 = C2 and no unlabelled "
      "hinge (semi-supervised relative margin machine), one convex problem")(
      "balance-mean", po::value(&balance_mean),
      "r of the class-balance constraint mean_unlabelled f = r kept in every CCCP round (default: "
      "the mean label of the labelled rows)")("no-balance", po::bool_switch(&no_balance),
                                              "drop the class-balance constraint")(
      "max-rounds", po::value(&p.max_rounds)->default_value(30), "at most this many CCCP rounds")(
      "tolerance", po::value(&p.tolerance)->default_value(1e-3),
      "a round stops when no coordinate step moves the dual by more than this")(
      "max-sweeps", po::value(&p.max_sweeps)->default_value(5000),
      "at most this many coordinate-descent sweeps per round");
  po::variables_map vm;
  if (!parse_kernel_options("cmm", "-d TRAIN -o MODEL [--unlabeled FILE] [options]", opts, args, vm,
                            o))
    return std::nullopt;
  if (!vm["c3"].defaulted()) p.c3 = c3;
  if (vm.count("balance-mean")) p.balance_mean = balance_mean;
  p.balance = !no_balance;
  json = o.json;
  return job;
}

const TrainAlgorithmRegistration kldm_registration(
    {"kldm", "kernel LDM (linear, RBF, polynomial), dual coordinate descent; regular scale",
     parse_kldm, print_summary});
const TrainAlgorithmRegistration cmm_registration(
    {"cmm", "Compact Margin Machine, semi-supervised (label 0 = unlabelled), CCCP", parse_cmm,
     print_summary});
const TrainAlgorithmRegistration tldm_registration(
    {"tldm", "Twin LDM: two non-parallel planes (linear, RBF), SOR; regular scale", parse_tldm,
     print_summary});

}  // namespace
}  // namespace polymargin::cli
