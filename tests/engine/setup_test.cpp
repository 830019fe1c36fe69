// The kernel learners' set-up pieces (engine/setup.h): the factorisation and solves give Eigen's
// bits exactly (models do not change), the batched loops stop at a stop request and report their
// progress, and the kernel matrix and kernel LDM's operator stop between their pieces.
#include "engine/setup.h"

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "engine/kernel.h"
#include "engine/kldm.h"
#include "engine/random.h"

namespace polymargin::engine {
namespace {

// A symmetric positive-definite n × n matrix from a seeded generator: XᵀX/n + I.
Eigen::MatrixXd spd(Eigen::Index n, std::uint64_t seed) {
  SplitMix64 rng(seed);
  Eigen::MatrixXd x(n + 3, n);
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = 0; i < n + 3; ++i)
      x(i, j) = static_cast<double>(rng.next() >> 11) * 0x1.0p-53 - 0.5;
  Eigen::MatrixXd a = x.transpose() * x / static_cast<double>(n);
  a.diagonal().array() += 1.0;
  return a;
}

bool same_bits(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * a.size()) == 0;
}

TEST(Setup, CholeskyAndSolvesAreEigensBitForBit) {
  // Below 32 (unblocked), at the block size's steps (size/8 rounded to 16, within 8…128), beyond.
  for (const Eigen::Index n : {1, 7, 31, 32, 33, 100, 255, 256, 257, 600, 1100}) {
    const Eigen::MatrixXd a = spd(n, 7 + n);
    Eigen::MatrixXd eigen = a, ours = a;
    Eigen::LLT<Eigen::Ref<Eigen::MatrixXd>> llt(eigen);
    ASSERT_EQ(llt.info(), Eigen::Success);
    int calls = 0;
    const Watch watch{{}, [&](const char*, double) { ++calls; }};
    ASSERT_TRUE(cholesky_in_place(ours, watch, "factor"));
    EXPECT_TRUE(same_bits(eigen, ours)) << "n = " << n;
    if (n >= 32) EXPECT_GT(calls, 1) << "n = " << n;
    Eigen::MatrixXd rhs = spd(n, 99 + n).leftCols(std::min<Eigen::Index>(n, 70));
    const Eigen::MatrixXd solved = llt.solve(rhs);
    cholesky_solve_in_place(ours, rhs);
    EXPECT_TRUE(same_bits(solved, rhs)) << "n = " << n;
    Eigen::VectorXd v = a.col(0);
    const Eigen::VectorXd solved_v = llt.solve(v);
    cholesky_solve_in_place(ours, v);
    EXPECT_TRUE(same_bits(solved_v, v)) << "n = " << n;
  }
}

TEST(Setup, CholeskyRefusesAMatrixThatIsNotPositiveDefinite) {
  Eigen::MatrixXd a = spd(300, 3);
  a(200, 200) = -5;
  EXPECT_FALSE(cholesky_in_place(a, {}, "factor"));
}

TEST(Setup, BatchesCoverEveryUnitOnceAndStopWhenAsked) {
  std::vector<std::atomic<int>> seen(1000);
  std::vector<double> shares;
  parallel_batches(seen.size(), 64, {{}, [&](const char*, double done) { shares.push_back(done); }},
                   "units", [&](std::size_t begin, std::size_t end) {
                     for (std::size_t u = begin; u < end; ++u) ++seen[u];
                   });
  for (const auto& s : seen) EXPECT_EQ(s.load(), 1);
  ASSERT_EQ(shares.size(), 16u);
  EXPECT_EQ(shares.back(), 1.0);

  std::atomic<std::size_t> done{0};
  int polls = 0;
  const Watch stop_at_third{[&] { return ++polls == 3; }, {}};
  EXPECT_THROW(parallel_batches(1000, 64, stop_at_third, "units",
                                [&](std::size_t begin, std::size_t end) { done += end - begin; }),
               Stopped);
  EXPECT_EQ(done.load(), 3u * 64);  // the batch under way ends; no other starts
}

TEST(Setup, TheKernelMatrixAndKldmsOperatorStopBetweenTheirPieces) {
  // 700 rows of 20 features: 21 tiles of the kernel matrix's lower triangle… in batches.
  RowSet x;
  SplitMix64 rng(5);
  Eigen::VectorXd y(700);
  for (int i = 0; i < 700; ++i) {
    for (int f = 0; f < 20; ++f) {
      x.rows.indices.push_back(static_cast<std::uint32_t>(f));
      x.rows.values.push_back(static_cast<float>(rng.next() >> 40) * 0x1.0p-24f);
    }
    x.rows.labels.push_back(0);
    x.rows.offsets.push_back(static_cast<std::uint32_t>(x.rows.indices.size()));
    y(i) = i % 3 == 0 ? 1 : -1;
  }
  x.rows.has_values = true;
  x.finish();
  KernelSpec rbf;
  rbf.gamma = 0.5;
  tbb::task_arena one(1);  // one thread: batches of few tiles
  one.execute([&] {
    int polls = 0;
    std::vector<std::string> steps;
    const Watch stop_at_second{[&] { return ++polls == 2; },
                               [&](const char* step, double) { steps.push_back(step); }};
    EXPECT_THROW(gram_matrix(x, rbf, stop_at_second), Stopped);
    ASSERT_EQ(steps, std::vector<std::string>{"kernel matrix"});
    const Eigen::MatrixXd g = gram_matrix(x, rbf);
    EXPECT_TRUE(same_bits(g, gram_matrix(x, rbf, {{}, [](const char*, double) {}})));
    polls = 0;
    steps.clear();
    const Watch stop_at_tenth{[&] { return ++polls == 10; },
                              [&](const char* step, double) { steps.push_back(step); }};
    EXPECT_THROW(ldm_dual_operator(g, y, 2.0, stop_at_tenth), Stopped);
    ASSERT_EQ(steps.size(), 9u);
    EXPECT_EQ(steps.front(), "Cholesky factor");  // 700 rows: blocks of 80 columns, 9 of them
  });
}

}  // namespace
}  // namespace polymargin::engine
