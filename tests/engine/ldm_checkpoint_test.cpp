// LdmTrainer::restore and warm_start, the engine side of `train --checkpoint/--resume` and
// `--warm-start`: a trainer restored from a copy of another's state (in the averaging phase, after
// renormalisations) continues bit for bit; a warm start scores like the model it starts from.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "engine/ldm.h"

namespace polymargin::engine {
namespace {

CsrBuffer random_rows(std::size_t m, std::uint32_t d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  CsrBuffer b;
  b.has_values = true;
  for (std::size_t r = 0; r < m; ++r) {
    double dot = 0;
    for (std::uint32_t f = 1; f <= d; ++f) {
      if (unit(rng) < 0.6) continue;
      const float v = static_cast<float>(unit(rng));
      b.indices.push_back(f);
      b.values.push_back(v);
      dot += (f % 2 ? 1 : -1) * v;
    }
    b.offsets.push_back(static_cast<std::uint32_t>(b.indices.size()));
    b.labels.push_back(dot + 0.2 * (unit(rng) - 0.5) > 0 ? 1.0f : -1.0f);
  }
  return b;
}

CsrView view(const CsrBuffer& b, std::size_t begin, std::size_t end) {
  CsrView v;
  v.rows = end - begin;
  v.labels = b.labels.data() + begin;
  v.offsets = b.offsets.data() + begin;
  v.indices = b.indices.data();
  v.values = b.values.data();
  return v;
}

TEST(LdmCheckpoint, RestoredTrainerContinuesBitForBit) {
  const std::size_t m = 400;
  const CsrBuffer rows = random_rows(m, 30, 5);
  LdmConfig config;
  config.epochs = 4;
  config.avg_start_epochs = 1;
  config.renorm_threshold = 4;  // renormalise often, so the restored scalars matter
  config.seed = 9;
  auto run = [&](LdmTrainer& t, std::size_t from_window, std::size_t to_window) {
    for (std::size_t w = from_window; w < to_window; ++w) {  // 4 epochs of 4 windows of 100 rows
      const std::size_t begin = (w % 4) * 100;
      t.learn(view(rows, begin, begin + 100));
    }
  };
  LdmTrainer whole(config, m, 30, LabelMap{});
  run(whole, 0, 16);
  // Stop in the averaging phase (window 9: epoch 3), copy the state, continue in a new trainer.
  LdmTrainer first(config, m, 30, LabelMap{});
  run(first, 0, 9);
  ASSERT_FALSE(first.state().avg_is_zero);
  ASSERT_GT(first.state().renorms, 0u);
  LdmTrainer second(config, m, 30, LabelMap{});
  second.restore(first.state(), first.progress(), first.eta0_clamped());
  run(second, 9, 16);
  EXPECT_EQ(second.state().t, whole.state().t);
  EXPECT_EQ(second.state().rng, whole.state().rng);
  const std::vector<double> a = whole.averaged_weights(), b = second.averaged_weights();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t f = 0; f < a.size(); ++f) EXPECT_EQ(a[f], b[f]) << "feature " << f;
  EXPECT_EQ(whole.progress().sum, second.progress().sum);
  EXPECT_EQ(whole.describe(), second.describe());
}

TEST(LdmCheckpoint, RestoreRefusesAStateOfAnotherSize) {
  LdmConfig config;
  config.eta0 = 0.1;
  LdmTrainer small(config, 10, 5, LabelMap{}), large(config, 10, 6, LabelMap{});
  EXPECT_THROW(large.restore(small.state(), {}, false), std::invalid_argument);
}

TEST(LdmWarmStart, StartsFromTheGivenWeightsAndRestartsTheSchedule) {
  const std::size_t m = 400;
  const CsrBuffer rows = random_rows(m, 30, 6);
  LdmConfig config;
  config.epochs = 2;
  config.avg_start_epochs = 1;
  config.bias = 1;
  LdmTrainer cold(config, m, 30, LabelMap{});
  for (int e = 0; e < 2; ++e) cold.learn(view(rows, 0, m));
  LinearModel model = cold.finish();
  // A new trainer with room for 10 more features starts where the model is: same margins.
  LdmTrainer warm(config, m, 40, LabelMap{});
  warm.calibrate(view(rows, 0, m));
  warm.warm_start(model.weights, model.bias_weight);
  EXPECT_EQ(warm.state().t, 0u);
  MarginStats from_model, from_trainer;
  std::vector<double> scores(m);
  model.score_batch(view(rows, 0, m), scores.data());
  for (std::size_t r = 0; r < m; ++r) from_model.add(rows.labels[r] > 0 ? 1 : -1, scores[r]);
  warm.add_margins(view(rows, 0, m), from_trainer);
  EXPECT_NEAR(from_model.sum, from_trainer.sum, 1e-9 * (1 + std::abs(from_model.sum)));
  EXPECT_EQ(from_model.correct, from_trainer.correct);
  const std::vector<double> w = warm.weights();
  for (std::size_t f = 31; f <= 40; ++f) EXPECT_EQ(w[f], 0.0) << "new feature " << f;
  EXPECT_EQ(w[41], model.bias_weight);
  // Training on from there keeps the objective at least as low as the model's (one epoch).
  warm.learn(view(rows, 0, m));
  EXPECT_THROW(warm.warm_start(model.weights, 0), std::logic_error);
}

}  // namespace
}  // namespace polymargin::engine
