// Temporary files and directories that must not outlive the process that made them: an atomic
// write's "<path>.tmp-<pid>-<n>", a conversion's "<dir>.tmp-<pid>", the shards of a text input
// converted on the fly. Each is registered while it exists; the process's signal handler (cli/)
// removes whatever is registered before the process dies of SIGTERM, SIGINT or SIGHUP. A process
// killed outright (SIGKILL, a crash) cannot clean up: the next command that writes beside its
// leftovers sweeps them (sweep_dead_temporaries).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace polymargin::io {

/// A registered temporary path: while it lives, remove_temporaries() removes the path (a file, or
/// a directory with everything in it). Destroying it only forgets the path; the owner removes or
/// publishes the file itself.
class TemporaryPath {
 public:
  TemporaryPath() = default;
  /// Runs `make` (which creates the temporary and returns its path, or throws) and registers the
  /// path, all with the registry locked: a signal's remove_temporaries() finds the temporary either
  /// not yet made or registered, and once it has run no temporary is made any more (the caller
  /// waits for the process's end). Registering a path before creating it, or after, would leave a
  /// gap where the signal's removal misses it and it outlives the process.
  static TemporaryPath create(const std::function<std::string()>& make);
  ~TemporaryPath();
  TemporaryPath(TemporaryPath&& other) noexcept;
  TemporaryPath& operator=(TemporaryPath&& other) noexcept;
  TemporaryPath(const TemporaryPath&) = delete;
  TemporaryPath& operator=(const TemporaryPath&) = delete;

  /// Runs `rename_into_place` with the registry locked, then forgets the path: a signal handled
  /// meanwhile sees either the temporary (removed whole) or the published output, never a part.
  void publish(const std::function<void()>& rename_into_place);
  /// Forgets the path (it was removed or published by other means).
  void release();

 private:
  std::uint64_t id_ = 0;  // 0: nothing registered
};

/// Removes every registered temporary and keeps the registry locked for good, so that no
/// publish() can follow: for the signal handler's thread, right before the process dies. Returns
/// how many paths it removed.
int remove_temporaries();

/// True when a process holds the temporary `path` (TemporaryPath::create's flock): a live one,
/// maybe of another PID namespace, whose pid in the name means nothing here.
bool temporary_in_use(const std::string& path);

/// Removes the temporaries that processes which no longer run left beside `path`: entries of its
/// directory named "<name>.tmp-<pid>" or "<name>.tmp-<pid>-<n>" (name = the last component of
/// `path`) whose pid is not a running process and that no process holds (temporary_in_use). Errors
/// are ignored: a sweep is a courtesy.
void sweep_dead_temporaries(const std::string& path);
/// The same for entries "<prefix><pid>-..." of `directory` (the on-the-fly conversions'
/// "polymargin-<pid>-XXXXXX" in $TMPDIR).
void sweep_dead_temporaries_in(const std::string& directory, const std::string& prefix);

}  // namespace polymargin::io
