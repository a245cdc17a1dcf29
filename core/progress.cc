#include "core/progress.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>

#include <glog/logging.h>

namespace ember {
namespace {

std::atomic<double> g_default_progress_seconds{10.0};

}  // namespace

void SetDefaultProgressSeconds(double seconds) {
  CHECK(seconds > 0) << "progress seconds " << seconds;
  g_default_progress_seconds.store(seconds, std::memory_order_relaxed);
}

double DefaultProgressSeconds() { return g_default_progress_seconds.load(std::memory_order_relaxed); }

ProgressReporter::ProgressReporter(std::string label, int64_t total, double log_interval_seconds)
    : label_(std::move(label)),
      total_(total),
      log_interval_seconds_(log_interval_seconds > 0 ? log_interval_seconds
                                                     : DefaultProgressSeconds()),
      terminal_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

ProgressReporter::~ProgressReporter() {
  if (terminal_ && !finished_ && done_ > 0) std::fputc('\n', stderr);
}

double ProgressReporter::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

bool ProgressReporter::Due() {
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_print_).count();
  if (since < (terminal_ ? 0.25 : log_interval_seconds_)) return false;
  last_print_ = now;
  return true;
}

void ProgressReporter::Update(int64_t done, const std::string& detail) {
  done_ = done;
  detail_ = detail;
  if (Due()) Print(false);
}

void ProgressReporter::Update(int64_t done, const std::function<std::string()>& detail) {
  done_ = done;
  if (!Due()) return;
  detail_ = detail();
  Print(false);
}

void ProgressReporter::Finish(const std::string& detail) {
  if (!detail.empty()) detail_ = detail;
  Print(true);
  finished_ = true;
}

void ProgressReporter::Print(bool final_line) {
  const double elapsed = elapsed_seconds();
  const double rate = elapsed > 0 ? done_ / elapsed : 0.0;
  char line[512];
  int n = std::snprintf(line, sizeof(line), "%s: %lld", label_.c_str(),
                        static_cast<long long>(done_));
  if (total_ > 0) {
    n += std::snprintf(line + n, sizeof(line) - n, "/%lld (%.0f%%)",
                       static_cast<long long>(total_), 100.0 * done_ / total_);
  }
  n += std::snprintf(line + n, sizeof(line) - n, ", %.0f/s", rate);
  if (total_ > 0 && rate > 0 && !final_line) {
    n += std::snprintf(line + n, sizeof(line) - n, ", ETA %.0fs", (total_ - done_) / rate);
  }
  if (final_line) n += std::snprintf(line + n, sizeof(line) - n, ", %.1fs", elapsed);
  if (!detail_.empty()) std::snprintf(line + n, sizeof(line) - n, ", %s", detail_.c_str());
  if (terminal_) {
    std::fprintf(stderr, "\r\033[K%s%s", line, final_line ? "\n" : "");
    std::fflush(stderr);
  } else {
    LOG(INFO) << line;
  }
}

}  // namespace ember
