#include "io/feature_order.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "engine/sparse.h"

namespace polymargin::io {

std::vector<std::uint32_t> order_by_count(std::vector<std::uint32_t> counts) {
  // A counting sort, in place: the first new id of each count, from the largest count down, then
  // each id takes the next one of its count, ids in increasing order.
  const std::uint32_t top = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  std::vector<std::uint32_t> next(std::size_t{top} + 1, 0);
  for (const std::uint32_t c : counts) ++next[c];
  std::uint32_t first = 0;
  for (std::size_t c = next.size(); c-- > 0;) first += std::exchange(next[c], first);
  for (std::uint32_t& c : counts) c = next[c]++;
  return counts;
}

std::vector<std::uint32_t> frequency_order(const ShardSet& shards, int threads) {
  const Manifest& manifest = shards.manifest();
  if (manifest.nnz == 0) return {};
  const std::uint64_t ids = std::uint64_t{manifest.max_index} + 1;
  std::uint64_t blocks = 0;
  for (const ShardInfo& s : manifest.shards) blocks += s.blocks;
  // The first block of every window of k blocks: one reader part of k.
  const std::uint64_t k = std::max<std::uint64_t>(1, blocks / kFrequencySampleBlocks);
  ReadOptions read;
  read.shuffle = false;
  read.threads = threads;
  read.window_blocks =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(k, std::uint32_t{1} << 20));
  read.parts = read.window_blocks;
  read.part = 0;
  std::vector<std::uint32_t> counts(ids, 0);
  // Counted, then looked up by the reader, at random: on 2 MB pages, one TLB entry covers 2 MB.
  engine::sparse::collapse_to_huge_pages(counts.data(), counts.size() * sizeof(std::uint32_t));
  shards.scan(read, [&](const CsrView& batch) {
    if (batch.rows == 0) return;
    for (std::size_t e = batch.offsets[0]; e < batch.offsets[batch.rows]; ++e)
      if (batch.indices[e] < ids) ++counts[batch.indices[e]];
  });
  return order_by_count(std::move(counts));
}

std::vector<float> renumbered_maxabs(const ShardSet& shards, std::span<const std::uint32_t> table) {
  const std::vector<float>& by_id = shards.feature_maxabs();  // kept: the model folds it in
  // Ids beyond the table keep their number, and their maximum.
  std::vector<float> by_new_id(std::max(table.size(), by_id.size()), 0.0f);
  constexpr std::size_t kAhead = 16;  // the writes land at random: their lines requested ahead
  for (std::size_t f = 0; f < by_new_id.size(); ++f) {
    if (f + kAhead < table.size() && table[f + kAhead] < by_new_id.size())
      __builtin_prefetch(by_new_id.data() + table[f + kAhead], 1);
    const std::size_t to = f < table.size() ? table[f] : f;
    if (to >= table.size() && f < table.size())
      throw std::invalid_argument("renumbered_maxabs: the table is not a permutation of its ids");
    if (f < by_id.size()) by_new_id[to] = by_id[f];
  }
  // Looked up for every non-zero: on 2 MB pages (its hot part is a few lines either way).
  engine::sparse::collapse_to_huge_pages(by_new_id.data(), by_new_id.size() * sizeof(float));
  return by_new_id;
}

}  // namespace polymargin::io
