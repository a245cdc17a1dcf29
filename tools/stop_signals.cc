#include "tools/stop_signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include <glog/logging.h>

namespace ember::tools {
namespace {

std::mutex g_mu;  // Orders a signal's arrival against a StopOnSignal's end.
std::atomic<bool>* g_stop = nullptr;  // Guarded by g_mu.
std::atomic<int> g_signal{0};
// When the last stop request was taken (zero: none yet). Guarded by g_mu.
std::chrono::steady_clock::time_point g_taken_at{};

// A repeat this soon after a request is the same request delivered twice.
constexpr std::chrono::milliseconds kRepeatWindow{1000};

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Ends the process as `signal`'s default action does: the parent sees it
// killed by that signal.
[[noreturn]] void DieOf(int signal) {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = SIG_DFL;
  sigaction(signal, &action, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(signal);
  _exit(128 + signal);  // Not reached.
}

void WaitForSignals() {
  const sigset_t set = StopSignals();
  while (true) {
    int signal = 0;
    if (sigwait(&set, &signal) != 0) continue;
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(g_mu);
    // Not logged: the job may be ending, and glog with it.
    if (g_taken_at != std::chrono::steady_clock::time_point{} && now - g_taken_at < kRepeatWindow) {
      continue;
    }
    if (g_stop == nullptr || g_signal.load() != 0) DieOf(signal);
    // Logged before the flag is set: once it is, the job may end and the
    // process exit, destroying glog under a thread still logging.
    LOG(WARNING) << strsignal(signal) << ": stopping after the step in progress (send it again "
                 << "after a second to stop at once, without a checkpoint)";
    g_signal.store(signal);
    g_taken_at = now;
    g_stop->store(true);
  }
}

}  // namespace

void StartStopSignalThread() {
  static std::once_flag once;
  std::call_once(once, [] {
    const sigset_t set = StopSignals();
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &set, nullptr), 0) << "blocking SIGINT and SIGTERM";
    std::thread(WaitForSignals).detach();
  });
}

StopOnSignal::StopOnSignal(std::atomic<bool>* stop) {
  std::lock_guard<std::mutex> lock(g_mu);
  CHECK(g_stop == nullptr) << "one StopOnSignal at a time";
  g_signal.store(0);
  g_taken_at = {};
  stop->store(false);
  g_stop = stop;
}

StopOnSignal::~StopOnSignal() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_stop = nullptr;
}

int StopOnSignal::signal() const { return g_signal.load(); }

}  // namespace ember::tools
