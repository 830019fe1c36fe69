// polymargin._core: what the Python package (python/polymargin) needs of the C++ side, and no more.
//
// - train(): a training job (the arguments of `train`, without --tune) parsed into a
//   driver::TrainJob and trained by the training library (driver/train.h) in this process: the
//   GIL released, nothing of the process swapped or locked, so that several fits run at once in
//   threads; its notes go to a Python callable, SIGINT stops it at its next window and then
//   raises KeyboardInterrupt, and its summary comes back as JSON text. Its rows are files named
//   in the arguments, or a matrix's rows in memory (Rows).
// - tune(): the same for `train --tune` (driver::tune: the search, then the final run), with no
//   executable; a matrix's rows in memory are what the search writes its folds from.
// - Rows: the rows of an in-memory CSR matrix as a shard set held in memory (the blocks, scaling
//   table and data checksum write_shards would write into a directory), for train(): no
//   temporary files.
// - run(): a command of the polymargin CLI (train, convert, eval, ...) run in this process with the
//   arguments the command line would have: the same options, the same epoch loop, the same model
//   files byte for byte. The GIL is released while it runs; its stderr lines go to a Python
//   callable (the package's logger), its stdout comes back as a string (--json); SIGINT asks a
//   training run to stop at its next window, and then raises KeyboardInterrupt; a typed error of
//   the library becomes ValueError (usage, data), OSError (I/O), MemoryError or
//   FloatingPointError, with the message the CLI prints.
// - write_shards(): rows of an in-memory CSR matrix written as a shard directory, a batch at a
//   time, as `convert` writes text: column j is feature j + 1 (LIBSVM's 1-based ids).
// - Model: a model file loaded for scoring the rows of a CSR matrix.
//
// docs/design.md, "Python", says how the package reaches the training library.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/train.h"
#include "cli/tune.h"
#include "driver/options.h"
#include "driver/train.h"
#include "cli/experiment_runner.h"
#include "cli/progress.h"
#include "cli/signals.h"
#include "engine/classifier.h"
#include "engine/csr.h"
#include "engine/errors.h"
#include "engine/linear_model.h"
#include "io/model_file.h"
#include "io/shards.h"

namespace py = pybind11;
using namespace polymargin;

namespace {

// ---------------------------------------------------------------------------------------------
// Commands

// `line` to the Python callable `log` (None: nowhere), taking the GIL; an exception it raises is
// reported as unraisable, not thrown into the C++ that wrote the line.
void send_to_log(const py::object& log, const std::string& line) {
  if (log.is_none()) return;
  py::gil_scoped_acquire gil;
  try {
    log(line);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("polymargin: the log callable");
  }
}

// A command's stderr: each line goes to `log` (under the GIL, from whichever thread wrote it). A
// rewritten progress line ('\r') counts as a line. The last lines are kept for the message of a
// command that fails without a typed error.
class LogLines : public std::streambuf {
 public:
  explicit LogLines(py::object log) : log_(std::move(log)) {}
  void flush_line() {
    std::string line;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      line.swap(line_);
    }
    emit(line);
  }
  std::string last_lines() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string text;
    for (const std::string& l : last_) text += (text.empty() ? "" : "\n") + l;
    return text;
  }

 protected:
  int overflow(int c) override {
    if (c != traits_type::eof()) put(static_cast<char>(c));
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    for (std::streamsize i = 0; i < n; ++i) put(s[i]);
    return n;
  }

 private:
  void put(char c) {
    std::string line;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (c != '\n' && c != '\r') {
        line_ += c;
        return;
      }
      line.swap(line_);
    }
    emit(line);
  }
  void emit(const std::string& line) {
    if (line.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      last_.push_back(line);
      if (last_.size() > 5) last_.pop_front();
    }
    send_to_log(log_, line);
  }

  py::object log_;
  mutable std::mutex mutex_;
  std::string line_;
  std::deque<std::string> last_;
};

// std::cout or std::cerr pointed at another buffer while it lives.
class Redirect {
 public:
  Redirect(std::ostream& stream, std::streambuf* to) : stream_(stream), old_(stream.rdbuf(to)) {}
  ~Redirect() {
    stream_.flush();
    stream_.rdbuf(old_);
  }

 private:
  std::ostream& stream_;
  std::streambuf* old_;
};

// SIGINT while fits or commands run: counted, and passed to a command's StopSignals. Each stops
// once the count passes the one it started at (a fit through its events, a command at its
// StopSignals' next poll) and then owes Python a KeyboardInterrupt. The first to start installs the
// handler, the last to end puts Python's back.
std::atomic<std::uint64_t> g_sigints{0};
std::mutex g_watch_mutex;
int g_watches = 0;
struct sigaction g_python_sigint = {};

void on_sigint(int signal) {
  g_sigints.fetch_add(1);
  cli::StopSignals::request(signal);
}

class SigintWatch {
 public:
  SigintWatch() {
    std::lock_guard<std::mutex> lock(g_watch_mutex);
    start_ = g_sigints.load();
    if (g_watches++ > 0) return;
    struct sigaction action = {};
    action.sa_handler = on_sigint;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGINT, &action, &g_python_sigint) != 0) g_python_sigint.sa_handler = SIG_ERR;
  }
  ~SigintWatch() {
    std::lock_guard<std::mutex> lock(g_watch_mutex);
    if (--g_watches == 0 && g_python_sigint.sa_handler != SIG_ERR)
      sigaction(SIGINT, &g_python_sigint, nullptr);
  }
  bool received() const { return g_sigints.load() != start_; }

 private:
  std::uint64_t start_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Commands, run as the command line runs them

// What became of a command, held until the GIL is back.
struct Outcome {
  int code = cli::kExitOk;
  std::optional<cli::Failure> failure;
};

Outcome run_caught(const cli::Command& command, const std::vector<std::string>& args) {
  Outcome o;
  try {
    o.code = command.run(args);
  } catch (const std::exception&) {
    o.failure = cli::describe_failure(std::current_exception());
    o.code = o.failure->code;
  }
  return o;
}

// The Python exception of a failure, set: ValueError for a request or data the library refuses,
// OSError, MemoryError (refused as too large, or out of memory), FloatingPointError, RuntimeError
// (a bug).
void set_error(const cli::Failure& failure) {
  PyObject* type = failure.out_of_memory ? PyExc_MemoryError
                   : failure.code == cli::kExitUsage || failure.code == cli::kExitData
                       ? PyExc_ValueError
                   : failure.code == cli::kExitIo        ? PyExc_OSError
                   : failure.code == cli::kExitMemory    ? PyExc_MemoryError
                   : failure.code == cli::kExitNumerical ? PyExc_FloatingPointError
                                                         : PyExc_RuntimeError;
  PyErr_SetString(type, failure.message.c_str());
}

[[noreturn]] void raise(const cli::Failure& failure) {
  set_error(failure);
  throw py::error_already_set();
}

// One command at a time in a process: std::cout and std::cerr are the process's.
std::mutex g_command_mutex;

[[noreturn]] void raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

py::tuple run(const std::string& name, const std::vector<std::string>& args, py::object log) {
  const cli::Command* command = nullptr;
  for (const cli::Command& c : cli::commands())
    if (c.name == name) command = &c;
  if (!command) raise(PyExc_ValueError, "unknown polymargin command '" + name + "'");
  LogLines err(std::move(log));
  std::stringbuf out;
  Outcome outcome;
  bool interrupted = false;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(g_command_mutex);
    Redirect to_out(std::cout, &out), to_err(std::cerr, &err);
    const SigintWatch sigint;
    outcome = run_caught(*command, args);
    interrupted = sigint.received();
  }
  err.flush_line();
  if (interrupted)
    raise(PyExc_KeyboardInterrupt,
          "polymargin " + name + " stopped by SIGINT; nothing was written");
  if (outcome.failure) raise(*outcome.failure);
  if (outcome.code != cli::kExitOk)
    raise(PyExc_RuntimeError, "polymargin " + name + " ended with exit code " +
                                  std::to_string(outcome.code) + ": " + err.last_lines());
  return py::make_tuple(outcome.code, py::bytes(out.str()));
}

// ---------------------------------------------------------------------------------------------
// Rows of a CSR matrix

// A CSR matrix of Python's (scipy's indptr, indices, data; numpy arrays, C-contiguous) handed out
// as CsrViews of at most kBatchRows rows, with raw feature ids = column + base and float values;
// labels from `labels`, or 0 when it is None (rows to score); column ids below `columns` (the
// matrix's width; 0: any the engine takes). The package checks the arrays first (with scipy's
// names for them); what reading them relies on is checked here too, before any row is read.
// The batches are copies (the engine's ids are 32-bit, its values float), made one at a time.
class CsrRows {
 public:
  static constexpr std::size_t kBatchRows = 4096;

  CsrRows(const py::array& indptr, const py::array& indices, const py::array& data,
          const py::object& labels, std::uint32_t base, std::uint64_t columns)
      : indptr_(indptr), indices_(indices), data_(data), base_(base), columns_(columns) {
    if (!py::isinstance<py::array_t<std::int64_t>>(indptr_) || indptr_.ndim() != 1 ||
        indptr_.shape(0) < 1)
      raise(PyExc_ValueError, "indptr must be a 1-d int64 array");
    rows_ = static_cast<std::size_t>(indptr_.shape(0) - 1);
    if (!labels.is_none()) {
      if (!py::isinstance<py::array_t<double>>(labels))
        raise(PyExc_ValueError, "labels must be a float64 array");
      const auto y = py::reinterpret_borrow<py::array>(labels);
      if (y.ndim() != 1 || static_cast<std::size_t>(y.shape(0)) != rows_ ||
          !(y.flags() & py::array::c_style))
        raise(PyExc_ValueError, "labels must be a contiguous array of one entry per row");
      labels_ = y;
      y_ = static_cast<const double*>(y.data());
    }
    wide_ = py::isinstance<py::array_t<std::int64_t>>(indices_);
    if (!wide_ && !py::isinstance<py::array_t<std::int32_t>>(indices_))
      raise(PyExc_ValueError, "indices must be int32 or int64");
    double_ = py::isinstance<py::array_t<double>>(data_);
    if (!double_ && !py::isinstance<py::array_t<float>>(data_))
      raise(PyExc_ValueError, "data must be float32 or float64");
    for (const py::array* a : {&indptr_, &indices_, &data_})
      if (!(a->flags() & py::array::c_style)) raise(PyExc_ValueError, "arrays must be contiguous");
    const auto* ptr = static_cast<const std::int64_t*>(indptr_.data());
    if (ptr[0] != 0 || ptr[rows_] != indices_.shape(0) || ptr[rows_] != data_.shape(0))
      raise(PyExc_ValueError, "indptr does not match indices and data");
    // A row's entries lie between its indptr and the next: one that decreases would have a row
    // read past the arrays' end.
    for (std::size_t r = 0; r < rows_; ++r)
      if (ptr[r + 1] < ptr[r])
        raise(PyExc_ValueError, "indptr decreases at row " + std::to_string(r) + " (from " +
                                    std::to_string(ptr[r]) + " to " + std::to_string(ptr[r + 1]) +
                                    ")");
  }

  std::size_t rows() const { return rows_; }

  /// Rows [begin, end) as a view valid until the next call. Checks that ids are increasing
  /// within each row and that they and the values fit the engine (ValueError otherwise).
  CsrView batch(std::size_t begin, std::size_t end) {
    const auto* ptr = static_cast<const std::int64_t*>(indptr_.data());
    buffer_.clear();
    buffer_.ensure_values();
    bool all_ones = true;
    for (std::size_t r = begin; r < end; ++r) {
      buffer_.labels.push_back(y_ ? static_cast<float>(y_[r]) : 0.0f);
      std::int64_t previous = -1;
      for (std::int64_t k = ptr[r]; k < ptr[r + 1]; ++k) {
        const std::int64_t column = wide_ ? static_cast<const std::int64_t*>(indices_.data())[k]
                                          : static_cast<const std::int32_t*>(indices_.data())[k];
        if (column < 0 || (columns_ > 0 && static_cast<std::uint64_t>(column) >= columns_))
          throw DataError(
              "X", 0, 0,
              "row " + std::to_string(r) + " has column id " + std::to_string(column) +
                  ", outside the matrix's " +
                  (columns_ > 0 ? std::to_string(columns_) + " columns" : std::string("columns")));
        if (column <= previous)
          throw DataError("X", 0, 0, "row " + std::to_string(r) + ": column ids must increase");
        if (column + base_ > std::numeric_limits<std::uint32_t>::max() - 1)
          throw DataError("X", 0, 0,
                          "row " + std::to_string(r) + ": column " + std::to_string(column) +
                              " is feature id " + std::to_string(column + base_) +
                              " (ids go up to 4294967294: the linear learners keep the next "
                              "slot for the bias)");
        previous = column;
        const float v = double_ ? static_cast<float>(static_cast<const double*>(data_.data())[k])
                                : static_cast<const float*>(data_.data())[k];
        if (!std::isfinite(v)) {  // as the text parser says of '1e300' or 'nan'
          char given[32];
          std::snprintf(given, sizeof given, "%.9g",
                        double_ ? static_cast<const double*>(data_.data())[k] : double{v});
          throw DataError("X", 0, 0,
                          "row " + std::to_string(r) + ", column " + std::to_string(column) +
                              ": value " + given +
                              " is out of float range (the engine's values are floats)");
        }
        all_ones = all_ones && v == 1.0f;
        buffer_.indices.push_back(static_cast<std::uint32_t>(column + base_));
        buffer_.values.push_back(v);
      }
      if (buffer_.indices.size() > std::numeric_limits<std::uint32_t>::max() / 2)
        throw DataError("X", 0, 0, "rows from " + std::to_string(begin) + " hold over 2^31 non-zeros");
      buffer_.offsets.push_back(static_cast<std::uint32_t>(buffer_.indices.size()));
    }
    CsrView view = buffer_.view();
    if (all_ones) view.values = nullptr;  // as the text parser stores unit values
    return view;
  }

 private:
  py::array indptr_, indices_, data_;
  py::object labels_;          // held while y_ points into it; null without labels
  const double* y_ = nullptr;
  std::uint32_t base_;
  std::uint64_t columns_;  // the matrix's width; 0: not checked
  std::size_t rows_ = 0;
  bool wide_ = false, double_ = false;
  CsrBuffer buffer_;
};

// How a matrix's rows are written: raw blocks of `block_rows` rows (as `train` converts a9a-size
// text), without fsync (a temporary directory, removed after the fit, or memory).
io::ConvertOptions matrix_options(std::uint32_t block_rows) {
  io::ConvertOptions options;
  options.codec = io::Codec::kRaw;
  options.block_rows = block_rows;
  options.durable = false;
  return options;
}

// The matrix's rows appended to `writer` in row order, its feature ids up to `columns` (the
// matrix's width, of which no column id may be past; 0: the largest present).
void append_matrix(io::ShardWriter& writer, CsrRows& rows, std::uint64_t columns) {
  // The matrix's width, whatever its last columns hold: column j is id j + 1.
  // Ids end at 2^32 - 2 (the rows' check says so of any column beyond).
  if (columns > 0)
    writer.declare_max_index(static_cast<std::uint32_t>(
        std::min<std::uint64_t>(columns, std::numeric_limits<std::uint32_t>::max() - 1)));
  for (std::size_t begin = 0; begin < rows.rows(); begin += CsrRows::kBatchRows)
    writer.append(rows.batch(begin, std::min(rows.rows(), begin + CsrRows::kBatchRows)));
}

py::dict manifest_counts(const io::Manifest& manifest) {
  py::dict d;
  d["rows"] = manifest.rows;
  d["features"] = manifest.features;
  d["nnz"] = manifest.nnz;
  return d;
}

// write_shards: the matrix's rows (labels as given) as a raw shard directory at `dir`; returns the
// manifest's rows, features and non-zeros.
py::dict write_shards(const std::string& dir, const py::array& indptr, const py::array& indices,
                      const py::array& data, const py::array& labels, std::uint32_t block_rows,
                      int threads, std::uint64_t columns) {
  CsrRows rows(indptr, indices, data, labels, 1, columns);
  io::Manifest manifest;
  {
    py::gil_scoped_release release;
    io::ShardWriter writer(dir, matrix_options(block_rows), threads);
    append_matrix(writer, rows, columns);
    manifest = writer.finish(1, {}, 0);
  }
  return manifest_counts(manifest);
}

// The rows of a matrix held in memory as the shard set write_shards would write for them (the
// same blocks, so the same rows in the same order and the same model), for train().
class Rows {
 public:
  Rows(const py::array& indptr, const py::array& indices, const py::array& data,
       const py::array& labels, std::uint32_t block_rows, int threads, std::uint64_t columns,
       const std::string& name) {
    CsrRows rows(indptr, indices, data, labels, 1, columns);
    py::gil_scoped_release release;
    io::ShardWriter writer(matrix_options(block_rows), threads, name);
    append_matrix(writer, rows, columns);
    shards_ = std::make_shared<const io::ShardSet>(writer.finish_in_memory(1));
  }
  const std::shared_ptr<const io::ShardSet>& shards() const { return shards_; }
  py::dict counts() const { return manifest_counts(shards_->manifest()); }

 private:
  std::shared_ptr<const io::ShardSet> shards_;
};

// ---------------------------------------------------------------------------------------------
// Training jobs

// A job's notes to `log` (under the GIL, from the job's thread), its stop on SIGINT.
class PythonEvents final : public driver::Events {
 public:
  PythonEvents(py::object log, const SigintWatch& sigint) : log_(std::move(log)), sigint_(sigint) {}
  void note(const std::string& line) override { send_to_log(log_, line); }
  int stop_requested() override { return sigint_.received() ? SIGINT : 0; }

 private:
  py::object log_;
  const SigintWatch& sigint_;
};

// A job of the library run with the GIL released, its notes to `log`, stopped by SIGINT
// (KeyboardInterrupt), its errors raised as the command's exit code says; `run` returns its summary.
std::string run_job(py::object log, const std::function<std::string(driver::Events&)>& run) {
  std::optional<cli::Failure> failure;
  std::string summary;
  bool interrupted = false;
  {
    py::gil_scoped_release release;
    const SigintWatch sigint;
    PythonEvents events(log, sigint);
    try {
      summary = run(events);
    } catch (const driver::Interrupted&) {  // a search's too
      interrupted = true;
    } catch (...) {
      failure = cli::describe_failure(std::current_exception());
    }
  }
  if (interrupted)
    raise(PyExc_KeyboardInterrupt, "polymargin train stopped by SIGINT; no model was written");
  if (failure) raise(*failure);
  return summary;
}

std::string train(const std::vector<std::string>& args, py::object log, const Rows* rows,
                  bool durable) {
  return run_job(std::move(log), [&](driver::Events& events) {
    std::optional<driver::TrainJob> job = cli::parse_train_job(args);
    if (!job) throw UsageError("train: --help is not a training job");
    if (rows) job->shards = rows->shards();
    job->durable_output = durable;
    nlohmann::ordered_json record;
    return driver::train(*job, events, record).summary.dump();
  });
}

// `train --tune ARGS` as a job of the library (driver::tune): the search reads `rows` when given
// (the fold files it writes come from them), no shard directory of the matrix is written.
std::string tune(const std::vector<std::string>& args, py::object log, const Rows* rows,
                 bool durable) {
  return run_job(std::move(log), [&](driver::Events& events) {
    bool json = false;
    driver::TuneJob job = cli::parse_tune_job(args, json);
    if (rows) job.train.shards = rows->shards();
    job.train.durable_output = durable;
    nlohmann::ordered_json record;
    return driver::tune(job, events, record).final.summary.dump();
  });
}

// ---------------------------------------------------------------------------------------------
// Models

class Model {
 public:
  explicit Model(const std::string& path) : model_(io::load_classifier(path)) {}

  /// algorithm, config, labels, classes, index_base, max_index, features: as JSON text.
  std::string info() const {
    const engine::ModelInfo& i = *model_;
    nlohmann::json j = {{"algorithm", i.algorithm},
                        {"config", i.config},
                        {"labels", {{"negative", i.labels.negative}, {"positive", i.labels.positive}}},
                        {"classes", i.classes},
                        {"index_base", i.index_base},
                        {"max_index", i.max_index},
                        {"features", i.features}};
    return j.dump();
  }

  /// Scores, and the predicted raw labels when `predict`, of every row (column j is feature j +
  /// the model's index base).
  py::tuple score(const py::array& indptr, const py::array& indices, const py::array& data,
                  bool predict, std::uint64_t columns) const {
    const std::size_t n = static_cast<std::size_t>(std::max<py::ssize_t>(indptr.shape(0) - 1, 0));
    CsrRows rows(indptr, indices, data, py::none(), static_cast<std::uint32_t>(model_->index_base),
                 columns);
    py::array_t<double> scores(static_cast<py::ssize_t>(n));
    py::array_t<double> predicted(static_cast<py::ssize_t>(predict ? n : 0));
    double* s = scores.mutable_data();
    double* p = predicted.mutable_data();
    {
      py::gil_scoped_release release;
      for (std::size_t begin = 0; begin < n; begin += CsrRows::kBatchRows) {
        const CsrView batch = rows.batch(begin, std::min(n, begin + CsrRows::kBatchRows));
        if (predict)
          model_->predict_batch(batch, s + begin, p + begin);
        else
          model_->score_batch(batch, s + begin);
      }
    }
    return py::make_tuple(scores, predicted);
  }

  /// A linear model whose score is w·x + b in the raw features (no --normalize l2): (w by raw
  /// feature id with the scaling folded in, b); None for any other model.
  py::object linear() const {
    const auto* m = dynamic_cast<const engine::LinearModel*>(model_.get());
    if (!m || m->normalize_l2) return py::none();
    py::array_t<double> w(static_cast<py::ssize_t>(m->weights.size()));
    double* out = w.mutable_data();
    for (std::size_t f = 0; f < m->weights.size(); ++f)
      out[f] = m->scale.empty() ? m->weights[f] : m->weights[f] * static_cast<double>(m->scale[f]);
    return py::make_tuple(w, m->bias_weight * m->bias_value);
  }

 private:
  std::unique_ptr<engine::Classifier> model_;
};

// ---------------------------------------------------------------------------------------------
// Reading data

// The rows of `inputs` (LIBSVM text, plain or compressed, or a shard directory), in the order of
// the data, as polymargin's reader reads them (values and labels float32): (indptr int64, column
// ids int32, values float32, labels float32, features, index_base), a row's ids made columns by
// subtracting the index base. The GIL is released while reading.
py::tuple read_rows(const std::vector<std::string>& inputs, int threads) {
  std::vector<std::int64_t> indptr{0};
  std::vector<std::int32_t> columns;
  std::vector<float> values, labels;
  io::Manifest manifest;
  {
    py::gil_scoped_release release;
    const io::Dataset data = io::Dataset::open(inputs, io::ConvertOptions{}, threads);
    manifest = data.shards().manifest();
    if (manifest.features > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()))
      throw DataError(inputs.front(), 0, 0,
                      std::to_string(manifest.features) +
                          " features do not fit a scipy matrix's int32 column ids");
    labels.reserve(manifest.rows);
    indptr.reserve(manifest.rows + 1);
    columns.reserve(manifest.nnz);
    values.reserve(manifest.nnz);
    const auto base = static_cast<std::uint32_t>(manifest.index_base);
    io::ReadOptions read;
    read.shuffle = false;
    read.threads = threads;
    data.shards().scan(read, [&](const CsrView& rows) {
      for (std::size_t r = 0; r < rows.rows; ++r) {
        labels.push_back(rows.labels[r]);
        for (std::uint32_t k = rows.offsets[r]; k < rows.offsets[r + 1]; ++k) {
          columns.push_back(static_cast<std::int32_t>(rows.indices[k] - base));
          values.push_back(rows.value(k));
        }
        indptr.push_back(static_cast<std::int64_t>(columns.size()));
      }
    });
  }
  const auto array = [](auto& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    auto* held = new std::vector<T>(std::move(v));
    py::capsule owner(held, [](void* p) { delete static_cast<std::vector<T>*>(p); });
    return py::array_t<T>(static_cast<py::ssize_t>(held->size()), held->data(), owner);
  };
  return py::make_tuple(array(indptr), array(columns), array(values), array(labels),
                        manifest.features, manifest.index_base);
}

// Errors of the library outside run(), and running out of memory: the same mapping (pybind11's
// own exceptions pass on).
void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const Error&) {
    set_error(cli::describe_failure(std::current_exception()));
  } catch (const std::bad_alloc&) {
    set_error(cli::describe_failure(std::current_exception()));
  }
}

// The option table (driver/options.h) as JSON: per option its key, learners, type, default and
// roles, from which the estimators take their parameters.
std::string train_options() {
  nlohmann::json all = nlohmann::json::array();
  for (const driver::TrainOption& o : driver::train_options()) {
    nlohmann::json learners = nlohmann::json::array();
    const std::vector<std::string>& names = driver::learner_names();
    for (std::size_t i = 0; i < names.size(); ++i)
      if (o.learners & (1u << i)) learners.push_back(names[i]);
    all.push_back({{"key", o.key},
                   {"learners", learners},
                   {"switch", o.type == driver::OptionType::kSwitch},
                   {"several", o.type == driver::OptionType::kTexts},
                   {"default", o.default_text},
                   {"help", o.help},
                   {"estimator", (o.role & driver::kEstimatorParam) != 0},
                   {"alias", o.estimator_alias}});
  }
  return all.dump();
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "polymargin's C++ engine (use the polymargin package)";
  // Progress goes through the log callable, never as a rewritten line on the terminal.
  cli::g_terminal_progress.store(false);
  py::register_exception_translator(translate);
  m.def("train", &train, py::arg("args"), py::arg("log") = py::none(),
        py::arg("rows") = nullptr, py::arg("durable") = true,
        "Trains the job of `polymargin train ARGS` (no --tune) in this process, the GIL released, "
        "on the data files it names or on `rows` (a Rows); `durable` false: the model file is not "
        "fsync'ed (a temporary file). Returns its summary as JSON text.");
  m.def("read_rows", &read_rows, py::arg("inputs"), py::arg("threads") = 0,
        "The rows of LIBSVM text files (plain, gzip, bzip2, zstd) or a shard directory, in data "
        "order, as polymargin reads them: (indptr, columns, values, labels, features, "
        "index_base).");
  m.def("tune", &tune, py::arg("args"), py::arg("log") = py::none(), py::arg("rows") = nullptr,
        py::arg("durable") = true,
        "Searches and trains the job of `polymargin train --tune ARGS` in this process (no "
        "executable), the GIL released, on the data files it names or on `rows` (a Rows); "
        "`durable` as train's. Returns the final run's summary as JSON text.");
  m.def("train_options", &train_options,
        "The options of `polymargin train` as JSON: key, learners, switch, several, default, "
        "help, estimator (a parameter of the Python estimators), alias (its scikit-learn name, "
        "or empty).");
  m.def("run", &run, py::arg("command"), py::arg("args"), py::arg("log") = py::none(),
        "Runs a polymargin command in this process; returns (exit code, stdout bytes).");
  m.def("set_program", &cli::experiment::set_self_executable, py::arg("path"),
        "The polymargin program that `experiment` starts for its cells.");
  // This process is Python: until set_program names it, a command that starts the program says how.
  cli::experiment::set_self_executable_missing(
      "no polymargin program found (`experiment` runs it for its cells): set POLYMARGIN_BINARY "
      "to its path, or put it on PATH");
  m.def("write_shards", &write_shards, py::arg("dir"), py::arg("indptr"), py::arg("indices"),
        py::arg("data"), py::arg("labels"), py::arg("block_rows") = 4096, py::arg("threads") = 0,
        py::arg("columns") = 0);
  py::class_<Rows>(m, "Rows",
                   "A CSR matrix's rows (labels as given) held in memory as the shards "
                   "write_shards would write, for train(rows=...).")
      .def(py::init<const py::array&, const py::array&, const py::array&, const py::array&,
                    std::uint32_t, int, std::uint64_t, const std::string&>(),
           py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("labels"),
           py::arg("block_rows") = 4096, py::arg("threads") = 0, py::arg("columns") = 0,
           py::arg("name") = "<memory>")
      .def("counts", &Rows::counts, "The rows, features and non-zeros, as write_shards returns them.");
  py::class_<Model>(m, "Model")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def("info", &Model::info)
      .def("score", &Model::score, py::arg("indptr"), py::arg("indices"), py::arg("data"),
           py::arg("predict") = false, py::arg("columns") = 0)
      .def("linear", &Model::linear);
}
