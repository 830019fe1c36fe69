#include "io/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "engine/errors.h"
#include "tests/io/decoded_file.h"

namespace polymargin::io {
namespace {

using testing::decoded_file;
using testing::file_bytes;
using testing::TempDir;

GeneratorSpec small_kdda(std::uint64_t rows, std::uint64_t seed = 7) {
  GeneratorSpec spec = generator_preset("kdda");
  spec.rows = rows;
  spec.seed = seed;
  return spec;
}

// Runs generate_text into `dir / name` and returns the bytes of the file.
std::string generate_file(const Generator& g, const TempDir& dir, const std::string& name,
                          int threads, std::uint32_t block_rows = 4096,
                          std::uint64_t stream = kTrainStream) {
  GenRunOptions run;
  run.threads = threads;
  run.block_rows = block_rows;
  const GenStats stats = generate_text(g, stream, g.spec().rows, dir / name, run);
  EXPECT_EQ(stats.rows, g.spec().rows);
  const std::string content = file_bytes(dir / name);
  EXPECT_EQ(stats.file_bytes, content.size());
  EXPECT_EQ(stats.text_bytes, decoded_file(dir / name).size());
  return content;
}

TEST(FeaturePermutation, IsABijectionWithItsInverse) {
  for (const std::uint64_t n : {1u, 2u, 7u, 1000u, 1024u, 1025u, 65537u}) {
    const FeaturePermutation p(n, 42);
    std::vector<char> seen(n, 0);
    for (std::uint32_t r = 0; r < n; ++r) {
      const std::uint32_t id = p.forward(r);
      ASSERT_LT(id, n);
      ASSERT_FALSE(seen[id]) << "n=" << n << " rank " << r;
      seen[id] = 1;
      ASSERT_EQ(p.inverse(id), r);
    }
  }
  const FeaturePermutation big(20'216'830, 1);
  for (std::uint32_t r = 0; r < 20'000'000; r += 9973) ASSERT_EQ(big.inverse(big.forward(r)), r);
}

TEST(Generator, SameSeedSameBytesWhateverThreadsAndBlocks) {
  TempDir dir;
  const Generator g(small_kdda(20'000));
  const std::string one = generate_file(g, dir, "a.svm", 1);
  EXPECT_EQ(generate_file(g, dir, "b.svm", 2), one);
  EXPECT_EQ(generate_file(g, dir, "c.svm", 3, 777), one);
  const Generator again(small_kdda(20'000));
  EXPECT_EQ(generate_file(again, dir, "d.svm", 2), one);
  const Generator other(small_kdda(20'000, 8));
  EXPECT_NE(generate_file(other, dir, "e.svm", 2), one);
  // The test stream shares the rule but not the rows.
  EXPECT_NE(generate_file(g, dir, "f.svm", 2, 4096, kTestStream), one);
}

TEST(Generator, CompressedOutputIsReproducibleAndDecodes) {
  TempDir dir;
  const Generator g(small_kdda(10'000));
  const std::string plain = generate_file(g, dir, "x.svm", 2);
  for (const std::string ext : {".zst", ".gz"}) {
    const std::string one = generate_file(g, dir, "one.svm" + ext, 1);
    EXPECT_EQ(generate_file(g, dir, "two.svm" + ext, 2), one) << ext;
    EXPECT_LT(one.size(), plain.size() / 2) << ext;
    EXPECT_EQ(decoded_file(dir / ("two.svm" + ext)), plain) << ext;
  }
}

TEST(Generator, RowsAreAPureFunctionOfStreamAndRowNumber) {
  const Generator g(small_kdda(1000));
  CsrBuffer all, part;
  g.generate_rows(kTrainStream, 0, 100, all);
  g.generate_rows(kTrainStream, 40, 10, part);
  std::string a, b;
  for (std::size_t r = 40; r < 50; ++r) {
    CsrBuffer one;
    one.append_row(all.view(), r);
    append_libsvm_text(one.view(), a);
  }
  append_libsvm_text(part.view(), b);
  EXPECT_EQ(a, b);
}

// Statistics of a 200,000-row sample against KDD Cup 2010 (algebra).
TEST(Generator, SampleHasKddLikeStatistics) {
  const GeneratorSpec spec = small_kdda(200'000, 2010);
  const Generator g(spec);
  std::vector<std::uint32_t> count(spec.features + 1, 0);
  std::uint64_t rows = 0, nnz = 0, positives = 0, real_values = 0, long_rows = 0;
  bool sorted = true, in_range = true, values_ok = true;
  GenRunOptions run;
  const GenStats stats = generate_stream(g, kTrainStream, spec.rows, run, {}, [&](GenBlock& b) {
    const CsrView v = b.rows.view();
    for (std::size_t r = 0; r < v.rows; ++r) {
      ++rows;
      positives += v.labels[r] > 0;
      long_rows += v.row_nnz(r) > 72;
      values_ok &= v.labels[r] == 1.0f || v.labels[r] == -1.0f;
      for (std::uint32_t k = v.offsets[r]; k < v.offsets[r + 1]; ++k) {
        ++nnz;
        in_range &= v.indices[k] >= 1 && v.indices[k] <= spec.features;
        if (k > v.offsets[r]) sorted &= v.indices[k - 1] < v.indices[k];
        ++count[v.indices[k]];
        const float x = v.value(k);
        values_ok &= x > 0 && x <= 1;
        real_values += x != 1.0f;
      }
    }
  });
  EXPECT_EQ(stats.rows, rows);
  EXPECT_EQ(stats.nnz, nnz);
  EXPECT_EQ(stats.positives, positives);
  EXPECT_TRUE(sorted) << "indices strictly increasing within every row (no duplicates)";
  EXPECT_TRUE(in_range);
  EXPECT_TRUE(values_ok);
  const double mean_nnz = static_cast<double>(nnz) / rows;
  EXPECT_NEAR(mean_nnz, 36, 3);
  EXPECT_GT(long_rows, rows / 200) << "a long tail of row lengths";
  const double positive = static_cast<double>(positives) / rows;
  EXPECT_GT(positive, 0.80);
  EXPECT_LT(positive, 0.90);
  const double real = static_cast<double>(real_values) / nnz;
  EXPECT_GT(real, 0.05);
  EXPECT_LT(real, 0.15);

  // Heavy tail: the top 1% of the features that occur hold more than 30% of the non-zeros.
  std::vector<std::uint32_t> used;
  for (const std::uint32_t c : count)
    if (c > 0) used.push_back(c);
  std::sort(used.begin(), used.end(), std::greater<>());
  const std::size_t top = used.size() / 100;
  const double top_share =
      static_cast<double>(std::accumulate(used.begin(), used.begin() + top, std::uint64_t{0})) /
      nnz;
  EXPECT_GT(top_share, 0.30) << used.size() << " features used";
  // Frequency is not monotone in id: the 100 most frequent features spread over the id range.
  std::vector<std::uint32_t> ids(count.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + 100, ids.end(),
                    [&](std::uint32_t a, std::uint32_t b) { return count[a] > count[b]; });
  const auto low = std::count_if(ids.begin(), ids.begin() + 100,
                                 [&](std::uint32_t id) { return id <= spec.features / 2; });
  EXPECT_GT(low, 30);
  EXPECT_LT(low, 70);
}

// The fraction of labels that agree with the noiseless rule re-evaluated from the written row.
double agreement(const Generator& g, std::uint64_t stream, std::uint64_t rows) {
  std::uint64_t agree = 0;
  generate_stream(g, stream, rows, GenRunOptions{}, {}, [&](GenBlock& b) {
    const CsrView v = b.rows.view();
    for (std::size_t r = 0; r < v.rows; ++r)
      agree += g.model().noiseless_label(v, r) == v.labels[r];
  });
  return static_cast<double>(agree) / static_cast<double>(rows);
}

TEST(Generator, LabelsFollowThePlantedLinearRuleUpToNoise) {
  GeneratorSpec spec = small_kdda(50'000);
  const Generator g(spec);
  EXPECT_EQ(g.model().faces(), 1);
  const double a = agreement(g, kTrainStream, spec.rows);
  EXPECT_GE(a, 1 - spec.noise - 0.01);
  EXPECT_LE(a, 1 - spec.noise + 0.01);
  EXPECT_GE(agreement(g, kTestStream, spec.rows), 1 - spec.noise - 0.01);
  spec.noise = 0;
  EXPECT_EQ(agreement(Generator(spec), kTrainStream, 20'000), 1.0);
  // Indices the generator never writes (0, beyond the features) weigh nothing.
  CsrBuffer foreign;
  foreign.labels = {1.0f};
  foreign.indices = {0, static_cast<std::uint32_t>(spec.features) + 5, 4294967295u};
  foreign.offsets = {0, 3};
  EXPECT_EQ(g.model().score(foreign.view(), 0), 0.0);
}

// --feature-order frequency: the scattered rows relabelled (id = frequency rank), re-sorted.
TEST(Generator, FrequencyOrderRelabelsTheScatteredRows) {
  GeneratorSpec spec = small_kdda(5'000);
  spec.model = PlantedModelKind::kPolytope;
  const Generator scattered(spec);
  spec.feature_order = FeatureOrder::kFrequency;
  const Generator ordered(spec);
  CsrBuffer a, b;
  scattered.generate_rows(kTrainStream, 0, spec.rows, a);
  ordered.generate_rows(kTrainStream, 0, spec.rows, b);
  ASSERT_EQ(a.labels, b.labels);
  ASSERT_EQ(a.offsets, b.offsets);
  const CsrView va = a.view(), vb = b.view();
  std::uint64_t low = 0;  // non-zeros among the 1,000 lowest ids of the ordered rows
  for (std::size_t r = 0; r < va.rows; ++r) {
    std::vector<std::pair<std::uint32_t, float>> relabelled, written;
    for (std::uint32_t k = va.offsets[r]; k < va.offsets[r + 1]; ++k)
      relabelled.emplace_back(scattered.permutation().inverse(va.indices[k] - 1) + 1, va.value(k));
    std::sort(relabelled.begin(), relabelled.end());
    for (std::uint32_t k = vb.offsets[r]; k < vb.offsets[r + 1]; ++k) {
      written.emplace_back(vb.indices[k], vb.value(k));
      if (k > vb.offsets[r]) {
        ASSERT_LT(vb.indices[k - 1], vb.indices[k]) << "row " << r;
      }
      low += vb.indices[k] <= 1000;
    }
    ASSERT_EQ(relabelled, written) << "row " << r;
    // Each generator's rule reads its own ids back to the same ranks (summed in another order).
    ASSERT_NEAR(scattered.model().score(va, r), ordered.model().score(vb, r), 1e-9) << "row " << r;
  }
  // Zipf(1) over 20.2 M features: the 1,000 most frequent hold about 7.5 / 17.4 of the mass.
  EXPECT_GT(static_cast<double>(low) / static_cast<double>(b.nnz()), 0.35);
  EXPECT_THROW(parse_feature_order("hashed"), UsageError);
  EXPECT_EQ(parse_feature_order(feature_order_name(FeatureOrder::kFrequency)),
            FeatureOrder::kFrequency);
}

TEST(Generator, PolytopeRuleEnclosesTheNegatives) {
  GeneratorSpec spec = small_kdda(50'000);
  spec.model = PlantedModelKind::kPolytope;
  spec.noise = 0.1;
  const Generator g(spec);
  EXPECT_EQ(g.model().faces(), 5);
  EXPECT_GE(agreement(g, kTrainStream, spec.rows), 1 - spec.noise - 0.01);
  std::uint64_t positives = 0;
  generate_stream(g, kTrainStream, spec.rows, GenRunOptions{}, {}, [&](GenBlock& b) {
    for (float y : b.rows.labels) positives += y > 0;
  });
  EXPECT_NEAR(static_cast<double>(positives) / spec.rows, 0.85, 0.02);
}

TEST(Generator, SmallFeatureSpacesStillTerminate) {
  GeneratorSpec spec = small_kdda(2000);
  spec.features = 40;
  spec.nnz = 30;
  spec.real_fraction = 0;
  const Generator g(spec);
  CsrBuffer b;
  g.generate_rows(kTrainStream, 0, spec.rows, b);
  EXPECT_FALSE(b.has_values);
  for (const std::uint32_t i : b.indices) ASSERT_LE(i, 40u);
  EXPECT_GT(static_cast<double>(b.nnz()) / b.rows(), 15);
}

TEST(Generator, InvalidSpecsAreUsageErrors) {
  const auto bad = [](auto edit) {
    GeneratorSpec spec = small_kdda(10);
    edit(spec);
    EXPECT_THROW(validate_spec(spec), UsageError);
  };
  bad([](GeneratorSpec& s) { s.rows = 0; });
  bad([](GeneratorSpec& s) { s.features = 0; });
  bad([](GeneratorSpec& s) { s.nnz = 0; });
  bad([](GeneratorSpec& s) { s.noise = 0.5; });
  bad([](GeneratorSpec& s) { s.faces = 0; });
  bad([](GeneratorSpec& s) { s.positive_fraction = 0.01; });
  EXPECT_THROW(generator_preset("rcv1"), UsageError);
  EXPECT_THROW(parse_planted_model("cubic"), UsageError);
  EXPECT_EQ(parse_planted_model("polytope"), PlantedModelKind::kPolytope);
}

}  // namespace
}  // namespace polymargin::io
