// The driver's epoch loop with a learner that records what it is given: the windows of every pass
// are the reader's, a resumed run (by windows or by rows) sees exactly the rest, done() cuts a
// pass, checkpoints come when due and at the end of every pass, and a stop request saves first.
#include "driver/epoch_loop.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "../io/shard_test_util.h"
#include "engine/errors.h"

namespace polymargin::driver {
namespace {

using io::testing::Row;

struct Stopped {
  int reason;
  Position at;
};

// Records every call; done() after `done_after` windows (0: never); stop() throws Stopped.
class Recorder final : public Learner {
 public:
  std::vector<std::vector<Row>> windows;
  std::vector<Position> window_positions;
  std::vector<std::pair<Position, bool>> checkpoints;
  std::vector<Position> pass_ends;
  std::size_t done_after = 0;

  void learn(const CsrView& window, const io::SpareWork&, const Position& at) override {
    windows.push_back(io::testing::rows_of(window));
    window_positions.push_back(at);
  }
  bool done() const override { return done_after > 0 && windows.size() >= done_after; }
  void checkpoint(const Position& at, bool pass_end) override {
    checkpoints.emplace_back(at, pass_end);
  }
  [[noreturn]] void stop(int reason, const Position& at) override { throw Stopped{reason, at}; }
  void pass_end(const Position& at, double) override { pass_ends.push_back(at); }
};

class EpochLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = io::testing::fresh_dir("epoch_loop");
    const CsrBuffer rows =
        io::testing::random_rows(7, kRows, 6, 50, io::testing::Values::kSomeRows);
    io::testing::write_shards(rows, (dir_ / "d.shards").string(), io::Codec::kRaw, 10, 2);
    shards_.emplace(io::ShardSet::open((dir_ / "d.shards").string()));
    options_.read.seed = 3;
    options_.read.window_blocks = 2;
    options_.read.threads = 2;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The reader's windows of `passes` epochs, read directly.
  std::vector<std::vector<Row>> reader_windows(std::uint64_t passes) const {
    std::vector<std::vector<Row>> out;
    io::ReadOptions read = options_.read;
    for (std::uint64_t e = 0; e < passes; ++e) {
      read.epoch = e;
      shards_->scan(read, [&](const CsrView& w) { out.push_back(io::testing::rows_of(w)); });
    }
    return out;
  }

  static constexpr std::size_t kRows = 95;  // 10 blocks of up to 10 rows: 5 windows a pass
  std::filesystem::path dir_;
  std::optional<io::ShardSet> shards_;
  LoopOptions options_;
};

TEST_F(EpochLoop, PassesDeliverTheReaderWindowsInOrder) {
  Recorder learner;
  options_.passes = 3;
  const LoopResult result = run_passes(*shards_, learner, options_, {}, "resume");
  EXPECT_EQ(learner.windows, reader_windows(3));
  ASSERT_EQ(learner.pass_ends.size(), 3u);
  for (std::uint64_t p = 0; p < 3; ++p) {
    EXPECT_EQ(learner.pass_ends[p].pass, p);
    EXPECT_EQ(learner.pass_ends[p].windows, 5u);
    EXPECT_EQ(learner.pass_ends[p].pass_rows, kRows);
    EXPECT_EQ(learner.pass_ends[p].rows, (p + 1) * kRows);
  }
  EXPECT_EQ(result.end.pass, 3u);
  EXPECT_EQ(result.end.rows, 3 * kRows);
  EXPECT_TRUE(learner.checkpoints.empty());  // no checkpoints asked for
}

TEST_F(EpochLoop, AResumedRunSeesTheRestWhetherItKnowsWindowsOrRows) {
  Recorder whole;
  options_.passes = 2;
  run_passes(*shards_, whole, options_, {}, "resume");
  const Position at = whole.window_positions[7];  // pass 1, after 2 of its windows
  ASSERT_EQ(at.pass, 1u);
  ASSERT_EQ(at.windows, 2u);
  const std::vector<std::vector<Row>> rest(whole.windows.begin() + 7, whole.windows.end());

  Recorder by_windows;
  run_passes(*shards_, by_windows, options_, at, "resume");
  EXPECT_EQ(by_windows.windows, rest);
  EXPECT_EQ(by_windows.window_positions.front().rows, at.rows);

  Recorder by_rows;  // a checkpoint that recorded the rows of its pass only
  run_passes(*shards_, by_rows, options_, {at.pass, 0, at.pass_rows, at.rows}, "resume");
  EXPECT_EQ(by_rows.windows, rest);
  EXPECT_EQ(by_rows.window_positions.front().windows, 2u);

  Recorder off;  // rows that end inside a window
  EXPECT_THROW(run_passes(*shards_, off, options_, {1, 0, at.pass_rows + 1, 0}, "resume"),
               DataError);
  Recorder ended;  // the whole pass learnt: the next one starts
  run_passes(*shards_, ended, options_, {0, 0, kRows, kRows}, "resume");
  EXPECT_EQ(ended.windows,
            std::vector<std::vector<Row>>(whole.windows.begin() + 5, whole.windows.end()));
}

TEST_F(EpochLoop, DoneCutsThePassAndEndsTheRun) {
  Recorder learner;
  learner.done_after = 7;
  options_.checkpoints = true;  // per pass: the cut pass writes none
  const LoopResult result = run_passes(*shards_, learner, options_, {}, "resume");
  EXPECT_EQ(learner.windows.size(), 7u);
  ASSERT_EQ(learner.pass_ends.size(), 2u);
  EXPECT_EQ(result.end.pass, 1u);
  EXPECT_EQ(result.end.windows, 2u);
  ASSERT_EQ(learner.checkpoints.size(), 1u);
  EXPECT_TRUE(learner.checkpoints[0].second);
  EXPECT_EQ(learner.checkpoints[0].first.pass, 0u);
  EXPECT_EQ(result.checkpoints_written, 1);
}

TEST_F(EpochLoop, CheckpointsComeByRowsOrAtEveryPassEnd) {
  Recorder per_pass;
  options_.passes = 2;
  options_.checkpoints = true;
  run_passes(*shards_, per_pass, options_, {}, "resume");
  ASSERT_EQ(per_pass.checkpoints.size(), 2u);
  for (const auto& [at, pass_end] : per_pass.checkpoints) {
    EXPECT_TRUE(pass_end);
    EXPECT_EQ(at.pass_rows, kRows);
  }
  Recorder by_rows;
  options_.every.rows = 50;
  run_passes(*shards_, by_rows, options_, {}, "resume");
  ASSERT_FALSE(by_rows.checkpoints.empty());
  std::uint64_t last = 0;
  for (const auto& [at, pass_end] : by_rows.checkpoints) {
    EXPECT_FALSE(pass_end);
    EXPECT_GE(at.rows - last, 50u);  // after the window that reaches 50 rows since the last
    last = at.rows;
  }
}

// Of many passes (a small set under a step floor) the pass ends at each further 5 % of the
// expected passes are saved, and the last: 20 checkpoints, not 100; up to 20 passes, every one.
TEST_F(EpochLoop, ManyPassesSaveAtEachTwentiethOfThem) {
  options_.checkpoints = true;
  Recorder many;
  options_.passes = 100;
  run_passes(*shards_, many, options_, {}, "resume");
  ASSERT_EQ(many.checkpoints.size(), 20u);
  for (std::size_t i = 0; i < many.checkpoints.size(); ++i) {
    EXPECT_TRUE(many.checkpoints[i].second);
    EXPECT_EQ(many.checkpoints[i].first.pass, 5 * i + 4);
  }
  Recorder hinted;  // passes unbounded (the CPM's), the expected count given
  options_.passes = 41;
  options_.expected_passes = 40;
  run_passes(*shards_, hinted, options_, {}, "resume");
  ASSERT_EQ(hinted.checkpoints.size(), 21u);  // 20 by the hint, then the pass past it
  EXPECT_EQ(hinted.checkpoints[19].first.pass, 39u);
  EXPECT_EQ(hinted.checkpoints[20].first.pass, 40u);
  Recorder few;
  options_.passes = 20;
  options_.expected_passes = 0;
  run_passes(*shards_, few, options_, {}, "resume");
  EXPECT_EQ(few.checkpoints.size(), 20u);
}

TEST_F(EpochLoop, AStopRequestSavesThenStopsBetweenWindows) {
  Recorder learner;
  options_.passes = 2;
  options_.checkpoints = true;
  options_.every.rows = 1000;  // not due on its own
  options_.stop_requested = [](std::uint64_t rows) { return rows >= 120 ? 15 : 0; };
  try {
    run_passes(*shards_, learner, options_, {}, "resume");
    FAIL() << "the run did not stop";
  } catch (const Stopped& s) {
    EXPECT_EQ(s.reason, 15);
    EXPECT_EQ(s.at.pass, 1u);
    EXPECT_GE(s.at.rows, 120u);
    ASSERT_EQ(learner.checkpoints.size(), 1u);
    EXPECT_EQ(learner.checkpoints[0].first.rows, s.at.rows);
    EXPECT_FALSE(learner.checkpoints[0].second);
  }
  Recorder at_start;  // a request already there stops before the first window
  options_.stop_requested = [](std::uint64_t) { return 2; };
  EXPECT_THROW(run_passes(*shards_, at_start, options_, {}, "resume"), Stopped);
  EXPECT_TRUE(at_start.windows.empty());
}

}  // namespace
}  // namespace polymargin::driver
