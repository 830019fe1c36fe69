// `polymargin experiment`: the config format (lists, power ranges, coordinate-descent stages,
// errors naming file:line), then the binary end to end: configs/smoke.conf with every report file
// checked, a rerun served from the cache, resume after a kill, a changed input recomputed, and
// missing data / unknown methods as clear errors before any work.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "cli/experiment_config.h"
#include "cli/experiment_runner.h"
#include "engine/errors.h"
#include "io/file_lock.h"

namespace polymargin::cli::experiment {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kBinary = POLYMARGIN_BINARY;
const std::string kSource = POLYMARGIN_SOURCE_DIR;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs the binary with `args` from the source directory (configs name data relative to it).
// `environment`: assignments put before the command, e.g. "PATH=/nowhere".
Outcome run(const std::string& args, const std::string& environment = "") {
  const fs::path log = fs::temp_directory_path() / ("pm_experiment_" + std::to_string(::getpid()) + ".log");
  const std::string command = "cd '" + kSource + "' && " + environment + " '" + kBinary + "' " +
                              args + " > '" + log.string() + "' 2>&1";
  const int status = std::system(command.c_str());
  Outcome r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.output = read(log);
  fs::remove(log);
  return r;
}

class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/pm_experiment_test.XXXXXX";
    path_ = ::mkdtemp(name);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::size_t count_files(const fs::path& dir, const std::string& suffix) {
  std::size_t n = 0;
  if (!fs::exists(dir)) return 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().string().ends_with(suffix)) ++n;
  return n;
}

// Minimal well-formedness of an SVG: one root <svg>, every element closed in order.
void expect_valid_svg(const std::string& text, const std::string& name) {
  ASSERT_EQ(text.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << name;
  std::vector<std::string> open;
  int roots = 0;
  for (std::size_t at = text.find('<'); at != std::string::npos; at = text.find('<', at + 1)) {
    const std::size_t end = text.find('>', at);
    ASSERT_NE(end, std::string::npos) << name << ": unterminated tag";
    const std::string tag = text.substr(at + 1, end - at - 1);
    if (tag.empty()) FAIL() << name << ": empty tag";
    if (tag[0] == '/') {
      ASSERT_FALSE(open.empty()) << name << ": stray </" << tag << ">";
      EXPECT_EQ(open.back(), tag.substr(1)) << name;
      open.pop_back();
    } else if (tag.back() != '/') {
      const std::string element = tag.substr(0, tag.find_first_of(" \n"));
      if (open.empty()) ++roots;
      open.push_back(element);
    }
    ASSERT_EQ(text.find('<', at + 1) < end, false) << name << ": '<' inside a tag";
  }
  EXPECT_TRUE(open.empty()) << name << ": unclosed <" << (open.empty() ? "" : open.back()) << ">";
  EXPECT_EQ(roots, 1) << name;
  EXPECT_EQ(text.find("NaN"), std::string::npos) << name;
  EXPECT_EQ(text.find("nan"), std::string::npos) << name;
}

std::vector<std::vector<std::string>> read_csv(const fs::path& path) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(read(path));
  for (std::string line; std::getline(in, line);) {
    rows.emplace_back();
    std::string field;
    std::istringstream cells(line);
    while (std::getline(cells, field, ',')) rows.back().push_back(field);
    if (!line.empty() && line.back() == ',') rows.back().emplace_back();
  }
  return rows;
}

// --- config --------------------------------------------------------------------------------------

// A data set's files are relative to the config file's folder; absolute names, and every name of a
// config in the working folder, stay as written.
TEST(ExperimentConfig, DataFilesAreRelativeToTheConfigsFolder) {
  const std::string text =
      "[dataset a]\ndata = x.svm, ../up/y.svm, /abs/z.svm\ntest = t.svm\n[method m]\nalgo = ldm\n";
  const ExperimentConfig there = parse_config(text, "/some/dir/c.conf");
  EXPECT_EQ(there.datasets[0].data,
            (std::vector<std::string>{"/some/dir/x.svm", "/some/dir/../up/y.svm", "/abs/z.svm"}));
  EXPECT_EQ(there.datasets[0].test, std::vector<std::string>{"/some/dir/t.svm"});
  const ExperimentConfig here = parse_config(text, "c.conf");
  EXPECT_EQ(here.datasets[0].data,
            (std::vector<std::string>{"x.svm", "../up/y.svm", "/abs/z.svm"}));
}

TEST(ExperimentConfig, ListsRangesAndSections) {
  const ExperimentConfig c = parse_config(
      "title = t\nrepeats = 3  # comment\nfolds = 4\n"
      "[dataset a]\ndata = x.svm, y.svm\ntest = z.svm\noptional = yes\n"
      "[method m]\nalgo = ldm\ncost = 10, 50\nlambda1 = 2^-2..2^0\nepochs = 5\n"
      "search = coordinate\norder = lambda1 | cost\n",
      "c.conf");
  EXPECT_EQ(c.repeats, 3);
  EXPECT_EQ(c.folds, 4);
  ASSERT_EQ(c.datasets.size(), 1u);
  EXPECT_EQ(c.datasets[0].data, (std::vector<std::string>{"x.svm", "y.svm"}));
  EXPECT_TRUE(c.datasets[0].optional);
  const MethodSpec& m = c.methods.at(0);
  EXPECT_EQ(m.fixed, (Setting{{"epochs", "5"}}));
  ASSERT_EQ(m.grid.size(), 2u);
  EXPECT_EQ(m.grid[1].values, (std::vector<std::string>{"0.25", "0.5", "1"}));
  // Coordinate descent: lambda1 first (cost held at its first value), then cost.
  const auto stages = search_stages(m);
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0], std::vector<std::string>{"lambda1"});
  const auto first = settings_for_group(m, stages[0], first_setting(m));
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[2], (Setting{{"epochs", "5"}, {"cost", "10"}, {"lambda1", "1"}}));
  const auto second = settings_for_group(m, stages[1], {{"cost", "10"}, {"lambda1", "0.5"}});
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[1], (Setting{{"epochs", "5"}, {"cost", "50"}, {"lambda1", "0.5"}}));
  EXPECT_EQ(setting_text(second[1], m), "cost=50 lambda1=0.5");
}

TEST(ExperimentConfig, ProductSearchIsOneStageOfEveryCombination) {
  const ExperimentConfig c = parse_config(
      "[dataset a]\ndata = x\n[method m]\nalgo = ldm\na = 1, 2\nb = 3, 4, 5\n", "c.conf");
  const MethodSpec& m = c.methods[0];
  ASSERT_EQ(search_stages(m).size(), 1u);
  const auto all = settings_for_group(m, search_stages(m)[0], first_setting(m));
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[1], (Setting{{"a", "1"}, {"b", "4"}}));  // the last key varies fastest
  EXPECT_EQ(all[5], (Setting{{"a", "2"}, {"b", "5"}}));
}

TEST(ExperimentConfig, ErrorsNameFileAndLine) {
  const auto message = [](const std::string& text) {
    try {
      parse_config(text, "bad.conf");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("[dataset a]\ndata = x\n[method m]\nalgo = ldm\nbogus\n").find("bad.conf:5"),
            std::string::npos);
  EXPECT_NE(message("repeats = x\n").find("bad.conf:1: repeats"), std::string::npos);
  EXPECT_NE(message("colour = red\n").find("unknown experiment key"), std::string::npos);
  // A misused key of a [method] section is named at its own line (8, 6), not at the header's (3).
  EXPECT_NE(message("[dataset a]\ndata = x\n[method m]\nalgo = ldm\ncost = 1, 2\nc = 3, 4\n"
                    "search = coordinate\norder = cost\n")
                .find("bad.conf:8: method m: order leaves out the grid key 'c'"),
            std::string::npos);
  EXPECT_NE(message("[dataset a]\ndata = x\n[method m]\nalgo = ldm\ncost = 1, 2\norder = cost\n")
                .find("bad.conf:6: method m: order is for search = coordinate"),
            std::string::npos);
  EXPECT_NE(message("[dataset a]\ndata = x\n[method m]\nalgo = ldm\ncost = 1, 2\n"
                    "search = coordinate\norder = cost, gamma\n")
                .find("bad.conf:7: method m: order names 'gamma'"),
            std::string::npos);
  EXPECT_NE(message("[dataset a]\ndata = x\n[method m]\nalgo = ldm\n\nexternal = liblinear\n")
                .find("bad.conf:6: method m: algo and external exclude each other"),
            std::string::npos);
  EXPECT_NE(message("[dataset a]\ndata = x\n[method m]\nalgo = ldm\ncost = 1, 1\n").find("twice"),
            std::string::npos);
  EXPECT_NE(message("[dataset a]\ndata = x\n[method m]\ncost = 1\n").find("needs algo"),
            std::string::npos);
  EXPECT_NE(message("[dataset a]\ndata = x\n[method m]\nalgo = ldm\nlambda1 = 2^-1..2^-3\n")
                .find("FROM ≤ TO"),
            std::string::npos);
  EXPECT_NE(message("margin-plot = l\n[dataset a]\ndata = x\n[method l]\nexternal = liblinear\n")
                .find("an external method"),
            std::string::npos);
  EXPECT_NE(message("baseline = none\n[dataset a]\ndata = x\n[method m]\nalgo = ldm\n")
                .find("baseline 'none'"),
            std::string::npos);
  // A protocol value out of range names its line, and the command line's override is what counts.
  const std::string one_fold =
      "title = t\nfolds = 1\n[dataset a]\ndata = x\n[method m]\nalgo = ldm\n";
  EXPECT_NE(message(one_fold).find("bad.conf:2: folds must be at least 2"), std::string::npos)
      << message(one_fold);
  EXPECT_EQ(parse_config(one_fold, "bad.conf", {.folds = 3}).folds, 3);
  EXPECT_NE(message("[dataset a]\ndata = x\n[method m]\nalgo = ldm\ncost = 2^-1080..2^-1070\n")
                .find("bad.conf:5: cost: 2^-1080 is out of a double's range"),
            std::string::npos);
  // Powers are written as the shortest text that reads back to them.
  EXPECT_EQ(parse_value_list("10^-2..10^1", "x"),
            (std::vector<std::string>{"0.01", "0.1", "1", "10"}));
  // An editor's byte order mark before the first key is not part of it.
  EXPECT_EQ(parse_config("\xEF\xBB\xBFtitle = t\n[dataset a]\ndata = x\n[method m]\nalgo = ldm\n",
                         "bom.conf")
                .title,
            "t");
  EXPECT_NE(message("repeats = 0\n[dataset a]\ndata = x\n[method m]\nalgo = ldm\n")
                .find("bad.conf:1: repeats must be at least 1"),
            std::string::npos);
}

TEST(ExperimentConfig, ShippedConfigsParse) {
  for (const char* name : {"smoke", "ldm-table4", "ldm-table2", "cpm-table1"}) {
    const std::string path = kSource + "/configs/" + std::string(name) + ".conf";
    EXPECT_NO_THROW(read_config(path)) << path;
  }
}

// --- end to end ----------------------------------------------------------------------------------

// polymargin blocks SIGTERM, SIGINT and SIGHUP for its signal thread; a cell or liblinear-train it
// starts must not inherit that mask (it could not be stopped by them).
TEST(Experiment, ChildrenStartWithNoSignalBlocked) {
  TempDir dir;
  sigset_t blocked, before;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGINT);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &blocked, &before), 0);
  const ChildResult r = run_child({"grep", "SigBlk", "/proc/self/status"}, dir.path().string());
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_tail;
  EXPECT_NE(r.stdout_text.find("0000000000000000"), std::string::npos) << r.stdout_text;
}

// A child of an MPI rank (a --tune cell) must not take itself for a rank: the launcher's variables
// are not passed on; the others are.
TEST(Experiment, ChildrenDoNotInheritAnMpiLaunchersVariables) {
  TempDir dir;
  ASSERT_EQ(setenv("OMPI_COMM_WORLD_SIZE", "2", 1), 0);
  ASSERT_EQ(setenv("PMIX_RANK", "1", 1), 0);
  ASSERT_EQ(setenv("PMI_SIZE", "2", 1), 0);
  ASSERT_EQ(setenv("POLYMARGIN_TEST_KEPT", "yes", 1), 0);
  const ChildResult r = run_child({"env"}, dir.path().string());
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "POLYMARGIN_TEST_KEPT"})
    unsetenv(name);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_tail;
  EXPECT_EQ(r.stdout_text.find("OMPI_"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("PMIX_"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("PMI_"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("POLYMARGIN_TEST_KEPT=yes"), std::string::npos) << r.stdout_text;
}

// A child is stopped (SIGTERM) soon after its stop predicate turns true; one that ends first is
// waited for as usual.
TEST(Experiment, ChildIsStoppedWhenAsked) {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  const auto after = [&](int ms) {
    return [&start, ms] {
      return std::chrono::steady_clock::now() - start > std::chrono::milliseconds(ms);
    };
  };
  const ChildResult stopped = run_child({"sleep", "30"}, dir.path().string(), after(100));
  EXPECT_EQ(stopped.exit_code, 128 + SIGTERM);
  EXPECT_LT(stopped.wall_seconds, 10.0);
  const ChildResult done = run_child({"true"}, dir.path().string(), after(60000));
  EXPECT_EQ(done.exit_code, 0);
}

TEST(Experiment, SmokeConfigWritesEveryTableAndPlot) {
  TempDir dir;
  const fs::path out = dir.path() / "smoke";
  const Outcome first = run("experiment configs/smoke.conf -o '" + out.string() + "' --jobs 2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const json results = json::parse(read(out / "results.json"));
  const json& run_counts = results["run"];
  EXPECT_EQ(run_counts["cells_failed"], 0);
  EXPECT_EQ(run_counts["cells_computed"].get<int>() + run_counts["cells_from_cache"].get<int>(),
            run_counts["cells_planned"].get<int>());

  // Every (data set, method) has a row in the accuracy table, with sane numbers.
  const ExperimentConfig config = read_config(kSource + "/configs/smoke.conf");
  std::set<std::string> ran;  // methods that ran (LIBLINEAR only where installed)
  for (const auto& m : results["methods"])
    if (m["status"] == "ok") ran.insert(m["name"].get<std::string>());
  EXPECT_TRUE(ran.count("svm") && ran.count("ldm"));
  const auto csv = read_csv(out / "accuracy.csv");
  ASSERT_FALSE(csv.empty());
  EXPECT_EQ(csv[0][0], "dataset");
  std::set<std::string> cells;
  for (std::size_t i = 1; i < csv.size(); ++i) {
    ASSERT_EQ(csv[i].size(), csv[0].size()) << "row " << i;
    cells.insert(csv[i][0] + "/" + csv[i][1]);
    const double accuracy = std::stod(csv[i][2]);
    EXPECT_GT(accuracy, 0.6) << csv[i][0] << " " << csv[i][1];
    EXPECT_LE(accuracy, 1.0);
    EXPECT_EQ(csv[i][4], std::to_string(config.repeats));
  }
  for (const auto& d : config.datasets)
    for (const std::string& m : ran) EXPECT_TRUE(cells.count(d.name + "/" + m)) << d.name << "/" << m;
  const json accuracy = json::parse(read(out / "accuracy.json"));
  EXPECT_EQ(accuracy.size(), cells.size());
  for (const auto& row : accuracy) EXPECT_EQ(row["accuracies"].size(), config.repeats);
  EXPECT_EQ(json::parse(read(out / "timing.json")).size(), cells.size());
  for (const auto& row : json::parse(read(out / "timing.json")))
    for (const auto& seconds : row["train_cpu_seconds"]) EXPECT_GE(seconds.get<double>(), 0.0);
  EXPECT_EQ(read_csv(out / "timing.csv").size(), cells.size() + 1);

  // Markdown: a table per file, the win/tie/loss row against the baseline.
  const std::string md = read(out / "accuracy.md");
  EXPECT_NE(md.find("| data set | #inst | #feat | svm | ldm |"), std::string::npos) << md;
  EXPECT_NE(md.find("| win/tie/loss vs svm |"), std::string::npos) << md;
  EXPECT_NE(md.find("**"), std::string::npos) << "no best value in bold:\n" << md;
  EXPECT_NE(read(out / "timing.md").find("(CPU "), std::string::npos);

  // Plots: valid SVG; the HTML embeds each one and links its file.
  std::vector<std::string> svgs = {"timing.svg"};
  for (const auto& d : config.datasets) svgs.push_back("margins-" + d.name + ".svg");
  const std::string html = read(out / "report.html");
  std::size_t embedded = 0;
  for (std::size_t at = html.find("<svg "); at != std::string::npos; at = html.find("<svg ", at + 1))
    ++embedded;
  EXPECT_EQ(embedded, svgs.size());
  for (const std::string& name : svgs) {
    SCOPED_TRACE(name);
    const std::string svg = read(out / name);
    expect_valid_svg(svg, name);
    EXPECT_NE(html.find("href=\"" + name + "\""), std::string::npos);
  }
  EXPECT_NE(read(out / "margins-a9a.t.svg").find(">ldm<"), std::string::npos);
  EXPECT_NE(read(out / "margins-a9a.t.svg").find(">svm<"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"))
      << "the report must not fetch anything";

  // A rerun is served from the cache entirely and writes the same tables.
  const std::string before = read(out / "accuracy.csv");
  const Outcome again = run("experiment configs/smoke.conf -o '" + out.string() + "' --jobs 1");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  const json rerun = json::parse(read(out / "results.json"))["run"];
  EXPECT_EQ(rerun["cells_computed"], 0);
  EXPECT_EQ(rerun["cells_from_cache"], rerun["cells_planned"]);
  EXPECT_EQ(read(out / "accuracy.csv"), before) << "tables depend on --jobs or on the cache";
}

// A small config of its own: two generated data sets in `dir`, an SVM with a two-value grid.
fs::path small_config(const fs::path& dir) {
  for (const char* seed : {"11", "12"}) {
    const Outcome gen = run("gen --like kdda --rows 3000 --features 3000 --nnz 15 --seed " +
                        std::string(seed) + " -o '" + (dir / ("d" + std::string(seed) + ".svm")).string() + "'");
    EXPECT_EQ(gen.exit_code, 0) << gen.output;
  }
  const fs::path config = dir / "small.conf";
  write(config, "repeats = 2\nfolds = 3\n"
                "[dataset one]\ndata = " + (dir / "d11.svm").string() + "\n"
                "[dataset two]\ndata = " + (dir / "d12.svm").string() + "\n"
                "[method svm]\nalgo = svm\ncost = 0.1, 1\nepochs = 3\nthreads = 1\n");
  return config;
}

// `experiment CONFIG -o OUT --jobs 1` started in the background, quiet; its pid (< 0: no fork).
pid_t start_experiment(const fs::path& config, const fs::path& out, const fs::path& tmp = {}) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!tmp.empty()) ::setenv("TMPDIR", tmp.c_str(), 1);  // where the cells convert their folds
    ::freopen("/dev/null", "w", stderr);
    ::freopen("/dev/null", "w", stdout);
    ::execl(kBinary.c_str(), kBinary.c_str(), "experiment", config.c_str(), "-o", out.c_str(),
            "--jobs", "1", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Waits (at most a minute) until `cells` holds `n` finished cells.
void wait_for_cells(const fs::path& cells, std::size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (count_files(cells, ".json") < n && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

TEST(Experiment, ResumesAfterAKillWithoutRecomputingFinishedCells) {
  TempDir dir;
  const fs::path config = small_config(dir.path());
  const fs::path out = dir.path() / "out", cells = out / "cells";
  const pid_t pid = start_experiment(config, out);
  ASSERT_GE(pid, 0);
  wait_for_cells(cells, 4);  // a few of the 28 it plans
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it could be killed";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a child's last write, if any
  std::map<std::string, fs::file_time_type> finished;
  for (const auto& e : fs::directory_iterator(cells))
    if (e.path().extension() == ".json") finished[e.path().string()] = e.last_write_time();
  ASSERT_GE(finished.size(), 4u);
  ASSERT_FALSE(fs::exists(out / "results.json"));

  const Outcome resumed = run("experiment '" + config.string() + "' -o '" + out.string() + "'");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const json counts = json::parse(read(out / "results.json"))["run"];
  EXPECT_EQ(counts["cells_planned"], 28);
  // Every cell computed now is one that was missing; every finished one came from the cache.
  EXPECT_EQ(counts["cells_computed"].get<std::size_t>(), count_files(cells, ".json") - finished.size());
  EXPECT_GE(counts["cells_from_cache"].get<std::size_t>(), finished.size());
  for (const auto& [path, time] : finished) EXPECT_EQ(fs::last_write_time(path), time) << path;
}

// The signal reaches the experiment alone (as from `timeout` or a scheduler, not a terminal's
// Ctrl-C, which reaches the cells too): it stops the running cell first, which removes its own
// on-the-fly conversion in $TMPDIR (the cell died of SIGKILL with the experiment and left it).
TEST(Experiment, ASignalRemovesTheWorkDirectoryTheLockAndTheCellsTemporaries) {
  TempDir dir;
  const fs::path config = small_config(dir.path());
  const fs::path out = dir.path() / "out", cells = out / "cells", tmp = dir.path() / "tmp";
  fs::create_directory(tmp);
  const pid_t pid = start_experiment(config, out, tmp);
  ASSERT_GE(pid, 0);
  wait_for_cells(cells, 2);
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;  // the shell's 143
  EXPECT_FALSE(fs::exists(out / "work"));
  EXPECT_FALSE(fs::exists(out / "experiment.lock"));
  EXPECT_TRUE(fs::exists(cells));  // the finished cells stay, for the next run
  for (const fs::directory_entry& left : fs::directory_iterator(tmp))
    ADD_FAILURE() << "left in $TMPDIR: " << left.path();
}

TEST(Experiment, AChangedInputIsRecomputedAndOnlyIt) {
  TempDir dir;
  const fs::path config = small_config(dir.path());
  const fs::path out = dir.path() / "out";
  ASSERT_EQ(run("experiment '" + config.string() + "' -o '" + out.string() + "'").exit_code, 0);
  // Drop the last row of data set two: its cells must be recomputed, one's must not.
  std::string text = read(dir.path() / "d12.svm");
  text.erase(text.rfind('\n', text.size() - 2) + 1);
  write(dir.path() / "d12.svm", text);
  const Outcome again = run("experiment '" + config.string() + "' -o '" + out.string() + "'");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  const json results = json::parse(read(out / "results.json"));
  EXPECT_EQ(results["run"]["cells_computed"], 14);
  EXPECT_EQ(results["run"]["cells_from_cache"], 14);
  EXPECT_EQ(results["datasets"][1]["rows"], 2999);

  // A split file deleted (or changed) since is made again, and the run goes on from the cache.
  std::vector<fs::path> tests;
  for (const auto& e : fs::recursive_directory_iterator(out / "splits"))
    if (e.path().filename() == "r0.test.svm" &&
        e.path().parent_path().filename().string().starts_with("one"))
      tests.push_back(e.path());
  ASSERT_FALSE(tests.empty());
  fs::remove(tests[0]);
  // ... and a killed run's leftover beside it is swept then.
  const fs::path leftover = tests[0].string() + ".tmp-999999-0";
  write(leftover, "a partial split");
  const Outcome third = run("experiment '" + config.string() + "' -o '" + out.string() + "'");
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_TRUE(fs::exists(tests[0]));
  EXPECT_FALSE(fs::exists(leftover));
  EXPECT_EQ(json::parse(read(out / "results.json"))["run"]["cells_computed"], 0) << third.output;
}

TEST(Experiment, MissingDataAndUnknownMethodsAreClearErrors) {
  TempDir dir;
  const fs::path out = dir.path() / "out";
  write(dir.path() / "missing.conf",
        "[dataset gone]\ndata = /nonexistent/gone.svm\n[method svm]\nalgo = svm\n");
  Outcome r = run("experiment '" + (dir.path() / "missing.conf").string() + "' -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(
      r.output.find("missing.conf:2: dataset gone: data file /nonexistent/gone.svm does not exist"),
      std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(out)) << "a refused run left the directory it made";
  // ... with the parents it made.
  r = run("experiment '" + (dir.path() / "missing.conf").string() + "' -o '" +
          (dir.path() / "new" / "deeper" / "out").string() + "'");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "new")) << "a refused run left the directories it made";
  // An existing directory stays.
  fs::create_directories(out);
  r = run("experiment '" + (dir.path() / "missing.conf").string() + "' -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_TRUE(fs::is_directory(out));
  fs::remove_all(out);

  write(dir.path() / "unknown.conf",
        "[dataset a]\ndata = " + kSource + "/data/a9a.t.zst\n[method cpm]\nalgo = nosuchlearner\ncost = 1, 2\n");
  r = run("experiment '" + (dir.path() / "unknown.conf").string() + "' -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown.conf:3: method cpm: algo 'nosuchlearner' is not a learner"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("ldm"), std::string::npos) << "the message lists the learners";

  write(dir.path() / "badkey.conf",
        "[dataset a]\ndata = " + kSource + "/data/a9a.t.zst\n[method ldm]\nalgo = ldm\nlambda9 = 1, 2\n");
  r = run("experiment '" + (dir.path() / "badkey.conf").string() + "' -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  // Named at the key's own line (5), not at its section's header (3).
  EXPECT_NE(r.output.find("badkey.conf:5: method ldm: 'lambda9' is not an option of `train --algo "
                          "ldm`"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(out)) << "a refused run left the directory it made";

  r = run("experiment configs/smoke.conf --only a9a.t,nosuchset -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--only names 'nosuchset'"), std::string::npos) << r.output;

  // A missing test part is named at its own line.
  write(dir.path() / "test.conf",
        "[dataset t]\ndata = " + kSource + "/data/a9a.t.zst\n\ntest = /nonexistent/t.svm\n"
        "[method svm]\nalgo = svm\n");
  r = run("experiment '" + (dir.path() / "test.conf").string() + "' -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("test.conf:4: dataset t: data file /nonexistent/t.svm does not exist"),
            std::string::npos)
      << r.output;

  // A switch takes true or false; checked before any work.
  write(dir.path() / "switch.conf",
        "[dataset a]\ndata = " + kSource + "/data/a9a.t.zst\n[method svm]\nalgo = svm\n"
        "no-final-pass = true, 3\n");
  r = run("experiment '" + (dir.path() / "switch.conf").string() + "' -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("switch.conf:5: method svm: 'no-final-pass' is a switch of `train "
                          "--algo svm`: its values are true and false (got '3')"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(out)) << "a refused run left the directory it made";
}

TEST(Experiment, TheAverageIsOverCommonSetsAndOneRepeatHasNoSpreadOrTest) {
  TempDir dir;
  for (const auto& [name, rows] : {std::pair{"small", "200"}, std::pair{"large", "2000"}}) {
    const Outcome gen =
        run(std::string("gen --like kdda --rows ") + rows + " --features 50 --nnz 8 --seed 5 -o '" +
            (dir.path() / (std::string(name) + ".svm")).string() + "'");
    ASSERT_EQ(gen.exit_code, 0) << gen.output;
  }
  // The kernel LDM fits the small set only (its m² matrices: 1 MB against 96 MB).
  write(dir.path() / "gaps.conf",
        "repeats = 1\nfolds = 2\n[dataset small]\ndata = " + (dir.path() / "small.svm").string() +
            "\n[dataset large]\ndata = " + (dir.path() / "large.svm").string() +
            "\n[method svm]\nalgo = svm\nepochs = 2\nthreads = 1\n"
            "[method k]\nalgo = kldm\nmax-memory = 10M\nthreads = 1\n");
  const fs::path out = dir.path() / "out";
  const Outcome r =
      run("experiment '" + (dir.path() / "gaps.conf").string() + "' -o '" + out.string() + "'");
  EXPECT_NE(r.exit_code, 0) << r.output;  // the failed cells' exit code
  const std::string table = read(out / "accuracy.md");
  EXPECT_NE(table.find("| average (the 1 of 2 sets every method finished) |"), std::string::npos)
      << table;
  const json accuracy = json::parse(read(out / "accuracy.json"));
  double svm_small = -1;
  for (const json& row : accuracy) {
    if (row.value("status", "") == "failed") continue;
    ASSERT_TRUE(row.contains("accuracy_std")) << row;
    EXPECT_TRUE(row["accuracy_std"].is_null()) << row;         // one repeat: no spread
    EXPECT_FALSE(row.contains("p_value_vs_baseline")) << row;  // nor a test
    if (row["dataset"] == "small" && row["method"] == "svm") svm_small = row["accuracy_mean"];
  }
  ASSERT_GE(svm_small, 0);
  // The svm's average is its small-set accuracy, not the mean over both sets.
  char text[32];
  std::snprintf(text, sizeof text, "| %.4f |", svm_small);
  EXPECT_NE(table.find(text), std::string::npos) << table;
  EXPECT_EQ(table.find(" ± "), std::string::npos) << table;
}

TEST(Experiment, ASecondRunInTheSameDirectoryIsRefusedAndRemovesNothing) {
  TempDir dir;
  const fs::path out = dir.path() / "out";
  fs::create_directories(out);
  write(out / "kept.txt", "the first run's");
  {
    // The lock a running experiment holds on its directory.
    const io::FileLock held((out / "experiment").string(), "experiment directory");
    const Outcome r = run("experiment configs/smoke.conf -o '" + out.string() + "'");
    EXPECT_EQ(r.exit_code, 4) << r.output;
    EXPECT_NE(r.output.find("the experiment directory " + out.string() +
                            " is being written by another job"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("by pid " + std::to_string(::getpid())), std::string::npos) << r.output;
    EXPECT_TRUE(fs::exists(out / "kept.txt"));
  }
  // A value flag given "true" gets it as its value, not as a bare flag: the cell fails naming it.
  write(dir.path() / "value.conf",
        "repeats = 1\nfolds = 2\n[dataset a]\ndata = " + kSource + "/data/a9a.t.zst\n"
        "[method svm]\nalgo = svm\nepochs = true\nthreads = 1\n");
  // (Into a directory whose parents do not exist yet: made.)
  const Outcome r = run("experiment '" + (dir.path() / "value.conf").string() + "' -o '" +
                        (dir.path() / "new" / "out2").string() + "'");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("'true'"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir.path() / "new" / "out2" / "results.json")) << r.output;
}

TEST(Experiment, AnOptionalMissingDataSetIsReportedAndSkipped) {
  TempDir dir;
  const fs::path config = small_config(dir.path());
  std::string text = read(config);
  text += "[dataset absent]\ndata = /nonexistent/absent.svm\noptional = yes\n";
  write(config, text);
  const fs::path out = dir.path() / "out";
  const Outcome r = run("experiment '" + config.string() + "' -o '" + out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("skipping data set absent"), std::string::npos) << r.output;
  const json results = json::parse(read(out / "results.json"));
  EXPECT_EQ(results["datasets"][2]["status"], "data file /nonexistent/absent.svm does not exist");
  EXPECT_NE(read(out / "accuracy.md").find("| absent |"), std::string::npos);
  EXPECT_NE(read(out / "report.html").find("absent</b> skipped"), std::string::npos);
}

TEST(Experiment, NothingToRunExitsNonZero) {
  // Every data set optional and absent: the report is written, and the exit says nothing ran.
  TempDir dir;
  write(dir.path() / "none.conf",
        "repeats = 1\nfolds = 2\n[dataset absent]\ndata = /nonexistent/absent.svm\n"
        "optional = yes\n[method svm]\nalgo = svm\n");
  const fs::path out = dir.path() / "out";
  const Outcome r =
      run("experiment '" + (dir.path() / "none.conf").string() + "' -o '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("experiment: nothing ran"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(out / "report.html")) << r.output;
}

TEST(Experiment, AMissingLiblinearIsReportedNotReplaced) {
  TempDir dir;
  const fs::path config = small_config(dir.path());
  write(config, read(config) + "[method svml]\nexternal = liblinear\ncost = 1\n");
  const fs::path out = dir.path() / "out";
  // No PATH entry holds liblinear-train: the method is reported as not run, the others run.
  const Outcome r = run("experiment '" + config.string() + "' -o '" + out.string() + "'",
                        "PATH=/nonexistent");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("experiment: method svml not run: liblinear-train"), std::string::npos)
      << r.output;  // said on the console too
  const json results = json::parse(read(out / "results.json"));
  ASSERT_EQ(results["methods"].size(), 2u);
  EXPECT_EQ(results["methods"][0]["status"], "ok");
  EXPECT_NE(results["methods"][1]["status"].get<std::string>().find("not found in PATH"),
            std::string::npos);
  EXPECT_EQ(results["run"]["cells_planned"], 28);  // the SVM's only
  const std::string md = read(out / "accuracy.md");
  EXPECT_NE(md.find("| one | 3000 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| n/a |"), std::string::npos) << md;
  EXPECT_EQ(json::parse(read(out / "accuracy.json")).size(), 2u) << "only the SVM has results";
}

}  // namespace
}  // namespace polymargin::cli::experiment
