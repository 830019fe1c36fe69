#include "cli/command.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "cli/signals.h"
#include "driver/options.h"
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

namespace {

// Boost parses "-1" into an unsigned option as 2^32 - 1 (or 2^64 - 1): a negative number given to
// an unsigned option is refused here, naming the option, before it wraps.
bool is_unsigned(const std::type_info& type) {
  return type == typeid(unsigned short) || type == typeid(unsigned) ||
         type == typeid(unsigned long) || type == typeid(unsigned long long);
}

// The largest value of an integer option's type, or 0 for another type: Boost calls a whole number
// beyond it "invalid", as it does a word.
std::uint64_t integer_maximum(const std::type_info& type) {
  if (type == typeid(int)) return std::numeric_limits<int>::max();
  if (type == typeid(long)) return std::numeric_limits<long>::max();
  if (type == typeid(unsigned)) return std::numeric_limits<unsigned>::max();
  if (type == typeid(unsigned long)) return std::numeric_limits<unsigned long>::max();
  if (type == typeid(unsigned long long)) return std::numeric_limits<unsigned long long>::max();
  return 0;
}

// For a token of digits alone (a sign and spaces around them aside) beyond what an integer option
// holds (at most `maximum`; a signed one at least -maximum - 1), the bound it passes ("the largest
// value the option holds (2147483647)"); else empty.
std::string beyond(const std::string& token, std::uint64_t maximum, bool is_signed) {
  const std::size_t first = token.find_first_not_of(" \t"), last = token.find_last_not_of(" \t");
  if (first == std::string::npos) return "";
  const char* begin = token.data() + first;
  const char* end = token.data() + last + 1;
  const bool negative = *begin == '-';
  if (*begin == '+' || negative) ++begin;
  if (begin == end || !std::all_of(begin, end, [](char c) { return c >= '0' && c <= '9'; }))
    return "";
  std::uint64_t value = 0;
  const auto [stop, error] = std::from_chars(begin, end, value);
  const bool huge = error == std::errc::result_out_of_range;
  if (!negative && (huge || value > maximum))
    return "the largest value the option holds (" + std::to_string(maximum) + ")";
  if (negative && is_signed && (huge || value > maximum + 1))
    return "the smallest value the option holds (-" + std::to_string(maximum + 1) + ")";
  return "";
}

// An option of several values (`data`, eval's `model`): its key may be given once a line, as often
// as needed, in a config file; Boost appends each line's value.
bool takes_several(const po::option_description& option) {
  const auto* typed = dynamic_cast<const po::typed_value_base*>(option.semantic().get());
  return option.semantic()->is_composing() ||
         (typed && typed->value_type() == typeid(std::vector<std::string>));
}

// `train --tune`'s own keys: read from the config file by train's dispatcher (cli/tune.h) before a
// learner runs, and no learner's options.
bool tune_key(const std::string& command, const std::string& key) {
  const driver::TrainOption* o = command == "train" ? driver::find_train_option(key) : nullptr;
  return o && (o->role & driver::kSearchParam);
}

// The config file: its lines checked first, so an unknown key, a key given twice, an empty value
// or a line that is not `key = value` is refused naming the file and line; then parsed as Boost
// does, and a value Boost refuses is named with its line too.
void store_config_file(const std::string& command, const std::string& path,
                       const po::options_description& options, po::variables_map& vm) {
  std::string kept;
  std::map<std::string, std::uint64_t> first_line;             // of each key
  std::vector<std::pair<std::uint64_t, std::string>> entries;  // line number, the line
  for (const ConfigEntry& entry : read_config_entries(command, path)) {
    const std::string at = path + ":" + std::to_string(entry.line) + ": ";
    if (tune_key(command, entry.key)) continue;  // train --tune's, read by cli/tune.h
    const po::option_description* option = options.find_nothrow(entry.key, false);
    if (!option)
      throw UsageError(at + "unknown key '" + entry.key + "' (" + command +
                       " takes the long option names as keys: polymargin " + command + " --help)");
    const auto [seen, added] = first_line.emplace(entry.key, entry.line);
    if (!added && !takes_several(*option))
      throw UsageError(at + "'" + entry.key + "' is given twice (also on line " +
                       std::to_string(seen->second) + ")");
    // A switch's empty value is Boost's "true"; any other option's is refused as on the command
    // line.
    if (entry.value.empty() && option->semantic()->min_tokens() > 0)
      refuse_empty_value(command, "--" + entry.key,
                         " in " + path + ":" + std::to_string(entry.line));
    kept += entry.text + "\n";
    entries.emplace_back(entry.line, entry.text);
  }
  try {
    std::istringstream text(kept);
    const po::parsed_options parsed = po::parse_config_file(text, options, false);
    refuse_out_of_range(command, options, parsed, " in " + path);
    po::store(parsed, vm);
  } catch (const po::error& e) {
    // Which line: each parsed alone into a scratch map, with its value checked as its option's.
    for (const auto& [number, alone] : entries) {
      try {
        std::istringstream one(alone);
        po::variables_map scratch;
        po::store(po::parse_config_file(one, options, false), scratch);
      } catch (const po::error& bad) {
        throw UsageError(path + ":" + std::to_string(number) + ": " + bad.what());
      }
    }
    throw UsageError(path + ": " + e.what());
  }
}

// Every option of `parsed` (the command line) that takes a value, given an empty one: refused
// (refuse_empty_value), a positional argument too.
void refuse_empty_values(const std::string& command, const po::options_description& options,
                         const po::parsed_options& parsed) {
  for (const po::option& o : parsed.options) {
    const po::option_description* d = options.find_nothrow(o.string_key, false);
    if (!d || d->semantic()->min_tokens() == 0) continue;  // a switch takes no value
    for (const std::string& token : o.value)
      if (token.empty())
        refuse_empty_value(command, o.position_key >= 0 ? "" : "--" + d->long_name(), "");
  }
}

// --threads and --jobs: 0 (all cores) up to kMaxThreads; a larger count only exhausts the process.
constexpr int kMaxThreads = 1024;

void check_thread_counts(const std::string& command, const po::variables_map& vm) {
  for (const char* name : {"threads", "jobs"}) {
    if (!vm.count(name)) continue;
    const auto* value = boost::any_cast<int>(&vm[name].value());
    if (value && (*value < 0 || *value > kMaxThreads))
      throw UsageError(command + ": --" + name + " must be between 0 (all cores) and " +
                       std::to_string(kMaxThreads) + " (got " + std::to_string(*value) + ")");
  }
}

}  // namespace

int exact_names_style() {
  // Boost would take any unambiguous prefix (`--alg` for `--algo`), but the options read before
  // parsing (peek_option: the learner, the config file, --tune, the metrics file) match whole
  // names, so a prefix would be parsed one way and routed another.
  namespace style = po::command_line_style;
  return style::default_style & ~style::allow_guessing;
}

void refuse_out_of_range(const std::string& command, const po::options_description& options,
                         const po::parsed_options& parsed, const std::string& where) {
  for (const po::option& o : parsed.options) {
    const po::option_description* d = options.find_nothrow(o.string_key, false);
    if (!d) continue;
    const auto* typed = dynamic_cast<const po::typed_value_base*>(d->semantic().get());
    if (!typed) continue;
    const std::uint64_t maximum = integer_maximum(typed->value_type());
    for (const std::string& token : o.value) {
      const std::size_t first = token.find_first_not_of(" \t");
      if (is_unsigned(typed->value_type()) && first != std::string::npos && token[first] == '-')
        throw UsageError(command + ": --" + d->long_name() + " must not be negative (got '" +
                         token + "'" + where + ")");
      if (const std::string bound =
              maximum > 0 ? beyond(token, maximum, !is_unsigned(typed->value_type())) : "";
          !bound.empty())
        throw UsageError(command + ": --" + d->long_name() + " '" + token + "'" + where +
                         " is beyond " + bound);
    }
  }
}

std::vector<ConfigEntry> read_config_entries(const std::string& command, const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UsageError(command + ": --config " + path + " is a directory, not a config file");
  std::ifstream in(path);
  if (!in) throw IoError("cannot open config file " + path);
  const auto trim = [](const std::string& text) {
    const std::size_t first = text.find_first_not_of(" \t\r");
    if (first == std::string::npos) return std::string();
    return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
  };
  std::vector<ConfigEntry> entries;
  std::string text;
  for (std::uint64_t number = 1; std::getline(in, text); ++number) {
    if (number == 1) drop_byte_order_mark(text);
    const std::string line = trim(text.substr(0, text.find('#')));  // as Boost reads it
    if (line.empty()) continue;
    const std::string at = path + ":" + std::to_string(number) + ": ";
    // Boost would read the keys after `[name]` as `name.KEY`, which no option is; the header was
    // once skipped, and its keys taken as the file's own: neither is what the writer meant.
    if (line.front() == '[')
      throw UsageError(at + "'" + line +
                       "': a --config file has no sections, only 'key = value' lines (long option "
                       "names as keys)");
    const std::size_t equals = line.find('=');
    if (equals == std::string::npos)
      throw UsageError(at + "'" + line + "' is not a 'key = value' line");
    ConfigEntry entry{number, trim(line.substr(0, equals)), trim(line.substr(equals + 1)), text};
    if (config_path_key(entry.key) && !entry.value.empty()) {
      entry.value = config_relative(path, entry.value);
      entry.text = entry.key + " = " + entry.value;
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::string config_relative(const std::string& config, const std::string& value) {
  const std::filesystem::path folder = std::filesystem::path(config).parent_path();
  if (folder.empty() || value == "-" || std::filesystem::path(value).is_absolute()) return value;
  return (folder / value).string();
}

bool config_path_key(const std::string& key) {
  static const std::set<std::string> kFiles = {
      "input",      "output",       "path",       "data",   "model",      "margins",
      "plot",       "test-output",  "validation", "resume", "checkpoint", "metrics-json",
      "warm-start", "unlabeled"};
  return kFiles.count(key) > 0;
}

void refuse_empty_value(const std::string& command, const std::string& flag,
                        const std::string& where) {
  if (flag.empty())
    throw UsageError(command + ": an empty argument" + where +
                     " where a file name is expected (an unset variable?)");
  if (!where.empty())  // a config file's key
    throw UsageError(command + ": " + flag + " needs a value, not an empty one" + where +
                     ": give one, or leave the key out");
  throw UsageError(command + ": " + flag +
                   " needs a value, not an empty one (an unset variable?): give one, or leave the "
                   "option out");
}

bool parse_options(const std::string& command, const std::string& usage,
                   po::options_description& options,
                   const po::positional_options_description& positional,
                   const std::vector<std::string>& args, po::variables_map& vm,
                   const po::options_description* hidden) {
  po::options_description common("Common options");
  common.add_options()("help,h", "print this help and exit")(
      "config", po::value<std::string>(), "read options from FILE (keys = long flag names)");
  po::options_description shown;  // what --help prints
  shown.add(options).add(common);
  po::options_description taken;  // what a config file may set
  taken.add(options);
  if (hidden) taken.add(*hidden);
  po::options_description all;
  all.add(taken).add(common);
  try {
    const po::parsed_options parsed = po::command_line_parser(args)
                                          .options(all)
                                          .positional(positional)
                                          .style(exact_names_style())
                                          .run();
    refuse_out_of_range(command, all, parsed, "");
    refuse_empty_values(command, all, parsed);
    po::store(parsed, vm);
    if (vm.count("help")) {
      std::cout << "usage: polymargin " << command << " " << usage << "\n\n" << shown << "\n";
      return false;
    }
    if (vm.count("config")) store_config_file(command, vm["config"].as<std::string>(), taken, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(command + ": " + e.what() + " (see polymargin " + command + " --help)");
  }
  check_thread_counts(command, vm);
  return true;
}

std::vector<io::NamedPath> input_paths(const po::variables_map& vm,
                                       const std::vector<std::string>& names) {
  std::vector<io::NamedPath> paths;
  std::vector<std::string> all = names;
  all.push_back("config");
  for (const std::string& name : all) {
    if (!vm.count(name)) continue;
    const std::string option = name == "input" ? "INPUT" : "--" + name;
    const boost::any& value = vm[name].value();
    if (const auto* one = boost::any_cast<std::string>(&value)) paths.push_back({option, *one});
    if (const auto* many = boost::any_cast<std::vector<std::string>>(&value))
      for (const std::string& path : *many) paths.push_back({option, path});
  }
  return paths;
}

namespace {
extern "C" void on_sigbus(int) {
  // Only async-signal-safe calls here: write, kill, pause and _exit. The signal thread removes the
  // unfinished outputs and ends the process (exit 4).
  static const char kMessage[] =
      "error: an input file was cut short while it was being read (SIGBUS on a memory-mapped "
      "file): was it rewritten or truncated by another program?\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  relay_fatal_io_error();
  ::_exit(kExitIo);
}
}  // namespace

void report_sigbus_as_io_error() {
  struct sigaction action {};
  action.sa_handler = on_sigbus;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, nullptr);
}


}  // namespace polymargin::cli
