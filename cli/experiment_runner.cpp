#include "cli/experiment_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

#include "cli/signals.h"
#include "engine/errors.h"
#include "io/atomic_file.h"
#include "io/shards.h"
#include "io/split.h"
#include "io/temporaries.h"
#include "io/text_reader.h"
#include "io/text_writer.h"

namespace polymargin::cli::experiment {
namespace fs = std::filesystem;

namespace {

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string last_lines(const std::string& text, int lines) {
  std::size_t end = text.size();
  while (end > 0 && text[end - 1] == '\n') --end;
  std::size_t begin = end;
  for (int n = 0; n < lines && begin > 0; ++n) {
    begin = text.rfind('\n', begin - 1);
    if (begin == std::string::npos) {
      begin = 0;
      break;
    }
  }
  if (begin < end && text[begin] == '\n') ++begin;
  return text.substr(begin, end - begin);
}

}  // namespace

namespace {
std::string g_self_executable;  // set_self_executable's path; empty: /proc/self/exe
std::string g_self_missing;     // set_self_executable_missing's message
}  // namespace

void set_self_executable(const std::string& path) { g_self_executable = path; }
void set_self_executable_missing(const std::string& message) { g_self_missing = message; }

std::string self_executable() {
  if (!g_self_executable.empty()) {
    if (::access(g_self_executable.c_str(), X_OK) != 0)
      throw IoError("cannot run " + g_self_executable + " (the polymargin program): " +
                    std::strerror(errno));
    return g_self_executable;
  }
  if (!g_self_missing.empty()) throw IoError(g_self_missing);
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw IoError("cannot find this program's path (/proc/self/exe): " + ec.message());
  return self.string();
}

namespace {

// This process's environment less what an MPI launcher sets for its ranks (OMPI_*, PMIX_*, PMI_*):
// a child of a rank (a --tune cell) is a program of its own, and would otherwise take itself for a
// rank of the job (driver::launched_as_rank) and try to join it.
std::vector<char*> child_environment() {
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view var(*e);
    if (!var.starts_with("OMPI_") && !var.starts_with("PMIX_") && !var.starts_with("PMI_"))
      env.push_back(*e);
  }
  env.push_back(nullptr);
  return env;
}

}  // namespace

ChildResult run_child(const std::vector<std::string>& argv, const std::string& work_dir,
                      const std::function<bool()>& stop) {
  const std::string out_path = work_dir + "/stdout", err_path = work_dir + "/stderr";
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env = child_environment();
  const pid_t parent = ::getpid();
  const auto start = std::chrono::steady_clock::now();
  // fork + exec rather than posix_spawn, for PR_SET_PDEATHSIG. Between the two only
  // async-signal-safe calls, as the parent has threads.
  // Registered from before the fork until it is reaped: a signal that ends this process stops it
  // first (cli/signals.h).
  std::optional<RunningChild> running(std::in_place);
  const pid_t pid = ::fork();
  if (pid < 0) throw IoError(std::string("cannot start ") + argv[0] + ": " + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the experiment died before the prctl
    // The parent blocks SIGTERM/SIGINT/SIGHUP for its signal thread (cli/signals.h); a mask is
    // inherited across exec, and the child (liblinear-train, a cell) must be stoppable by them.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || err < 0 || in < 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execvpe(args[0], args.data(), env.data());
    ::_exit(127);
  }
  running->started(pid);
  int status = 0;
  struct rusage usage{};
  bool stopped = false;
  auto pause = std::chrono::milliseconds(1);  // doubled up to 20 ms: short cells end soon after
  for (;;) {
    const pid_t done = ::wait4(pid, &status, stop && !stopped ? WNOHANG : 0, &usage);
    if (done == pid) break;
    if (done < 0) {
      if (errno == EINTR) continue;
      throw IoError(std::string("waiting for ") + argv[0] + ": " + std::strerror(errno));
    }
    if (stop()) {
      ::kill(pid, SIGTERM);
      stopped = true;  // then wait for it without polling
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(2 * pause, std::chrono::milliseconds(20));
    }
  }
  running.reset();
  ChildResult r;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.stdout_text = read_whole(out_path);
  r.stderr_tail = last_lines(read_whole(err_path), 3);
  if (r.exit_code == 127 && r.stderr_tail.empty())
    r.stderr_tail = std::string("cannot run ") + argv[0];
  return r;
}

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::istringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

SplitFiles make_split(const std::vector<std::string>& data, const std::vector<std::string>& test,
                      double test_fraction, std::uint64_t split_seed, int folds,
                      std::uint64_t fold_seed, const std::string& prefix, int threads,
                      DataSummary* summary) {
  fs::create_directories(fs::path(prefix).parent_path());
  io::SplitOptions fold_options;
  fold_options.folds = folds;
  fold_options.seed = fold_seed;
  SplitFiles files;
  files.folds = io::split_output_paths(prefix + ".cv", fold_options);
  io::SplitOptions split_options;
  split_options.test_fraction = test_fraction;
  split_options.seed = split_seed;
  const std::vector<std::string> split_paths = io::split_output_paths(prefix, split_options);
  files.test = test.empty() ? std::vector<std::string>{split_paths[1]} : test;

  // The stamp is written last: files without it, or with another stamp, are made again, and so
  // are files one of which is missing or has changed size since (a deleted or edited split).
  std::vector<std::string> made = files.folds;
  if (test.empty()) made.push_back(split_paths[1]);
  const auto sizes = [&] {
    nlohmann::json bytes = nlohmann::json::array();
    for (const std::string& path : made) {
      std::error_code ec;
      const std::uintmax_t size = fs::file_size(path, ec);
      bytes.push_back(ec ? nlohmann::json() : nlohmann::json(size));
    }
    return bytes;
  };
  const std::string stamp_path = prefix + ".stamp.json";
  nlohmann::json stamp = {{"data", data},           {"test", test},
                          {"test_fraction", test_fraction}, {"split_seed", split_seed},
                          {"folds", folds},         {"fold_seed", fold_seed}};
  {
    std::ifstream in(stamp_path);
    if (in) {
      try {
        const nlohmann::json old = nlohmann::json::parse(in);
        if (old.value("inputs", nlohmann::json()) == stamp &&
            old.value("bytes", nlohmann::json()) == sizes()) {
          files.train_rows = old["train_rows"];
          files.test_rows = old["test_rows"];
          files.index_base = old.value("index_base", 1);
          if (summary) {
            summary->rows = old["rows"];
            summary->max_index = old["max_index"];
          }
          return files;
        }
      } catch (const nlohmann::json::exception&) {
      }
    }
  }

  // Made again: first the leftovers of a killed run's writes of these files
  // (r2.test.svm.tmp-PID-N).
  for (const std::string& path : made) io::sweep_dead_temporaries(path);
  io::sweep_dead_temporaries(stamp_path);
  if (test.empty()) io::sweep_dead_temporaries(split_paths[0]);

  std::uint64_t max_index = 0;
  const auto note_indices = [&](const CsrView& rows) {
    if (rows.rows > 0 && rows.nnz() > 0)
      for (std::size_t r = 0; r < rows.rows; ++r)
        if (rows.row_nnz(r) > 0)
          max_index = std::max<std::uint64_t>(max_index, rows.indices[rows.offsets[r + 1] - 1]);
  };
  std::uint64_t rows = 0;
  if (test.empty()) {
    // Pass 1: the random split; pass 2: the folds of its training part.
    io::Splitter splitter(prefix, split_options);
    files.index_base = for_each_batch(data, threads, [&](const CsrView& batch) {
      note_indices(batch);
      splitter.append(batch);
    });
    const io::SplitCounts counts = splitter.finish();
    files.train_rows = counts.train_rows;
    files.test_rows = counts.test_rows;
    rows = counts.rows;
    io::Splitter fold_splitter(prefix + ".cv", fold_options);
    for_each_batch({split_paths[0]}, threads, [&](const CsrView& batch) { fold_splitter.append(batch); });
    fold_splitter.finish();
    fs::remove(split_paths[0]);  // the folds hold the same rows
  } else {
    io::Splitter fold_splitter(prefix + ".cv", fold_options);
    files.index_base = for_each_batch(data, threads, [&](const CsrView& batch) {
      note_indices(batch);
      fold_splitter.append(batch);
    });
    files.train_rows = fold_splitter.finish().rows;
    for_each_batch(test, threads, [&](const CsrView& batch) {
      note_indices(batch);
      files.test_rows += batch.rows;
    });
    rows = files.train_rows + files.test_rows;
  }
  if (summary) {
    summary->rows = rows;
    summary->max_index = max_index;
  }
  io::write_file_atomically(stamp_path, nlohmann::json{{"inputs", stamp},
                                                       {"train_rows", files.train_rows},
                                                       {"test_rows", files.test_rows},
                                                       {"rows", rows},
                                                       {"max_index", max_index},
                                                       {"index_base", files.index_base},
                                                       {"bytes", sizes()}}
                                            .dump(1));
  return files;
}

void write_scaled_text(const std::vector<std::string>& train, const std::vector<std::string>& test,
                       const std::string& train_out, const std::string& test_out, int threads) {
  std::vector<float> maxabs;
  for_each_batch(train, threads, [&](const CsrView& batch) {
    for (std::size_t k = batch.offsets[0]; k < batch.offsets[batch.rows]; ++k) {
      const std::uint32_t j = batch.indices[k];
      if (j >= maxabs.size()) maxabs.resize(std::size_t{j} + 1, 0.0f);
      maxabs[j] = std::max(maxabs[j], std::abs(batch.value(k)));
    }
  });
  const auto write = [&](const std::vector<std::string>& inputs, const std::string& out) {
    io::TextWriter writer(out);
    CsrBuffer scaled;
    for_each_batch(inputs, threads, [&](const CsrView& batch) {
      scaled.clear();
      scaled.ensure_values();
      for (std::size_t r = 0; r < batch.rows; ++r) {
        scaled.labels.push_back(batch.labels[r]);
        for (std::size_t k = batch.offsets[r]; k < batch.offsets[r + 1]; ++k) {
          const std::uint32_t j = batch.indices[k];
          // A test feature never seen in training has no scale: it is left out, as a model
          // trained on the training part gives it no weight.
          const float m = j < maxabs.size() ? maxabs[j] : 0.0f;
          if (m == 0) continue;
          scaled.indices.push_back(j);
          scaled.values.push_back(batch.value(k) / m);
        }
        scaled.offsets.push_back(static_cast<std::uint32_t>(scaled.indices.size()));
      }
      writer.write(scaled.view());
    });
    writer.finish();
  };
  write(train, train_out);
  write(test, test_out);
}

}  // namespace polymargin::cli::experiment
