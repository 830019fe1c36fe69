// ASSIGN of the Convex Polytope Machine (CPM-paper Algorithm 2, docs/algorithms.md §2.4): which
// face a positive ("outer") example updates. The natural choice is the best-scoring face; while the
// entropy of the faces' share of positives is below h, the example is sent instead to the best face
// among those that would raise the entropy. Entropies are kept in nats and updated in O(K) per call
// from the face counts n_k (H = ln N − S/N, S = Σ n_k ln n_k, 0 ln 0 := 0); the history UNADJ is a
// table from example identity to its last natural (unadjusted) face.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace polymargin::engine {

/// n ln n with 0 ln 0 = 0 (the limit; the reference code's NaN here forces spurious adjustments).
inline double n_log_n(std::int64_t n) {
  return n > 0 ? static_cast<double>(n) * std::log(static_cast<double>(n)) : 0.0;
}

/// Entropy in nats of the distribution n_k / Σ n (0 for an empty one), computed term by term: the
/// brute-force oracle of the incremental form.
double count_entropy(const std::vector<std::int64_t>& counts);

/// The face counts of the history and the O(1) entropy of each one-entry change.
class FaceCounts {
 public:
  explicit FaceCounts(int faces) : n_(static_cast<std::size_t>(faces), 0), f_(n_.size(), 0.0) {}
  /// The counts of a saved history (n_k ≥ 0): the same state as the one that reached them, since
  /// the cached terms and the total are functions of the counts.
  explicit FaceCounts(const std::vector<std::int64_t>& counts);

  int faces() const { return static_cast<int>(n_.size()); }
  std::int64_t count(int k) const { return n_[static_cast<std::size_t>(k)]; }
  std::int64_t total() const { return total_; }
  const std::vector<std::int64_t>& counts() const { return n_; }

  /// Current entropy H (nats).
  double entropy() const { return entropy_of(total_, sum_f()); }

  /// H after the example whose entry is `old_face` (−1: not in the history) gets entry `face`.
  double entropy_if(int old_face, int face) const {
    if (old_face == face) return entropy();
    const std::size_t k = static_cast<std::size_t>(face);
    double s = sum_f() - f_[k] + n_log_n(n_[k] + 1);
    if (old_face < 0) return entropy_of(total_ + 1, s);
    const std::size_t o = static_cast<std::size_t>(old_face);
    s += n_log_n(n_[o] - 1) - f_[o];
    return entropy_of(total_, s);
  }

  /// Whether moving an existing entry from `old_face` to `face` raises H: exactly when
  /// n_face < n_old − 1 (equal entropy when n_face = n_old − 1), so no rounding decides it.
  bool move_raises_entropy(int old_face, int face) const {
    return count(face) < count(old_face) - 1;
  }

  /// Records the entry change old_face → face (old_face −1: a new example).
  void move(int old_face, int face) {
    if (old_face == face) return;
    if (old_face >= 0) {
      const std::size_t o = static_cast<std::size_t>(old_face);
      f_[o] = n_log_n(--n_[o]);
    } else {
      ++total_;
    }
    const std::size_t k = static_cast<std::size_t>(face);
    f_[k] = n_log_n(++n_[k]);
  }

 private:
  static double entropy_of(std::int64_t total, double s) {
    if (total <= 0) return 0.0;
    const double n = static_cast<double>(total);
    return std::log(n) - s / n;
  }
  // S summed afresh from the cached terms on every call (O(K)), so it never drifts.
  double sum_f() const {
    double s = 0;
    for (const double v : f_) s += v;
    return s;
  }

  std::vector<std::int64_t> n_;
  std::vector<double> f_;  // n_k ln n_k, cached
  std::int64_t total_ = 0;
};

/// UNADJ: example identity (a 64-bit hash of its content, never 0) → its last natural face.
/// Open addressing with linear probing, sized once for the number of outer-class rows. A key and
/// its face share one 16-byte entry, so a look-up at KDD size (hundreds of MB) is one cache miss,
/// and the trainer can request that line a row ahead (prefetch).
class AssignHistory {
 public:
  explicit AssignHistory(std::uint64_t expected_entries);
  /// The slot of `key`, found or claimed (its face is −1 when the key is new).
  std::int32_t& face_of(std::uint64_t key);
  /// Asks for the cache line of `key`'s home entry (a hint; changes nothing).
  void prefetch(std::uint64_t key) const {
    __builtin_prefetch(&entries_[key & (entries_.size() - 1)], 1);
  }
  std::uint64_t size() const { return size_; }
  std::uint64_t capacity() const { return entries_.size(); }
  /// The entries in table order, as two plain arrays (a checkpoint's content).
  void export_entries(std::vector<std::uint64_t>& keys, std::vector<std::int32_t>& faces) const;
  /// The same a chunk at a time, without a copy of the table (a checkpoint written as it goes):
  /// from table slot `slot` on, the keys (or the faces) of the next entries into `out` until it
  /// is full or the table ends; returns the slot to go on from. Chunks taken one after the other
  /// from slot 0 give export_entries' arrays.
  std::uint64_t copy_keys(std::uint64_t slot, std::span<std::uint64_t> out) const;
  std::uint64_t copy_faces(std::uint64_t slot, std::span<std::int32_t> out) const;
  /// A table of `capacity` slots (a power of two) holding the exported entries: every look-up,
  /// insertion and growth then goes as in the table they came from (a key's slot may differ,
  /// which no result depends on). std::invalid_argument for a capacity or entries that cannot be.
  static AssignHistory restore(std::uint64_t capacity, const std::vector<std::uint64_t>& keys,
                               const std::vector<std::int32_t>& faces);
  /// Bytes used for `expected_entries`, for the memory plan.
  static std::uint64_t bytes_for(std::uint64_t expected_entries);

 private:
  struct Entry {
    std::uint64_t key = 0;  // 0: empty
    std::int32_t face = -1;
  };
  void grow();
  template <typename T>
  std::uint64_t copy_field(std::uint64_t slot, std::span<T> out, T Entry::*field) const;
  std::vector<Entry> entries_;
  std::uint64_t size_ = 0;
};

/// The result of ASSIGN: the face to update and the natural face the history records.
struct Assignment {
  int adjusted = 0;
  int natural = 0;
};

/// The ASSIGN decision of §2.4 for an example with history entry `old_face` (−1: new) and face
/// scores `scores[0, K)`; `threshold` = h in nats (≤ 0: off). Does not change `counts`.
/// - natural = argmax_k scores (ties → lowest k);
/// - warm-up: while fewer than 5K examples are in the history, or with h ≤ 0, adjusted = natural;
/// - if H(UNADJ + (x, natural)) ≥ h: adjusted = natural;
/// - else adjusted = argmax over K_inc = {k : H(UNADJ + (x, k)) > H(UNADJ)} (ties → lowest k),
///   natural when K_inc is empty.
Assignment assign_face(const FaceCounts& counts, int old_face, const double* scores,
                       double threshold);

}  // namespace polymargin::engine
