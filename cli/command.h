// Subcommand registry and the option plumbing every subcommand shares: --help, --config FILE
// (same keys as the long flags), --json. Each cli/cmd_*.cpp registers itself with a static
// CommandRegistration.
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "driver/config_check.h"
#include "io/output_path.h"

namespace polymargin::driver {
/// Number of worker threads to use: `requested` if > 0, else the cores this process may run on
/// (its affinity mask: `taskset`, a cpuset, or a rank that mpirun bound), as the reader counts them
/// (driver/job.h).
int resolve_threads(int requested);
}  // namespace polymargin::driver

namespace polymargin::cli {

namespace po = boost::program_options;
using driver::resolve_threads;

using CommandFn = std::function<int(const std::vector<std::string>& args)>;

struct Command {
  std::string name;
  std::string summary;  // one line for `polymargin --help`
  CommandFn run;
};

/// All registered subcommands, sorted by name.
std::vector<Command>& commands();

/// Registers a subcommand at static-initialisation time.
struct CommandRegistration {
  CommandRegistration(std::string name, std::string summary, CommandFn run);
};

/// Parses a subcommand's arguments. Adds --help and --config FILE; options in the config file use
/// the long flag names (`key = value` lines, `#` comments) and the command line wins over the file.
/// Returns false after printing the help text when --help was given. Throws UsageError on a bad
/// option, naming it: an unknown config key or malformed line (naming the file and line), a
/// negative number for an unsigned option, --threads or --jobs outside [0, 1024]. `hidden`
/// options are taken as `options` are but left out of the help (another learner's, which this one
/// refuses with its own message).
bool parse_options(const std::string& command, const std::string& usage,
                   po::options_description& options,
                   const po::positional_options_description& positional,
                   const std::vector<std::string>& args, po::variables_map& vm,
                   const po::options_description* hidden = nullptr);

/// Boost's command-line style less prefix guessing: exact names only (`--alg` is not `--algo`), as
/// the options read before parsing (peek_option) match whole names.
int exact_names_style();

/// UsageError naming the option when `parsed` gives a negative value to an unsigned option of
/// `options` (Boost would wrap it around), or a whole number beyond an integer option's type
/// (Boost would call it invalid); `where` is appended to the value in the message.
void refuse_out_of_range(const std::string& command, const po::options_description& options,
                         const po::parsed_options& parsed, const std::string& where);

/// The paths that the options `names` (string or list valued; "input" is the positional INPUT) and
/// --config hold in `vm`, for io::check_outputs.
std::vector<io::NamedPath> input_paths(const po::variables_map& vm,
                                       const std::vector<std::string>& names);

using driver::flag_of;
using driver::FlagNames;

/// Shards and plain-text inputs are memory-mapped: a file cut short by another program while it is
/// read raises SIGBUS at the next page touched. After this call that ends the process with a
/// message and the I/O exit code (4) instead of "Bus error".
void report_sigbus_as_io_error();


/// A config file's first line without the UTF-8 byte order mark that some editors write.
inline void drop_byte_order_mark(std::string& first_line) {
  if (first_line.starts_with("\xEF\xBB\xBF")) first_line.erase(0, 3);
}

}  // namespace polymargin::cli
