#include "driver/tune_data.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <map>

#include "driver/tune.h"
#include "engine/csr.h"
#include "engine/errors.h"
#include "io/cell_cache.h"
#include "io/split.h"

namespace polymargin::driver {
namespace {

// The seed streams of the search's subsample and of its holdout's blocks (folds use the run's seed
// itself).
constexpr std::uint64_t kSampleStream = 0x7475'6e65;   // "tune"
constexpr std::uint64_t kHoldoutStream = 0x686f'6c64;  // "hold"
// Repeat r of the cross-validation splits with seed + r·kRepeatStream (repeat 0: the seed itself).
constexpr std::uint64_t kRepeatStream = 0x9e37'79b9'7f4a'7c15;

// DataError for a fold without rows, or a class whose rows all fall in one fold: missing from the
// cell that holds that fold out, which then cannot score it (tiny data, a rare class).
void check_fold_counts(const io::SplitCounts& counts, const Folds& folds, const std::string& data) {
  for (std::size_t f = 0; f < counts.fold_rows.size(); ++f)
    if (counts.fold_rows[f] == 0)
      throw DataError(data, 0, 0,
                      "--tune: fold " + std::to_string(f + 1) + " of " +
                          std::to_string(folds.folds) + " is empty (" +
                          std::to_string(folds.searched) + " rows): use fewer --tune-folds");
  std::map<float, std::uint64_t> label_rows;
  for (const auto& fold : counts.fold_labels)
    for (const auto& [label, n] : fold) label_rows[label] += n;
  for (std::size_t f = 0; f < counts.fold_labels.size(); ++f)
    for (const auto& [label, n] : counts.fold_labels[f]) {
      if (n == label_rows[label])
        throw DataError(
            data, 0, 0,
            "--tune: " + (n == 1 ? "the one row" : "all " + std::to_string(n) + " rows") +
                " of label " + io::label_text(label) + " fall" + (n == 1 ? "s" : "") +
                " in fold " + std::to_string(f + 1) + " of " + std::to_string(folds.folds) +
                ", so the cell that holds it out trains without that class: " +
                (n == 1 || folds.folds == 2 ? "add rows of that class, or leave it out"
                                            : "use fewer --tune-folds"));
    }
}

// Feature ids renumbered 1, 2, … in their order (so a row's ids stay sorted): the search's cells
// then allocate weights for the features the search has, not for every id of the data (at KDD
// size 2 M of 20 M), and a cell costs what its rows cost.
struct DenseIds {
  std::vector<std::uint64_t> seen;  // a bit per raw id
  std::vector<std::uint32_t> rank;  // ids seen before each word of `seen`

  void note(const CsrBuffer& rows) {
    for (const std::uint32_t id : rows.indices) {
      if (id / 64 >= seen.size()) seen.resize(id / 64 + 1, 0);
      seen[id / 64] |= std::uint64_t{1} << (id % 64);
    }
  }
  std::uint64_t finish() {
    rank.resize(seen.size());
    std::uint32_t count = 0;
    for (std::size_t w = 0; w < seen.size(); ++w) {
      rank[w] = count;
      count += static_cast<std::uint32_t>(std::popcount(seen[w]));
    }
    return count;
  }
  void apply(CsrBuffer& rows) const {
    for (std::uint32_t& id : rows.indices) {
      const std::uint64_t below = seen[id / 64] & ((std::uint64_t{1} << (id % 64)) - 1);
      id = 1 + rank[id / 64] + static_cast<std::uint32_t>(std::popcount(below));
    }
  }
};

void write_shards(const CsrBuffer& rows, const std::string& path, int threads) {
  io::ConvertOptions options;
  options.codec = io::Codec::kRaw;  // read by every cell, several epochs each: no decode work
  options.durable = false;          // temporary: gone with the search
  io::ShardWriter writer(path, options, threads);
  writer.append(rows.view());
  writer.finish(1, {}, 0);
}

// The blocks of a holdout: which are held out (the first in a seeded order, up to
// kTuneHoldoutFraction of the rows or kTuneHoldoutRows rows) and the share of the others' rows
// the search trains on.
std::vector<bool> choose_holdout(Folds& folds, std::uint64_t block_rows, std::uint64_t seed,
                                 std::uint64_t search_rows, const std::string& data) {
  const std::uint64_t rows = folds.rows;
  if (folds.blocks < 2)
    throw DataError(data, 0, 0,
                    "--tune: a holdout of whole blocks needs two blocks or more, and the data "
                    "have one: convert it with a smaller --block-rows, or raise --tune-rows to "
                    "its " +
                        std::to_string(rows) + " rows for cross-validation");
  const auto wanted = std::min<std::uint64_t>(
      kTuneHoldoutRows,
      static_cast<std::uint64_t>(kTuneHoldoutFraction * static_cast<double>(rows)));
  folds.holdout_blocks =
      std::clamp<std::uint64_t>((wanted + block_rows - 1) / block_rows, 1, folds.blocks - 1);
  std::vector<std::pair<double, std::uint64_t>> order(folds.blocks);
  for (std::uint64_t b = 0; b < folds.blocks; ++b)
    order[b] = {io::split_uniform(seed ^ kHoldoutStream, b), b};
  std::sort(order.begin(), order.end());
  std::vector<bool> held(folds.blocks, false);
  for (std::uint64_t k = 0; k < folds.holdout_blocks; ++k) held[order[k].second] = true;
  const double others =
      static_cast<double>(rows) - static_cast<double>(folds.holdout_blocks * block_rows);
  const auto wanted_rows = static_cast<double>(search_rows);
  folds.sample_fraction = others > wanted_rows ? wanted_rows / others : 1;
  return held;
}

}  // namespace

io::Manifest count_rows(const SearchData& data) {
  io::Manifest counts;
  if (data.held) {
    counts = data.held->manifest();
  } else if (std::optional<io::ShardSet> set = data.open_directory()) {
    counts = set->manifest();
  } else {
    data.for_each_batch([&](const CsrView& batch) {
      counts.rows += batch.rows;
      for (std::size_t r = 0; r < batch.rows; ++r) ++counts.label_counts[batch.labels[r]];
    });
  }
  if (counts.rows == 0) throw DataError(data.name, 0, 0, "--tune: no rows");
  return counts;
}

Folds write_folds(const SearchData& data, int k, int repeats, std::uint64_t seed,
                  const std::string& dir, std::uint64_t rows) {
  Folds folds;
  folds.rows = rows;
  folds.folds = k;
  folds.repeats = repeats;
  // One pass over the data feeds every repeat's splitter; repeat 0's folds are those of the seed.
  std::vector<std::unique_ptr<io::Splitter>> splitters;
  for (int r = 0; r < folds.repeats; ++r) {
    io::SplitOptions options;
    options.folds = k;
    options.seed = seed + static_cast<std::uint64_t>(r) * kRepeatStream;
    splitters.push_back(std::make_unique<io::Splitter>(
        dir + (r == 0 ? "/data" : "/data-" + std::to_string(r)), options));
  }
  folds.index_base = data.for_each_batch([&](const CsrView& batch) {
    for (const auto& splitter : splitters) splitter->append(batch);
  });
  for (const auto& splitter : splitters) {
    const io::SplitCounts counts = splitter->finish();
    folds.files.insert(folds.files.end(), counts.outputs.begin(), counts.outputs.end());
    folds.searched = counts.rows;
    check_fold_counts(counts, folds, data.name);
  }
  folds.scored = k * folds.repeats;
  return folds;
}

// Large data: whole blocks (a shard set's own; of text, runs of kTuneBlockRows rows, or of 1/64 of
// the rows when that is fewer) held out (choose_holdout); of the other blocks a seeded subsample
// of about search_rows rows. Both are held in memory (the rows are capped, not their bytes),
// renumbered (DenseIds) and written as raw shards.
Folds write_holdout(const SearchData& data, std::uint64_t seed, std::uint64_t search_rows,
                    const std::string& dir, std::uint64_t rows) {
  Folds folds;
  folds.rows = rows;
  folds.scored = 1;
  std::optional<io::ShardSet> directory = data.open_directory();  // opened once: counted, read
  const io::ShardSet* set = data.held ? data.held.get() : directory ? &*directory : nullptr;
  std::uint64_t block_rows = kTuneBlockRows;
  if (set) {
    const io::Manifest& manifest = set->manifest();
    folds.blocks = manifest.total_blocks;
    block_rows = manifest.rows / std::max<std::uint64_t>(1, manifest.total_blocks);
  } else {
    block_rows = std::clamp<std::uint64_t>(rows / 64, 1, kTuneBlockRows);
    folds.blocks = (rows + block_rows - 1) / block_rows;
  }
  const std::vector<bool> held = choose_holdout(folds, block_rows, seed, search_rows, data.name);

  CsrBuffer train, holdout;
  std::uint64_t row = 0, block = 0;
  // An in-memory set's positions are 32-bit: the rows are capped, and so must their non-zeros be.
  auto append = [&](CsrBuffer& to, const CsrView& batch, std::size_t r, bool sample) {
    if (to.indices.size() + (batch.offsets[r + 1] - batch.offsets[r]) >
        std::numeric_limits<std::uint32_t>::max())
      throw MemoryError(data.name + ": --tune's " +
                        (sample ? "search sample" : "holdout of whole blocks") +
                        " would hold more than 4294967295 non-zeros; " +
                        (sample ? "lower --tune-rows" : "convert with a smaller --block-rows"));
    to.append_row(batch, r);
  };
  auto take = [&](const CsrView& batch, std::uint64_t b) {
    if (held[std::min(b, folds.blocks - 1)]) {
      for (std::size_t r = 0; r < batch.rows; ++r) append(holdout, batch, r, false);
      row += batch.rows;
      return;
    }
    for (std::size_t r = 0; r < batch.rows; ++r, ++row)
      if (folds.sample_fraction >= 1 ||
          io::split_uniform(seed ^ kSampleStream, row) < folds.sample_fraction)
        append(train, batch, r, true);
  };
  if (set) {
    // Unshuffled, a window of one block: the sink sees each block once, in order.
    io::ReadOptions read;
    read.shuffle = false;
    read.window_blocks = 1;
    read.threads = data.threads;
    set->scan(read, [&](const CsrView& batch) { take(batch, block++); });
  } else {
    data.for_each_batch([&](const CsrView& batch) {
      for (std::size_t r = 0; r < batch.rows;) {  // cut at block boundaries
        const std::uint64_t b = row / block_rows;
        const std::size_t n = std::min<std::uint64_t>(batch.rows - r, (b + 1) * block_rows - row);
        CsrView part = batch;
        part.rows = n;
        part.labels = batch.labels + r;
        part.offsets = batch.offsets + r;
        take(part, b);
        r += n;
      }
    });
  }
  if (train.rows() == 0 || holdout.rows() == 0)
    throw DataError(data.name, 0, 0, "--tune: the holdout or the search sample is empty");
  DenseIds ids;
  ids.note(train);
  ids.note(holdout);
  folds.features = ids.finish();
  ids.apply(train);
  ids.apply(holdout);
  folds.searched = train.rows();
  folds.held_out = holdout.rows();
  folds.train = dir + "/search.shards";
  folds.holdout = dir + "/holdout.shards";
  write_shards(train, folds.train, data.threads);
  write_shards(holdout, folds.holdout, data.threads);
  return folds;
}

}  // namespace polymargin::driver
