// `train --tune`'s command line and the training library's search: the job the arguments make
// (cli::parse_tune_job) is the job a caller of driver::tune writes by hand (the same choice, the
// same record, the same model bytes), and on heart_scale it chooses what `polymargin train --tune`
// chose before the search moved into the library.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../io/shard_test_util.h"
#include "cli/tune.h"
#include "driver/tune.h"

namespace polymargin::cli {
namespace {

namespace fs = std::filesystem;

const std::string kHeart = std::string(POLYMARGIN_SOURCE_DIR) + "/../shared/data/uci/heart_scale.libsvm";

TEST(TuneJob, TheCommandLinesJobIsTheLibrarysJob) {
  if (!fs::exists(kHeart)) GTEST_SKIP() << kHeart << " is missing";
  const fs::path dir = io::testing::fresh_dir("tune_job_" + std::to_string(::getpid()));
  bool json = false;
  const driver::TuneJob parsed =
      parse_tune_job({"--algo", "svm", "-d", kHeart, "-o", (dir / "cli.model").string(), "--tune",
                      "--tune-folds", "3", "--tune-repeats", "2", "--epochs", "4", "--json"},
                     json);
  EXPECT_TRUE(json);
  driver::TuneJob typed;
  typed.train.algo = "svm";
  typed.train.inputs = {kHeart};
  typed.train.output = (dir / "typed.model").string();
  typed.train.linear.epochs = 4;
  typed.given = {{"epochs", "4"}};
  typed.folds = 3;
  typed.repeats = 2;
  EXPECT_EQ(parsed.given, typed.given);
  EXPECT_EQ(parsed.folds, 3);
  EXPECT_EQ(parsed.repeats, 2);

  driver::Events quiet;
  nlohmann::ordered_json record;
  const driver::TuneResult from_cli = driver::tune(parsed, quiet, record);
  const driver::TuneResult from_library = driver::tune(typed, quiet, record);
  EXPECT_EQ(from_cli.chosen, from_library.chosen);
  EXPECT_EQ(from_cli.search, from_library.search);
  EXPECT_EQ(io::testing::slurp(dir / "cli.model"), io::testing::slurp(dir / "typed.model"));
  // What `polymargin train --algo svm --tune --tune-folds 3 --tune-repeats 2 --epochs 4` chose on
  // heart_scale when each cell was a command line of its own.
  EXPECT_EQ(from_cli.chosen, (driver::Setting{{"cost", "100"}, {"normalize", "l2"},
                                              {"bias", "1"}}));
  fs::remove_all(dir);
}

TEST(TuneJob, RefusedBeforeAnySearch) {
  bool json = false;
  EXPECT_THROW(parse_tune_job({"--algo", "cmm", "-d", kHeart, "-o", "x", "--tune"}, json),
               UsageError);
  EXPECT_THROW(parse_tune_job({"-d", kHeart, "-o", "x", "--tune", "--tune-folds", "1"}, json),
               UsageError);
  EXPECT_THROW(parse_tune_job({"-d", kHeart, "-o", "x", "--tune", "--bogus", "1"}, json),
               UsageError);
}

}  // namespace
}  // namespace polymargin::cli
