#include "io/output_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include "engine/errors.h"
#include "io/temporaries.h"

namespace polymargin::io {

namespace fs = std::filesystem;

namespace {

std::optional<struct stat> stat_of(const std::string& path) {
  struct stat s {};
  if (::stat(path.c_str(), &s) != 0) return std::nullopt;
  return s;
}

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

std::string named(const std::string& option, const std::string& path) {
  return option + " " + path;
}

// True when `path` (existing or not: where a write of it lands) lies inside the existing directory
// `dir`, their canonical spellings compared.
bool lies_inside(const std::string& dir, const std::string& path) {
  std::error_code ec1, ec2;
  const fs::path d = fs::canonical(dir, ec1);
  const fs::path p = fs::weakly_canonical(fs::absolute(rename_target(path)), ec2);
  if (ec1 || ec2) return false;
  const fs::path rel = p.lexically_relative(d);
  return !rel.empty() && *rel.begin() != ".." && rel != ".";
}

std::string spelled(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(rename_target(path), ec);
  return ec ? fs::absolute(path).lexically_normal().string() : p.string();
}

// One of the process's streams (standard output; an output named /dev/fd/N, `out.path`) that is a
// regular file, when that file is an input (`>> in.svm`, `1<> in.svm`; a `-` input is standard
// input): refused, as an output that is an input under any name.
void refuse_stream_over_input(const OutputPath& out, int stream,
                              const std::vector<NamedPath>& inputs) {
  struct stat o {};
  if (::fstat(stream, &o) != 0 || !S_ISREG(o.st_mode)) return;
  const std::string what = out.path.empty() ? "" : " " + out.path;
  for (const NamedPath& in : inputs) {
    if (in.path.empty() || (!out.may_be_input.empty() && in.option == out.may_be_input)) continue;
    struct stat i {};
    const bool found =
        in.path == "-" ? ::fstat(STDIN_FILENO, &i) == 0 : ::stat(in.path.c_str(), &i) == 0;
    if (found && same_file(o, i))
      throw OutputPathError(out.option + what + " is the input " +
                                named(in.option, in.path == "-" ? "- (standard input)" : in.path) +
                                ": writing it would destroy the input; choose another output",
                            {out.option, in.option});
  }
}

}  // namespace

int stream_descriptor(const std::string& path) {
  if (path == "/dev/stdout") return STDOUT_FILENO;
  if (path == "/dev/stderr") return STDERR_FILENO;
  for (const std::string_view prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (path.size() <= prefix.size() || path.compare(0, prefix.size(), prefix) != 0) continue;
    int fd = -1;
    const char* first = path.data() + prefix.size();
    const char* last = path.data() + path.size();
    const auto [end, error] = std::from_chars(first, last, fd);
    if (error == std::errc() && end == last && fd >= 0) return fd;
  }
  return -1;
}

bool writes_in_place(const std::string& path) {
  if (stream_descriptor(path) >= 0) return true;
  const std::optional<struct stat> s = stat_of(path);
  return s && !S_ISREG(s->st_mode) && !S_ISDIR(s->st_mode);
}

void check_writable(const std::string& path, const std::string& option) {
  if (path.empty() || path == "-" || writes_in_place(path)) return;
  // A probe under the name pattern of this process's temporaries (swept if it is killed here).
  const std::string probe = rename_target(path) + ".tmp-" + std::to_string(::getpid()) + "-999999";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno != EEXIST)
    throw IoError("cannot write " + path + " (" + option + "): " + std::strerror(errno));
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
  }
}

std::string rename_target(const std::string& path) {
  fs::path p = path;
  for (int hops = 0; hops < 40; ++hops) {  // as the kernel's limit on a chain of links
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec)) || ec) break;
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) break;
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  return p.string();
}

void check_outputs(const std::vector<NamedPath>& inputs, const std::vector<OutputPath>& outputs) {
  // What a command prints, or writes to `-` or /dev/stdout, goes to standard output: never into
  // one of its inputs either.
  refuse_stream_over_input({"standard output", "", false, ""}, STDOUT_FILENO, inputs);
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const OutputPath& out = outputs[k];
    if (out.path.empty() || out.path == "-") continue;
    if (const int stream = stream_descriptor(out.path); stream >= 0 && stream != STDOUT_FILENO)
      refuse_stream_over_input(out, stream, inputs);
    const std::optional<struct stat> o = stat_of(out.path);
    if (!o) {
      fs::path target = fs::absolute(rename_target(out.path)).lexically_normal();
      if (!target.has_filename()) target = target.parent_path();  // "out.shards/"
      const fs::path dir = target.parent_path();
      std::error_code ec;
      const fs::file_status parent = fs::status(dir, ec);
      if (fs::exists(parent) && !fs::is_directory(parent))
        throw IoError("cannot write " + out.path + " (" + out.option + "): " + dir.string() +
                      " is not a directory");
      if (!out.makes_parents && !fs::is_directory(parent))
        throw IoError("cannot write " + out.path + " (" + out.option + "): directory " +
                      dir.string() + " does not exist");
    }
    // Nothing is written inside an input directory (a shard directory's files are its data).
    if (!writes_in_place(out.path))
      for (const NamedPath& in : inputs) {
        if (in.path.empty() || in.path == "-") continue;
        if (!out.may_be_input.empty() && in.option == out.may_be_input) continue;
        std::error_code ec;
        if (fs::is_directory(in.path, ec) && lies_inside(in.path, out.path))
          throw OutputPathError(named(out.option, out.path) + " lies inside the input " +
                                    named(in.option, in.path) +
                                    ": writing there could destroy the input; choose an output "
                                    "outside it",
                                {out.option, in.option});
      }
    if (o) {
      for (const NamedPath& in : inputs) {
        if (in.path.empty() || in.path == "-") continue;
        if (!out.may_be_input.empty() && in.option == out.may_be_input) continue;
        const std::optional<struct stat> i = stat_of(in.path);
        if (!i) continue;
        if (same_file(*o, *i) && !writes_in_place(out.path))
          throw OutputPathError(named(out.option, out.path) + " is the input " +
                                    named(in.option, in.path) +
                                    ": writing it would destroy the input; choose another output",
                                {out.option, in.option});
        if (out.directory && S_ISDIR(o->st_mode) && lies_inside(out.path, in.path))
          throw OutputPathError(named(out.option, out.path) + " holds the input " +
                                    named(in.option, in.path) +
                                    ": replacing the directory would destroy it; choose another "
                                    "output",
                                {out.option, in.option});
      }
      if (!out.directory && S_ISDIR(o->st_mode))
        throw OutputPathError(named(out.option, out.path) +
                                  " is a directory: give the name of a file to write (e.g. " +
                                  (fs::path(out.path) / "out").string() + ")",
                              {out.option});
    }
    if (writes_in_place(out.path)) continue;  // devices may be named twice (-o /dev/null ...)
    for (std::size_t j = 0; j < k; ++j) {
      const OutputPath& other = outputs[j];
      if (other.path.empty() || other.path == "-" || writes_in_place(other.path)) continue;
      const std::optional<struct stat> b = stat_of(other.path);
      if ((o && b && same_file(*o, *b)) || spelled(out.path) == spelled(other.path))
        throw OutputPathError(named(other.option, other.path) + " and " + out.option +
                                  " name the same file: they must be different files",
                              {other.option, out.option});
    }
    sweep_dead_temporaries(out.directory ? out.path : rename_target(out.path));
  }
}

}  // namespace polymargin::io
