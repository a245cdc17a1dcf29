#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"

namespace ember {

// Records spans ("complete" events) and writes them as Chrome trace JSON,
// viewable in chrome://tracing or Perfetto.
// Thread safety: all methods may be called concurrently.
class Tracer {
 public:
  struct Event {
    std::string name;
    std::string category;
    int64_t start_us;
    int64_t duration_us;
    int thread_id;
    int64_t batch;  // -1 when the span belongs to no batch.
  };

  Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Microseconds since this tracer was created.
  int64_t NowUs() const;
  void Record(std::string name, std::string category, int64_t start_us, int64_t end_us,
              int64_t batch = -1);
  std::vector<Event> Events() const;
  // A (key, value) the trace carries beside its events (the trace format's
  // "otherData": the job's layout, its rank); a key set again is replaced.
  void SetOtherData(const std::string& key, const std::string& value);
  // The events as a Chrome trace JSON document.
  std::string ToJson() const;
  // Writes ToJson() to `path` atomically.
  Status WriteJson(const std::string& path) const;

 private:
  std::chrono::steady_clock::time_point origin_;
  mutable Mutex mu_;
  std::vector<Event> events_ GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> other_data_ GUARDED_BY(mu_);
};

// Records one span from construction to destruction. A null tracer records
// nothing, so call sites need no branch.
class TraceSpan {
 public:
  TraceSpan(Tracer* tracer, const char* name, const char* category, int64_t batch = -1)
      : tracer_(tracer), name_(name), category_(category), batch_(batch),
        start_us_(tracer ? tracer->NowUs() : 0) {}
  ~TraceSpan() {
    if (tracer_ != nullptr) tracer_->Record(name_, category_, start_us_, tracer_->NowUs(), batch_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  Tracer* tracer_;
  const char* name_;
  const char* category_;
  int64_t batch_;
  int64_t start_us_;
};

}  // namespace ember
