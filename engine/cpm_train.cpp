// CpmTrainer: the SGD of docs/algorithms.md §2.2 in the sparse form of §2.3, one Side per trained
// CPM.

#include <sys/mman.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "engine/cpm.h"
#include "engine/cpm_assign.h"
#include "engine/errors.h"
#include "engine/limits.h"
#include "engine/random.h"

namespace polymargin::engine {

namespace {

// Seed stream of which replicas get the extra steps of T's pass (Side::plan_interval).
constexpr std::uint64_t kExtraStepStream = 0x4350'4d45'5854'5241ULL;  // "CPMEXTRA"

// Batches of fewer non-zeros than this are learnt on one thread (CpmTrainer::learn says why).
constexpr std::size_t kSerialBatchNnz = 65536;

std::string text(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

// Example identity for the ASSIGN history: the paper keys UNADJ by the example x itself, so rows
// with the same content are the same entry. 64-bit hash of indices and values; 0 marks empty.
std::uint64_t row_key(const CsrView& rows, std::size_t r) {
  const std::uint32_t b = rows.offsets[r], n = rows.offsets[r + 1] - b;
  std::uint64_t h = XXH3_64bits(rows.indices + b, n * sizeof(std::uint32_t));
  if (rows.values) h = XXH3_64bits_withSeed(rows.values + b, n * sizeof(float), h);
  return h == 0 ? 1 : h;
}

std::uint64_t side_rows(const CpmProblem& p, double positive, double negative, double label) {
  std::uint64_t n = 0;
  for (const auto& [l, count] : p.label_counts)
    if ((label == 0 && (l == positive || l == negative)) || (label != 0 && l == label)) n += count;
  return n;
}

}  // namespace

void CpmConfig::validate() const {
  if (faces < 1)
    throw ConfigError("faces", "must be at least 1 (got " + std::to_string(faces) + ")");
  if (iterations == 0 && !(epochs > 0 && std::isfinite(epochs)))
    throw ConfigError("iterations", "must be at least 1, or epochs positive (got iterations " +
                                        std::to_string(iterations) + ", epochs " + text(epochs) +
                                        ")");
  if (!cost_in_range(c))
    throw ConfigError("c", "must be > 0, in [1e-30, 1e30] (got " + text(c) +
                               "): beyond, the steps underflow to an all-zero model or overflow");
  if (!(perplexity >= 1 && perplexity <= faces))
    throw ConfigError("perplexity", "must be in [1, K] = [1, " + std::to_string(faces) + "] (got " +
                                        text(perplexity) + ")");
  if (!(cost_ratio > 0) || !std::isfinite(cost_ratio))
    throw ConfigError("cost_ratio", "must be > 0 (got " + text(cost_ratio) + ")");
  if (hash_bits < 0 || hash_bits > 31)
    throw ConfigError("hash_bits", "must be in [1, 31], or 0 for no hashing (got " +
                                       std::to_string(hash_bits) + ")");
}

std::string sides_name(CpmSides sides) {
  switch (sides) {
    case CpmSides::kDouble:
      return "double";
    case CpmSides::kOuterPositive:
      return "outer=+1";
    case CpmSides::kOuterNegative:
      return "outer=-1";
  }
  return "?";
}

nlohmann::json CpmConfig::json() const {
  nlohmann::json j = {{"faces", faces},
          {"iterations", iterations},
          {"epochs", epochs},
          {"c", c},
          {"entropy_perplexity", perplexity},
          {"entropy_nats", std::log(perplexity)},
          {"cost_ratio", cost_ratio},
          {"sides", sides_name(sides)},
          {"seed", seed},
          {"hash_bits", hash_bits},
          {"precision", precision == CpmPrecision::kDouble ? "double" : "float"}};
  if (min_iterations > 0) j["min_iterations"] = min_iterations;
  if (lambda_of_epochs) j["lambda_of_epochs"] = true;
  return j;
}

// One CPM being trained: its labels, schedule, U and b, and its ASSIGN state. Sides train on
// different threads: each starts on its own cache line, so their counters never share one.
struct alignas(64) CpmTrainer::Side {
  std::size_t machine = 0;
  float positive = 1, negative = -1;  // the machine's raw labels
  int outer = 1;                      // +1: `positive` rows are outer
  int faces = 1;
  std::uint64_t slots = 0;
  FeatureHash hash;
  std::uint64_t seed = 0;
  std::uint64_t iterations = 0, steps = 0, rows = 0, outer_rows = 0, updates = 0, adjusted = 0;
  // Progressive estimates: steps whose row the side misclassified before learning from it, and
  // the sum of its hinge loss max(0, 1 − y·max_k s_k) there (the polytope's own score).
  std::uint64_t mistakes = 0;
  double hinge = 0;
  double loss = 0;  // the objective's data term at the same scores (SideStatus::loss)
  // ‖U‖² + ‖B‖², kept by the steps from their scores (an update u += d·x adds 2d·u·x + d²‖x‖²,
  // exact up to rounding, and to hash collisions within a row) and counted afresh where U or B is
  // set whole (an average, a restore): the regulariser's, in O(1) (penalties()).
  double squares = 0;
  std::uint64_t limit = 0;  // steps this learner makes: T, or a replica's share of what is left
  // A replica's: the steps of all replicas together and its own step count, at the last average,
  // and its number among the run's replicas.
  std::uint64_t made = 0, synced_steps = 0, replica = 0;
  double lambda = 0, cost_outer = 0.5, cost_inner = 0.5, threshold = 0;
  double seconds = 0;
  FaceCounts counts{1};
  std::vector<std::int64_t> synced;  // a replica's counts at the last average
  // UNADJ, kept only with an entropy floor (h > 0): without one ASSIGN always takes the natural
  // face and needs no history, and every outer-row step counts once in `counts`.
  AssignHistory history{0};
  std::vector<double> score, acc;
  std::vector<std::uint32_t> hit;  // the faces an inner row's step moves
  std::vector<std::uint32_t> order;

  virtual ~Side() = default;
  /// One SGD step on row r with label y (+1: outer); `key` is the row's ASSIGN history key
  /// (row_key), needed for outer rows only.
  virtual void step(const CsrView& rows, std::size_t r, int y, std::uint64_t key) = 0;
  /// Asks for the cache lines of row r's weights (the next row's, while this one is computed).
  virtual void prefetch(const CsrView& rows, std::size_t r) const = 0;
  virtual double u(std::uint64_t i) const = 0;
  /// ‖U‖² + ‖B‖², summed in slot order.
  virtual double sum_squares() const = 0;
  virtual double b(int k) const = 0;
  virtual void release() = 0;
  /// out[i] = U[first + i] · scale, rounded to float.
  virtual void export_weights(std::uint64_t first, std::span<float> out, double scale) const = 0;
  virtual std::string_view weight_bytes() const = 0;
  virtual std::span<char> writable_weight_bytes() = 0;
  /// Writes U's pages in bytes [begin, end) once (zeros over zeros: no value changes), so that the
  /// kernel maps them now rather than at a step.
  virtual void commit_pages(std::size_t begin, std::size_t end) = 0;
  virtual void restore_accumulators(std::string_view weights, const std::vector<double>& b) = 0;
  /// Averaging (CpmTrainer::average), U[first, first + out.size()): out = σU (`add`: out += σU).
  virtual void add_represented(std::uint64_t first, std::span<double> out, bool add) const = 0;
  /// U[first + i] = in[i] · scale.
  virtual void assign(std::uint64_t first, std::span<const double> in, double scale) = 0;
  /// U itself when its accumulators are doubles (the average is summed in place), else null.
  virtual double* doubles() = 0;
  virtual void set_b(int k, double value) = 0;

  double sigma() const { return 1.0 / (static_cast<double>(steps) + 1.0); }
  // A replica's next interval (one of `total`), so that the replicas together make T; none once
  // they have (done). While T reaches the end of the pass the run is in, every replica steps
  // through all its rows (their sum is what is left of the pass): the replicas' shares of a pass
  // differ (a rank's part of the windows, a worker's of a window), and equal quotas would leave
  // the steps of the shorter shares to one more pass. Until then no quota has cut a step, so the
  // steps made are the rows seen (a resumed run decides alike). In the pass where T falls, each
  // replica makes at most its share of the steps still to make (the shares sum to them exactly).
  // The replicas that get a share's extra step turn with `batches` (the windows seen, the same in
  // every replica, saved by a checkpoint): fixed ones might never hold a row (a worker's share of
  // one-row windows, a rank that small windows never reach), and the run would then wait for them
  // for ever.
  void plan_interval(int total, std::uint64_t batches) {
    const auto n = static_cast<std::uint64_t>(total);
    synced_steps = steps;
    const std::uint64_t left = made >= iterations ? 0 : iterations - made;
    const bool whole_pass = rows > 0 && left >= rows - made % rows;
    const std::uint64_t first = derive_seed(batches, kExtraStepStream) % n;
    const bool extra = (replica + n - first) % n < left % n;
    limit = steps + (whole_pass ? left : left / n + (extra ? 1 : 0));
  }
  bool keeps_history() const { return threshold > 0; }
  int label_of(const CsrView& rows, std::size_t r) const {
    return (rows.labels[r] == positive ? 1 : -1) * outer;
  }

  // The row's ASSIGN key (outer rows with a history; else 0), with its weights and history entry
  // requested from memory.
  std::uint64_t request(const CsrView& rows, std::size_t r) const {
    prefetch(rows, r);
    if (!keeps_history() || label_of(rows, r) < 0) return 0;
    const std::uint64_t key = row_key(rows, r);
    history.prefetch(key);
    return key;
  }

  // This side's rows of the batch, in its own seeded order, until T steps are made.
  void learn(const CsrView& batch, std::uint64_t batch_number) {
    if (steps >= limit) return;
    const auto start = std::chrono::steady_clock::now();
    order.clear();
    for (std::size_t r = 0; r < batch.rows; ++r)
      if (batch.labels[r] == positive || batch.labels[r] == negative)
        order.push_back(static_cast<std::uint32_t>(r));
    SplitMix64 rng(derive_seed(seed, batch_number));
    seeded_shuffle(order.data(), order.size(), rng);
    // A step is bound by memory latency: its rows' weights are scattered over U (gigabytes at KDD
    // size), the history over hundreds of MB, and the rows themselves over the window. So two
    // stages run ahead of the step: the row two ahead is requested (its indices and values), and
    // the row one ahead has its weights and history entry requested (its indices are at hand by
    // then), so the misses overlap the step's work.
    const std::size_t n = order.size();
    if (n > 1) prefetch_row(batch, order[1]);
    std::uint64_t next_key = n ? request(batch, order[0]) : 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (steps >= limit) break;
      const std::uint32_t r = order[i];
      const std::uint64_t key = next_key;
      if (i + 2 < n) prefetch_row(batch, order[i + 2]);
      if (i + 1 < n) next_key = request(batch, order[i + 1]);
      step(batch, r, label_of(batch, r), key);
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

 private:
  static void prefetch_row(const CsrView& rows, std::size_t r) {
    const std::uint32_t b = rows.offsets[r], e = rows.offsets[r + 1];
    const char* indices = reinterpret_cast<const char*>(rows.indices + b);
    const std::size_t bytes = (e - b) * sizeof(std::uint32_t);
    for (std::size_t o = 0; o < bytes; o += 64) __builtin_prefetch(indices + o);
    if (bytes) __builtin_prefetch(indices + bytes - 1);
    if (!rows.values) return;
    const char* values = reinterpret_cast<const char*>(rows.values + b);
    for (std::size_t o = 0; o < bytes; o += 64) __builtin_prefetch(values + o);
    if (bytes) __builtin_prefetch(values + bytes - 1);
  }
};

namespace {

// U: K × slots accumulators (up to gigabytes) read at random. Anonymous memory comes zeroed (the
// trainer maps every page up front, commit_pages); transparent huge pages spare a TLB miss on
// almost every access.
template <typename T>
class WeightBuffer {
 public:
  WeightBuffer() = default;
  explicit WeightBuffer(std::size_t n) : size_(n) {
    if (n == 0) return;
    void* p = mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    madvise(p, bytes(), MADV_HUGEPAGE);  // advice only: without it the buffer still works
#endif
    data_ = static_cast<T*>(p);
  }
  WeightBuffer(const WeightBuffer&) = delete;
  WeightBuffer& operator=(WeightBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  ~WeightBuffer() { release(); }
  void release() {
    if (data_) munmap(data_, bytes());
    data_ = nullptr;
    size_ = 0;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  // One write per page of bytes [begin, end): a fault here maps (and zeroes) the page, a read would
  // only map the shared zero page.
  void commit_pages(std::size_t begin, std::size_t end) {
    volatile char* p = reinterpret_cast<char*>(data_);
    for (std::size_t o = begin; o < std::min(end, bytes()); o += kPage) p[o] = 0;
  }
  static constexpr std::size_t kPage = 4096;
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  std::size_t size() const { return size_; }

 private:
  std::size_t bytes() const { return size_ * sizeof(T); }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

template <typename Acc>
struct SideOf : CpmTrainer::Side {
  WeightBuffer<Acc> weights;  // U, feature-major
  std::vector<Acc> bias;      // b/σ

  void release() override { weights.release(); }
  void prefetch(const CsrView& rows, std::size_t r) const override {
    const std::size_t K = static_cast<std::size_t>(faces);
    for (std::uint32_t j = rows.offsets[r]; j < rows.offsets[r + 1]; ++j) {
      const std::uint32_t f = rows.indices[j];
      const Acc* w = &weights[(hash.bits ? hash.bucket(f) : std::uint64_t{f}) * K];
      __builtin_prefetch(w, 1);  // a face row spans up to two cache lines
      __builtin_prefetch(w + K - 1, 1);
    }
  }
  void export_weights(std::uint64_t first, std::span<float> out, double scale) const override {
    if (first > weights.size() || out.size() > weights.size() - first)
      throw std::out_of_range("export_weights past the end of U");
    const Acc* u = weights.data() + first;
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<float>(static_cast<double>(u[i]) * scale);
  }

  std::string_view weight_bytes() const override {
    return {reinterpret_cast<const char*>(weights.data()), weights.size() * sizeof(Acc)};
  }
  std::span<char> writable_weight_bytes() override {
    return {reinterpret_cast<char*>(weights.data()), weights.size() * sizeof(Acc)};
  }
  void commit_pages(std::size_t begin, std::size_t end) override {
    weights.commit_pages(begin, end);
  }
  void restore_accumulators(std::string_view w, const std::vector<double>& b) override {
    if (w.size() != weights.size() * sizeof(Acc) || b.size() != bias.size())
      throw std::invalid_argument("weights of " + std::to_string(w.size()) + " bytes and " +
                                  std::to_string(b.size()) + " intercepts for a side of " +
                                  std::to_string(weights.size() * sizeof(Acc)) + " bytes and " +
                                  std::to_string(bias.size()));
    // A view of U itself: the checkpoint was read into it (side_weights_to_restore).
    if (!w.empty() && w.data() != reinterpret_cast<const char*>(weights.data()))
      std::memcpy(weights.data(), w.data(), w.size());
    for (std::size_t k = 0; k < b.size(); ++k) bias[k] = static_cast<Acc>(b[k]);
    squares = sum_squares();
  }

  void add_represented(std::uint64_t first, std::span<double> out, bool add) const override {
    const double s = sigma();
    const Acc* u = weights.data() + first;
    if (add) {
      for (std::size_t i = 0; i < out.size(); ++i) out[i] += static_cast<double>(u[i]) * s;
    } else {
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(u[i]) * s;
    }
  }
  void assign(std::uint64_t first, std::span<const double> in, double scale) override {
    Acc* u = weights.data() + first;
    for (std::size_t i = 0; i < in.size(); ++i) u[i] = static_cast<Acc>(in[i] * scale);
  }
  double* doubles() override {
    if constexpr (std::is_same_v<Acc, double>) {
      return weights.data();
    } else {
      return nullptr;
    }
  }
  void set_b(int k, double value) override {
    bias[static_cast<std::size_t>(k)] = static_cast<Acc>(value);
  }

  double u(std::uint64_t i) const override { return static_cast<double>(weights[i]); }
  double sum_squares() const override {
    double sum = 0;
    for (std::size_t i = 0; i < weights.size(); ++i)
      sum += static_cast<double>(weights[i]) * static_cast<double>(weights[i]);
    for (const Acc b : bias) sum += static_cast<double>(b) * static_cast<double>(b);
    return sum;
  }
  double b(int k) const override { return static_cast<double>(bias[static_cast<std::size_t>(k)]); }

  void step(const CsrView& rows, std::size_t r, int y, std::uint64_t key) override {
    const std::size_t K = static_cast<std::size_t>(faces);
    const std::uint32_t begin = rows.offsets[r], end = rows.offsets[r + 1];
    // Scores s_k = σ (U_k·x + B_k), σ = 1/(t + 1).
    for (std::size_t k = 0; k < K; ++k) acc[k] = static_cast<double>(bias[k]);
    double length = 0;  // ‖x‖², for the regulariser's bookkeeping (squares)
    for (std::uint32_t j = begin; j < end; ++j) {
      const std::uint32_t f = rows.indices[j];
      double v = rows.values ? rows.values[j] : 1.0;
      const std::uint64_t slot = hash.slot(f, v);
      length += v * v;
      const Acc* w = &weights[slot * K];
      for (std::size_t k = 0; k < K; ++k) acc[k] += v * static_cast<double>(w[k]);
    }
    const double s = sigma();
    double top = acc[0] * s;
    for (std::size_t k = 0; k < K; ++k) {
      score[k] = acc[k] * s;
      top = std::max(top, score[k]);
    }
    const double margin = y > 0 ? top : -top;
    if (margin <= 0) ++mistakes;
    hinge += std::max(0.0, 1.0 - margin);
    // η_t c / σ_t = c (t + 1) / (λ_s (t + 2)): the gradient step on W = σU, in U's units; the
    // shrink by (t + 1)/(t + 2) that follows is σ_{t+1} = 1/(t + 2), i.e. nothing to do.
    const double t = static_cast<double>(steps);
    const double g = (t + 1) / (lambda * (t + 2));
    if (y > 0) {
      std::int32_t untracked = -1;  // no history: a new entry every time
      std::int32_t& entry = keeps_history() ? history.face_of(key) : untracked;
      const Assignment a = assign_face(counts, entry, score.data(), threshold);
      counts.move(entry, a.natural);
      entry = a.natural;
      if (a.adjusted != a.natural) ++adjusted;
      const std::size_t z = static_cast<std::size_t>(a.adjusted);
      loss += cost_outer * std::max(0.0, 1.0 - score[z]);
      if (score[z] < 1) {
        // One face moves: write only its entries, so the other cache line of each face row
        // stays clean (half the write-back traffic of a full row).
        ++updates;
        const double d = g * cost_outer;
        // (u + d·x)² − u² over U_z and B_z: 2d·(U_z·x + B_z) + d²(‖x‖² + 1).
        squares += 2 * d * acc[z] + d * d * (length + 1);
        bias[z] = static_cast<Acc>(bias[z] + d);
        for (std::uint32_t j = begin; j < end; ++j) {
          const std::uint32_t f = rows.indices[j];
          double v = rows.values ? rows.values[j] : 1.0;
          const std::uint64_t slot = hash.slot(f, v);
          weights[slot * K + z] = static_cast<Acc>(weights[slot * K + z] + d * v);
        }
      }
    } else {
      // Every face with s_k > −1 moves by the same −g c₋ x; the others are left unwritten
      // (adding 0 would change no value).
      hit.clear();
      double over = 0;  // Σ_k [1 + s_k]_+
      for (std::size_t k = 0; k < K; ++k)
        if (score[k] > -1) {
          hit.push_back(static_cast<std::uint32_t>(k));
          over += 1 + score[k];
        }
      loss += cost_inner * over;
      if (!hit.empty()) {
        ++updates;
        const double d = -g * cost_inner;
        double hit_scores = 0;  // Σ_{k hit} (U_k·x + B_k)
        for (const std::uint32_t k : hit) {
          hit_scores += acc[k];
          bias[k] = static_cast<Acc>(bias[k] + d);
        }
        squares += 2 * d * hit_scores + static_cast<double>(hit.size()) * d * d * (length + 1);
        for (std::uint32_t j = begin; j < end; ++j) {
          const std::uint32_t f = rows.indices[j];
          double v = rows.values ? rows.values[j] : 1.0;
          const std::uint64_t slot = hash.slot(f, v);
          Acc* w = &weights[slot * K];
          const double dv = d * v;
          if (hit.size() == K) {
            for (std::size_t k = 0; k < K; ++k) w[k] = static_cast<Acc>(w[k] + dv);
          } else {
            for (const std::uint32_t k : hit) w[k] = static_cast<Acc>(w[k] + dv);
          }
        }
      }
    }
    ++steps;
  }
};

std::uint64_t slots_of(const CpmConfig& config, const CpmProblem& problem) {
  return config.hash_bits ? std::uint64_t{1} << config.hash_bits
                          : std::uint64_t{problem.max_index} + 1;
}

// (positive, negative) raw labels of every machine: binary → (larger, smaller); multiclass →
// every pair a < b with a ↦ +1.
std::vector<std::pair<double, double>> machines_of(const CpmProblem& problem) {
  std::vector<std::pair<double, double>> m;
  const auto& lc = problem.label_counts;
  if (lc.size() == 2) {
    m.emplace_back(lc[1].first, lc[0].first);
  } else {
    for (std::size_t a = 0; a < lc.size(); ++a)
      for (std::size_t b = a + 1; b < lc.size(); ++b) m.emplace_back(lc[a].first, lc[b].first);
  }
  return m;
}

std::vector<int> outers_of(CpmSides sides) {
  if (sides == CpmSides::kOuterPositive) return {1};
  if (sides == CpmSides::kOuterNegative) return {-1};
  return {1, -1};
}

}  // namespace

std::uint64_t cpm_training_bytes(const CpmConfig& config, const CpmProblem& problem,
                                 CpmPrecision precision) {
  const std::uint64_t acc = precision == CpmPrecision::kDouble ? 8 : 4;
  // Per face, besides its weights: the intercept (acc), its score (8), its place in the hit list
  // (4), ASSIGN's counts (16) and the intercept a checkpoint or model copies out (8).
  const std::uint64_t per_face = slots_of(config, problem) * acc + acc + 36;
  const std::uint64_t per_side = per_face * std::uint64_t(config.faces);
  std::uint64_t total = 0;
  const bool history = config.perplexity > 1;  // Side::keeps_history
  for (const auto& [pos, neg] : machines_of(problem))
    for (const int outer : outers_of(config.sides))
      total += per_side + AssignHistory::bytes_for(
                              history ? side_rows(problem, pos, neg, outer > 0 ? pos : neg) : 0);
  return total;
}

CpmTrainer::CpmTrainer(const CpmConfig& config, const CpmProblem& problem)
    : config_(config), problem_(problem) {
  config_.validate();
  if (problem.label_counts.size() < 2)
    throw UsageError("the CPM needs at least two classes; the data have " +
                     std::to_string(problem.label_counts.size()));
  for (const auto& [label, count] : problem.label_counts) {
    if (count == 0)
      throw UsageError("class " + text(label) + " has no examples");
    classes_.push_back(label);
  }
  const std::uint64_t slots = slots_of(config_, problem_);
  const auto machines = machines_of(problem_);
  for (std::size_t m = 0; m < machines.size(); ++m) {
    for (const int outer : outers_of(config_.sides)) {
      std::unique_ptr<Side> side;
      if (config_.precision == CpmPrecision::kDouble) {
        auto s = std::make_unique<SideOf<double>>();
        s->weights = WeightBuffer<double>(slots * std::uint64_t(config_.faces));
        s->bias.assign(static_cast<std::size_t>(config_.faces), 0.0);
        side = std::move(s);
      } else {
        auto s = std::make_unique<SideOf<float>>();
        s->weights = WeightBuffer<float>(slots * std::uint64_t(config_.faces));
        s->bias.assign(static_cast<std::size_t>(config_.faces), 0.0f);
        side = std::move(s);
      }
      Side& s = *side;
      s.machine = m;
      s.positive = static_cast<float>(machines[m].first);
      s.negative = static_cast<float>(machines[m].second);
      s.outer = outer;
      s.faces = config_.faces;
      s.slots = slots;
      s.hash.bits = config_.hash_bits;
      s.seed = derive_seed(config_.seed, 0x63706d /* "cpm" */, sides_.size());
      s.rows = side_rows(problem_, machines[m].first, machines[m].second, 0);
      s.outer_rows = side_rows(problem_, machines[m].first, machines[m].second,
                               outer > 0 ? machines[m].first : machines[m].second);
      const double epoch_steps = std::ceil(config_.epochs * double(s.rows));
      if (!config_.iterations && epoch_steps >= 18446744073709551616.0)  // 2^64
        throw ConfigError(
            "epochs", "gives more SGD steps than 2^64 (T = " + message_number(epoch_steps) + ")");
      s.iterations = config_.iterations ? config_.iterations
                                        : std::max(config_.min_iterations,
                                                   static_cast<std::uint64_t>(epoch_steps));
      if (s.iterations == 0) throw ConfigError("epochs", "gives no SGD step (T = 0)");
      s.limit = s.iterations;
      const bool of_epochs = config_.lambda_of_epochs && !config_.iterations && epoch_steps >= 1;
      s.lambda = 1.0 / (config_.c * (of_epochs ? epoch_steps : static_cast<double>(s.iterations)));
      s.cost_inner = config_.cost_ratio / (1 + config_.cost_ratio);
      s.cost_outer = 1 / (1 + config_.cost_ratio);
      s.threshold = config_.perplexity > 1 ? std::log(config_.perplexity) : 0.0;
      s.counts = FaceCounts(config_.faces);
      s.history = AssignHistory(s.keeps_history() ? s.outer_rows : 0);
      s.score.assign(static_cast<std::size_t>(config_.faces), 0.0);
      s.acc = s.score;
      s.hit.reserve(static_cast<std::size_t>(config_.faces));
      sides_.push_back(std::move(side));
    }
  }
  commit_weights();
}

// Every page of U is written once here, in parallel over the caller's arena, before the first
// step. Training touches nearly every page anyway (a 4 KiB page holds 51 features at K = 10), but a
// fault taken inside a step stalls that side with the page's zeroing, one page at a time and at
// random moments, and the other side then waits for it at the end of the window. At KDD size the
// faults were ~9 CPU-s of a double-sided run (17 % of its samples in the kernel's clear_page), most
// of them in the first pass. Zeros over zeros: no value changes.
void CpmTrainer::commit_weights() {
  constexpr std::size_t kChunk = std::size_t{32} << 20;
  std::vector<std::pair<std::size_t, std::size_t>> chunks;  // (side, first byte)
  for (std::size_t i = 0; i < sides_.size(); ++i)
    for (std::size_t o = 0; o < sides_[i]->weight_bytes().size(); o += kChunk)
      chunks.emplace_back(i, o);
  tbb::parallel_for(std::size_t{0}, chunks.size(), [&](std::size_t c) {
    const auto [side, begin] = chunks[c];
    sides_[side]->commit_pages(begin, begin + kChunk);
  });
}

CpmTrainer::~CpmTrainer() = default;

bool CpmTrainer::multiclass() const { return classes_.size() > 2; }

void CpmTrainer::learn(const CsrView& batch, const std::function<bool()>& spare) {
  const std::uint64_t number = batches_++;
  // Sides are independent (two for a double-sided binary CPM, more for pairs). One task per thread
  // (at most one per side), each taking the next side left until none is, then spare work until
  // none is: a thread whose sides are done reads the next batch meanwhile. Which thread trains a
  // side does not matter to its result. A small batch is learnt on the calling thread alone: a
  // data set of a few hundred rows is one batch a pass, and the step floor makes that hundreds of
  // passes, each of which would otherwise wake the arena's threads for microseconds of work (on a
  // loaded machine, a scheduler's time slice each).
  const std::size_t workers =
      batch.nnz() < kSerialBatchNnz
          ? 1
          : std::min<std::size_t>(sides_.size(), static_cast<std::size_t>(
                                                     tbb::this_task_arena::max_concurrency()));
  std::atomic<std::size_t> next{0};
  tbb::parallel_for(std::size_t{0}, workers, [&](std::size_t) {
    for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < sides_.size();)
      sides_[i]->learn(batch, number);
    if (spare)
      while (spare()) {
      }
  });
}

bool CpmTrainer::done() const {
  return std::all_of(sides_.begin(), sides_.end(),
                     [](const auto& s) { return s->steps >= s->limit; });
}

bool CpmTrainer::run_done() const {
  return std::all_of(sides_.begin(), sides_.end(),
                     [](const auto& s) { return s->made >= s->iterations; });
}

std::vector<CpmTrainer::SideStatus> CpmTrainer::status() const {
  std::vector<SideStatus> out;
  for (const auto& s : sides_) {
    SideStatus st;
    st.iterations = s->iterations;
    st.steps = s->steps;
    st.run_steps = s->made;
    st.rows = s->rows;
    st.outer_rows = s->outer_rows;
    st.updates = s->updates;
    st.seconds = s->seconds;
    st.assignment_entropy = s->counts.entropy();
    st.assignments = static_cast<std::uint64_t>(s->counts.total());
    st.adjusted = s->adjusted;
    st.mistakes = s->mistakes;
    st.hinge = s->hinge;
    st.loss = s->loss;
    out.push_back(st);
  }
  return out;
}

std::vector<double> CpmTrainer::penalties() const {
  std::vector<double> out;
  for (const auto& s : sides_) out.push_back(s->lambda / 2 * s->sigma() * s->sigma() * s->squares);
  return out;
}

CpmTrainer::SideState CpmTrainer::side_state(std::size_t side, bool history) const {
  const Side& s = *sides_.at(side);
  SideState st;
  st.steps = s.steps;
  st.run_steps = s.made;
  st.updates = s.updates;
  st.adjusted = s.adjusted;
  st.seconds = s.seconds;
  for (int k = 0; k < s.faces; ++k) st.intercept_sums.push_back(s.b(k));
  st.face_counts = s.counts.counts();
  st.history_capacity = s.history.capacity();
  if (history) s.history.export_entries(st.history_keys, st.history_faces);
  return st;
}

const AssignHistory& CpmTrainer::side_history(std::size_t side) const {
  return sides_.at(side)->history;
}

std::string_view CpmTrainer::side_weights(std::size_t side) const {
  return sides_.at(side)->weight_bytes();
}

std::span<char> CpmTrainer::side_weights_to_restore(std::size_t side) {
  return sides_.at(side)->writable_weight_bytes();
}

void CpmTrainer::restore(std::uint64_t batches, const std::vector<SideState>& sides,
                         const std::vector<std::string_view>& weights) {
  if (sides.size() != sides_.size() || weights.size() != sides_.size())
    throw std::invalid_argument(std::to_string(sides.size()) + " sides saved, the trainer has " +
                                std::to_string(sides_.size()));
  for (std::size_t i = 0; i < sides_.size(); ++i) {
    Side& s = *sides_[i];
    const SideState& st = sides[i];
    const std::string which = "side " + std::to_string(i) + ": ";
    // A replicated run's lead holds the counters of all its replicas, made in run_steps steps.
    const std::uint64_t made = replicas_ == 1 ? st.steps : st.run_steps;
    if (st.steps > s.iterations || st.updates > made || st.adjusted > made)
      throw std::invalid_argument(which + "step counters beyond its T = " +
                                  std::to_string(s.iterations));
    if (st.face_counts.size() != static_cast<std::size_t>(s.faces))
      throw std::invalid_argument(which + std::to_string(st.face_counts.size()) +
                                  " face counts for K = " + std::to_string(s.faces));
    // With an entropy floor the counts are the histogram of the history's faces; without one
    // there is no history and they count outer-row steps. A saved state that disagrees is not
    // one a run can reach.
    std::vector<std::int64_t> histogram(st.face_counts.size(), 0);
    for (const std::int32_t f : st.history_faces) {
      if (f < 0 || f >= s.faces) throw std::invalid_argument(which + "history face out of range");
      ++histogram[static_cast<std::size_t>(f)];
    }
    if (s.keeps_history() ? histogram != st.face_counts : !st.history_faces.empty())
      throw std::invalid_argument(which + "face counts do not match the ASSIGN history");
    std::int64_t counted = 0;
    for (const std::int64_t n : st.face_counts) {
      if (n < 0) throw std::invalid_argument(which + "negative face count");
      counted += n;
    }
    if (static_cast<std::uint64_t>(counted) > made)
      throw std::invalid_argument(which + "more face counts than steps");
    try {
      s.history = AssignHistory(0);  // the empty table the constructor made goes first
      s.history = AssignHistory::restore(st.history_capacity, st.history_keys, st.history_faces);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(which + e.what());
    }
    s.restore_accumulators(weights[i], st.intercept_sums);
    s.counts = FaceCounts(st.face_counts);
    s.synced = st.face_counts;
    s.steps = st.steps;
    s.made = st.run_steps;
    s.updates = st.updates;
    s.adjusted = st.adjusted;
    s.seconds = st.seconds;
  }
  batches_ = batches;
}

std::vector<double> CpmTrainer::weights(std::size_t side) const {
  const Side& s = *sides_.at(side);
  std::vector<double> w(s.slots * std::uint64_t(s.faces));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = s.u(i) * s.sigma();
  return w;
}

std::vector<double> CpmTrainer::intercepts(std::size_t side) const {
  const Side& s = *sides_.at(side);
  std::vector<double> b(static_cast<std::size_t>(s.faces));
  for (int k = 0; k < s.faces; ++k) b[static_cast<std::size_t>(k)] = s.b(k) * s.sigma();
  return b;
}

CpmModel CpmTrainer::model_without_weights(const std::vector<float>* maxabs) const {
  CpmModel model;
  model.algorithm = "cpm";
  model.config = config_.json();
  model.max_index = problem_.max_index;
  model.hash.bits = config_.hash_bits;
  model.vote_seed = derive_seed(config_.seed, 0x766f7465 /* "vote" */);
  if (maxabs) model.maxabs = *maxabs;
  if (multiclass()) {
    model.classes = classes_;
  } else {
    model.labels.positive = classes_[1];
    model.labels.negative = classes_[0];
  }
  const auto machines = machines_of(problem_);
  model.machines.resize(machines.size());
  for (std::size_t m = 0; m < machines.size(); ++m) {
    model.machines[m].positive = machines[m].first;
    model.machines[m].negative = machines[m].second;
  }
  for (std::size_t i = 0; i < sides_.size(); ++i) {
    const Side& s = *sides_[i];
    CpmFaces f;
    f.outer = s.outer;
    f.faces = s.faces;
    f.slots = s.slots;
    f.intercepts = intercepts(i);
    model.machines[s.machine].sides.push_back(std::move(f));
  }
  return model;
}

void CpmTrainer::export_weights(std::size_t side, std::uint64_t first, std::span<float> out) const {
  const Side& s = *sides_.at(side);
  s.export_weights(first, out, s.sigma());
}

void CpmTrainer::release_weights(std::size_t side) {
  Side& s = *sides_.at(side);
  s.history = AssignHistory(0);
  s.release();
}

CpmModel CpmTrainer::finish(const std::vector<float>* maxabs) {
  CpmModel model = model_without_weights(maxabs);
  // The histories are done with (0.3 GB at KDD size): freed first, the first model can reuse
  // their pages instead of faulting in fresh ones.
  for (auto& s : sides_) s->history = AssignHistory(0);
  std::vector<std::size_t> next_side(model.machines.size(), 0);
  for (std::size_t i = 0; i < sides_.size(); ++i) {
    Side& s = *sides_[i];
    CpmFaces& f = model.machines[s.machine].sides[next_side[s.machine]++];
    f.weights.resize(s.slots * std::uint64_t(s.faces));
    export_weights(i, 0, f.weights);
    s.release();  // before the next side's model is built: peak = U + one side's model
  }
  return model;
}

namespace {

// Seed stream of the replicas' row orders, apart from every other stream.
constexpr std::uint64_t kReplicaStream = 0x43504d5245504c53ULL;  // "CPMREPLS"
// Accumulators a task of the averaging handles (256 KiB of doubles), and those summed by one
// Peers::sum when U is float (a double copy of that many is made, 32 MiB).
constexpr std::size_t kAverageGrain = 32768;
constexpr std::size_t kFloatChunk = std::size_t{1} << 22;

}  // namespace

void CpmTrainer::make_replica(int global, int total) {
  if (total <= 1) return;
  if (config_.perplexity > 1)
    throw ConfigError("perplexity",
                      "must be 1 (no entropy floor) with several replicas: ASSIGN's history of "
                      "each training row is not averaged (got " +
                          text(config_.perplexity) + ")");
  replicas_ = total;
  for (auto& s : sides_) {
    s->seed = derive_seed(s->seed, kReplicaStream, static_cast<std::uint64_t>(global));
    s->replica = static_cast<std::uint64_t>(global);
    s->synced = s->counts.counts();
    s->plan_interval(total, batches_);
  }
}

void CpmTrainer::average(const std::vector<CpmTrainer*>& local, bool holds_totals,
                         const Peers& peers) {
  CpmTrainer& lead = *local.front();
  const int total = lead.replicas_;
  if (total == 1) return;
  const std::size_t n = local.size();
  const auto K = static_cast<std::size_t>(lead.config_.faces);
  for (std::size_t i = 0; i < lead.sides_.size(); ++i) {
    std::vector<Side*> sides;
    for (CpmTrainer* replica : local) sides.push_back(replica->sides_[i].get());
    Side& first = *sides.front();
    // The scalars: Σt, the counters, b = σB of every face, the face counts' increments and the
    // steps made since the last average.
    enum : std::size_t { kSumT, kUpdates, kAdjusted, kSeconds, kMistakes, kHinge, kLoss, kFaces };
    const std::size_t b_at = kFaces, counts_at = kFaces + K, made_at = kFaces + 2 * K;
    std::vector<double> scalars(made_at + 1, 0.0);
    for (const Side* s : sides) {
      scalars[kSumT] += static_cast<double>(s->steps);
      scalars[kUpdates] += static_cast<double>(s->updates);
      scalars[kAdjusted] += static_cast<double>(s->adjusted);
      scalars[kSeconds] += s->seconds;
      scalars[kMistakes] += static_cast<double>(s->mistakes);
      scalars[kHinge] += s->hinge;
      scalars[kLoss] += s->loss;
      scalars[made_at] += static_cast<double>(s->steps - s->synced_steps);
      for (std::size_t k = 0; k < K; ++k) {
        scalars[b_at + k] += s->b(static_cast<int>(k)) * s->sigma();
        scalars[counts_at + k] +=
            static_cast<double>(s->counts.count(static_cast<int>(k)) - s->synced[k]);
      }
    }
    peers.sum_in_place(scalars);
    const std::uint64_t t =
        static_cast<std::uint64_t>(scalars[kSumT]) / static_cast<std::uint64_t>(total);
    // U = W̄/σ with σ = 1/(t + 1), W̄ = ΣW / total.
    const double scale = (static_cast<double>(t) + 1.0) / static_cast<double>(total);

    // W = σU of every replica summed slot by slot in replica order, then every replica takes the
    // mean. One process: in one pass, a task's sums in a buffer of its own (reads n arrays, writes
    // n). Several: the sums go through Peers::sum, into the lead's U itself when it holds doubles,
    // else a chunk at a time through a double copy, and every replica takes the mean afterwards
    // (the lead last: with U summed in place, its array is the sum).
    const std::uint64_t size = first.slots * K;
    if (peers.alone()) {
      tbb::enumerable_thread_specific<std::vector<double>> sums;
      tbb::parallel_for(tbb::blocked_range<std::uint64_t>(0, size, kAverageGrain),
                        [&](const tbb::blocked_range<std::uint64_t>& r) {
                          std::vector<double>& sum = sums.local();
                          sum.resize(r.size());
                          for (std::size_t k = 0; k < n; ++k)
                            sides[k]->add_represented(r.begin(), sum, k > 0);
                          for (std::size_t k = 0; k < n; ++k)
                            sides[k]->assign(r.begin(), sum, scale);
                        });
    } else {
      double* in_place = first.doubles();
      std::vector<double> buffer;
      const std::uint64_t chunk =
          in_place ? std::max<std::uint64_t>(size, 1) : std::min<std::uint64_t>(size, kFloatChunk);
      if (!in_place) buffer.resize(chunk);
      for (std::uint64_t begin = 0; begin < size; begin += chunk) {
        const std::size_t len = std::min(chunk, size - begin);
        double* sum = in_place ? in_place + begin : buffer.data();
        tbb::parallel_for(tbb::blocked_range<std::size_t>(0, len, kAverageGrain),
                          [&](const tbb::blocked_range<std::size_t>& r) {
                            const std::span<double> out(sum + r.begin(), r.size());
                            for (std::size_t k = 0; k < n; ++k)
                              sides[k]->add_represented(begin + r.begin(), out, k > 0);
                          });
        peers.sum({sum, len});
        tbb::parallel_for(tbb::blocked_range<std::size_t>(0, len, kAverageGrain),
                          [&](const tbb::blocked_range<std::size_t>& r) {
                            const std::span<const double> in(sum + r.begin(), r.size());
                            for (std::size_t k = n; k-- > 0;)
                              sides[k]->assign(begin + r.begin(), in, scale);
                          });
      }
    }
    // Counts: those at the last average plus all increments, the same in every replica.
    std::vector<std::int64_t> counts = first.synced;
    for (std::size_t k = 0; k < K; ++k)
      counts[k] += static_cast<std::int64_t>(scalars[counts_at + k]);
    for (std::size_t r = 0; r < n; ++r) {
      Side& s = *sides[r];
      for (std::size_t k = 0; k < K; ++k) s.set_b(static_cast<int>(k), scalars[b_at + k] * scale);
      s.steps = t;
      s.made += static_cast<std::uint64_t>(scalars[made_at]);
      s.plan_interval(total, local[r]->batches_);
      s.counts = FaceCounts(counts);
      s.synced = counts;
      const bool totals = holds_totals && r == 0;
      s.updates = totals ? static_cast<std::uint64_t>(scalars[kUpdates]) : 0;
      s.adjusted = totals ? static_cast<std::uint64_t>(scalars[kAdjusted]) : 0;
      s.seconds = totals ? scalars[kSeconds] : 0;
      s.mistakes = totals ? static_cast<std::uint64_t>(scalars[kMistakes]) : 0;
      s.hinge = totals ? scalars[kHinge] : 0;
      s.loss = totals ? scalars[kLoss] : 0;
    }
    // Every replica holds the same mean now.
    const double squares = first.sum_squares();
    for (Side* s : sides) s->squares = squares;
  }
}

void CpmTrainer::take_state(const CpmTrainer& lead, bool with_totals) {
  for (std::size_t i = 0; i < sides_.size(); ++i) {
    Side& s = *sides_[i];
    const Side& from = *lead.sides_.at(i);
    if (&s != &from) {
      std::vector<double> b;
      for (int k = 0; k < from.faces; ++k) b.push_back(from.b(k));
      s.restore_accumulators(from.weight_bytes(), b);
      s.counts = from.counts;
      s.steps = from.steps;
      s.made = from.made;
    }
    s.synced = s.counts.counts();
    s.plan_interval(replicas_, lead.batches_);
    if (!with_totals) {
      s.updates = s.adjusted = s.mistakes = 0;
      s.seconds = s.hinge = s.loss = 0;
    }
  }
  batches_ = lead.batches_;
}

std::uint64_t CpmTrainer::sync_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& s : sides_)
    bytes +=
        (s->slots * std::uint64_t(s->faces) + 5 + 2 * std::uint64_t(s->faces)) * sizeof(double);
  return bytes;
}

}  // namespace polymargin::engine
