// polymargin: one binary, many subcommands. Errors from the library arrive here as typed
// exceptions and leave as a one-line message and a documented exit code.
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/signals.h"
#include "engine/errors.h"

namespace {

void print_usage(std::ostream& out) {
  out << "usage: polymargin <command> [options]   (polymargin <command> --help for details)\n\n"
         "commands:\n";
  for (const auto& c : polymargin::cli::commands())
    out << "  " << c.name << std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ')
        << c.summary << "\n";
  out << "\nexit codes: 0 ok, 2 usage, 3 data, 4 I/O, 5 numerical failure, 6 interrupted, 7 would "
         "not fit in memory\n";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace polymargin;
  if (argc < 2) {
    print_usage(std::cerr);
    return cli::kExitUsage;
  }
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    print_usage(std::cout);
    return cli::kExitOk;
  }
  if (name == "--version") {
    std::cout << "polymargin 0.1.0\n";
    return cli::kExitOk;
  }
  cli::start_signal_thread();
  cli::report_sigbus_as_io_error();
  const std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& c : cli::commands()) {
    if (c.name != name) continue;
    try {
      return c.run(args);
    } catch (const ConfigError& e) {  // a learner's field: said with its flag
      std::cerr << "error: " << cli::flag_of(e.field()) << " " << e.rule() << "\n";
      return cli::exit_code_of(e);
    } catch (const Error& e) {
      std::cerr << "error: " << e.what() << "\n";
      return cli::exit_code_of(e);
    } catch (const std::bad_alloc&) {
      std::cerr << "error: out of memory\n";
      return cli::kExitIo;
    } catch (const std::exception& e) {
      std::cerr << "internal error: " << e.what() << "\n";
      return cli::kExitInternal;
    }
  }
  std::cerr << "error: unknown command '" << name << "'\n\n";
  print_usage(std::cerr);
  return cli::kExitUsage;
}
