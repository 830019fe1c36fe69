// `polymargin inspect`: what a shard directory holds, and with --verify whether every block is
// intact. Opens the directory exactly as training does, so a directory that inspect accepts is
// one that train accepts (stale sources included).
#include <iostream>

#include "cli/command.h"
#include "cli/shard_summary.h"
#include "engine/errors.h"
#include "io/shards.h"

namespace polymargin::cli {
namespace {

int run_inspect(const std::vector<std::string>& args) {
  std::string path;
  bool json = false, verify = false;
  int threads = 0;
  po::options_description opts("inspect options");
  opts.add_options()("path", po::value(&path)->required(), "shard directory")(
      "json", po::bool_switch(&json), "print as JSON")(
      "verify", po::bool_switch(&verify),
      "decode every block and check every checksum (exit 3 naming the first bad block)")(
      "threads", po::value(&threads)->default_value(0), "threads for --verify (0: all cores)");
  po::positional_options_description positional;
  positional.add("path", 1);
  po::variables_map vm;
  if (!parse_options("inspect", "PATH [--json] [--verify]", opts, positional, args, vm))
    return kExitOk;

  const io::ShardSet set = io::ShardSet::open(path);
  const io::Manifest& m = set.manifest();
  io::VerifyReport report;
  if (verify) report = set.verify(resolve_threads(threads));
  const auto missing = [&](const std::string& source) {
    for (const auto& s : set.missing_sources())
      if (s == source) return true;
    return false;
  };

  if (json) {
    nlohmann::ordered_json j = summary_json(m, set.dir());
    nlohmann::ordered_json sources = nlohmann::ordered_json::array();
    for (const auto& s : m.sources)
      sources.push_back({{"path", s.path},
                         {"size", s.size},
                         {"mtime_ns", s.mtime_ns},
                         {"missing", missing(s.path)}});
    j["sources"] = sources;
    j["verified"] = verify;
    if (verify) {
      j["blocks_checked"] = report.blocks_checked;
      j["bytes_checked"] = report.bytes_checked;
    }
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  print_summary(std::cout, m, set.dir());
  for (const auto& s : m.sources)
    std::cout << "source     " << s.path
              << (s.path == "-" ? std::string(" (stdin)")
                                : " (" + std::to_string(s.size) + " bytes" +
                                      (missing(s.path) ? ", missing now)" : ")"))
              << "\n";
  if (verify)
    std::cout << "verified   " << report.blocks_checked << " blocks, "
              << megabytes(report.bytes_checked) << ": every checksum matches\n";
  return kExitOk;
}

const CommandRegistration registration("inspect",
                                       "what a shard directory holds; --verify checks every block",
                                       run_inspect);

}  // namespace
}  // namespace polymargin::cli
