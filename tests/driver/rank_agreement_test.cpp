// check_ranks_agree over ranks made of threads (an engine::Peers whose sum meets at a barrier):
// ranks that agree pass after one sum; ranks that differ are all refused with the same message,
// naming the first rank that differs and every differing key, other data before other options.
#include <gtest/gtest.h>

#include <barrier>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "driver/job.h"
#include "engine/errors.h"

namespace polymargin::driver {
namespace {

// `count` ranks in threads: rank r calls check_ranks_agree(data(r), config(r)); what each threw
// ("" when nothing), and the sums made.
struct Outcome {
  std::vector<std::string> messages;
  std::vector<std::string> kinds;  // "data", "usage" or ""
  int sums = 0;
};

Outcome agree_in_threads(int count, const std::function<nlohmann::json(int)>& data,
                         const std::function<nlohmann::json(int)>& config) {
  std::barrier meet(count);
  std::vector<std::span<double>> arrays(static_cast<std::size_t>(count));
  std::vector<double> total;
  std::mutex lock;
  Outcome outcome;
  outcome.messages.resize(static_cast<std::size_t>(count));
  outcome.kinds.resize(static_cast<std::size_t>(count));
  std::vector<std::thread> ranks;
  for (int r = 0; r < count; ++r)
    ranks.emplace_back([&, r] {
      engine::Peers peers{r, count, {}};
      peers.sum = [&, r](std::span<double> values) {
        arrays[static_cast<std::size_t>(r)] = values;
        meet.arrive_and_wait();
        if (r == 0) {
          total.assign(values.size(), 0.0);
          for (const std::span<double> a : arrays)
            for (std::size_t k = 0; k < a.size(); ++k) total[k] += a[k];
          ++outcome.sums;
        }
        meet.arrive_and_wait();
        std::copy(total.begin(), total.end(), values.begin());
        meet.arrive_and_wait();
      };
      std::string message, kind;
      try {
        check_ranks_agree(peers, data(r), config(r), "train.shards");
      } catch (const DataError& e) {
        message = e.what(), kind = "data";
      } catch (const UsageError& e) {
        message = e.what(), kind = "usage";
      }
      const std::lock_guard<std::mutex> hold(lock);
      outcome.messages[static_cast<std::size_t>(r)] = message;
      outcome.kinds[static_cast<std::size_t>(r)] = kind;
    });
  for (std::thread& t : ranks) t.join();
  return outcome;
}

const nlohmann::json kData = {{"rows", 3000}, {"data_checksum", "00ff"}};

TEST(RankAgreement, RanksThatAgreeMakeOneSum) {
  const Outcome o = agree_in_threads(
      3, [](int) { return kData; }, [](int) { return nlohmann::json{{"epochs", 2}, {"c", 1.0}}; });
  EXPECT_EQ(o.sums, 1);
  for (const std::string& m : o.messages) EXPECT_EQ(m, "");
}

TEST(RankAgreement, OtherOptionsAreRefusedOnEveryRankNamingEachKey) {
  const Outcome o = agree_in_threads(
      3, [](int) { return kData; },
      [](int r) { return nlohmann::json{{"epochs", r == 0 ? 2 : 3}, {"c", r == 2 ? 0.5 : 1.0}}; });
  EXPECT_EQ(o.sums, 3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(o.kinds[r], "usage");
    EXPECT_EQ(o.messages[r], o.messages[0]);
  }
  EXPECT_NE(o.messages[0].find("train: rank 1 of 3 was given other options than rank 0 (rank 0 "
                               "-> rank 1: epochs 2 -> 3)"),
            std::string::npos)
      << o.messages[0];
}

TEST(RankAgreement, OtherDataComeBeforeOtherOptions) {
  const Outcome o = agree_in_threads(
      2,
      [](int r) {
        nlohmann::json d = kData;
        if (r == 1) d["rows"] = 2000;
        return d;
      },
      [](int r) { return nlohmann::json{{"max_index", r == 0 ? 40 : 39}}; });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(o.kinds[r], "data");
  EXPECT_NE(o.messages[1].find("train.shards: rank 1 of 2 was given other data than rank 0 (rank "
                               "0 -> rank 1: rows 3000 -> 2000)"),
            std::string::npos)
      << o.messages[1];
}

TEST(RankAgreement, OneRankAloneMakesNoSum) {
  const Outcome o = agree_in_threads(
      1, [](int) { return kData; }, [](int) { return nlohmann::json{{"epochs", 2}}; });
  EXPECT_EQ(o.sums, 0);
}

}  // namespace
}  // namespace polymargin::driver
