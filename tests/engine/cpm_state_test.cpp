// CpmTrainer's saved state (side_state, side_weights, batches) restored into a fresh trainer: the
// run continues exactly as the uninterrupted one, for double and float accumulators, one and two
// sides, binary and one-vs-one; a state that does not fit the trainer is refused. Also the parts:
// FaceCounts from saved counts, AssignHistory export and restore.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpm.h"
#include "engine/cpm_assign.h"
#include "engine/random.h"

namespace polymargin::engine {
namespace {

// Rows of 8 of 300 features; labels from a planted rule (binary) or at random (classes > 2).
CsrBuffer rows(std::size_t n, std::uint64_t seed, int classes) {
  SplitMix64 rng(seed);
  CsrBuffer b;
  b.has_values = true;
  for (std::size_t r = 0; r < n; ++r) {
    std::set<std::uint32_t> ids;
    while (ids.size() < 8) ids.insert(1 + static_cast<std::uint32_t>(rng.below(300)));
    double s = 0;
    for (const std::uint32_t f : ids) {
      const float v = static_cast<float>(1 + rng.below(100)) / 50.0f;
      b.indices.push_back(f);
      b.values.push_back(v);
      s += f % 3 == 0 ? v : -0.5 * v;
    }
    b.offsets.push_back(static_cast<std::uint32_t>(b.indices.size()));
    b.labels.push_back(classes > 2 ? static_cast<float>(rng.below(std::uint64_t(classes)))
                                   : (s > 0.3 ? 1.0f : -1.0f));
  }
  return b;
}

CpmProblem problem_of(const CsrBuffer& b) {
  std::map<double, std::uint64_t> counts;
  for (std::size_t r = 0; r < b.rows(); ++r) ++counts[b.labels[r]];
  CpmProblem p;
  for (const auto& [l, n] : counts) p.label_counts.emplace_back(l, n);
  p.max_index = 300;
  return p;
}

// Batch i of the data (batches of 70 rows, cycling over it).
CsrView batch(const CsrBuffer& b, std::uint64_t i) {
  const std::size_t per_pass = (b.rows() + 69) / 70, first = (i % per_pass) * 70;
  CsrView v = b.view();
  v.rows = std::min<std::size_t>(70, b.rows() - first);
  v.labels += first;
  v.offsets += first;
  return v;
}

void expect_same(const CpmTrainer& a, const CpmTrainer& b) {
  ASSERT_EQ(a.sides(), b.sides());
  EXPECT_EQ(a.batches(), b.batches());
  for (std::size_t s = 0; s < a.sides(); ++s) {
    EXPECT_EQ(a.side_weights(s), b.side_weights(s)) << "side " << s;
    const CpmTrainer::SideState x = a.side_state(s), y = b.side_state(s);
    EXPECT_EQ(x.steps, y.steps);
    EXPECT_EQ(x.updates, y.updates);
    EXPECT_EQ(x.adjusted, y.adjusted);
    EXPECT_EQ(x.intercept_sums, y.intercept_sums);
    EXPECT_EQ(x.face_counts, y.face_counts);
    EXPECT_EQ(x.history_keys.size(), y.history_keys.size());
    EXPECT_EQ(a.status()[s].assignment_entropy, b.status()[s].assignment_entropy);
  }
}

struct Case {
  int classes;
  CpmSides sides;
  CpmPrecision precision;
};

class CpmState : public ::testing::TestWithParam<Case> {};

TEST_P(CpmState, RestoredTrainerContinuesAsTheUninterruptedOne) {
  const Case c = GetParam();
  const CsrBuffer data = rows(600, 3, c.classes);
  CpmConfig config;
  config.faces = 4;
  config.epochs = 4;
  config.perplexity = 3.5;  // ASSIGN adjusts: the history and counts matter
  config.c = 0.1;
  config.sides = c.sides;
  config.precision = c.precision;
  config.seed = 9;
  const CpmProblem problem = problem_of(data);
  for (const std::uint64_t at : {0u, 3u, 11u, 20u}) {  // saved after `at` batches, then restored
    CpmTrainer whole(config, problem), first(config, problem);
    for (std::uint64_t i = 0; i < at; ++i) first.learn(batch(data, i));
    std::vector<CpmTrainer::SideState> states;
    std::vector<std::string_view> weights;
    for (std::size_t s = 0; s < first.sides(); ++s) {
      states.push_back(first.side_state(s));
      weights.push_back(first.side_weights(s));
    }
    CpmTrainer resumed(config, problem);
    resumed.restore(first.batches(), states, weights);
    expect_same(first, resumed);
    for (std::uint64_t i = at; !resumed.done(); ++i) resumed.learn(batch(data, i));
    for (std::uint64_t i = 0; !whole.done(); ++i) whole.learn(batch(data, i));
    ASSERT_GT(whole.batches(), at) << "the stop must fall before the end";
    expect_same(whole, resumed);
    std::uint64_t adjusted = 0;  // ASSIGN's history and counts took part in the result
    for (const auto& st : whole.status()) adjusted += st.adjusted;
    EXPECT_GT(adjusted, 0u);
    const CpmModel a = whole.finish(nullptr), b = resumed.finish(nullptr);
    ASSERT_EQ(a.machines.size(), b.machines.size());
    for (std::size_t m = 0; m < a.machines.size(); ++m)
      for (std::size_t s = 0; s < a.machines[m].sides.size(); ++s) {
        EXPECT_EQ(a.machines[m].sides[s].weights, b.machines[m].sides[s].weights);
        EXPECT_EQ(a.machines[m].sides[s].intercepts, b.machines[m].sides[s].intercepts);
      }
  }
}

TEST(CpmState, StateThatDoesNotFitIsRefused) {
  const CsrBuffer data = rows(300, 4, 2);
  CpmConfig config;
  config.faces = 3;
  config.epochs = 2;
  config.perplexity = 2;
  CpmTrainer trainer(config, problem_of(data));
  for (std::uint64_t i = 0; i < 3; ++i) trainer.learn(batch(data, i));
  const CpmTrainer::SideState good = trainer.side_state(0);
  ASSERT_GT(good.history_keys.size(), 0u);
  const std::vector<std::string_view> weights{trainer.side_weights(0), trainer.side_weights(1)};
  const auto refused = [&](CpmTrainer::SideState bad, std::vector<std::string_view> w) {
    CpmTrainer fresh(config, problem_of(data));
    EXPECT_THROW(fresh.restore(3, {bad, trainer.side_state(1)}, w), std::invalid_argument);
  };
  refused(good, {weights[0]});  // one side's weights for two sides
  refused(good, {weights[0].substr(8), weights[1]});
  CpmTrainer::SideState bad = good;
  bad.face_counts[0] += 1;  // no longer the history's histogram
  refused(bad, weights);
  bad = good;
  bad.history_faces[0] = 3;  // K = 3: faces 0..2
  refused(bad, weights);
  bad = good;
  bad.history_capacity = 24;  // not a power of two
  refused(bad, weights);
  bad = good;
  bad.history_keys[1] = bad.history_keys[0];
  refused(bad, weights);
  bad = good;
  bad.steps = 1u << 30;  // beyond T
  refused(bad, weights);
  bad = good;
  bad.intercept_sums.pop_back();
  refused(bad, weights);
}

TEST(CpmState, FaceCountsFromSavedCountsEqualTheOnesThatReachedThem) {
  FaceCounts live(4);
  const int moves[][2] = {{-1, 0}, {-1, 1}, {-1, 1}, {0, 2}, {-1, 3}, {1, 3}, {-1, 0}};
  for (const auto& m : moves) live.move(m[0], m[1]);
  const FaceCounts saved(live.counts());
  EXPECT_EQ(saved.total(), live.total());
  EXPECT_EQ(saved.entropy(), live.entropy());
  for (int from = -1; from < 4; ++from)
    for (int to = 0; to < 4; ++to) EXPECT_EQ(saved.entropy_if(from, to), live.entropy_if(from, to));
  EXPECT_THROW(FaceCounts(std::vector<std::int64_t>{1, -1}), std::invalid_argument);
}

TEST(CpmState, HistoryRestoredFromItsEntriesAnswersAndGrowsAlike) {
  AssignHistory history(8);
  for (std::uint64_t key = 1; key <= 60; ++key) history.face_of(key * 0x9e3779b97f4a7c15ull) = int(key % 5);
  std::vector<std::uint64_t> keys;
  std::vector<std::int32_t> faces;
  history.export_entries(keys, faces);
  ASSERT_EQ(keys.size(), 60u);
  AssignHistory restored = AssignHistory::restore(history.capacity(), keys, faces);
  EXPECT_EQ(restored.size(), 60u);
  EXPECT_EQ(restored.capacity(), history.capacity());
  for (std::uint64_t key = 1; key <= 60; ++key)
    EXPECT_EQ(restored.face_of(key * 0x9e3779b97f4a7c15ull), int(key % 5));
  for (std::uint64_t key = 61; key <= 400; ++key) {  // new keys: both grow at the same sizes
    history.face_of(key * 0x9e3779b97f4a7c15ull) = 1;
    restored.face_of(key * 0x9e3779b97f4a7c15ull) = 1;
    ASSERT_EQ(restored.capacity(), history.capacity()) << key;
  }
  EXPECT_THROW(AssignHistory::restore(16, std::vector<std::uint64_t>(13, 7),
                                      std::vector<std::int32_t>(13, 0)),
               std::invalid_argument);  // over 3/4 full
  EXPECT_THROW(AssignHistory::restore(16, {0}, {0}), std::invalid_argument);  // the empty mark
}

TEST(CpmState, HistoryCopiedAChunkAtATimeGivesTheExportedEntries) {
  AssignHistory history(8);
  for (std::uint64_t key = 1; key <= 300; ++key)
    history.face_of(key * 0x9e3779b97f4a7c15ull) = int(key % 7);
  std::vector<std::uint64_t> keys;
  std::vector<std::int32_t> faces;
  history.export_entries(keys, faces);
  for (const std::size_t chunk : {1u, 7u, 64u, 300u, 1000u}) {
    std::vector<std::uint64_t> got_keys(keys.size(), 0);
    std::vector<std::int32_t> got_faces(faces.size(), -2);
    std::uint64_t key_slot = 0, face_slot = 0;
    for (std::size_t at = 0; at < keys.size(); at += chunk) {
      const std::size_t n = std::min(chunk, keys.size() - at);
      key_slot = history.copy_keys(key_slot, std::span(got_keys).subspan(at, n));
      face_slot = history.copy_faces(face_slot, std::span(got_faces).subspan(at, n));
      EXPECT_EQ(key_slot, face_slot);
    }
    EXPECT_EQ(got_keys, keys) << "chunks of " << chunk;
    EXPECT_EQ(got_faces, faces) << "chunks of " << chunk;
    // Past the last entry there is nothing more to copy.
    std::vector<std::uint64_t> more(4, 9);
    EXPECT_EQ(history.copy_keys(key_slot, more), history.capacity());
    EXPECT_EQ(more, std::vector<std::uint64_t>(4, 9));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, CpmState,
    ::testing::Values(Case{2, CpmSides::kDouble, CpmPrecision::kDouble},
                      Case{2, CpmSides::kDouble, CpmPrecision::kFloat},
                      Case{2, CpmSides::kOuterNegative, CpmPrecision::kDouble},
                      Case{3, CpmSides::kDouble, CpmPrecision::kDouble}),
    [](const auto& info) {
      return std::to_string(info.param.classes) + "classes_" +
             (info.param.sides == CpmSides::kDouble ? "double" : "single") + "_" +
             (info.param.precision == CpmPrecision::kDouble ? "f64" : "f32");
    });
}  // namespace
}  // namespace polymargin::engine
