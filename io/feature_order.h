// Feature ids renumbered most frequent first, for a learner whose weights are indexed by id. At
// KDD size a step reads the weights of its row's ~36 features at random places in a 323 MB array;
// with the frequent features numbered first their weights share cache lines and stay cached, which
// takes a fifth or more off the learning time of ids given in no such order (hashed features, or
// generated ones: docs/performance.md#feature-ids-and-memory). The learner reads its rows through
// ReadOptions::renumber and maps its results back (engine::LdmTrainer::set_feature_slots): the
// shards, the model and everything else keep the ids of the data.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "io/shards.h"

namespace polymargin::io {

/// Blocks a frequency count looks at: every k-th block in storage order, k chosen so that about
/// this many are read (all of them in a smaller data set).
inline constexpr std::uint64_t kFrequencySampleBlocks = 64;

/// New ids for the ids [0, counts.size()): by decreasing count, equal counts (the unseen among
/// them) in the order of their ids. A permutation of [0, counts.size()), in the counts' place.
std::vector<std::uint32_t> order_by_count(std::vector<std::uint32_t> counts);

/// order_by_count of each feature id's occurrences in a fixed sample of the blocks of `shards`
/// (kFrequencySampleBlocks of them, evenly spread), for the ids [0, max_index]. A function of the
/// data alone: every process of a job, and a resumed run, get the same table. `threads` decode.
std::vector<std::uint32_t> frequency_order(const ShardSet& shards, int threads);

/// The feature maxima of `shards` (--scale maxabs) in the order of the new ids: entry table[f] is
/// id f's max |value|, ids beyond the table keep theirs (ReadOptions::renumbered_maxabs). `table`
/// must be a permutation of [0, table.size()) (std::invalid_argument).
std::vector<float> renumbered_maxabs(const ShardSet& shards, std::span<const std::uint32_t> table);

}  // namespace polymargin::io
