#include "cli/signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "cli/exit_codes.h"
#include "io/atomic_file.h"
#include "io/temporaries.h"

namespace polymargin::cli {

namespace {

std::atomic<int> g_received{0};
std::atomic<bool> g_stop_politely{false};

std::atomic<bool> g_thread_runs{false};
std::atomic<bool> g_ending{false};  // die_of has begun

// The children RunningChild registered, those being forked, and whether stop_children() has run
// (the process is ending).
struct Children {
  std::mutex mutex;
  std::condition_variable gone;
  std::set<int> pids;
  int forking = 0;
  bool ending = false;
};
Children& children() {
  static Children c;
  return c;
}

// SIGTERM to every running child, then up to 10 s for their threads to reap them; a child started
// after this gets SIGTERM at its registration.
void stop_children() {
  Children& c = children();
  std::unique_lock lock(c.mutex);
  c.ending = true;
  for (const int pid : c.pids) ::kill(pid, SIGTERM);
  c.gone.wait_for(lock, std::chrono::seconds(10), [&] { return c.pids.empty() && c.forking == 0; });
}

// Where a thread waits for the end of a process that is ending (die_of).
[[noreturn]] void wait_for_the_end() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

// The relay of relay_fatal_io_error(): a real-time signal no library of ours uses.
int relay_signal() { return SIGRTMIN + 2; }

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, relay_signal());
  return set;
}

const char* name_of(int signal) {
  return signal == SIGTERM ? "SIGTERM" : signal == SIGINT ? "SIGINT" : "SIGHUP";
}

[[noreturn]] void die_of(int signal) {
  g_ending.store(true);
  stop_children();
  const int removed = io::remove_temporaries();
  const std::string line =
      std::string("polymargin: stopped by ") + name_of(signal) +
      (removed > 0 ? "; unfinished output removed, nothing was written\n" : "\n");
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  ::signal(signal, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(signal);        // delivered to this thread, now unblocked: the process dies of it
  ::_exit(128 + signal);  // in case the signal was ignored after all
}

void wait_for_signals(sigset_t set) {
  for (;;) {
    int signal = 0;
    if (sigwait(&set, &signal) != 0) continue;
    if (signal == relay_signal()) {  // the faulting thread has said what happened
      g_ending.store(true);
      if (io::remove_temporaries() > 0) {
        static const char kLine[] = "polymargin: unfinished output removed, nothing was written\n";
        [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kLine, sizeof kLine - 1);
      }
      ::_exit(kExitIo);
    }
    int none = 0;
    // A FIFO without its other end holds the process in open(), where no flag is polled.
    if (g_stop_politely.load() && !io::waiting_in_open() &&
        g_received.compare_exchange_strong(none, signal)) {
      io::note_stop_signal(signal);
      continue;
    }
    die_of(signal);
  }
}

}  // namespace

void start_signal_thread() {
  const sigset_t set = handled_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(wait_for_signals, set).detach();
  g_thread_runs.store(true);
}

RunningChild::RunningChild() {
  Children& c = children();
  std::unique_lock lock(c.mutex);
  if (c.ending) {  // no further child
    lock.unlock();
    wait_for_the_end();
  }
  ++c.forking;
}

void RunningChild::started(int pid) {
  Children& c = children();
  const std::lock_guard lock(c.mutex);
  --c.forking;
  pid_ = pid;
  c.pids.insert(pid);
  if (c.ending) ::kill(pid, SIGTERM);  // forked as the process began to end
}

RunningChild::~RunningChild() {
  Children& c = children();
  std::unique_lock lock(c.mutex);
  if (pid_ < 0)
    --c.forking;  // the fork failed
  else
    c.pids.erase(pid_);
  if (c.pids.empty() && c.forking == 0) c.gone.notify_all();
  if (!c.ending) return;
  // The process is ending (die_of): this thread starts no further cell and writes nothing more
  // while the temporaries are removed.
  lock.unlock();
  wait_for_the_end();
}

void wait_if_ending() {
  if (g_ending.load()) wait_for_the_end();
}

void relay_fatal_io_error() {
  if (!g_thread_runs.load()) return;
  ::kill(::getpid(), relay_signal());
  for (;;) ::pause();
}

StopSignals::StopSignals() {
  g_received.store(0);
  g_stop_politely.store(true);
}

StopSignals::~StopSignals() { g_stop_politely.store(false); }

int StopSignals::received() { return g_received.load(std::memory_order_relaxed); }

bool StopSignals::request(int signal) {
  int none = 0;
  return g_stop_politely.load() && g_received.compare_exchange_strong(none, signal);
}

}  // namespace polymargin::cli
