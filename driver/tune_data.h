// The data of a --tune search (driver/tune.h), written once before its cells: every row in k
// seeded fold files (cross-validation), or, above TuneJob::search_rows rows, a holdout of whole
// blocks and a seeded subsample of the other blocks as two shard directories. Read from the job's
// files or from its shard set held in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/cell_cache.h"
#include "io/shards.h"

namespace polymargin::driver {

/// The search's data, as it reads it: files (text, or one shard directory), or a shard set held in
/// memory.
struct SearchData {
  std::vector<std::string> files;
  std::shared_ptr<const io::ShardSet> held;
  int threads = 0;
  std::string name;  // for messages

  /// The one shard directory given, opened; none for text or a set held.
  std::optional<io::ShardSet> open_directory() const {
    if (!held && files.size() == 1 && io::is_shard_dir(files[0]))
      return io::ShardSet::open(files[0]);
    return std::nullopt;
  }
  /// Every row in data order; returns their index base.
  int for_each_batch(const io::RowSink& sink) const {
    if (!held) return io::for_each_batch(files, threads, sink);
    io::ReadOptions read;
    read.shuffle = false;
    read.threads = threads;
    held->scan(read, sink);
    return held->manifest().index_base;
  }
};

/// The data of the search. Up to search_rows rows: every row in k seeded fold files, each setting
/// scored on every fold (cross-validation). Above: a holdout of whole blocks and a seeded row
/// subsample of the other blocks to train on, each written once as a shard directory whose feature
/// ids are renumbered densely (write_holdout), each setting trained once and scored once.
struct Folds {
  std::vector<std::string> files;  // cross-validation: the fold files, k of each repeat in turn
  int folds = 5;                   // cross-validation: k
  int repeats = 1;                 // cross-validation: seeded splits into k folds
  std::string train, holdout;      // holdout: the two shard directories
  std::uint64_t rows = 0;          // rows of the data
  std::uint64_t searched = 0;      // rows the search trains on (and, with CV, scores on)
  std::uint64_t held_out = 0;      // rows of the holdout
  std::uint64_t holdout_blocks = 0, blocks = 0;
  std::uint64_t features = 0;  // feature ids of the search's data, after renumbering
  double sample_fraction = 1;  // share of the other blocks' rows searched
  int scored = 0;              // folds a setting is scored on (k × repeats); 1: the holdout
  int index_base = 1;          // of the fold files (the data's); a holdout's ids are renumbered
};

/// The rows of the data and their labels: a shard set says them, text is counted by a first pass.
/// DataError for no rows.
io::Manifest count_rows(const SearchData& data);
/// Every row in `k` seeded fold files under `dir`, `repeats` times (seeds seed + r·φ); DataError
/// for an empty fold or a class whose rows all fall in one fold.
Folds write_folds(const SearchData& data, int k, int repeats, std::uint64_t seed,
                  const std::string& dir, std::uint64_t rows);
/// The holdout of whole blocks and the subsample of about `search_rows` rows of the others, their
/// ids renumbered densely, as two raw shard directories under `dir`.
Folds write_holdout(const SearchData& data, std::uint64_t seed, std::uint64_t search_rows,
                    const std::string& dir, std::uint64_t rows);

}  // namespace polymargin::driver
