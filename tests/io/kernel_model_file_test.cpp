// Kernel model files: save → load_classifier round trip (bit-identical scores, scaling and ignored
// features included), and corrupt or inconsistent files refused with DataError.
#include "io/kernel_model_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <cmath>

#include "engine/errors.h"

namespace polymargin::io {
namespace {

namespace fs = std::filesystem;

// Rows: {1: 0.5, 3: 2}, {2: 1}, {1: -1, 2: 0.25, 3: 4}.
CsrBuffer sample_rows() {
  CsrBuffer b;
  b.has_values = true;
  b.labels = {1, -1, 1};
  b.offsets = {0, 2, 3, 6};
  b.indices = {1, 3, 2, 1, 2, 3};
  b.values = {0.5f, 2, 1, -1, 0.25f, 4};
  return b;
}

engine::KernelModel sample_model(engine::KernelModel::Decision decision) {
  engine::KernelModel m;
  m.algorithm = decision == engine::KernelModel::Decision::kSign ? "kldm" : "tldm";
  m.labels = {0, 1};
  m.max_index = 3;
  m.features = 3;
  m.config = {{"c", 10}};
  m.kernel.type = engine::KernelType::kRbf;
  m.kernel.gamma = 0.7;
  m.kernel.bias = 0.5;
  m.maxabs = {0, 1, 1, 4};
  m.vectors.rows = sample_rows();
  m.vectors.finish();
  m.coefficients = {{0.25, -1.5, 0.75}};
  m.intercepts = {0.125};
  m.decision = decision;
  if (decision == engine::KernelModel::Decision::kNearerPlane) {
    m.coefficients.push_back({-0.5, 0.5, 2});
    m.intercepts.push_back(-0.25);
    m.plane_norms = {1.5, 0.75};
  }
  m.check();
  return m;
}

class KernelModelFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pm_kmf_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(KernelModelFile, RoundTripScoresBitIdentically) {
  // Test rows: one with a feature (9) beyond the model, which is ignored and counted.
  CsrBuffer test = sample_rows();
  test.labels.push_back(0);
  test.indices.insert(test.indices.end(), {2, 9});
  test.values.insert(test.values.end(), {3, 5});
  test.offsets.push_back(8);
  for (const auto decision :
       {engine::KernelModel::Decision::kSign, engine::KernelModel::Decision::kNearerPlane}) {
    const engine::KernelModel model = sample_model(decision);
    save_kernel_model(model, path("k.model"));
    const std::unique_ptr<engine::Classifier> loaded = load_classifier(path("k.model"));
    EXPECT_EQ(loaded->algorithm, model.algorithm);
    EXPECT_EQ(loaded->config, model.config);
    std::vector<double> a(4), b(4);
    EXPECT_EQ(model.score_batch(test.view(), a.data()), 1u);
    EXPECT_EQ(loaded->score_batch(test.view(), b.data()), 1u);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(a[r], b[r]) << r;
    // The score by hand for row 1 ({2: 1} → scaled {2: 1}) under the sign rule.
    if (decision == engine::KernelModel::Decision::kSign) {
      const double x2 = 1.0;
      auto k = [&](double d1, double d2, double d3) {
        const double sq = d1 * d1 + (d2 - x2) * (d2 - x2) + d3 * d3;
        return std::exp(-0.7 * sq) + 0.25;
      };
      const double expected = 0.125 + 0.25 * k(0.5, 0, 2) - 1.5 * k(0, 1, 0) +
                              0.75 * k(-1, 0.25, 4);
      EXPECT_NEAR(a[1], expected, 1e-12);
    }
    const std::string text = loaded->to_text();
    EXPECT_NE(text.find("decision " + engine::decision_name(decision)), std::string::npos);
    EXPECT_EQ(loaded->to_json()["vectors"].size(), 3u);
  }
}

TEST_F(KernelModelFile, InconsistentFilesAreDataErrors) {
  engine::KernelModel model = sample_model(engine::KernelModel::Decision::kSign);
  // A vector feature beyond max_index.
  ModelContainer file;
  save_kernel_model(model, path("ok.model"));
  file = read_model_container(path("ok.model"));
  for (ModelArray& a : file.arrays)
    if (a.name == "vector_indices") {
      std::vector<double> idx = a.as<double>("x");
      idx[0] = 7;
      a = ModelArray::of("vector_indices", idx);
    }
  write_model_container(path("bad_index.model"), file);
  EXPECT_THROW(load_classifier(path("bad_index.model")), DataError);
  // Coefficients that do not match the vectors.
  file = read_model_container(path("ok.model"));
  for (ModelArray& a : file.arrays)
    if (a.name == "coefficients") a = ModelArray::of("coefficients", std::vector<double>{1, 2});
  write_model_container(path("bad_coef.model"), file);
  EXPECT_THROW(load_classifier(path("bad_coef.model")), DataError);
  // An unknown kernel.
  file = read_model_container(path("ok.model"));
  file.header["kernel"]["kernel"] = "sigmoid";
  write_model_container(path("bad_kernel.model"), file);
  EXPECT_THROW(load_classifier(path("bad_kernel.model")), DataError);
  // A nearer-plane model without its norms.
  file = read_model_container(path("ok.model"));
  file.header["decision"] = "nearer_plane";
  write_model_container(path("bad_rule.model"), file);
  EXPECT_THROW(load_classifier(path("bad_rule.model")), DataError);
  // A middle offset far beyond the ids (found by fuzz/model_loader_fuzz: it was cast to u32
  // before the order check could refuse it), and one that is NaN.
  for (const double bad : {5.7896e77, std::nan("")}) {
    file = read_model_container(path("ok.model"));
    for (ModelArray& a : file.arrays)
      if (a.name == "vector_offsets") {
        std::vector<double> offsets = a.as<double>("x");
        offsets[1] = bad;
        a = ModelArray::of("vector_offsets", offsets);
      }
    write_model_container(path("bad_offsets.model"), file);
    EXPECT_THROW(load_classifier(path("bad_offsets.model")), DataError) << bad;
  }
}

// Coefficients and vector values must be finite: a NaN scored nan for every row.
TEST_F(KernelModelFile, NonFiniteNumbersAreRefusedNamingTheField) {
  for (const char* name : {"coefficients", "vector_values"}) {
    engine::KernelModel model = sample_model(engine::KernelModel::Decision::kSign);
    if (std::string(name) == "coefficients")
      model.coefficients[0][1] = std::nan("");
    else
      model.vectors.rows.values[1] = std::nanf("");
    save_kernel_model(model, path("nan.model"));
    try {
      load_classifier(path("nan.model"));
      ADD_FAILURE() << name << ": a NaN loaded";
    } catch (const DataError& e) {
      EXPECT_EQ(e.file(), path("nan.model"));
      EXPECT_EQ(e.message(), std::string(name) + "[1] is not finite (nan)");
    }
  }
}

}  // namespace
}  // namespace polymargin::io
