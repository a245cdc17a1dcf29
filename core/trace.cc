#include "core/trace.h"

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "core/file.h"
#include "core/json.h"

namespace ember {
namespace {

int CurrentThreadId() {
  // Small stable ids read better in trace viewers than hashed native ids.
  static std::atomic<int> next{1};
  thread_local int id = next.fetch_add(1, std::memory_order_relaxed);
  return id;
}

}  // namespace

Tracer::Tracer() : origin_(std::chrono::steady_clock::now()) {}

int64_t Tracer::NowUs() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now() - origin_)
      .count();
}

void Tracer::Record(std::string name, std::string category, int64_t start_us, int64_t end_us,
                    int64_t batch) {
  Event event{std::move(name), std::move(category), start_us, end_us - start_us,
              CurrentThreadId(), batch};
  MutexLock lock(mu_);
  events_.push_back(std::move(event));
}

std::vector<Tracer::Event> Tracer::Events() const {
  MutexLock lock(mu_);
  return events_;
}

// A complete event ("ph": "X") of the Chrome trace event format.
void to_json(Json& j, const Tracer::Event& event) {
  j = Json{{"name", event.name},    {"cat", event.category},    {"ph", "X"},
           {"ts", event.start_us},  {"dur", event.duration_us}, {"pid", 1},
           {"tid", event.thread_id}};
  if (event.batch >= 0) j["args"] = Json{{"batch", event.batch}};
}

void Tracer::SetOtherData(const std::string& key, const std::string& value) {
  MutexLock lock(mu_);
  for (auto& [k, v] : other_data_) {
    if (k == key) {
      v = value;
      return;
    }
  }
  other_data_.emplace_back(key, value);
}

std::string Tracer::ToJson() const {
  // One event a line: a long trace stays readable and diffable.
  std::string out = "{\"displayTimeUnit\":\"ms\",";
  {
    MutexLock lock(mu_);
    if (!other_data_.empty()) {
      Json other = Json::object();
      for (const auto& [key, value] : other_data_) other[key] = value;
      out += "\"otherData\":" + JsonText(other) + ",";
    }
  }
  out += "\"traceEvents\":[";
  bool first = true;
  for (const Event& event : Events()) {
    out += (first ? "\n" : ",\n") + JsonText(Json(event));
    first = false;
  }
  return out + "\n]}\n";
}

Status Tracer::WriteJson(const std::string& path) const {
  return WriteFileAtomic(path, ToJson());
}

}  // namespace ember
