// The training library's entry point: a job described by plain values, trained by
// train(job, events, record). It opens the data, plans the memory, resumes, runs the passes
// (driver::run_passes), finishes the model, makes the final pass, writes the model and validates
// it, as `polymargin train` does, and returns the model and the run's summary. No argv, no
// printing, no process-wide state: what the run says and the stop requests it takes go through
// `events` (driver/job.h), so two jobs can run in one process.
//
// Every learner trains through it: the streamed ones (ldm, svm, cpm) and the kernel learners
// (kldm, tldm, cmm) (docs/design.md, "The training library").
//
//   driver::TrainJob job;
//   job.algo = "svm";
//   job.inputs = {"a9a.shards"};
//   job.output = "a9a.model";
//   job.linear.c = 1;
//   driver::Events quiet;                    // says nothing, never stops
//   nlohmann::ordered_json record;           // what the run did, also when it fails
//   driver::TrainResult result = driver::train(job, quiet, record);
//   double accuracy = result.summary["train_accuracy"];
//
// Rows in memory instead of files (what Python's fit does with a matrix):
//
//   io::ShardWriter writer(io::ConvertOptions{.codec = io::Codec::kRaw}, 0, "X");
//   writer.append(rows);                     // CsrViews, as many as it takes
//   job.inputs = {};
//   job.shards = std::make_shared<const io::ShardSet>(writer.finish_in_memory(1));
//   job.job.data_name = "X";
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "driver/job.h"
#include "engine/classifier.h"
#include "engine/cpm.h"
#include "engine/ldm.h"
#include "engine/linear_model.h"
#include "io/output_path.h"

namespace polymargin::driver {

/// The linear learners' parameters (ldm; svm is the LDM with λ1 = λ2 = 0 and takes no λ).
struct LinearParams {
  double c = engine::kDefaultC;            // C, the weight of the hinge loss
  std::optional<int> epochs;               // passes (T); unset: engine::ldm_default_epochs(rows)
  std::optional<int> avg_start_epochs;     // averaging starts after this many; unset: 2, or
                                           // epochs − 1 for a shorter run
  std::string eta0 = "auto";               // the initial step: a positive number, or auto
  double bias = 1;                         // B of a constant (regularised) feature; 0: no bias
  std::uint64_t seed = 1;                  // of shuffling, pairing, calibration
  std::string scale = "maxabs";            // maxabs | none
  std::string normalize = "none";          // l2 | none
  std::string pairing;                     // ldm: next | permuted; empty: next
  std::optional<double> lambda1, lambda2;  // ldm: λ in the paper's units
  std::optional<double> lambda1_rel, lambda2_rel;  // ldm: λ/(m·C) instead
  std::string feature_order = "given";             // given | frequency (io/feature_order.h)
  std::string warm_start;  // a model of the same learner and labels to start from
  bool final_pass = true;  // the exact pass over the training rows at the end
  double tol = 1e-3;       // converged: the objective changes by less than this share a pass
  // --epochs auto (driver/early_stopping.h): passes until the held-out rows stop improving (or,
  // without early stopping, the training objective converges), at most max_epochs.
  bool epochs_auto = false;
  std::optional<double> validation_fraction;  // unset: kDefaultValidationFraction
  std::optional<int> n_iter_no_change;        // unset: kDefaultNoChangePasses
  std::optional<int> max_epochs;              // unset: kDefaultMaxEpochs
  bool early_stopping = true;                 // false: --no-early-stopping
};

/// The CPM's passes by default (T = this × a side's rows), with at least
/// engine::kCpmDefaultMinSteps steps a side.
inline constexpr double kCpmDefaultEpochs = 10;

/// The Convex Polytope Machine's parameters (engine/cpm.h).
struct CpmParams {
  int faces = 10;                          // K, faces (sub-classifiers) per side
  std::optional<std::int64_t> iterations;  // T, SGD steps per side (excludes epochs)
  std::optional<double> epochs;            // T = this × the side's rows; unset: kCpmDefaultEpochs
                                           // and the step floor
  std::string cost = "auto";               // C (λ = 1/(C T)), or auto: 3/√m within [0.01, 1]
  double entropy = 1;                      // ASSIGN's entropy floor as a perplexity in [1, K]
  double cost_ratio = 1;                   // r: an inner row costs r/(1+r), an outer one 1/(1+r)
  std::string sides = "double";            // double | outer=+1 | outer=-1
  std::optional<std::string> classes;      // comma-separated labels the data must have
  std::string scale = "maxabs";            // maxabs | none
  std::string normalize = "none";          // l2 | none
  int hash_bits = 0;                       // B: 2^B hashed slots a face; 0: none
  std::string precision = "auto";          // auto | double | float
  std::uint64_t seed = 1;                  // of shuffling and tie-breaking
  double tol = 1e-3;  // converged: the progressive objective changes by less than this share a pass
  std::string warm_start;                  // refused: the CPM's state is more than its weights
};

/// What every kernel learner (kldm, tldm, cmm: regular-scale data held in memory) takes besides its
/// own parameters. Unset values take the learner's defaults.
struct KernelOptions {
  std::string kernel = "rbf";       // linear | rbf | poly (tldm: linear | rbf)
  std::optional<double> rbf_width;  // RBF σ as a multiple of δ, the mean distance between
                                    // training rows; unset: 1 (tldm: 4)
  std::optional<double> gamma;      // RBF: γ directly instead of the width; poly: γ (unset: 1)
  std::optional<int> degree;        // poly: unset 3
  std::optional<double> coef0;      // poly: c0, unset 0
  std::optional<double> bias;       // B of a constant feature; unset: 0 (cmm: 1; tldm: only 0)
  std::string scale = "maxabs";     // maxabs | none
  std::string normalize = "none";   // l2 | none
  std::string max_memory = "auto";  // the most the m² matrices may take (512M, 4G), or auto
  std::uint64_t seed = 1;           // of the coordinate order and δ's sample
};

/// The kernel LDM's parameters (engine/kldm.h).
struct KldmParams {
  KernelOptions kernel;
  double c = engine::kDefaultC;                    // C, the dual box [0, C]
  std::optional<double> lambda1, lambda2;          // λ in the paper's units
  std::optional<double> lambda1_rel, lambda2_rel;  // λ/(m·C) instead
  double tolerance = 0.01;                         // of the projected gradient's spread
  int max_sweeps = 1000;
  bool shrinking = true;
};

/// The Twin LDM's parameters (engine/tldm.h).
struct TldmParams {
  KernelOptions kernel;
  double c = 0.125;         // c1 = c2
  double lambda1 = 1;       // λ1 = λ3
  double lambda2 = 1;       // λ2 = λ4
  double epsilon = 1e-6;    // ε·I keeping P and S invertible
  double sor_omega = 1;     // SOR relaxation, in (0, 2)
  double tolerance = 1e-4;  // of the dual's projected gradients
  int max_sweeps = 5000;
};

/// The Compact Margin Machine's parameters (engine/cmm.h).
struct CmmParams {
  KernelOptions kernel;
  std::vector<std::string> unlabeled;  // files of unlabelled rows (rows labelled 0 are, too)
  double c1 = 10;                      // labelled hinge
  double c2 = 1;                       // unlabelled symmetric hinge (rmm: the compactness)
  std::optional<double> c3;            // compactness; unset: 1 (rmm: C2)
  double epsilon = 1;                  // half-width of the compact tube
  double delta = -0.3;                 // the ramp threshold, in (-1, 0]
  std::string variant = "cmm";         // cmm | rmm
  std::optional<double> balance_mean;  // r of the class balance; unset: the labelled mean label
  bool balance = true;                 // keep the class-balance constraint
  int max_rounds = 30;                 // CCCP rounds
  double tolerance = 1e-3;
  int max_sweeps = 5000;  // a round
};

/// A training job: what to learn from, what to write, how.
struct TrainJob {
  std::string algo = "ldm";         // ldm | svm | cpm | kldm | tldm | cmm
  std::vector<std::string> inputs;  // text files (plain, gz, bz2, zstd; "-" stdin) or shards
  /// Or training rows already open, instead of `inputs` (then empty): a shard set in memory
  /// (io::ShardWriter's: a Python matrix), shared with its other holders; its rows, their order
  /// and so the model are those of the directory the same writer options make. job.data_name
  /// names it in the model, the reports and messages ("<memory>" when empty).
  std::shared_ptr<const io::ShardSet> shards;
  std::string output;               // the model file
  int threads = 0;                  // reading and converting; 0: all cores
  std::uint32_t window_blocks = 8;  // rows are shuffled within windows of this many blocks
  JobOptions job;                   // checkpoint, resume, stop, validation, metrics, ...
                                    // (the kernel learners: validation, metrics, names)
  DataParallel parallel;            // its workers and sync_rows (ldm, svm, cpm)
  LinearParams linear;              // of ldm and svm
  CpmParams cpm;                    // of cpm
  KldmParams kldm;                  // of kldm
  TldmParams tldm;                  // of tldm
  CmmParams cmm;                    // of cmm
  /// Whether the model file is fsync'ed (with its directory) before the job returns, to outlive a
  /// crash. false for a model its caller reads back at once and removes (Python's fit writes it
  /// into a temporary directory): the same bytes, without waiting for the disk.
  bool durable_output = true;
  /// The search that chose these parameters (--tune), recorded in the model and the summary.
  nlohmann::json tune;
  /// Further files the caller read to make the job (a --config file): never written.
  std::vector<io::NamedPath> other_inputs;
};

/// What a job leaves besides its model file.
struct TrainResult {
  /// False on an MPI rank other than 0, which neither finishes nor writes the model: the rest is
  /// then empty.
  bool leader = true;
  /// The model written, where the job holds it whole (ldm, svm, the kernel learners); null for the
  /// CPM, which writes its model a side at a time (io::load_classifier reads it back).
  std::unique_ptr<engine::Classifier> model;
  /// The figures `polymargin train --json` prints (docs/output.md).
  nlohmann::ordered_json summary;
};

/// How far below the chosen setting's estimate (cross-validation or holdout accuracy) a --tune
/// search's final model may score on its own training rows before train() warns: a final run that
/// learnt less than its cells did (too few epochs for the whole set, another step) ends up there.
inline constexpr double kTunedModelGap = 0.02;

/// For a job that a --tune search made (`tune`, its record, has validation_accuracy) and a summary
/// with train_accuracy: {estimate (cross-validation | holdout), validation_accuracy,
/// train_accuracy, below (by more than kTunedModelGap)}; none otherwise. train() adds it to the
/// summary and the record as `tune_check`, and notes a warning when `below`.
std::optional<nlohmann::ordered_json> check_tuned_model(const nlohmann::json& tune,
                                                        const nlohmann::ordered_json& summary);

/// Runs `job`: checks it (UsageError), takes its locks, opens the data, plans its memory
/// (MemoryError), resumes, trains, writes the model and validates it. `record` (what
/// --metrics-json writes) is filled as the run goes, so a failed run's says how far it got. A stop
/// request or the row budget ends the run with Interrupted, after its checkpoint.
TrainResult train(const TrainJob& job, Events& events, nlohmann::ordered_json& record);

}  // namespace polymargin::driver
