#include "engine/cpm_assign.h"

#include <bit>
#include <stdexcept>
#include <string>

namespace polymargin::engine {

double count_entropy(const std::vector<std::int64_t>& counts) {
  std::int64_t total = 0;
  for (const std::int64_t n : counts) total += n;
  if (total <= 0) return 0;
  double h = 0;
  for (const std::int64_t n : counts)
    if (n > 0) {
      const double p = static_cast<double>(n) / static_cast<double>(total);
      h -= p * std::log(p);
    }
  return h;
}

FaceCounts::FaceCounts(const std::vector<std::int64_t>& counts) : n_(counts), f_(counts.size()) {
  for (std::size_t k = 0; k < n_.size(); ++k) {
    if (n_[k] < 0) throw std::invalid_argument("negative face count");
    f_[k] = n_log_n(n_[k]);
    total_ += n_[k];
  }
}

namespace {
std::uint64_t capacity_for(std::uint64_t entries) {
  return std::bit_ceil(std::max<std::uint64_t>(16, 2 * entries));
}
}  // namespace

AssignHistory::AssignHistory(std::uint64_t expected_entries)
    : entries_(capacity_for(expected_entries)) {}

std::uint64_t AssignHistory::bytes_for(std::uint64_t expected_entries) {
  return capacity_for(expected_entries) * sizeof(Entry);
}

std::int32_t& AssignHistory::face_of(std::uint64_t key) {
  const std::uint64_t mask = entries_.size() - 1;
  // Keys are hashes already; the low bits pick the home slot.
  for (std::uint64_t i = key & mask;; i = (i + 1) & mask) {
    Entry& e = entries_[i];
    if (e.key == key) return e.face;
    if (e.key == 0) {
      if (4 * (size_ + 1) > 3 * entries_.size()) {  // more distinct rows than planned: grow
        grow();
        return face_of(key);
      }
      e.key = key;
      ++size_;
      return e.face;
    }
  }
}

void AssignHistory::export_entries(std::vector<std::uint64_t>& keys,
                                   std::vector<std::int32_t>& faces) const {
  keys.clear();
  faces.clear();
  keys.reserve(size_);
  faces.reserve(size_);
  for (const Entry& e : entries_)
    if (e.key != 0) {
      keys.push_back(e.key);
      faces.push_back(e.face);
    }
}

template <typename T>
std::uint64_t AssignHistory::copy_field(std::uint64_t slot, std::span<T> out,
                                        T Entry::*field) const {
  std::size_t filled = 0;
  for (; slot < entries_.size() && filled < out.size(); ++slot)
    if (entries_[slot].key != 0) out[filled++] = entries_[slot].*field;
  return slot;
}

std::uint64_t AssignHistory::copy_keys(std::uint64_t slot, std::span<std::uint64_t> out) const {
  return copy_field(slot, out, &Entry::key);
}

std::uint64_t AssignHistory::copy_faces(std::uint64_t slot, std::span<std::int32_t> out) const {
  return copy_field(slot, out, &Entry::face);
}

AssignHistory AssignHistory::restore(std::uint64_t capacity,
                                     const std::vector<std::uint64_t>& keys,
                                     const std::vector<std::int32_t>& faces) {
  if (capacity < 16 || !std::has_single_bit(capacity) || keys.size() != faces.size() ||
      4 * keys.size() > 3 * capacity)
    throw std::invalid_argument("ASSIGN history of " + std::to_string(keys.size()) +
                                " entries in " + std::to_string(capacity) + " slots");
  AssignHistory h(0);
  h.entries_.assign(capacity, Entry{});
  const std::uint64_t mask = capacity - 1;
  for (std::size_t j = 0; j < keys.size(); ++j) {
    if (keys[j] == 0) throw std::invalid_argument("ASSIGN history key 0 (the empty mark)");
    std::uint64_t i = keys[j] & mask;
    while (h.entries_[i].key != 0) {
      if (h.entries_[i].key == keys[j]) throw std::invalid_argument("ASSIGN history key twice");
      i = (i + 1) & mask;
    }
    h.entries_[i] = Entry{keys[j], faces[j]};
  }
  h.size_ = keys.size();
  return h;
}

void AssignHistory::grow() {
  std::vector<Entry> entries(entries_.size() * 2);
  const std::uint64_t mask = entries.size() - 1;
  for (const Entry& e : entries_) {
    if (e.key == 0) continue;
    std::uint64_t i = e.key & mask;
    while (entries[i].key != 0) i = (i + 1) & mask;
    entries[i] = e;
  }
  entries_.swap(entries);
}

Assignment assign_face(const FaceCounts& counts, int old_face, const double* scores,
                       double threshold) {
  const int faces = counts.faces();
  int natural = 0;
  for (int k = 1; k < faces; ++k)
    if (scores[k] > scores[natural]) natural = k;
  Assignment a{natural, natural};
  // Warm-up (CPM-ref): the entropy of a handful of examples says nothing; wait for 5K of them.
  if (threshold <= 0 || counts.total() < 5 * static_cast<std::int64_t>(faces)) return a;
  if (counts.entropy_if(old_face, natural) >= threshold) return a;
  const double current = counts.entropy();
  int best = -1;
  for (int k = 0; k < faces; ++k) {
    // A move between faces is decided on the counts (exact); a new entry by the O(1) entropy.
    const bool raises = old_face >= 0 ? counts.move_raises_entropy(old_face, k)
                                      : counts.entropy_if(-1, k) > current;
    if (raises && (best < 0 || scores[k] > scores[best])) best = k;
  }
  if (best >= 0) a.adjusted = best;
  return a;
}

}  // namespace polymargin::engine
