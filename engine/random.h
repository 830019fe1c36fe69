// The project's one random-number generator, for shuffling, pairing, generation and splits. Our own
// generator and Fisher–Yates rather than <random>'s engines and std::shuffle: the standard fixes
// neither std::shuffle's algorithm nor the distributions, so the order of training rows would
// change with the standard library.
#pragma once

#include <cstddef>
#include <cstdint>

namespace polymargin {

/// One splitmix64 step on a plain state word (learner state stays plain, checkpointable scalars).
inline std::uint64_t splitmix64_next(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// splitmix64 (Steele, Lea & Flood, OOPSLA 2014): one 64-bit word of state, well-mixed output,
/// identical on every platform. Ample for shuffling; not for cryptography.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() { return splitmix64_next(state_); }

  /// Uniform in [0, n) for n > 0, without bias (Lemire, "Fast random integer generation in an
  /// interval", TOMACS 2019: multiply-shift, rejecting the few values that would over-represent).
  std::uint64_t below(std::uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
      const std::uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

 private:
  std::uint64_t state_;
};

/// A seed for stream `(a, b, c)`: nearby inputs (epoch 0, 1, 2 ...) give unrelated streams.
inline std::uint64_t derive_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0) {
  SplitMix64 g(a);
  SplitMix64 h(g.next() ^ b);
  SplitMix64 k(h.next() ^ c);
  return k.next();
}

/// Fisher–Yates (Durstenfeld's in-place form) over items[0, n).
template <class T>
void seeded_shuffle(T* items, std::size_t n, SplitMix64& rng) {
  for (std::size_t i = n; i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng.below(i));
    const T t = items[i - 1];
    items[i - 1] = items[j];
    items[j] = t;
  }
}

}  // namespace polymargin
