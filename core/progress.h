#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace ember {

// Seconds between the log lines of reporters made without an interval of
// their own (10 unless set; `ember --progress_seconds`). Set it before the
// reporters are made. REQUIRES: seconds > 0.
void SetDefaultProgressSeconds(double seconds);
double DefaultProgressSeconds();

// Shows the progress of long work: a self-updating line on a terminal
// (stderr is a TTY), a log line every `log_interval_seconds` otherwise.
// Thread safety: none; one reporter per loop.
class ProgressReporter {
 public:
  // `total` <= 0 means unknown (no ETA is shown). `log_interval_seconds` <= 0
  // means DefaultProgressSeconds().
  ProgressReporter(std::string label, int64_t total, double log_interval_seconds = 0);
  ~ProgressReporter();

  // Reports `done` units of work finished, with `detail` appended to the line
  // (e.g. "loss 0.4512"). Cheap when called often: prints at most 4 times a
  // second on a terminal.
  void Update(int64_t done, const std::string& detail = "");
  // As above, with the detail computed only when a line is printed (for
  // details that cost something to gather).
  void Update(int64_t done, const std::function<std::string()>& detail);
  // Prints the final line.
  void Finish(const std::string& detail = "");

  double elapsed_seconds() const;

 private:
  void Print(bool final_line);
  bool Due();

  std::string label_;
  int64_t total_;
  double log_interval_seconds_;
  bool terminal_;
  bool finished_ = false;
  int64_t done_ = 0;
  std::string detail_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_print_;
};

}  // namespace ember
