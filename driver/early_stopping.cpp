#include "driver/early_stopping.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/errors.h"
#include "io/split.h"

namespace polymargin::driver {
namespace {

// The seed stream of the held-out blocks' order.
constexpr std::uint64_t kHeldOutStream = 0x6175'746f;  // "auto"
// Re-blocked data get about this many blocks per unit of the fraction (10 / 0.1 = 100 blocks), so
// that whole blocks make the fraction to within a few percent of it.
constexpr double kBlocksPerFraction = 10;

// Blocks held out of `blocks` for `fraction`, or 0 when whole blocks cannot make it: at least one,
// not all, and their share within half the fraction of it.
std::uint64_t held_count(std::uint64_t blocks, double fraction) {
  const auto k = static_cast<std::uint64_t>(std::llround(fraction * static_cast<double>(blocks)));
  if (k < 1 || k >= blocks) return 0;
  const double share = static_cast<double>(k) / static_cast<double>(blocks);
  return std::abs(share - fraction) <= fraction / 2 ? k : 0;
}

io::ReadOptions plain_read(int threads) {
  io::ReadOptions read;
  read.shuffle = false;
  read.threads = threads;
  read.window_blocks = 1;
  return read;
}

}  // namespace

HeldOut::HeldOut(const io::ShardSet& all, double fraction, std::uint64_t seed, int threads,
                 const std::string& data)
    : all_(&all), fraction_(fraction) {
  const io::Manifest& given = all.manifest();
  const auto refuse = [&] {
    throw UsageError("train: --epochs auto: --validation-fraction " + std::to_string(fraction) +
                     " of the " + std::to_string(given.rows) + " rows of " + data +
                     " holds out no row, or all of them: give --epochs N, or another "
                     "--validation-fraction");
  };
  std::uint64_t k = held_count(given.total_blocks, fraction);
  if (k == 0) {
    // Too few blocks: the rows in smaller blocks, in memory (such data are a few blocks).
    const std::uint64_t wanted = std::min<std::uint64_t>(
        given.rows, static_cast<std::uint64_t>(std::ceil(kBlocksPerFraction / fraction)));
    if (wanted < 2) refuse();
    const std::uint64_t block_rows = (given.rows + wanted - 1) / wanted;
    const std::uint32_t old_rows = std::max<std::uint32_t>(given.block_rows, 1);
    parts_ = static_cast<std::uint32_t>((old_rows + block_rows - 1) / block_rows);
    io::ConvertOptions convert;
    convert.codec = io::Codec::kRaw;
    convert.block_rows = static_cast<std::uint32_t>(block_rows);
    io::ShardWriter writer(convert, threads, all.dir());
    writer.declare_max_index(given.max_index);
    all.scan(plain_read(threads), [&](const CsrView& rows) { writer.append(rows); });
    copy_.emplace(writer.finish_in_memory(given.index_base));
    k = held_count(copy_->manifest().total_blocks, fraction);
    if (k == 0) refuse();
  }
  const io::Manifest& manifest = set().manifest();
  std::vector<std::pair<double, std::uint32_t>> order(manifest.total_blocks);
  for (std::uint32_t b = 0; b < order.size(); ++b)
    order[b] = {io::split_uniform(seed ^ kHeldOutStream, b), b};
  std::sort(order.begin(), order.end());
  for (std::uint64_t i = 0; i < order.size(); ++i)
    (i < k ? held_blocks_ : train_blocks_).push_back(order[i].second);
  std::sort(held_blocks_.begin(), held_blocks_.end());
  std::sort(train_blocks_.begin(), train_blocks_.end());

  // The rows trained on: the set's counts less the held-out blocks' (read once, 1/10 of the rows).
  train_manifest_ = manifest;
  io::ReadOptions read = plain_read(threads);
  read.blocks = held_blocks_;
  std::uint64_t nnz = 0;
  set().scan(read, [&](const CsrView& rows) {
    held_rows_ += rows.rows;
    nnz += rows.nnz();
    for (std::size_t r = 0; r < rows.rows; ++r) {
      auto it = train_manifest_.label_counts.find(rows.labels[r]);
      if (it != train_manifest_.label_counts.end() && --it->second == 0)
        train_manifest_.label_counts.erase(it);
    }
  });
  if (held_rows_ == 0 || held_rows_ >= manifest.rows) refuse();
  train_manifest_.rows -= held_rows_;
  train_manifest_.nnz -= nnz;
  train_manifest_.total_blocks -= k;
}

nlohmann::ordered_json HeldOut::json() const {
  return {{"validation_fraction", fraction_},
          {"held_out_rows", held_rows_},
          {"held_out_blocks", held_blocks_.size()},
          {"blocks", set().manifest().total_blocks},
          {"reblocked", copy_.has_value()}};
}

bool StoppingRule::pass_end(double score, std::optional<double> accuracy) {
  ++passes;
  scores.push_back(score);
  if (accuracy) accuracies.push_back(*accuracy);
  if (passes < first_judged) return false;
  const bool finite = std::isfinite(score);
  const bool improved = finite && (!best || score < *best - tol * std::abs(*best));
  const bool better = finite && (!best || score < *best);
  if (better) {
    best = score;
    best_pass = passes;
  }
  without_progress = improved ? 0 : without_progress + 1;
  return better;
}

bool StoppingRule::stop() const {
  return without_progress >= patience || passes >= max_passes;
}

}  // namespace polymargin::driver
