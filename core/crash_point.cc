#include "core/crash_point.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace ember {
namespace {

struct Request {
  std::mutex mu;
  bool read = false;    // The environment was read (or a test set it).
  std::string name;     // Empty: no point requested.
  int64_t remaining = 0;  // Reaches of `name` left before the kill.
};

Request& TheRequest() {
  static Request* request = new Request();  // Never destroyed: used at exit.
  return *request;
}

// Whether any point is requested, so that the common case costs one load.
std::atomic<bool> g_armed{false};
std::atomic<bool> g_env_read{false};

void SetLocked(Request& r, const std::string& spec) {
  r.read = true;
  r.name.clear();
  r.remaining = 0;
  if (!spec.empty()) {
    const size_t at = spec.rfind('@');
    r.name = spec.substr(0, at);
    r.remaining = 1;
    if (at != std::string::npos) {
      char* end = nullptr;
      const long long n = std::strtoll(spec.c_str() + at + 1, &end, 10);
      r.remaining = (end != nullptr && *end == '\0' && n >= 1) ? n : 1;
    }
  }
  g_armed.store(!r.name.empty());
}

void ReadEnvironmentOnce() {
  if (g_env_read.load(std::memory_order_acquire)) return;
  Request& r = TheRequest();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.read) {
    const char* spec = std::getenv("EMBER_CRASH_POINT");
    // Under mpirun every rank has the same environment: EMBER_CRASH_RANK
    // picks the one that crashes.
    const char* only = std::getenv("EMBER_CRASH_RANK");
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    const bool this_rank = only == nullptr || *only == '\0' ||
                           std::string(only) == (rank != nullptr ? rank : "0");
    SetLocked(r, spec == nullptr || !this_rank ? std::string() : std::string(spec));
  }
  g_env_read.store(true, std::memory_order_release);
}

}  // namespace

void CrashPoint(const char* name) {
  ReadEnvironmentOnce();
  if (!g_armed.load(std::memory_order_relaxed)) return;
  Request& r = TheRequest();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.name != name || --r.remaining > 0) return;
  // Said on stderr so that a crash test's log shows where the job died, in
  // one write: the ranks of a job share mpirun's stderr, and three writes
  // had another rank's line land inside this one.
  char line[256];
  const int n = std::snprintf(line, sizeof(line), "ember: killed at crash point %s\n", name);
  const ssize_t ignored =
      write(STDERR_FILENO, line, std::min(static_cast<size_t>(n), sizeof(line) - 1));
  (void)ignored;
  kill(getpid(), SIGKILL);
  _exit(137);  // Not reached.
}

void SetCrashPointForTest(const std::string& spec) {
  Request& r = TheRequest();
  std::lock_guard<std::mutex> lock(r.mu);
  SetLocked(r, spec);
  g_env_read.store(true, std::memory_order_release);
}

}  // namespace ember
