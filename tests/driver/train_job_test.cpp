// The training library's entry point, driver::train, run whole in this process (no child process,
// no argv), for each learner: a job writes its model and summary and tells its events what it
// does; a stop request of the caller's events or the row budget ends it with a checkpoint from
// which a resumed job (ldm, svm, cpm) writes the uninterrupted job's model byte for byte (one
// worker and two), and a kernel solver with nothing written; refusals come before any work; and
// two jobs run at once in two threads give the models of two jobs run one after the other; rows
// held in memory train the model of the directory the same writer makes of them.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "../io/shard_test_util.h"
#include "driver/train.h"
#include "engine/errors.h"
#include "io/file_lock.h"
#include "io/model_file.h"

namespace polymargin::driver {
namespace {

namespace fs = std::filesystem;
using io::testing::slurp;

// Notes kept; a stop request once `stop_after` polls have been made (0: never).
class Recorder final : public Events {
 public:
  std::vector<std::string> notes;
  std::uint64_t progress_calls = 0;
  int polls = 0;
  int stop_after = 0;

  void note(const std::string& line) override { notes.push_back(line); }
  void progress(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t) override {
    ++progress_calls;
  }
  int stop_requested() override { return stop_after > 0 && ++polls >= stop_after ? SIGTERM : 0; }
  bool noted(const std::string& start) const {
    for (const std::string& n : notes)
      if (n.rfind(start, 0) == 0) return true;
    return false;
  }
};

class Train : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    dir_ = io::testing::fresh_dir("driver_train");
    // Rows labelled by a planted hyperplane (so there is something to learn), ±1.
    CsrBuffer rows = io::testing::random_rows(11, 3000, 12, 400, io::testing::Values::kRandom);
    for (std::size_t r = 0; r < rows.labels.size(); ++r) {
      double score = 0.3;
      for (std::uint32_t k = rows.offsets[r]; k < rows.offsets[r + 1]; ++k)
        score += (rows.indices[k] % 3 == 0 ? 1.0 : -0.7) * rows.values[k];
      rows.labels[r] = score > 0 ? 1.0f : -1.0f;
    }
    io::testing::write_shards(rows, (dir_ / "d.shards").string(), io::Codec::kRaw, 100, 2);
    // The first 300 rows, for the kernel learners (m² memory, m³ time).
    CsrBuffer small;
    small.has_values = true;
    const CsrView all = rows.view();
    for (std::size_t r = 0; r < 300; ++r) small.append_row(all, r);
    io::testing::write_shards(small, (dir_ / "small.shards").string(), io::Codec::kRaw, 100, 1);
    rows_ = std::move(rows);
    small_ = std::move(small);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static TrainJob job(const std::string& model, const std::string& algo = "ldm") {
    TrainJob j;
    j.algo = algo;
    j.inputs = {(dir_ / "d.shards").string()};
    j.output = (dir_ / model).string();
    j.threads = 2;
    j.window_blocks = 2;
    j.linear.epochs = 4;
    j.cpm.epochs = 4;
    j.cpm.faces = 3;
    return j;
  }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }

  static fs::path dir_;
  static CsrBuffer rows_, small_;  // the rows of d.shards and small.shards
};
fs::path Train::dir_;
CsrBuffer Train::rows_, Train::small_;

TEST_F(Train, AJobWritesItsModelAndSaysWhatItDid) {
  Recorder events;
  nlohmann::ordered_json record;
  const TrainResult result = train(job("plain.model"), events, record);
  ASSERT_TRUE(result.leader);
  EXPECT_TRUE(fs::exists(path("plain.model")));
  EXPECT_EQ(result.summary["algorithm"], "ldm");
  EXPECT_EQ(result.summary["rows"], 3000);
  EXPECT_EQ(result.summary["epochs"], 4);
  EXPECT_GT(result.summary["train_accuracy"].get<double>(), 0.8);
  EXPECT_EQ(result.summary["objective_kind"], "exact");
  ASSERT_TRUE(result.model);
  EXPECT_EQ(result.model->algorithm, "ldm");
  // The model in hand is the one written.
  const engine::LinearModel written = io::load_model(path("plain.model"));
  const auto* held = dynamic_cast<const engine::LinearModel*>(result.model.get());
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(written.weights, held->weights);
  EXPECT_EQ(record["command"], "train");
  EXPECT_EQ(record["objective_kind"], "exact");
  EXPECT_TRUE(events.noted("train ldm: "));
  EXPECT_TRUE(events.noted("eta0 "));
  EXPECT_TRUE(events.noted("epoch 4/4: "));
  EXPECT_GT(events.progress_calls, 0u);
}

TEST_F(Train, ATunedModelFarBelowItsSearchEstimateIsFlagged) {
  // A search whose estimate the final model's training accuracy trails by more than 2 points.
  TrainJob far = job("tuned-far.model", "svm");
  far.linear.epochs = 1;
  far.tune = {{"validation_accuracy", 0.9999}, {"holdout", false}};
  Recorder events;
  nlohmann::ordered_json record;
  const TrainResult result = train(far, events, record);
  ASSERT_TRUE(result.summary.contains("tune_check"));
  EXPECT_EQ(result.summary["tune_check"]["estimate"], "cross-validation");
  EXPECT_TRUE(result.summary["tune_check"]["below"].get<bool>());
  EXPECT_EQ(record["tune_check"], result.summary["tune_check"]);
  EXPECT_TRUE(events.noted("warning: the final model's training accuracy "));
  // Within 2 points (or above): no warning; and an untuned job has no check.
  TrainJob near = job("tuned-near.model", "svm");
  near.tune = {{"validation_accuracy", result.summary["train_accuracy"].get<double>() + 0.01},
               {"holdout", true}};
  Recorder quiet;
  const TrainResult fine = train(near, quiet, record);
  EXPECT_EQ(fine.summary["tune_check"]["estimate"], "holdout");
  EXPECT_FALSE(fine.summary["tune_check"]["below"].get<bool>());
  EXPECT_FALSE(quiet.noted("warning: the final model"));
  Events silent;
  EXPECT_FALSE(train(job("untuned.model", "svm"), silent, record).summary.contains("tune_check"));
}

TEST_F(Train, TheSvmIsTheLdmWithoutItsMarginTerms) {
  Events quiet;
  nlohmann::ordered_json record;
  const TrainResult result = train(job("svm.model", "svm"), quiet, record);
  EXPECT_EQ(result.summary["lambda1"], 0.0);
  EXPECT_EQ(result.summary["lambda2"], 0.0);
  EXPECT_EQ(result.model->algorithm, "svm");
  // The SVM takes no λ: refused before any work (no model written).
  TrainJob bad = job("refused.model", "svm");
  bad.linear.lambda1 = 1;
  EXPECT_THROW(train(bad, quiet, record), UsageError);
  EXPECT_FALSE(fs::exists(path("refused.model")));
}

TEST_F(Train, RefusalsComeBeforeAnyWork) {
  Events quiet;
  nlohmann::ordered_json record;
  TrainJob no_data = job("x.model");
  no_data.inputs.clear();
  EXPECT_THROW(train(no_data, quiet, record), UsageError);
  TrainJob bad_scale = job("x.model");
  bad_scale.linear.scale = "minmax";
  EXPECT_THROW(train(bad_scale, quiet, record), UsageError);
  TrainJob bad_eta = job("x.model");
  bad_eta.linear.eta0 = "-1";
  EXPECT_THROW(train(bad_eta, quiet, record), UsageError);
  TrainJob other = job("x.model", "lda");
  EXPECT_THROW(train(other, quiet, record), UsageError);
  TrainJob missing = job("x.model");
  missing.inputs = {path("no-such.shards")};
  EXPECT_THROW(train(missing, quiet, record), Error);
  EXPECT_FALSE(fs::exists(path("x.model")));
}

// Stopped by the caller's events (a SIGTERM after some windows) or by the row budget, with a
// checkpoint, then resumed: the model of the uninterrupted job, byte for byte.
void expect_resume_gives_uninterrupted_model(const std::string& algo, int workers,
                                             const std::string& name) {
  Events quiet;
  nlohmann::ordered_json record;
  TrainJob whole = Train::job(name + "-whole.model", algo);
  whole.parallel.workers = workers;
  train(whole, quiet, record);

  for (const bool by_signal : {true, false}) {
    const std::string tag = name + (by_signal ? "-signal" : "-rows");
    TrainJob part = Train::job(tag + ".model", algo);
    part.parallel.workers = workers;
    part.job.checkpoint = Train::path(tag + ".ck");
    Recorder stopping;
    if (by_signal)  // polled before the first window and after each; replicated, at averagings
      stopping.stop_after = workers > 1 ? 3 : 9;
    else
      part.job.stop_after_rows = 5000;
    nlohmann::ordered_json stopped_record;
    try {
      train(part, stopping, stopped_record);
      FAIL() << tag << ": the job was not stopped";
    } catch (const Interrupted& stop) {
      EXPECT_EQ(stop.signal, by_signal ? SIGTERM : kStopAfterRows) << tag;
      EXPECT_EQ(stop.checkpoint, part.job.checkpoint) << tag;
    }
    EXPECT_TRUE(stopped_record.contains("interrupted")) << tag;
    EXPECT_FALSE(fs::exists(part.output)) << tag;
    ASSERT_TRUE(fs::exists(part.job.checkpoint)) << tag;

    TrainJob rest = part;
    rest.job.stop_after_rows = 0;
    rest.job.resume = part.job.checkpoint;
    nlohmann::ordered_json resumed_record;
    train(rest, quiet, resumed_record);
    EXPECT_TRUE(resumed_record.contains("resumed_from")) << tag;
    EXPECT_FALSE(fs::exists(part.job.checkpoint)) << tag << ": removed once the model is written";
    EXPECT_EQ(slurp(Train::path(tag + ".model")), slurp(whole.output)) << tag;
  }
}

TEST_F(Train, AResumedJobWritesTheUninterruptedModel) {
  expect_resume_gives_uninterrupted_model("ldm", 1, "one");
}

TEST_F(Train, AResumedJobOfTwoWorkersWritesTheUninterruptedModel) {
  expect_resume_gives_uninterrupted_model("ldm", 2, "two");
}

TEST_F(Train, AResumedCpmJobWritesTheUninterruptedModel) {
  expect_resume_gives_uninterrupted_model("cpm", 1, "cpm-one");
}

TEST_F(Train, AResumedCpmJobOfTwoWorkersWritesTheUninterruptedModel) {
  expect_resume_gives_uninterrupted_model("cpm", 2, "cpm-two");
}

TEST_F(Train, ACpmJobWritesItsModelAndSummary) {
  Recorder events;
  nlohmann::ordered_json record;
  const TrainResult result = train(job("cpm.model", "cpm"), events, record);
  EXPECT_FALSE(result.model) << "the CPM writes its model a side at a time and holds none";
  EXPECT_EQ(result.summary["algorithm"], "cpm");
  EXPECT_EQ(result.summary["faces"], 3);
  EXPECT_EQ(result.summary["side_details"].size(), 2u);
  const std::unique_ptr<engine::Classifier> written = io::load_classifier(path("cpm.model"));
  EXPECT_EQ(written->algorithm, "cpm");
  EXPECT_EQ(record["algorithm"], "cpm");
  EXPECT_TRUE(events.noted("train cpm: "));
  EXPECT_TRUE(events.noted("pass 1: "));
  // Its own refusals, before any work.
  TrainJob warm = job("cpm-refused.model", "cpm");
  warm.cpm.warm_start = path("cpm.model");
  EXPECT_THROW(train(warm, events, record), UsageError);
  TrainJob both = job("cpm-refused.model", "cpm");
  both.cpm.iterations = 100;
  EXPECT_THROW(train(both, events, record), UsageError);
  EXPECT_FALSE(fs::exists(path("cpm-refused.model")));
}

// The kernel learners hold the rows in memory (a few hundred here) and write the model they hold.
TEST_F(Train, KernelJobsWriteTheModelTheyHold) {
  for (const std::string algo : {"kldm", "tldm", "cmm"}) {
    TrainJob j = job(algo + ".model", algo);
    j.inputs = {path("small.shards")};
    Recorder events;
    nlohmann::ordered_json record;
    const TrainResult result = train(j, events, record);
    ASSERT_TRUE(result.model) << algo;
    EXPECT_EQ(result.model->algorithm, algo);
    EXPECT_EQ(io::load_classifier(j.output)->algorithm, algo);
    EXPECT_EQ(result.summary["rows"], 300) << algo;
    EXPECT_GT(result.summary["train_accuracy"].get<double>(), 0.7) << algo;
    EXPECT_EQ(record["algorithm"], algo);
    EXPECT_TRUE(record.contains("model_checksum")) << algo;
    EXPECT_TRUE(events.noted("kernel ")) << algo;
  }
  // A kernel option the kernel does not use is noted as ignored; a refusal comes before any work.
  TrainJob linear = job("kldm-linear.model", "kldm");
  linear.inputs = {path("small.shards")};
  linear.kldm.kernel.kernel = "linear";
  linear.kldm.kernel.gamma = 2;
  Recorder events;
  nlohmann::ordered_json record;
  train(linear, events, record);
  EXPECT_TRUE(events.noted("warning: --gamma has no effect with --kernel linear"));
  TrainJob poly = job("tldm-poly.model", "tldm");
  poly.inputs = {path("small.shards")};
  poly.tldm.kernel.kernel = "poly";
  EXPECT_THROW(train(poly, events, record), UsageError);
  EXPECT_FALSE(fs::exists(path("tldm-poly.model")));
}

TEST_F(Train, AStopRequestEndsAKernelSolverWithNothingWritten) {
  TrainJob j = job("stopped.model", "kldm");
  j.inputs = {path("small.shards")};
  Recorder stopping;
  stopping.stop_after = 1;  // at the solver's first sweep
  nlohmann::ordered_json record;
  try {
    train(j, stopping, record);
    FAIL() << "not stopped";
  } catch (const Interrupted& stop) {
    EXPECT_EQ(stop.signal, SIGTERM);
    EXPECT_EQ(stop.checkpoint, "");
  }
  EXPECT_FALSE(fs::exists(path("stopped.model")));
}

// Rows held in memory (as Python's fit hands a matrix over, its model written without fsync): the
// model of the same job on the directory the same writer options make of them, byte for byte, for
// every kind of learner.
TEST_F(Train, RowsInMemoryTrainTheModelOfTheirDirectory) {
  const auto in_memory = [](const CsrBuffer& rows, std::uint32_t shards) {
    return std::make_shared<const io::ShardSet>(
        io::testing::shards_in_memory(rows, io::Codec::kRaw, 100, shards));
  };
  const std::shared_ptr<const io::ShardSet> all = in_memory(rows_, 2), small = in_memory(small_, 1);
  for (const std::string algo : {"ldm", "svm", "cpm", "kldm", "cmm"}) {
    const bool kernel = algo == "kldm" || algo == "cmm";
    TrainJob from_dir = job(algo + "-dir.model", algo);
    if (kernel) from_dir.inputs = {path("small.shards")};
    from_dir.parallel.workers = algo == "svm" ? 2 : 1;
    from_dir.job.data_name = "rows";
    TrainJob from_memory = from_dir;
    from_memory.inputs.clear();
    from_memory.shards = kernel ? small : all;
    from_memory.output = path(algo + "-memory.model");
    from_memory.durable_output = false;  // as Python's fit writes it: not fsync'ed, the same bytes
    Events quiet;
    nlohmann::ordered_json dir_record, memory_record;
    train(from_dir, quiet, dir_record);
    const TrainResult result = train(from_memory, quiet, memory_record);
    EXPECT_EQ(slurp(from_memory.output), slurp(from_dir.output)) << algo;
    EXPECT_EQ(memory_record["data_checksum"], dir_record["data_checksum"]) << algo;
    EXPECT_EQ(result.summary["rows"], kernel ? 300 : 3000) << algo;
  }
  // Without a name, the model says "<memory>"; rows in memory and files at once are refused.
  TrainJob unnamed = job("unnamed.model");
  unnamed.inputs.clear();
  unnamed.shards = all;
  Events quiet;
  nlohmann::ordered_json record;
  train(unnamed, quiet, record);
  EXPECT_EQ(io::load_model(unnamed.output).config["data"], nlohmann::json::array({"<memory>"}));
  EXPECT_EQ(record["data"], nlohmann::json::array({"<memory>"}));
  TrainJob both = job("both.model");
  both.shards = all;
  EXPECT_THROW(train(both, quiet, record), UsageError);
  EXPECT_FALSE(fs::exists(path("both.model")));
}

TEST_F(Train, ASecondJobOnTheSameModelIsRefusedWhileTheFirstHoldsIt) {
  // The first job's locks are held from its check to its end: a job started from its events
  // (while the first learns) on the same model file is refused, and the first still succeeds.
  class StartsAnother final : public Events {
   public:
    std::atomic<bool> tried{false};
    bool refused = false;
    int stop_requested() override {
      if (!tried.exchange(true)) {
        Events quiet;
        nlohmann::ordered_json record;
        try {
          train(Train::job("locked.model"), quiet, record);
        } catch (const io::LockedError&) {
          refused = true;
        }
      }
      return 0;
    }
  } events;
  nlohmann::ordered_json record;
  train(job("locked.model"), events, record);
  EXPECT_TRUE(events.refused);
  EXPECT_TRUE(fs::exists(path("locked.model")));
}

TEST_F(Train, TwoJobsAtOnceGiveTheModelsOfTwoJobsInTurn) {
  Events quiet;
  nlohmann::ordered_json record;
  TrainJob a = job("turn-a.model"), b = job("turn-b.model", "svm");
  b.linear.c = 0.5;
  b.parallel.workers = 2;
  train(a, quiet, record);
  train(b, quiet, record);

  TrainJob a2 = a, b2 = b;
  a2.output = path("at-once-a.model");
  b2.output = path("at-once-b.model");
  std::exception_ptr failed_a, failed_b;
  const auto in_thread = [](const TrainJob& j, std::exception_ptr& failed) {
    return std::thread([&j, &failed] {
      try {
        Events events;
        nlohmann::ordered_json r;
        train(j, events, r);
      } catch (...) {
        failed = std::current_exception();
      }
    });
  };
  std::thread ta = in_thread(a2, failed_a), tb = in_thread(b2, failed_b);
  ta.join();
  tb.join();
  ASSERT_FALSE(failed_a);
  ASSERT_FALSE(failed_b);
  EXPECT_EQ(slurp(a2.output), slurp(a.output));
  EXPECT_EQ(slurp(b2.output), slurp(b.output));
}

}  // namespace
}  // namespace polymargin::driver
