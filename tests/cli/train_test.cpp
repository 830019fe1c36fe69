// `polymargin train` end to end on the real data sets of ../shared/data: test accuracy of the
// trained model (scored with LinearModel::score on the raw test rows) against the targets, and
// bit-identical model files for any --threads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "engine/linear_model.h"
#include "io/model_file.h"
#include "io/text_reader.h"

namespace polymargin {
namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(POLYMARGIN_SOURCE_DIR) + "/../shared/data/";

class TrainCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("train_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Runs the binary with `args`; returns its exit code. Output goes to a log in the work dir.
  int polymargin(const std::string& args) const {
    const std::string command = std::string(POLYMARGIN_BINARY) + " " + args + " > " +
                                path("out.log") + " 2> " + path("err.log");
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string log(const std::string& name) const {
    std::ifstream in(path(name));
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  // Accuracy of a saved model on LIBSVM text: predicted +1 iff score > 0.
  static double accuracy(const std::string& model_path, const std::string& test) {
    const engine::LinearModel model = io::load_model(model_path);
    std::uint64_t rows = 0, correct = 0;
    io::read_libsvm_text({test}, io::TextOptions{}, [&](const CsrView& batch) {
      for (std::size_t r = 0; r < batch.rows; ++r) {
        const bool positive = model.labels.sign(batch.labels[r]) > 0;
        correct += (model.score(batch, r) > 0) == positive;
      }
      rows += batch.rows;
    });
    return rows ? static_cast<double>(correct) / rows : 0;
  }

  fs::path dir_;
};

struct AccuracyCase {
  const char* name;
  const char* train;  // relative to ../shared/data
  const char* test;   // "" = a seeded half split of train
  const char* options;
  double target;
};

void PrintTo(const AccuracyCase& c, std::ostream* out) { *out << c.name << ": " << c.options; }

class TrainAccuracy : public TrainCommand, public ::testing::WithParamInterface<AccuracyCase> {};

// Hyper-parameters per data set: the "Choosing λ1, λ2, C" table of engine/ldm.h (5-fold CV on the
// training part over C ∈ {0.03, 1, 10, 100}, λ1/(mC) ∈ {1e-5, 1e-4, 1e-3}, λ2/(mC) ∈ {1e-3 …
// 3e-2}).
TEST_P(TrainAccuracy, ReachesTheTarget) {
  const AccuracyCase c = GetParam();
  const std::string train = kData + c.train;
  if (!fs::exists(train)) GTEST_SKIP() << train << " is missing";
  std::string train_input = train, test = kData + c.test;
  if (std::string(c.test).empty()) {
    ASSERT_EQ(polymargin("split " + train + " --test-fraction 0.5 --seed 1 -o " + path("half")), 0)
        << log("err.log");
    train_input = path("half.train.svm");
    test = path("half.test.svm");
  }
  ASSERT_EQ(polymargin("train -d " + train_input + " -o " + path("m.model") + " " + c.options +
                       " --json"),
            0)
      << log("err.log");
  const double acc = accuracy(path("m.model"), test);
  std::printf("%s: test accuracy %.4f (target %.3f) with %s\n", c.name, acc, c.target, c.options);
  EXPECT_GE(acc, c.target);
}

INSTANTIATE_TEST_SUITE_P(
    RealData, TrainAccuracy,
    ::testing::Values(
        AccuracyCase{"a9a_ldm", "a9a/a9a", "a9a/a9a.t",
                     "--algo ldm -c 0.03 --lambda1-rel 1e-4 --lambda2-rel 1e-2", 0.850},
        AccuracyCase{"a9a_svm", "a9a/a9a", "a9a/a9a.t", "--algo svm -c 0.03", 0.848},
        AccuracyCase{"ijcnn1_ldm", "ijcnn1/ijcnn1.trn.bz2", "ijcnn1/ijcnn1.tst.bz2",
                     "--algo ldm -c 1 --lambda1-rel 1e-4 --lambda2-rel 3e-2", 0.925},
        AccuracyCase{"w8a_ldm", "w8a/w8a", "",
                     "--algo ldm -c 10 --lambda1-rel 1e-4 --lambda2-rel 1e-3 --bias 1", 0.983}),
    [](const ::testing::TestParamInfo<AccuracyCase>& info) {
      return std::string(info.param.name);
    });

TEST_F(TrainCommand, SameSeedGivesBitIdenticalModelsForAnyThreadCount) {
  const std::string train = std::string(POLYMARGIN_SOURCE_DIR) + "/data/a9a.zst";  // bundled
  // Shards once, so that every run reads the same directory (and --threads only changes decoding).
  ASSERT_EQ(polymargin("convert " + train + " -o " + path("a9a.shards") + " --block-rows 1024"), 0)
      << log("err.log");
  std::string first;
  for (const int threads : {1, 2, 4}) {
    const std::string model = path("t" + std::to_string(threads) + ".model");
    ASSERT_EQ(polymargin("train -d " + path("a9a.shards") + " -o " + model +
                         " --seed 7 --window-blocks 4 --threads " + std::to_string(threads)),
              0)
        << log("err.log");
    std::ifstream in(model, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (first.empty()) {
      first = bytes;
    } else {
      EXPECT_EQ(bytes, first) << "--threads " << threads << " changed the model";
    }
  }
  ASSERT_EQ(polymargin("train -d " + path("a9a.shards") + " -o " + path("s8.model") + " --seed 8"),
            0);
  EXPECT_NE(io::load_model(path("s8.model")).weights, io::load_model(path("t1.model")).weights);
}

// Text of any compression goes through the same shards, so it trains the same weights.
TEST_F(TrainCommand, TextAndShardInputsTrainTheSameWeights) {
  const std::string text = std::string(POLYMARGIN_SOURCE_DIR) + "/data/a9a.zst";
  ASSERT_EQ(polymargin("convert " + text + " -o " + path("a9a.shards")), 0) << log("err.log");
  ASSERT_EQ(polymargin("train -d " + text + " -o " + path("text.model")), 0) << log("err.log");
  ASSERT_EQ(polymargin("train -d " + path("a9a.shards") + " -o " + path("shards.model")), 0);
  ASSERT_EQ(std::system(("zstd -q -dc " + text + " | gzip > " + path("a9a.gz")).c_str()), 0);
  ASSERT_EQ(polymargin("train -d " + path("a9a.gz") + " -o " + path("gz.model")), 0);
  const engine::LinearModel from_text = io::load_model(path("text.model"));
  EXPECT_EQ(io::load_model(path("shards.model")).weights, from_text.weights);
  EXPECT_EQ(io::load_model(path("gz.model")).weights, from_text.weights);
  EXPECT_EQ(from_text.config["scale"], "maxabs");
  EXPECT_EQ(from_text.config["rows"], 32561);
  EXPECT_GT(from_text.config["eta0"].get<double>(), 0);
  EXPECT_EQ(from_text.config["label_map"]["positive"], 1.0);
  EXPECT_EQ(from_text.index_base, 1);
  EXPECT_EQ(from_text.features, 123u);
  EXPECT_TRUE(from_text.scale.empty());  // the scaling is folded into the weights
}

// A checkpoint's checksum proves only that its bytes are those written: a NaN in the state (as a
// diverged run or a tool would write it, the checksum recomputed) is refused on --resume, naming
// the array and element, instead of being learnt on.
TEST_F(TrainCommand, ResumeRefusesACheckpointHoldingANonFiniteNumber) {
  const std::string train = std::string(POLYMARGIN_SOURCE_DIR) + "/data/a9a.zst";
  ASSERT_EQ(polymargin("convert " + train + " -o " + path("a9a.shards")), 0) << log("err.log");
  struct Case {
    const char* algo;
    const char* array;
  };
  for (const Case c : {Case{"ldm", "weights_and_averages"}, Case{"ldm", "scalars"},
                       Case{"cpm", "weights_0"}, Case{"cpm", "intercept_sums_1"}}) {
    SCOPED_TRACE(std::string(c.algo) + " " + c.array);
    const std::string common = "train --algo " + std::string(c.algo) + " -d " + path("a9a.shards") +
                               " -o " + path("m") + " --seed 3";
    ASSERT_EQ(polymargin(common + " --checkpoint " + path("ck") + " --stop-after-rows 5000"), 6)
        << log("err.log");
    io::ModelContainer file = io::read_model_container(path("ck"));
    bool found = false;
    for (io::ModelArray& a : file.arrays) {
      if (a.name != c.array) continue;
      ASSERT_EQ(a.dtype, "f64");
      std::vector<double> values = a.as<double>(path("ck"));
      ASSERT_GT(values.size(), 1u);
      values[1] = std::nan("");
      a = io::ModelArray::of(a.name, values);
      found = true;
    }
    ASSERT_TRUE(found) << "no array " << c.array;
    io::write_model_container(path("ck"), file);
    EXPECT_EQ(polymargin(common + " --resume " + path("ck")), 3);
    EXPECT_NE(log("err.log").find(std::string(c.array) + "[1] is not finite (nan)"),
              std::string::npos)
        << log("err.log");
    EXPECT_FALSE(fs::exists(path("m")));
    fs::remove(path("ck"));
  }
}

}  // namespace
}  // namespace polymargin
