// Subcommand registry and the option plumbing every subcommand shares: --help, --config FILE
// (same keys as the long flags), --json. Each cli/cmd_*.cpp registers itself with a static
// CommandRegistration.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
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
/// option, naming it: an unknown config key or malformed line (naming the file and line; a
/// `[section]` line too: these files have no sections), an empty value (refuse_empty_value), a
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

/// One `key = value` line of a --config file, as written (`text`), with its number.
struct ConfigEntry {
  std::uint64_t line = 0;
  std::string key, value, text;
};

/// The `key = value` lines of the --config file `path` (blank lines and `#` comments left out;
/// the value trimmed, without a trailing comment; a file name relative to the file's folder, as
/// config_relative makes it). UsageError naming the file and line for a line
/// of another form: a `[section]` header (these files have none; `experiment`'s CONFIG, which has,
/// is read by cli/experiment_config.h) or a line without '='; UsageError for a directory, IoError
/// for a file that cannot be opened.
std::vector<ConfigEntry> read_config_entries(const std::string& command, const std::string& path);

/// A file name `value` read from the config file `config`, as the file means it: relative to the
/// file's folder (an absolute name, `-` for a standard stream, and any name in a config file of
/// the working folder stay as they are).
std::string config_relative(const std::string& config, const std::string& value);
/// Whether a config file's `key` names files (data, output, model, checkpoint, ...), which
/// read_config_entries takes relative to the file's folder.
bool config_path_key(const std::string& key);

/// UsageError for an empty value given to an option: `flag` is its name on the command line
/// ("--checkpoint"), or "" for a positional argument; `where` (" in FILE:LINE") names a --config
/// file's line. Boost takes "" as a value, which a script's unset variable passes (`--tune-budget
/// "$BUDGET"`): an empty checkpoint path would be no checkpoint, an empty budget no bound. No
/// option gives "" a meaning, so parse_options refuses it for every option that takes a value, and
/// train --tune's own parse (cli/tune.cpp) the same way.
[[noreturn]] void refuse_empty_value(const std::string& command, const std::string& flag,
                                     const std::string& where);

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
