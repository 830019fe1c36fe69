#include "cli/command.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <thread>

#include "engine/errors.h"

namespace polymargin::cli {

std::vector<Command>& commands() {
  static std::vector<Command> registry;
  return registry;
}

CommandRegistration::CommandRegistration(std::string name, std::string summary, CommandFn run) {
  auto& registry = commands();
  registry.push_back({std::move(name), std::move(summary), std::move(run)});
  std::sort(registry.begin(), registry.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
}

bool parse_options(const std::string& command, const std::string& usage,
                   po::options_description& options, const po::positional_options_description& positional,
                   const std::vector<std::string>& args, po::variables_map& vm) {
  po::options_description common("Common options");
  common.add_options()("help,h", "print this help and exit")(
      "config", po::value<std::string>(), "read options from FILE (keys = long flag names)");
  po::options_description all;
  all.add(options).add(common);
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: polymargin " << command << " " << usage << "\n\n" << all << "\n";
      return false;
    }
    if (vm.count("config")) {
      const std::string path = vm["config"].as<std::string>();
      std::ifstream in(path);
      if (!in) throw IoError("cannot open config file " + path);
      po::store(po::parse_config_file(in, options, /*allow_unregistered=*/false), vm);
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(command + ": " + e.what() + " (see polymargin " + command + " --help)");
  }
  return true;
}

namespace {
extern "C" void on_sigbus(int) {
  // Only async-signal-safe calls here: write and _exit.
  static const char kMessage[] =
      "error: an input file was cut short while it was being read (SIGBUS on a memory-mapped "
      "file): was it rewritten or truncated by another program?\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(kExitIo);
}
}  // namespace

void report_sigbus_as_io_error() {
  struct sigaction action {};
  action.sa_handler = on_sigbus;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, nullptr);
}

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

}  // namespace polymargin::cli
