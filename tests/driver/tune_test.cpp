// The --tune search of the training library, driver::tune, run whole in this process (no argv, no
// child process): two searches at once in two threads choose and write what one search alone
// does; a search stopped by its caller keeps its finished cells beside its checkpoint, and the run
// resumed from them chooses and writes what an uninterrupted one does; rows held in memory search
// as their directory does.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

#include "../io/shard_test_util.h"
#include "driver/failure.h"
#include "driver/tune.h"
#include "engine/errors.h"
#include "io/shards.h"

namespace polymargin::driver {
namespace {

namespace fs = std::filesystem;
using io::testing::slurp;

// Notes kept; SIGTERM once `stop_after` polls have been made (0: never). Polled by the search's
// cells from several threads at once.
class Caller final : public Events {
 public:
  explicit Caller(int stop_after = 0) : stop_after_(stop_after) {}
  void note(const std::string& line) override { notes.push_back(line); }
  int stop_requested() override {
    return stop_after_ > 0 && ++polls_ >= stop_after_ ? SIGTERM : 0;
  }
  std::vector<std::string> notes;  // from the caller's thread only (cells say nothing)

 private:
  int stop_after_;
  std::atomic<int> polls_{0};
};

class Tune : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    dir_ = io::testing::fresh_dir("driver_tune");
    // Rows labelled by a planted hyperplane with noise, ±1: settings score differently.
    rows_ = io::testing::random_rows(5, 400, 10, 60, io::testing::Values::kRandom);
    for (std::size_t r = 0; r < rows_.labels.size(); ++r) {
      double score = 0.2 + (r % 7 == 0 ? 0.8 : 0.0);
      for (std::uint32_t k = rows_.offsets[r]; k < rows_.offsets[r + 1]; ++k)
        score += (rows_.indices[k] % 3 == 0 ? 1.0 : -0.7) * rows_.values[k];
      rows_.labels[r] = score > 0 ? 1.0f : -1.0f;
    }
    io::testing::write_shards(rows_, path("d.shards"), io::Codec::kRaw, 100, 1);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static TuneJob job(const std::string& model) {
    TuneJob t;
    t.train.algo = "svm";
    t.train.inputs = {path("d.shards")};
    t.train.output = path(model);
    t.train.threads = 2;
    t.train.linear.epochs = 3;
    t.given = {{"epochs", "3"}};
    t.folds = 3;
    t.repeats = 1;
    return t;
  }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }

  static fs::path dir_;
  static CsrBuffer rows_;
};
fs::path Tune::dir_;
CsrBuffer Tune::rows_;

TEST_F(Tune, TwoSearchesAtOnceChooseAndWriteWhatOneAloneDoes) {
  Caller alone;
  nlohmann::ordered_json record;
  const TuneResult once = tune(job("once.model"), alone, record);
  ASSERT_TRUE(once.final.leader);
  EXPECT_FALSE(once.chosen.empty());
  EXPECT_EQ(once.search["folds"], 3);
  EXPECT_EQ(once.search["settings"].size(), 11u);  // svm: cost × normalize, then bias = 0
  EXPECT_EQ(once.final.summary["tune"], once.search);
  EXPECT_EQ(record["tune"], once.search);
  bool announced = false;
  for (const std::string& n : alone.notes) announced |= n.starts_with("tune svm: 3-fold");
  EXPECT_TRUE(announced);

  TuneResult first, second;
  std::thread a([&] {
    Caller events;
    nlohmann::ordered_json r;
    first = tune(job("first.model"), events, r);
  });
  std::thread b([&] {
    Caller events;
    nlohmann::ordered_json r;
    second = tune(job("second.model"), events, r);
  });
  a.join();
  b.join();
  for (const TuneResult* r : {&first, &second}) {
    EXPECT_EQ(r->chosen, once.chosen);
    EXPECT_EQ(r->search, once.search);
  }
  EXPECT_EQ(slurp(path("first.model")), slurp(path("once.model")));
  EXPECT_EQ(slurp(path("second.model")), slurp(path("once.model")));
}

TEST_F(Tune, AStoppedSearchKeepsItsCellsAndTheResumedOneChoosesAlike) {
  Caller quiet;
  nlohmann::ordered_json record;
  const TuneResult whole = tune(job("whole.model"), quiet, record);

  TuneJob stopped = job("stopped.model");
  stopped.train.job.checkpoint = path("stopped.ck");
  Caller stopping(40);  // some cells run, then the stop request
  try {
    tune(stopped, stopping, record);
    FAIL() << "not stopped";
  } catch (const SearchInterrupted& stop) {
    EXPECT_EQ(stop.signal, SIGTERM);
    EXPECT_EQ(stop.checkpoint, path("stopped.ck"));
    EXPECT_NE(stop.message.find("its cells are kept in"), std::string::npos) << stop.message;
  }
  EXPECT_FALSE(fs::exists(path("stopped.model")));
  ASSERT_TRUE(fs::is_directory(path("stopped.ck.tune")));
  EXPECT_FALSE(fs::is_empty(path("stopped.ck.tune")));

  stopped.train.job.resume = path("stopped.ck");  // no checkpoint yet: the search's cells
  const TuneResult resumed = tune(stopped, quiet, record);
  EXPECT_EQ(resumed.chosen, whole.chosen);
  EXPECT_EQ(resumed.search, whole.search);
  EXPECT_EQ(slurp(path("stopped.model")), slurp(path("whole.model")));
  EXPECT_FALSE(fs::exists(path("stopped.ck.tune")));  // removed once the run ended well
}

TEST_F(Tune, RowsInMemorySearchAsTheirDirectoryDoes) {
  Caller quiet;
  nlohmann::ordered_json record;
  TuneJob files = job("files.model");
  files.train.job.data_name = "rows";
  const TuneResult on_files = tune(files, quiet, record);
  TuneJob held = files;
  held.train.inputs = {};
  held.train.shards = std::make_shared<const io::ShardSet>(
      io::testing::shards_in_memory(rows_, io::Codec::kRaw, 100, 1));
  held.train.output = path("held.model");
  const TuneResult in_memory = tune(held, quiet, record);
  EXPECT_EQ(in_memory.chosen, on_files.chosen);
  EXPECT_EQ(in_memory.search, on_files.search);
  EXPECT_EQ(slurp(path("held.model")), slurp(path("files.model")));
}

TEST_F(Tune, RefusalsComeBeforeAnySearch) {
  Caller quiet;
  nlohmann::ordered_json record;
  TuneJob cmm = job("x.model");
  cmm.train.algo = "cmm";
  EXPECT_THROW(tune(cmm, quiet, record), UsageError);
  TuneJob budget = job("x.model");
  budget.budget = "5x";
  EXPECT_THROW(tune(budget, quiet, record), UsageError);
  TuneJob failing = job("x.model");
  failing.train.linear.epochs = 0;  // every cell refuses it
  try {
    tune(failing, quiet, record);
    FAIL() << "no cell failed";
  } catch (const CellFailed& e) {
    EXPECT_EQ(e.code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find("train: --tune: the cell"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(path("x.model")));
}

}  // namespace
}  // namespace polymargin::driver
