#include "driver/options.h"

#include <algorithm>
#include <cmath>

#include "driver/train.h"
#include "engine/errors.h"

namespace polymargin::driver {
namespace {

using T = OptionType;

double real(const OptionValue& v) { return std::get<double>(v); }
int integer(const OptionValue& v) { return std::get<int>(v); }
const std::string& text(const OptionValue& v) { return std::get<std::string>(v); }
const std::vector<std::string>& texts(const OptionValue& v) {
  return std::get<std::vector<std::string>>(v);
}

bool linear(const TrainJob& j) { return j.algo == "ldm" || j.algo == "svm"; }

// The settings a kernel learner shares, of the job's learner.
KernelOptions& kernel_of(TrainJob& j) {
  if (j.algo == "tldm") return j.tldm.kernel;
  if (j.algo == "cmm") return j.cmm.kernel;
  return j.kldm.kernel;
}
// The settings every learner has, of the job's learner.
std::string& scale_of(TrainJob& j) {
  return linear(j) ? j.linear.scale : j.algo == "cpm" ? j.cpm.scale : kernel_of(j).scale;
}
std::string& normalize_of(TrainJob& j) {
  return linear(j) ? j.linear.normalize : j.algo == "cpm" ? j.cpm.normalize : kernel_of(j).normalize;
}
std::uint64_t& seed_of(TrainJob& j) {
  return linear(j) ? j.linear.seed : j.algo == "cpm" ? j.cpm.seed : kernel_of(j).seed;
}
// λ of the LDM, linear or kernel.
template <class F>
void on_lambdas(TrainJob& j, F set) {
  if (j.algo == "kldm")
    set(j.kldm.lambda1, j.kldm.lambda2, j.kldm.lambda1_rel, j.kldm.lambda2_rel);
  else
    set(j.linear.lambda1, j.linear.lambda2, j.linear.lambda1_rel, j.linear.lambda2_rel);
}

const char* const kScaleHelp =
    "maxabs: divide each feature by its max |value| (the papers' [0,1] protocol) | none";
const char* const kNormalizeHelp =
    "l2: divide each row by its Euclidean norm after --scale (the model does it when it scores) "
    "| none";
const char* const kBiasHelp =
    "value B of a constant (regularised) bias feature: adds B² to the kernel; 0: none";
const char* const kRbfWidthHelp =
    "RBF width σ as a multiple of δ, the mean distance between training rows (the LDM paper's "
    "grid: 0.25, 0.5, 1, 2, 4); k = exp(−‖u−v‖²/(2σ²))";
const char* const kPolyGammaHelp =
    "RBF: γ of exp(−γ‖u−v‖²) directly, instead of --rbf-width; poly: γ of (γu·v + c0)^degree (0: "
    "1)";
const std::vector<std::string> kNormalizeGrid = {"none", "l2"};

// What every learner's run shares: the data, the model, the job's files and reports.
std::vector<TrainOption> run_options() {
  return {
      {.key = "algo",
       .learners = kAllLearners,
       .default_text = "ldm",
       .help = "the learner: ldm | svm | cpm | kldm | tldm | cmm (train --help lists them)",
       .role = 0,
       .apply = [](TrainJob& j, const OptionValue& v) { j.algo = text(v); }},
      {.key = "data",
       .short_name = 'd',
       .learners = kAllLearners,
       .type = T::kTexts,
       .help = "training data: LIBSVM text (plain, gzip, bzip2, zstd; several files; - for stdin) "
               "or a shard directory (the kernel learners hold it in memory: regular-scale data)",
       .role = 0,
       .apply = [](TrainJob& j, const OptionValue& v) { j.inputs = texts(v); }},
      {.key = "output",
       .short_name = 'o',
       .learners = kAllLearners,
       .help = "model file to write",
       .required = true,
       .role = 0,
       .apply = [](TrainJob& j, const OptionValue& v) { j.output = text(v); }},
  };
}

// The linear LDM's and SVM's own.
std::vector<TrainOption> linear_options() {
  return {
      {.key = "cost",
       .short_name = 'c',
       .learners = kLinear,
       .type = T::kReal,
       .default_text = "10",
       .help = "C, weight of the hinge loss",
       .grid = {"10", "0.01", "0.1", "1", "100"},
       .estimator_alias = "C",
       .apply = [](TrainJob& j, const OptionValue& v) { j.linear.c = real(v); }},
      {.key = "epochs",
       .learners = kLinear,
       .default_text = "5",
       .help = "passes over the data (T); by default also at least 50000 SGD steps (a small set "
               "gets more passes); auto: until the held-out rows stop improving "
               "(--validation-fraction, --n-iter-no-change, --max-epochs, --no-early-stopping)",
       .apply =
           [](TrainJob& j, const OptionValue& v) {
             if (text(v) == "auto") {
               j.linear.epochs_auto = true;
               j.linear.epochs.reset();
               return;
             }
             std::size_t used = 0;
             int epochs = 0;
             try {
               epochs = std::stoi(text(v), &used);
             } catch (const std::exception&) {
               used = 0;
             }
             if (used == 0 || used != text(v).size())
               throw UsageError("train: --epochs must be a whole number or auto (got '" +
                                text(v) + "')");
             j.linear.epochs_auto = false;
             j.linear.epochs = epochs;
           }},
      {.key = "validation-fraction",
       .learners = kLinear,
       .type = T::kReal,
       .default_text = "0.1",
       .help = "--epochs auto: the share of the rows held out (whole blocks, seeded) to judge the "
               "passes on; scikit-learn's default",
       .apply =
           [](TrainJob& j, const OptionValue& v) {
             if (!(real(v) > 0 && real(v) < 1))
               throw UsageError("train: --validation-fraction must lie between 0 and 1, both "
                                "excluded (got " +
                                number(real(v)) + ")");
             j.linear.validation_fraction = real(v);
           }},
      {.key = "n-iter-no-change",
       .learners = kLinear,
       .type = T::kInt,
       .default_text = "3",
       .help = "--epochs auto: stop once this many passes in a row did not lower the held-out "
               "loss (with --no-early-stopping: the training objective) by more than --tol",
       .apply =
           [](TrainJob& j, const OptionValue& v) {
             if (integer(v) < 1)
               throw UsageError("train: --n-iter-no-change must be at least 1 (got " +
                                std::to_string(integer(v)) + ")");
             j.linear.n_iter_no_change = integer(v);
           }},
      {.key = "max-epochs",
       .learners = kLinear,
       .type = T::kInt,
       .default_text = "50",
       .help = "--epochs auto: passes at most",
       .estimator_alias = "max_iter",
       .apply =
           [](TrainJob& j, const OptionValue& v) {
             if (integer(v) < 1)
               throw UsageError("train: --max-epochs must be at least 1 (got " +
                                std::to_string(integer(v)) + ")");
             j.linear.max_epochs = integer(v);
           }},
      {.key = "no-early-stopping",
       .learners = kLinear,
       .type = T::kSwitch,
       .help = "--epochs auto: hold no rows out; pass until the training objective has not "
               "fallen by more than --tol for --n-iter-no-change passes (or --max-epochs)",
       .apply =
           [](TrainJob& j, const OptionValue& v) { j.linear.early_stopping = !std::get<bool>(v); }},
      {.key = "avg-start-epochs",
       .learners = kLinear,
       .type = T::kInt,
       .help = "averaging starts after this many epochs (t0 = this × m); default 2, or epochs - 1 "
               "for a shorter run",
       .apply = [](TrainJob& j, const OptionValue& v) { j.linear.avg_start_epochs = integer(v); }},
      {.key = "eta0",
       .learners = kLinear,
       .default_text = "auto",
       .help = "initial step size, or auto: calibrated on 1000 seeded pairs",
       .apply = [](TrainJob& j, const OptionValue& v) { j.linear.eta0 = text(v); }},
      {.key = "bias",
       .learners = kLinear,
       .type = T::kReal,
       .default_text = "1",
       .help = "value B of a constant (regularised) bias feature; 0: no bias (the papers' "
               "protocol)",
       .grid = {"1", "0"},
       .apply = [](TrainJob& j, const OptionValue& v) { j.linear.bias = real(v); }},
  };
}

// The LDM's λ (linear and kernel), which the SVM takes unlisted to refuse them.
std::vector<TrainOption> lambda_options() {
  using Lambda = std::optional<double>;
  return {
      {.key = "lambda1",
       .learners = kLdm | kKldm,
       .hidden = kSvm,
       .type = T::kReal,
       .help = "weight of the margin variance (in the paper's units); default 1e-4·m·C",
       .apply =
           [](TrainJob& j, const OptionValue& v) {
             on_lambdas(j, [&](Lambda& l1, Lambda&, Lambda&, Lambda&) { l1 = real(v); });
           }},
      {.key = "lambda2",
       .learners = kLdm | kKldm,
       .hidden = kSvm,
       .type = T::kReal,
       .help = "weight of the margin mean (in the paper's units); default 3e-3·m·C",
       .apply =
           [](TrainJob& j, const OptionValue& v) {
             on_lambdas(j, [&](Lambda&, Lambda& l2, Lambda&, Lambda&) { l2 = real(v); });
           }},
      {.key = "lambda1-rel",
       .learners = kLdm | kKldm,
       .hidden = kSvm,
       .type = T::kReal,
       .help = "λ1/(m·C) instead of --lambda1 (scale-free)",
       .grid = {"1e-4", "1e-5", "1e-3"},
       .apply =
           [](TrainJob& j, const OptionValue& v) {
             on_lambdas(j, [&](Lambda&, Lambda&, Lambda& r1, Lambda&) { r1 = real(v); });
           }},
      {.key = "lambda2-rel",
       .learners = kLdm | kKldm,
       .hidden = kSvm,
       .type = T::kReal,
       .help = "λ2/(m·C) instead of --lambda2 (scale-free)",
       .grid = {"3e-3", "3e-4", "3e-2"},
       .apply =
           [](TrainJob& j, const OptionValue& v) {
             on_lambdas(j, [&](Lambda&, Lambda&, Lambda&, Lambda& r2) { r2 = real(v); });
           }},
      {.key = "pairing",
       .learners = kLdm,
       .hidden = kSvm,
       .default_text = "next",
       .help = "the second row j of a step: next (the next row of the shuffled window: x_j's "
               "weights stay in cache for the next step, about 2x faster at KDD size) | permuted "
               "(an independent seeded permutation, as the LDM reference code)",
       .apply = [](TrainJob& j, const OptionValue& v) { j.linear.pairing = text(v); }},
  };
}

// The Convex Polytope Machine's own.
std::vector<TrainOption> cpm_options() {
  return {
      {.key = "faces",
       .short_name = 'k',
       .learners = kCpm,
       .type = T::kInt,
       .default_text = "10",
       .help = "K, faces (sub-classifiers) per side",
       .grid = {"10", "2", "5", "20"},
       .apply = [](TrainJob& j, const OptionValue& v) { j.cpm.faces = integer(v); }},
      {.key = "iterations",
       .learners = kCpm,
       .type = T::kInt64,
       .help = "T, SGD steps per side (default: --epochs)",
       .apply =
           [](TrainJob& j, const OptionValue& v) { j.cpm.iterations = std::get<std::int64_t>(v); }},
      {.key = "epochs",
       .learners = kCpm,
       .type = T::kReal,
       .default_text = "10",
       .help = "T = this x the side's rows, when --iterations is not given; by default also at "
               "least 50000 steps per side (a small set gets more passes)",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cpm.epochs = real(v); }},
      {.key = "cost",
       .short_name = 'c',
       .learners = kCpm,
       .default_text = "auto",
       .help = "C: regularisation lambda = 1/(C T) (the paper's grid: 1, 0.1, ..., 1e-4); auto: "
               "3/sqrt(m) within [0.01, 1] for m rows (lambda shrinks as 1/sqrt(m)), and T that of "
               "the epochs alone: the 50000-step floor does not weaken lambda",
       .grid = {"auto", "0.01", "0.1", "1", "10"},
       .estimator_alias = "C",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cpm.cost = text(v); }},
      {.key = "entropy",
       .learners = kCpm,
       .type = T::kReal,
       .default_text = "1",
       .help = "ASSIGN's entropy floor as a perplexity P in [1, K] (effective number of faces): "
               "the paper's h = ln P; 1 = off (h = 0). The paper's grid h = log(jK/10) is P = "
               "jK/10",
       .grid = {"1", "2"},
       .apply = [](TrainJob& j, const OptionValue& v) { j.cpm.entropy = real(v); }},
      {.key = "cost-ratio",
       .learners = kCpm,
       .type = T::kReal,
       .default_text = "1",
       .help = "r: cost r/(1+r) of an inner (enclosed) row, 1/(1+r) of an outer one, on each side",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cpm.cost_ratio = real(v); }},
      {.key = "sides",
       .learners = kCpm,
       .default_text = "double",
       .help = "double (D = F+ - F-) | outer=+1 (one CPM, +1 outside) | outer=-1",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cpm.sides = text(v); }},
      {.key = "hash-bits",
       .learners = kCpm,
       .type = T::kInt,
       .default_text = "0",
       .help = "B: signed feature hashing into 2^B slots per face; 0 = off (as the paper)",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cpm.hash_bits = integer(v); }},
      {.key = "precision",
       .learners = kCpm,
       .default_text = "auto",
       .help = "weight accumulators: auto (double when it fits in memory, else float) | double | "
               "float",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cpm.precision = text(v); }},
      {.key = "classes",
       .learners = kCpm,
       .help = "comma-separated labels the data must have, each with rows (multiclass check)",
       .role = kCellParam,
       .apply = [](TrainJob& j, const OptionValue& v) { j.cpm.classes = text(v); }},
  };
}

// The settings every learner has: scaling, the seed, threads.
std::vector<TrainOption> shared_options() {
  return {
      {.key = "scale",
       .learners = kAllLearners,
       .default_text = "maxabs",
       .help = kScaleHelp,
       .apply = [](TrainJob& j, const OptionValue& v) { scale_of(j) = text(v); }},
      {.key = "normalize",
       .learners = kAllLearners,
       .default_text = "none",
       .help = kNormalizeHelp,
       .grid = kNormalizeGrid,
       .apply = [](TrainJob& j, const OptionValue& v) { normalize_of(j) = text(v); }},
      {.key = "seed",
       .learners = kLinear,
       .type = T::kUInt64,
       .default_text = "1",
       .help = "seed of shuffling, pairing, calibration",
       .estimator_alias = "random_state",
       .apply = [](TrainJob& j, const OptionValue& v) { seed_of(j) = std::get<std::uint64_t>(v); }},
      {.key = "seed",
       .learners = kCpm,
       .type = T::kUInt64,
       .default_text = "1",
       .help = "seed of shuffling and tie-breaking",
       .estimator_alias = "random_state",
       .apply = [](TrainJob& j, const OptionValue& v) { seed_of(j) = std::get<std::uint64_t>(v); }},
      {.key = "threads",
       .learners = kLinear,
       .type = T::kInt,
       .default_text = "0",
       .help = "decode/convert threads (0: all cores); the model does not depend on it",
       .role = kEstimatorParam,
       .estimator_alias = "n_jobs",
       .apply = [](TrainJob& j, const OptionValue& v) { j.threads = integer(v); }},
      {.key = "threads",
       .learners = kCpm,
       .type = T::kInt,
       .default_text = "0",
       .help = "threads (0: all cores); the model does not depend on it",
       .role = kEstimatorParam,
       .estimator_alias = "n_jobs",
       .apply = [](TrainJob& j, const OptionValue& v) { j.threads = integer(v); }},
      {.key = "window-blocks",
       .learners = kStreamed,
       .type = T::kUInt32,
       .default_text = "8",
       .help = "rows are shuffled (and, by the LDM, paired) within windows of this many blocks",
       .apply =
           [](TrainJob& j, const OptionValue& v) { j.window_blocks = std::get<std::uint32_t>(v); }},
      {.key = "tol",
       .learners = kStreamed,
       .type = T::kReal,
       .default_text = "0.001",
       .help = "the convergence test the summary reports: converged when the last epoch changed "
               "the (progressive) training objective by less than this share of it (the run "
               "still makes its epochs)",
       .apply =
           [](TrainJob& j, const OptionValue& v) {
             if (!(real(v) >= 0) || !std::isfinite(real(v)))
               throw UsageError("train: --tol must be a number ≥ 0 (got " + number(real(v)) + ")");
             j.linear.tol = j.cpm.tol = real(v);
           }},
      {.key = "no-final-pass",
       .learners = kLinear,
       .type = T::kSwitch,
       .help = "skip the exact pass over the training data after training (seconds at KDD size); "
               "the summary then gives the last epoch's progressive estimates",
       .role = kCellParam,
       .apply = [](TrainJob& j, const OptionValue& v) { j.linear.final_pass = !std::get<bool>(v); }},
      {.key = "feature-order",
       .learners = kLinear,
       .default_text = "given",
       .help = "where the weights of each feature id lie while learning: given (by id) | frequency "
               "(the most frequent features first, counted on a sample of the blocks: fewer cache "
               "misses for the learner, a look-up a non-zero for the reader; the same model)",
       .role = kCellParam,
       .apply = [](TrainJob& j, const OptionValue& v) { j.linear.feature_order = text(v); }},
      {.key = "warm-start",
       .learners = kLinear,
       .help = "start from this model (same algorithm and labels; new features start at 0)",
       .role = kEstimatorParam,
       .apply = [](TrainJob& j, const OptionValue& v) { j.linear.warm_start = text(v); }},
      {.key = "warm-start",
       .learners = kCpm,
       .help = "not for the CPM (refused): use --resume FILE to continue an interrupted run",
       .role = 0,
       .apply = [](TrainJob& j, const OptionValue& v) { j.cpm.warm_start = text(v); }},
  };
}

// The kernel learners' kernel and what they share.
std::vector<TrainOption> kernel_options() {
  return {
      {.key = "kernel",
       .learners = kKldm | kCmm,
       .default_text = "rbf",
       .help = "linear | rbf | poly",
       .grid = {"rbf", "linear"},
       .apply = [](TrainJob& j, const OptionValue& v) { kernel_of(j).kernel = text(v); }},
      {.key = "kernel",
       .learners = kTldm,
       .default_text = "rbf",
       .help = "linear (planes in feature space, eqs. 9-12) | rbf (eqs. 13-16)",
       .grid = {"rbf", "linear"},
       .apply = [](TrainJob& j, const OptionValue& v) { kernel_of(j).kernel = text(v); }},
      {.key = "rbf-width",
       .learners = kKldm | kCmm,
       .type = T::kReal,
       .default_text = "1",
       .help = kRbfWidthHelp,
       .grid = {"1", "0.25", "0.5", "2", "4"},
       .apply = [](TrainJob& j, const OptionValue& v) { kernel_of(j).rbf_width = real(v); }},
      // The Twin LDM's defaults, width 4·δ and C = 1/8: the setting within 2 points of the best
      // on the most of 19 UCI sets (docs/accuracy.md, "The Twin LDM's defaults").
      {.key = "rbf-width",
       .learners = kTldm,
       .type = T::kReal,
       .default_text = "4",
       .help = kRbfWidthHelp,
       .grid = {"4", "0.25", "0.5", "1", "2"},
       .apply = [](TrainJob& j, const OptionValue& v) { kernel_of(j).rbf_width = real(v); }},
      {.key = "gamma",
       .learners = kKldm | kCmm,
       .type = T::kReal,
       .default_text = "0",
       .help = kPolyGammaHelp,
       .apply = [](TrainJob& j, const OptionValue& v) { kernel_of(j).gamma = real(v); }},
      {.key = "gamma",
       .learners = kTldm,
       .type = T::kReal,
       .default_text = "0",
       .help = "RBF: γ of exp(−γ‖u−v‖²) directly, instead of --rbf-width",
       .apply = [](TrainJob& j, const OptionValue& v) { kernel_of(j).gamma = real(v); }},
      {.key = "degree",
       .learners = kKldm | kCmm,
       .type = T::kInt,
       .default_text = "3",
       .help = "poly: degree",
       .apply = [](TrainJob& j, const OptionValue& v) { kernel_of(j).degree = integer(v); }},
      {.key = "coef0",
       .learners = kKldm | kCmm,
       .type = T::kReal,
       .default_text = "0",
       .help = "poly: c0",
       .apply = [](TrainJob& j, const OptionValue& v) { kernel_of(j).coef0 = real(v); }},
      {.key = "bias",
       .learners = kKldm,
       .type = T::kReal,
       .default_text = "0",
       .help = kBiasHelp,
       .apply = [](TrainJob& j, const OptionValue& v) { kernel_of(j).bias = real(v); }},
      {.key = "bias",
       .learners = kCmm,
       .type = T::kReal,
       .default_text = "1",
       .help = kBiasHelp,
       .apply = [](TrainJob& j, const OptionValue& v) { kernel_of(j).bias = real(v); }},
      {.key = "bias",
       .learners = kTldm,
       .type = T::kReal,
       .default_text = "0",
       .help = "not for this learner, which has intercepts of its own (only 0)",
       .apply = [](TrainJob& j, const OptionValue& v) { kernel_of(j).bias = real(v); }},
      {.key = "max-memory",
       .learners = kKernel,
       .default_text = "auto",
       .help = "refuse to train when the m² matrices would need more than this many bytes "
               "(suffixes K, M, G; auto: half of the RAM, or less in a memory cgroup: what it "
               "leaves)",
       .apply = [](TrainJob& j, const OptionValue& v) { kernel_of(j).max_memory = text(v); }},
      {.key = "seed",
       .learners = kKernel,
       .type = T::kUInt64,
       .default_text = "1",
       .help = "seed of the coordinate order and δ's sample",
       .estimator_alias = "random_state",
       .apply = [](TrainJob& j, const OptionValue& v) { seed_of(j) = std::get<std::uint64_t>(v); }},
      {.key = "threads",
       .learners = kKernel,
       .type = T::kInt,
       .default_text = "0",
       .help = "threads for the kernel matrix and the factorisation (0: all cores); the model does "
               "not depend on it",
       .role = kEstimatorParam,
       .estimator_alias = "n_jobs",
       .apply = [](TrainJob& j, const OptionValue& v) { j.threads = integer(v); }},
  };
}

// The kernel LDM's and the Twin LDM's own.
std::vector<TrainOption> kldm_tldm_options() {
  return {
      {.key = "cost",
       .short_name = 'c',
       .learners = kKldm,
       .type = T::kReal,
       .default_text = "10",
       .help = "C, weight of the hinge loss (the dual box [0, C])",
       .grid = {"10", "1", "100"},
       .estimator_alias = "C",
       .apply = [](TrainJob& j, const OptionValue& v) { j.kldm.c = real(v); }},
      {.key = "tolerance",
       .learners = kKldm,
       .type = T::kReal,
       .default_text = "0.01",
       .help = "stop when the spread of the projected gradient is at most this (LDM-ref: 0.01)",
       .estimator_alias = "tol",
       .apply = [](TrainJob& j, const OptionValue& v) { j.kldm.tolerance = real(v); }},
      {.key = "max-sweeps",
       .learners = kKldm,
       .type = T::kInt,
       .default_text = "1000",
       .help = "at most this many passes of coordinate descent",
       .apply = [](TrainJob& j, const OptionValue& v) { j.kldm.max_sweeps = integer(v); }},
      {.key = "no-shrinking",
       .learners = kKldm,
       .type = T::kSwitch,
       .help = "visit every coordinate in every sweep",
       .apply = [](TrainJob& j, const OptionValue& v) { j.kldm.shrinking = !std::get<bool>(v); }},
      {.key = "cost",
       .short_name = 'c',
       .learners = kTldm,
       .type = T::kReal,
       .default_text = "0.125",
       .help = "c1 = c2, weight of the slacks (the paper's grid: 2^-8 … 2^8)",
       .grid = {"0.125", "0.015625", "1", "8", "64"},
       .estimator_alias = "C",
       .apply = [](TrainJob& j, const OptionValue& v) { j.tldm.c = real(v); }},
      {.key = "lambda1",
       .learners = kTldm,
       .type = T::kReal,
       .default_text = "1",
       .help = "λ1 = λ3, weight of the margin variance (paper's grid: 2^-8 … 2^8)",
       .apply = [](TrainJob& j, const OptionValue& v) { j.tldm.lambda1 = real(v); }},
      {.key = "lambda2",
       .learners = kTldm,
       .type = T::kReal,
       .default_text = "1",
       .help = "λ2 = λ4, weight of the margin mean (paper's grid: 2^-8 … 2^8)",
       .apply = [](TrainJob& j, const OptionValue& v) { j.tldm.lambda2 = real(v); }},
      {.key = "epsilon",
       .learners = kTldm,
       .type = T::kReal,
       .default_text = "1e-06",
       .help = "ε of the ε·I that keeps P and S invertible (TWSVM: 1e-6)",
       .apply = [](TrainJob& j, const OptionValue& v) { j.tldm.epsilon = real(v); }},
      {.key = "sor-omega",
       .learners = kTldm,
       .type = T::kReal,
       .default_text = "1",
       .help = "relaxation factor of the SOR solver, in (0, 2)",
       .apply = [](TrainJob& j, const OptionValue& v) { j.tldm.sor_omega = real(v); }},
      {.key = "tolerance",
       .learners = kTldm,
       .type = T::kReal,
       .default_text = "0.0001",
       .help = "stop when every projected gradient of the dual is at most this",
       .estimator_alias = "tol",
       .apply = [](TrainJob& j, const OptionValue& v) { j.tldm.tolerance = real(v); }},
      {.key = "max-sweeps",
       .learners = kTldm,
       .type = T::kInt,
       .default_text = "5000",
       .help = "at most this many SOR sweeps",
       .apply = [](TrainJob& j, const OptionValue& v) { j.tldm.max_sweeps = integer(v); }},
  };
}

// The Compact Margin Machine's own.
std::vector<TrainOption> cmm_options() {
  return {
      {.key = "unlabeled",
       .learners = kCmm,
       .type = T::kTexts,
       .help = "unlabelled rows (their labels are ignored); rows labelled 0 in --data are "
               "unlabelled too",
       .role = 0,
       .apply = [](TrainJob& j, const OptionValue& v) { j.cmm.unlabeled = texts(v); }},
      {.key = "c1",
       .learners = kCmm,
       .type = T::kReal,
       .default_text = "10",
       .help = "C1, weight of the labelled hinge loss",
       .estimator_alias = "C",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cmm.c1 = real(v); }},
      {.key = "c2",
       .learners = kCmm,
       .type = T::kReal,
       .default_text = "1",
       .help = "C2, weight of the unlabelled symmetric hinge loss (variant rmm: of the "
               "compactness)",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cmm.c2 = real(v); }},
      {.key = "c3",
       .learners = kCmm,
       .type = T::kReal,
       .default_text = "1",
       .help = "C3, weight of the compactness [|f| − ε]_+ on every row (variant cmm; rmm takes C2)",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cmm.c3 = real(v); }},
      {.key = "epsilon",
       .learners = kCmm,
       .type = T::kReal,
       .default_text = "1",
       .help = "ε, half-width of the compact tube",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cmm.epsilon = real(v); }},
      {.key = "delta",
       .learners = kCmm,
       .type = T::kReal,
       .default_text = "-0.3",
       .help = "δ ∈ (-1, 0], the ramp threshold of the CCCP split of the symmetric hinge",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cmm.delta = real(v); }},
      {.key = "variant",
       .learners = kCmm,
       .default_text = "cmm",
       .help = "cmm: relaxed CMM (8) by CCCP | rmm: the special variant (9), C3 = C2 and no "
               "unlabelled hinge (semi-supervised relative margin machine), one convex problem",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cmm.variant = text(v); }},
      {.key = "balance-mean",
       .learners = kCmm,
       .type = T::kReal,
       .help = "r of the class-balance constraint mean_unlabelled f = r kept in every CCCP round "
               "(default: the mean label of the labelled rows)",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cmm.balance_mean = real(v); }},
      {.key = "no-balance",
       .learners = kCmm,
       .type = T::kSwitch,
       .help = "drop the class-balance constraint",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cmm.balance = !std::get<bool>(v); }},
      {.key = "max-rounds",
       .learners = kCmm,
       .type = T::kInt,
       .default_text = "30",
       .help = "at most this many CCCP rounds",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cmm.max_rounds = integer(v); }},
      {.key = "tolerance",
       .learners = kCmm,
       .type = T::kReal,
       .default_text = "0.001",
       .help = "a round stops when no coordinate step moves the dual by more than this",
       .estimator_alias = "tol",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cmm.tolerance = real(v); }},
      {.key = "max-sweeps",
       .learners = kCmm,
       .type = T::kInt,
       .default_text = "5000",
       .help = "at most this many coordinate-descent sweeps per round",
       .apply = [](TrainJob& j, const OptionValue& v) { j.cmm.max_sweeps = integer(v); }},
  };
}

// Replicas: the streamed learners' workers in this process (and an MPI job's ranks).
std::vector<TrainOption> parallel_options() {
  return {
      {.key = "workers",
       .learners = kStreamed,
       .type = T::kInt,
       .default_text = "1",
       .help = "replicas of the learner in this process, each learning its share of every window, "
               "averaged every --sync-rows rows (1: one learner, as without the option)",
       .role = kEstimatorParam,
       .apply = [](TrainJob& j, const OptionValue& v) { j.parallel.workers = integer(v); }},
      {.key = "sync-rows",
       .learners = kStreamed,
       .type = T::kUInt64,
       .default_text = "0",
       .help = "with several workers or MPI ranks: rows of the whole run between averagings, in "
               "whole windows (0: once an epoch); every epoch ends with one",
       .role = kEstimatorParam,
       .apply =
           [](TrainJob& j, const OptionValue& v) {
             j.parallel.sync_rows = std::get<std::uint64_t>(v);
           }},
  };
}

// What a nightly job needs: checkpoints, a stop, validation, a record of the run.
std::vector<TrainOption> job_options() {
  return {
      {.key = "checkpoint",
       .learners = kStreamed,
       .help = "write the learner's whole state to this file (atomically) at the end of every "
               "pass (epoch; of a run of more than 20, at each 5 % of them), or as "
               "--checkpoint-every says, and on SIGTERM/SIGINT; removed once the model is written",
       .role = 0,
       .apply = [](TrainJob& j, const OptionValue& v) { j.job.checkpoint = text(v); }},
      {.key = "checkpoint-every",
       .learners = kStreamed,
       .help = "with --checkpoint: every N rows (1000000) or every so long (30s, 10m, 1h) instead "
               "of every pass",
       .role = 0,
       .apply = [](TrainJob& j, const OptionValue& v) { j.job.checkpoint_every = text(v); }},
      {.key = "resume",
       .learners = kStreamed,
       .help = "continue the run that wrote this checkpoint (same data and options); the model is "
               "bit-identical to an uninterrupted run's",
       .role = 0,
       .apply = [](TrainJob& j, const OptionValue& v) { j.job.resume = text(v); }},
      {.key = "stop-after-rows",
       .learners = kStreamed,
       .type = T::kUInt64,
       .help = "with --checkpoint: stop as on SIGTERM (checkpoint, exit 6) once the run has learnt "
               "this many rows in all, every pass counted (time-boxed jobs; tests of --resume)",
       .role = 0,
       .apply =
           [](TrainJob& j, const OptionValue& v) {
             const std::uint64_t rows = std::get<std::uint64_t>(v);
             if (rows == 0) throw UsageError("train: --stop-after-rows must be at least 1 (got 0)");
             j.job.stop_after_rows = rows;
           }},
      {.key = "validation",
       .learners = kAllLearners,
       .type = T::kTexts,
       .help = "data to evaluate the model on after training (accuracy, AUC; in --json and "
               "--metrics-json)",
       .role = 0,
       .apply = [](TrainJob& j, const OptionValue& v) { j.job.validation = texts(v); }},
      {.key = "metrics-json",
       .learners = kAllLearners,
       .help = "write a machine-readable summary of the run here (data checksums, phase times, "
               "objective, accuracy, model checksum, exit status), also when it fails",
       .role = 0,
       .apply = [](TrainJob& j, const OptionValue& v) { j.job.metrics = text(v); }},
      {.key = "data-name",
       .learners = kAllLearners,
       .help = "the name the model, the reports and the messages give the training data instead "
               "of its paths (e.g. for a temporary or dated copy); the model does not depend on "
               "it otherwise",
       .role = kCellParam,
       .apply = [](TrainJob& j, const OptionValue& v) { j.job.data_name = text(v); }},
      {.key = "index-base",
       .learners = kAllLearners,
       .default_text = "auto",
       .help = "auto | 0 | 1: how text input's feature ids count (auto: 0 when some id is 0, else "
               "1); a shard directory keeps the base it was converted with",
       .role = kCellParam,
       .apply = [](TrainJob& j, const OptionValue& v) { j.job.index_base = text(v); }},
      {.key = "read-ahead",
       .learners = kStreamed,
       .type = T::kUInt64,
       .default_text = "64",
       .help = "MiB of shard blocks read from disk ahead of the learner (0: none); the model does "
               "not depend on it",
       .role = kCellParam,
       .apply =
           [](TrainJob& j, const OptionValue& v) {
             j.job.read_ahead_mib = std::get<std::uint64_t>(v);
           }},
  };
}

// The --tune search's own (cli/tune.h reads them; their help is the search's).
std::vector<TrainOption> search_options() {
  const unsigned role = kEstimatorParam | kSearchParam;
  return {
      {.key = "tune", .learners = kTuned, .type = T::kSwitch, .role = role},
      {.key = "tune-folds", .learners = kTuned, .type = T::kInt, .role = role},
      {.key = "tune-repeats", .learners = kTuned, .type = T::kInt, .role = role},
      {.key = "tune-rows", .learners = kTuned, .type = T::kUInt64, .role = role},
      {.key = "tune-budget", .learners = kTuned, .role = role},
  };
}

}  // namespace

unsigned learner_bit(const std::string& algo) {
  const std::vector<std::string>& names = learner_names();
  const auto at = std::find(names.begin(), names.end(), algo);
  return at == names.end() ? 0u : 1u << (at - names.begin());
}

const std::vector<std::string>& learner_names() {
  static const std::vector<std::string> names = {"ldm", "svm", "cpm", "kldm", "tldm", "cmm"};
  return names;
}

const std::vector<TrainOption>& train_options() {
  static const std::vector<TrainOption> all = [] {
    std::vector<TrainOption> options;
    for (auto part : {run_options, linear_options, lambda_options, cpm_options, kernel_options,
                      kldm_tldm_options, cmm_options, shared_options, parallel_options,
                      job_options, search_options})
      for (TrainOption& o : part()) options.push_back(std::move(o));
    return options;
  }();
  return all;
}

const TrainOption* find_train_option(const std::string& algo, const std::string& key) {
  const unsigned learner = learner_bit(algo);
  for (const TrainOption& o : train_options())
    if (o.key == key && o.taken_by(learner)) return &o;
  return nullptr;
}

const TrainOption* find_train_option(const std::string& key) {
  for (const TrainOption& o : train_options())
    if (o.key == key) return &o;
  return nullptr;
}

const std::vector<SearchPlan>& search_plans() {
  static const std::vector<SearchPlan> plans = {
      {"ldm", {{"cost", "normalize"}, {"lambda1-rel"}, {"lambda2-rel"}, {"bias"}}},
      {"svm", {{"cost", "normalize"}, {"bias"}}},
      {"cpm", {{"cost", "normalize"}, {"faces"}, {"entropy"}}},
      {"kldm", {{"rbf-width"}, {"kernel"}, {"normalize"}, {"cost"}}},
      {"tldm", {{"rbf-width"}, {"kernel"}, {"normalize"}, {"cost"}}},
  };
  return plans;
}

const SearchPlan* search_plan(const std::string& algo) {
  for (const SearchPlan& p : search_plans())
    if (p.algo == algo) return &p;
  return nullptr;
}

}  // namespace polymargin::driver
