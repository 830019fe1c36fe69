// The option table (driver/options.h): every option's default, given as a value, trains the model
// of the job that leaves it unset (so the help, --config and the Python estimators say what the
// learner does), every option's key is a learner's once, and every searched key has a grid whose
// first value is its default.
#include "driver/options.h"

#include <gtest/gtest.h>

#include <boost/lexical_cast.hpp>
#include <filesystem>
#include <set>
#include <string>

#include "../io/shard_test_util.h"
#include "driver/train.h"

namespace polymargin::driver {
namespace {

namespace fs = std::filesystem;
using io::testing::slurp;

// The default of `o` as its apply takes it.
OptionValue default_value(const TrainOption& o) {
  using T = OptionType;
  switch (o.type) {
    case T::kSwitch: return false;
    case T::kInt: return boost::lexical_cast<int>(o.default_text);
    case T::kInt64: return boost::lexical_cast<std::int64_t>(o.default_text);
    case T::kUInt32: return boost::lexical_cast<std::uint32_t>(o.default_text);
    case T::kUInt64: return boost::lexical_cast<std::uint64_t>(o.default_text);
    case T::kReal: return boost::lexical_cast<double>(o.default_text);
    case T::kText: return o.default_text;
    case T::kTexts: return std::vector<std::string>{};
  }
  return false;
}

// Options whose being given is itself a setting, so their default is not "unset": the epochs of
// the streamed learners (unset: also the 50000-step floor), and the kernel's shape (a degree
// given with an RBF kernel is refused; a width beside --gamma too).
bool given_means_more(const TrainOption& o) {
  static const std::set<std::string> keys = {"epochs", "degree", "coef0", "gamma", "rbf-width",
                                             "algo"};
  return keys.count(o.key) > 0;
}

class Options : public ::testing::TestWithParam<std::string> {
 public:
  static void SetUpTestSuite() {
    dir_ = io::testing::fresh_dir("driver_options");
    CsrBuffer rows = io::testing::random_rows(5, 400, 12, 60, io::testing::Values::kRandom);
    for (std::size_t r = 0; r < rows.labels.size(); ++r) {
      double score = 0.2;
      for (std::uint32_t k = rows.offsets[r]; k < rows.offsets[r + 1]; ++k)
        score += (rows.indices[k] % 3 == 0 ? 1.0 : -0.7) * rows.values[k];
      rows.labels[r] = score > 0 ? 1.0f : -1.0f;
    }
    io::testing::write_shards(rows, (dir_ / "d.shards").string(), io::Codec::kRaw, 100, 2);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static TrainJob job(const std::string& algo, const std::string& model) {
    TrainJob j;
    j.algo = algo;
    j.inputs = {(dir_ / "d.shards").string()};
    j.output = (dir_ / model).string();
    j.threads = 1;
    j.linear.epochs = 3;
    j.cpm.epochs = 3;
    return j;
  }

  static fs::path dir_;
};
fs::path Options::dir_;

TEST_P(Options, EveryDefaultGivenTrainsTheModelOfTheJobThatLeavesItUnset) {
  const std::string algo = GetParam();
  const unsigned learner = learner_bit(algo);
  TrainJob given = job(algo, algo + "-given.model");
  std::vector<std::string> applied;
  for (const TrainOption& o : train_options()) {
    if (!o.applies_to(learner) || !o.apply || o.default_text.empty() || given_means_more(o))
      continue;
    o.apply(given, default_value(o));
    applied.push_back(o.key);
  }
  EXPECT_GE(applied.size(), 4u) << algo;
  Events quiet;
  nlohmann::ordered_json record;
  train(job(algo, algo + "-plain.model"), quiet, record);
  train(given, quiet, record);
  EXPECT_TRUE(slurp((dir_ / (algo + "-plain.model")).string()) ==
              slurp((dir_ / (algo + "-given.model")).string()))
      << algo << ": one of these defaults is not the learner's: " << ::testing::PrintToString(applied);
}

INSTANTIATE_TEST_SUITE_P(Learners, Options,
                         ::testing::Values("ldm", "svm", "cpm", "kldm", "tldm", "cmm"));

TEST(OptionTable, AKeyIsOneOptionOfALearner) {
  for (const std::string& algo : learner_names()) {
    std::set<std::string> keys;
    for (const TrainOption& o : train_options())
      if (o.taken_by(learner_bit(algo))) {
        EXPECT_TRUE(keys.insert(o.key).second) << algo << " has two options " << o.key;
      }
    EXPECT_TRUE(keys.count("data") && keys.count("output")) << algo;
  }
}

// scikit-learn's names (C, n_jobs, random_state, tol) are the Python estimators' second name of an
// option: one option of a learner each, an estimator parameter, named like no key of that learner.
TEST(OptionTable, AnEstimatorAliasNamesOneParameterOfALearner) {
  for (const std::string& algo : learner_names()) {
    std::set<std::string> aliases, names;
    for (const TrainOption& o : train_options())
      if (o.taken_by(learner_bit(algo))) names.insert(o.key);
    for (const TrainOption& o : train_options())
      if (o.applies_to(learner_bit(algo)) && !o.estimator_alias.empty()) {
        EXPECT_TRUE((o.role & kEstimatorParam) != 0) << algo << " " << o.key;
        EXPECT_TRUE(aliases.insert(o.estimator_alias).second) << algo << " " << o.estimator_alias;
        EXPECT_EQ(names.count(o.estimator_alias), 0u) << algo << " " << o.estimator_alias;
      }
    EXPECT_TRUE(aliases.count("C") && aliases.count("n_jobs") && aliases.count("random_state"))
        << algo;
  }
}

TEST(OptionTable, EverySearchedKeyHasAGridThatStartsAtItsDefault) {
  for (const SearchPlan& plan : search_plans())
    for (const std::vector<std::string>& group : plan.groups)
      for (const std::string& key : group) {
        const TrainOption* o = find_train_option(plan.algo, key);
        ASSERT_NE(o, nullptr) << plan.algo << " " << key;
        ASSERT_FALSE(o->grid.empty()) << plan.algo << " " << key;
        if (!o->default_text.empty()) {
          EXPECT_EQ(o->grid.front(), o->default_text) << key;
        }
      }
}

TEST(OptionTable, ALearnerTakesNoOptionOfAnother) {
  EXPECT_EQ(find_train_option("svm", "lambda1")->applies_to(kSvm), false);  // taken, to refuse
  EXPECT_EQ(find_train_option("tldm", "lambda1-rel"), nullptr);
  EXPECT_EQ(find_train_option("cmm", "tune"), nullptr);
  EXPECT_EQ(find_train_option("ldm", "faces"), nullptr);
  EXPECT_EQ(find_train_option("nothing", "cost"), nullptr);
}

}  // namespace
}  // namespace polymargin::driver
