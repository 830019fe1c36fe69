// Where a command may write: one policy for every command, applied before it does any work.
//
// - An output never replaces an input: the same file (by device and inode, whatever the spelling,
//   a symbolic or a hard link), nor a directory that holds an input when the output is a directory
//   replaced whole, nor anything inside an input directory (a shard directory's files are its
//   data). Two outputs of one command are never the same file.
// - An output meant to be a file is never an existing directory, and the directory it goes in
//   exists.
// - Regular files are written under a temporary name and renamed into place (io/atomic_file.h);
//   through a symbolic link, the file it points to is replaced and the link stays.
// - Anything else is written in place and never renamed over, locked or removed: a device
//   (/dev/null, /dev/full), a FIFO, a socket, and the process's own streams (/dev/stdout,
//   /dev/stderr, /dev/fd/N, /proc/self/fd/N: written through the descriptor itself, so a
//   redirection's file, offset and append mode are kept).
#pragma once

#include <string>
#include <vector>

#include "engine/errors.h"

namespace polymargin::io {

/// check_outputs' refusal: a UsageError that also names the options involved.
class OutputPathError : public UsageError {
 public:
  OutputPathError(const std::string& message, std::vector<std::string> options)
      : UsageError(message), options_(std::move(options)) {}
  bool involves(const std::string& option) const {
    for (const std::string& o : options_)
      if (o == option) return true;
    return false;
  }

 private:
  std::vector<std::string> options_;
};

/// A path named on the command line, with the option that named it (for messages).
struct NamedPath {
  std::string option;  // "--data", "-o", "INPUT", ...
  std::string path;    // "-" (standard input or output) is never checked
};

/// A path a command writes.
struct OutputPath {
  std::string option;
  std::string path;
  bool directory = false;    // a directory replaced whole (a shard directory)
  std::string may_be_input;  // the option of an input this output may be (--checkpoint: --resume)
  bool makes_parents = false;  // a directory made with its missing parents (experiment -o)
};

/// Applies the policy above to a command's paths before any work: UsageError (exit 2) naming
/// both options for an output that is an input or another output, or for a file output that is a
/// directory; IoError (exit 4) when an output's directory does not exist (unless it makes it). Also
/// sweeps the temporaries that dead processes left beside each output (io/temporaries.h).
void check_outputs(const std::vector<NamedPath>& inputs, const std::vector<OutputPath>& outputs);

/// The descriptor that `path` names when it is one of the process's own streams (/dev/stdout 1,
/// /dev/stderr 2, /dev/fd/N and /proc/self/fd/N: N), else -1.
int stream_descriptor(const std::string& path);

/// True when `path` is written in place (see above): one of the process's streams, or an existing
/// path that is neither a regular file nor a directory.
bool writes_in_place(const std::string& path);

/// IoError unless a file can be created beside `path` (what writing it atomically needs): a
/// read-only or unwritable directory is found before any work. Nothing for a stream or device.
void check_writable(const std::string& path, const std::string& option);

/// Where a write of `path` renames its temporary file to: `path` itself, or, when `path` is a
/// symbolic link (a chain of them), the file it finally points to, which need not exist yet.
std::string rename_target(const std::string& path);

}  // namespace polymargin::io
