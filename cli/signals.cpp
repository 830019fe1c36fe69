#include "cli/signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "cli/exit_codes.h"
#include "io/temporaries.h"

namespace polymargin::cli {

namespace {

std::atomic<int> g_received{0};
std::atomic<bool> g_stop_politely{false};

std::atomic<bool> g_thread_runs{false};

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
      if (io::remove_temporaries() > 0) {
        static const char kLine[] = "polymargin: unfinished output removed, nothing was written\n";
        [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kLine, sizeof kLine - 1);
      }
      ::_exit(kExitIo);
    }
    int none = 0;
    if (g_stop_politely.load() && g_received.compare_exchange_strong(none, signal)) continue;
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
