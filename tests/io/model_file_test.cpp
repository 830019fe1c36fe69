// Model files: exact round trip, and refusal (DataError naming the file) of foreign, other-version,
// truncated and corrupted files; no temporary file is left behind.
#include "io/model_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "engine/errors.h"

namespace polymargin::io {
namespace {

namespace fs = std::filesystem;

class ModelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("model_file_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::string read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void write(const std::string& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  }

  static engine::LinearModel sample_model() {
    engine::LinearModel m;
    m.algorithm = "ldm";
    m.config = {{"lambda1", 0.0625}, {"c", 10}, {"seed", 42}, {"eta0", 0.03125}};
    m.labels.negative = 0;
    m.labels.positive = 3.5;
    m.index_base = 1;
    m.max_index = 5;
    m.features = 5;
    m.weights = {0, -1.25, 3.0000000000000004, 1e-300, -7e12, 0.1};
    m.scale = {1, 0.5f, 0.25f, 1, 1, 0.125f};
    m.bias_value = 1;
    m.bias_weight = -0.30000000000000004;
    return m;
  }

  // Expects DataError whose message names the file and contains `fragment`.
  void expect_refused(const std::string& p, const std::string& fragment) {
    try {
      load_model(p);
      FAIL() << "expected DataError for " << fragment;
    } catch (const DataError& e) {
      EXPECT_EQ(e.file(), p);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  }

  fs::path dir_;
};

TEST_F(ModelFileTest, RoundTripIsExact) {
  const engine::LinearModel m = sample_model();
  save_model(m, path("m.model"));
  const engine::LinearModel r = load_model(path("m.model"));
  EXPECT_EQ(r.algorithm, m.algorithm);
  EXPECT_EQ(r.config, m.config);
  EXPECT_EQ(r.labels.negative, m.labels.negative);
  EXPECT_EQ(r.labels.positive, m.labels.positive);
  EXPECT_EQ(r.index_base, m.index_base);
  EXPECT_EQ(r.max_index, m.max_index);
  EXPECT_EQ(r.features, m.features);
  EXPECT_EQ(r.weights, m.weights);  // bit-exact doubles
  EXPECT_EQ(r.scale, m.scale);
  EXPECT_EQ(r.bias_value, m.bias_value);
  EXPECT_EQ(r.bias_weight, m.bias_weight);
  // Only the model itself is in the directory: the temporary file was renamed.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(ModelFileTest, ModelWithoutScaleAndOverwrite) {
  engine::LinearModel m = sample_model();
  m.scale.clear();
  save_model(sample_model(), path("m.model"));
  save_model(m, path("m.model"));  // replaces atomically
  const engine::LinearModel r = load_model(path("m.model"));
  EXPECT_TRUE(r.scale.empty());
  EXPECT_EQ(r.weights, m.weights);
}

TEST_F(ModelFileTest, ContainerKeepsNamedArraysOfAnyShape) {
  ModelContainer c;
  c.header = {{"kind", "cpm"}, {"faces", 3}};
  ModelArray matrix = ModelArray::of("weights", std::vector<float>{1, 2, 3, 4, 5, 6});
  matrix.shape = {2, 3};
  c.arrays.push_back(matrix);
  c.arrays.push_back(ModelArray::of("bias", std::vector<double>{0.5, -0.5, 1.5}));
  write_model_container(path("c.model"), c);
  const ModelContainer r = read_model_container(path("c.model"));
  EXPECT_EQ(r.header, c.header);
  EXPECT_EQ(r.array("weights", "x").shape, (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(r.array("weights", "x").as<float>("x"), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(r.array("bias", "x").as<double>("x"), (std::vector<double>{0.5, -0.5, 1.5}));
  EXPECT_THROW(r.array("bias", "x").as<float>("x"), DataError);
  EXPECT_THROW(r.array("missing", "x"), DataError);
  // A container of another kind is not a linear model.
  expect_refused(path("c.model"), "not a linear one");
}

// Checkpoints keep integer state (counters, hash keys) beside the weights, bit for bit.
TEST_F(ModelFileTest, ContainerKeepsIntegerArraysExactly) {
  ModelContainer c;
  c.header = {{"kind", "cpm_checkpoint"}};
  const std::vector<std::uint64_t> keys{0, 1, 0xfedcba9876543210ull, ~0ull};
  const std::vector<std::int64_t> counts{-3, 0, 1ll << 40};
  const std::vector<std::int32_t> faces{-1, 0, 7};
  c.arrays.push_back(ModelArray::of("keys", keys));
  c.arrays.push_back(ModelArray::of("counts", counts));
  c.arrays.push_back(ModelArray::of("faces", faces));
  write_model_container(path("i.model"), c);
  const ModelContainer r = read_model_container(path("i.model"));
  EXPECT_EQ(r.array("keys", "x").dtype, "u64");
  EXPECT_EQ(r.array("keys", "x").as<std::uint64_t>("x"), keys);
  EXPECT_EQ(r.array("counts", "x").as<std::int64_t>("x"), counts);
  EXPECT_EQ(r.array("faces", "x").as<std::int32_t>("x"), faces);
  EXPECT_THROW(r.array("faces", "x").as<std::int64_t>("x"), DataError);
}

TEST_F(ModelFileTest, RefusesForeignFile) {
  write(path("foreign"), "label 1 -1\nw\n0.5\n");
  expect_refused(path("foreign"), "bad magic");
  write(path("empty"), "");
  expect_refused(path("empty"), "bad magic");
}

TEST_F(ModelFileTest, RefusesOtherVersion) {
  save_model(sample_model(), path("m.model"));
  std::string bytes = read(path("m.model"));
  const std::uint32_t version = kModelFormatVersion + 1;
  std::memcpy(&bytes[8], &version, sizeof version);
  write(path("m.model"), bytes);
  expect_refused(path("m.model"), "version 2 is not supported");
}

TEST_F(ModelFileTest, RefusesTruncatedFile) {
  save_model(sample_model(), path("m.model"));
  const std::string bytes = read(path("m.model"));
  for (const std::size_t keep : {bytes.size() - 1, bytes.size() / 2, std::size_t{40}}) {
    write(path("cut.model"), bytes.substr(0, keep));
    expect_refused(path("cut.model"), "truncated");
  }
  write(path("cut.model"), bytes.substr(0, 12));
  expect_refused(path("cut.model"), "truncated");
}

TEST_F(ModelFileTest, RefusesCorruptedBytes) {
  save_model(sample_model(), path("m.model"));
  const std::string bytes = read(path("m.model"));
  // A flipped bit anywhere after the preamble — header, weights, padding or checksum — is caught.
  for (std::size_t at = 32; at < bytes.size(); at += 7) {
    std::string bad = bytes;
    bad[at] ^= 0x10;
    write(path("bad.model"), bad);
    expect_refused(path("bad.model"), "corrupt");
  }
}

// A file that declares a header and a length far beyond its own size (a 32-byte preamble claiming
// a 1 TiB header) is truncated, said before anything of the declared size is allocated; from a
// stream, which has no size, the header is read as far as its bytes go.
TEST_F(ModelFileTest, KindOfAFileShorterThanItsHeaderIsTruncated) {
  std::string preamble("PMMODEL\0", 8);
  const std::uint32_t version = kModelFormatVersion, reserved = 0;
  const std::uint64_t header_bytes = std::uint64_t{1} << 40, file_bytes = header_bytes + 40;
  for (const auto* field :
       {static_cast<const void*>(&version), static_cast<const void*>(&reserved)})
    preamble.append(static_cast<const char*>(field), 4);
  preamble.append(reinterpret_cast<const char*>(&header_bytes), 8);
  preamble.append(reinterpret_cast<const char*>(&file_bytes), 8);
  write(path("ck.bin"), preamble);
  try {
    model_file_kind(path("ck.bin"));
    FAIL() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_EQ(e.message(),
              "model file is truncated: 32 of " + std::to_string(file_bytes) + " bytes");
  }
  const std::string fifo = path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << preamble << "{\"kind\""; });
  try {
    model_file_kind(fifo);
    ADD_FAILURE() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_EQ(e.message(), "model file is truncated (in its header)");
  }
  writer.join();
}

// Every real-valued field of a linear model must be finite: a NaN weight, which the checksum
// cannot tell from a number, predicted nan for every row.
TEST_F(ModelFileTest, NonFiniteWeightsAreRefusedNamingTheField) {
  const struct {
    void (*spoil)(engine::LinearModel&);
    const char* message;
  } cases[] = {
      {[](engine::LinearModel& m) { m.weights[2] = std::nan(""); },
       "weights[2] is not finite (nan)"},
      {[](engine::LinearModel& m) { m.weights[5] = -HUGE_VAL; }, "weights[5] is not finite (-inf)"},
      {[](engine::LinearModel& m) { m.scale[1] = HUGE_VALF; }, "scale[1] is not finite (inf)"},
  };
  for (const auto& c : cases) {
    engine::LinearModel m = sample_model();
    c.spoil(m);
    save_model(m, path("nan.model"));
    expect_refused(path("nan.model"), c.message);
    try {
      load_classifier(path("nan.model"));
      ADD_FAILURE() << "load_classifier accepted " << c.message;
    } catch (const DataError& e) {
      EXPECT_EQ(e.file(), path("nan.model"));
      EXPECT_EQ(e.message(), c.message);
    }
  }
}

// Integer fields of the header must be JSON integers within range: a float far out of range
// (what the model-loader fuzzer found, as an array's byte count) was converted with a cast, which
// is undefined behaviour; an integer too large for its field was wrapped.
TEST_F(ModelFileTest, HeaderIntegersOutOfRangeOrNotIntegersAreRefused) {
  save_model(sample_model(), path("good.model"));
  const ModelContainer good = read_model_container(path("good.model"));
  const std::vector<std::pair<std::string, nlohmann::json>> bad = {
      {"max_index", 6.5e19}, {"max_index", 4294967296ull}, {"features", 2.5},
      {"features", -1},      {"index_base", "1"},          {"max_index", 1e300}};
  for (const auto& [field, value] : bad) {
    ModelContainer c = good;
    c.header[field] = value;
    write_model_container(path("bad.model"), c);
    expect_refused(path("bad.model"), field + " is not an integer in range");
  }
}

// A model given through a pipe (e.g. `-m <(zstdcat m.zst)`) has no size to read at once: it is
// read to its end, the same container.
TEST_F(ModelFileTest, ContainerReadsFromAPipe) {
  ModelContainer c;
  c.header = {{"kind", "cpm"}};
  c.arrays.push_back(ModelArray::of("weights", std::vector<double>(5000, 0.25)));
  write_model_container(path("p.model"), c);
  std::ifstream in(path("p.model"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string fifo = path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << bytes; });
  const ModelContainer r = read_model_container(fifo);
  writer.join();
  EXPECT_EQ(r.header, c.header);
  EXPECT_EQ(r.array("weights", "x").as<double>("x"), std::vector<double>(5000, 0.25));
}

// Arrays lie apart, one after another: a header that places two over the same bytes (the
// checksum made anew over it) is refused, from a file and from a pipe alike.
TEST_F(ModelFileTest, ArraysOverTheSameBytesAreRefused) {
  ModelContainer c;
  c.header = {{"kind", "cpm"}};
  c.arrays.push_back(ModelArray::of("first", std::vector<double>(4, 1.0)));
  c.arrays.push_back(ModelArray::of("second", std::vector<double>(4, 2.0)));
  write_model_container(path("o.model"), c);
  std::string bytes = read(path("o.model"));
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data() + 16, 8);
  const nlohmann::json arrays = nlohmann::json::parse(bytes.substr(32, header_bytes))["arrays"];
  const std::string first = std::to_string(arrays[0]["offset"].get<std::uint64_t>());
  const std::string second = std::to_string(arrays[1]["offset"].get<std::uint64_t>());
  ASSERT_EQ(first.size(), second.size());  // the header keeps its length
  const std::size_t at = bytes.find("\"offset\":" + second, 32);
  ASSERT_LT(at, 32 + header_bytes);
  bytes.replace(at + 9, second.size(), first);
  const std::uint64_t checksum = XXH64(bytes.data(), bytes.size() - 8, 0);
  std::memcpy(bytes.data() + bytes.size() - 8, &checksum, 8);
  write(path("o.model"), bytes);
  try {
    read_model_container(path("o.model"));
    FAIL() << "overlapping arrays read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("arrays 'first' and 'second' overlap"), std::string::npos)
        << e.what();
  }
  const std::string fifo = path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << bytes; });
  EXPECT_THROW(read_model_container(fifo), DataError);
  writer.join();
}

TEST_F(ModelFileTest, EmptyArraysWhereOthersBeginAreRead) {
  // A one-vs-one CPM checkpoint without an entropy floor has an empty history array per side,
  // each at the offset where the next machine's weights begin.
  ModelContainer c;
  c.header = {{"kind", "cpm_checkpoint"}};
  for (int m = 0; m < 12; ++m) {
    c.arrays.push_back(ModelArray::of("weights_" + std::to_string(m), std::vector<double>(3, m)));
    c.arrays.push_back(ModelArray::of("history_" + std::to_string(m), std::vector<double>()));
  }
  write_model_container(path("empty.model"), c);
  const std::string fifo = path("empty.pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string bytes = read(path("empty.model"));
  for (const std::string& from : {path("empty.model"), fifo}) {
    std::thread writer;
    if (from == fifo) writer = std::thread([&] { std::ofstream(fifo, std::ios::binary) << bytes; });
    const ModelContainer r = read_model_container(from);
    if (writer.joinable()) writer.join();
    ASSERT_EQ(r.arrays.size(), 24u) << from;
    for (int m = 0; m < 12; ++m) {
      EXPECT_EQ(r.array("weights_" + std::to_string(m), from).as<double>(from),
                std::vector<double>(3, m))
          << from;
      EXPECT_TRUE(r.array("history_" + std::to_string(m), from).data.empty()) << from;
    }
  }
}

TEST_F(ModelFileTest, TwoArraysOfOneNameAreRefused) {
  ModelContainer c;
  c.header = {{"kind", "linear"}};
  c.arrays.push_back(ModelArray::of("weights", std::vector<double>(4, 1.0)));
  c.arrays.push_back(ModelArray::of("weights", std::vector<double>(4, 2.0)));
  write_model_container(path("twice.model"), c);
  try {
    read_model_container(path("twice.model"));
    FAIL() << "two arrays of one name read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("two arrays named 'weights'"), std::string::npos)
        << e.what();
  }
}

TEST_F(ModelFileTest, AnArrayIsReadIntoTheBufferItsPlaceGives) {
  ModelContainer c;
  c.header = {{"kind", "linear"}};
  const std::vector<double> weights{1.5, -2.0, 0.25};
  c.arrays.push_back(ModelArray::of("scale", std::vector<float>{0.5f, 2.0f, 1.0f}));
  c.arrays.push_back(ModelArray::of("weights", weights));
  write_model_container(path("placed.model"), c);
  const std::string fifo = path("placed.pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string bytes = read(path("placed.model"));
  for (const std::string& from : {path("placed.model"), fifo}) {
    std::vector<double> into;
    std::string kind;
    const ArrayPlace place = [&](const nlohmann::json& header, const ModelArray& a,
                                 std::uint64_t n) -> std::span<char> {
      kind = header.value("kind", std::string());
      if (a.name != "weights") return {};
      into.resize(n / sizeof(double));
      return {reinterpret_cast<char*>(into.data()), n};
    };
    std::thread writer;
    if (from == fifo) writer = std::thread([&] { std::ofstream(fifo, std::ios::binary) << bytes; });
    const ModelContainer r = read_model_container(from, place);
    if (writer.joinable()) writer.join();
    EXPECT_EQ(kind, "linear") << from;
    EXPECT_EQ(into, weights) << from;
    EXPECT_TRUE(r.array("weights", from).is_placed()) << from;
    EXPECT_TRUE(r.array("weights", from).data.empty()) << from;
    EXPECT_FALSE(r.array("scale", from).is_placed()) << from;
    EXPECT_EQ(r.array("scale", from).as<float>(from), (std::vector<float>{0.5f, 2.0f, 1.0f}))
        << from;
  }
}

TEST_F(ModelFileTest, ADirectoryIsAnIoError) {
  EXPECT_THROW(read_model_container(dir_.string()), IoError);
}

TEST_F(ModelFileTest, MissingFileIsAnIoError) {
  EXPECT_THROW(load_model(path("absent.model")), IoError);
}

TEST_F(ModelFileTest, UnwritableDirectoryIsAnIoErrorAndLeavesNothing) {
  EXPECT_THROW(save_model(sample_model(), path("no/such/dir/m.model")), IoError);
}

}  // namespace
}  // namespace polymargin::io
