#include "pipeline/pipelined_runner.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "core/threads.h"

namespace ember::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The shared state of one run.
class Run {
 public:
  Run(const std::vector<Stage>& ids, const std::vector<std::function<Status(int)>>& stages,
      const std::function<void(int64_t, int)>& done, const PipelineOptions& options)
      : ids_(ids),
        stages_(stages),
        done_(done),
        options_(options),
        queues_(stages.size()),
        closed_(stages.size(), false),
        busy_since_us_(stages.size()),
        current_item_(stages.size()) {
    for (int slot = 0; slot < options.slots; ++slot) free_slots_.push_back(slot);
    for (auto& since : busy_since_us_) since.store(-1);
  }

  Status Execute(const std::function<Result<bool>(int64_t, int)>& read, PipelineStats* stats) {
    const Clock::time_point start = Clock::now();
    std::vector<std::thread> workers;
    for (size_t s = 0; s < stages_.size(); ++s) workers.emplace_back([this, s] { Work(s); });
    std::thread watchdog;
    if (options_.watchdog_seconds > 0) watchdog = std::thread([this] { Watch(); });
    Read(read);
    for (std::thread& worker : workers) worker.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
    }
    watchdog_cv_.notify_all();
    if (watchdog.joinable()) watchdog.join();
    if (stats != nullptr) {
      stats->times.busy_seconds[Stage::kRead] = read_seconds_;
      for (size_t s = 0; s < ids_.size(); ++s) {
        stats->times.busy_seconds[ids_[s]] = stage_seconds_[s];
      }
      stats->times.items = completed_;
      stats->wall_seconds = SecondsSince(start);
      stats->stalls = stalls_.load();
    }
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  // The reading loop, on the calling thread: takes a free slot, fills it and
  // hands it to the first stage.
  void Read(const std::function<Result<bool>(int64_t, int)>& read) {
    for (int64_t index = 0;; ++index) {
      int slot = -1;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopped_ || !free_slots_.empty(); });
        if (stopped_) break;
        slot = free_slots_.front();
        free_slots_.pop_front();
      }
      const Clock::time_point begin = Clock::now();
      Result<bool> more(false);
      {
        TraceSpan span(options_.tracer, StageName(Stage::kRead), "stage", index);
        more = read(index, slot);
      }
      read_seconds_ += SecondsSince(begin);
      if (!more.ok()) {
        Fail(more.status());
        break;
      }
      if (!*more) break;
      {
        std::lock_guard<std::mutex> lock(mu_);
        queues_[0].push_back({index, slot});
      }
      cv_.notify_all();
    }
    Close(0);
  }

  // The worker of stage s.
  void Work(size_t s) {
    const int threads = std::max(0, options_.stage_threads[ids_[s]]);
    std::unique_ptr<ThreadArena> arena;
    if (threads > 0) arena = std::make_unique<ThreadArena>(threads);
    const int nice = options_.stage_nice[ids_[s]];
    if (nice > 0) LowerThisThreadsPriority(nice);
    const bool last = s + 1 == stages_.size();
    while (true) {
      std::pair<int64_t, int> item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopped_ || !queues_[s].empty() || closed_[s]; });
        if (stopped_ || queues_[s].empty()) break;
        item = queues_[s].front();
        queues_[s].pop_front();
      }
      const auto [index, slot] = item;
      current_item_[s].store(index);
      const Clock::time_point begin = Clock::now();
      busy_since_us_[s].store(
          std::chrono::duration_cast<std::chrono::microseconds>(begin.time_since_epoch()).count());
      Status status;
      {
        TraceSpan span(options_.tracer, StageName(ids_[s]), "stage", index);
        if (arena) {
          arena->Execute([&] {
            SetOpenMpThreads(threads);
            status = stages_[s](slot);
          });
        } else {
          status = stages_[s](slot);
        }
      }
      busy_since_us_[s].store(-1);
      stage_seconds_[s] += SecondsSince(begin);
      if (!status.ok()) {
        Fail(status.WithContext(std::string("stage ") + StageName(ids_[s])));
        break;
      }
      if (last) {
        if (done_) done_(index, slot);
        std::lock_guard<std::mutex> lock(mu_);
        ++completed_;
        free_slots_.push_back(slot);
      } else {
        std::lock_guard<std::mutex> lock(mu_);
        queues_[s + 1].push_back(item);
      }
      cv_.notify_all();
    }
    if (!last) Close(s + 1);
  }

  void Close(size_t s) {
    if (s >= closed_.size()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_[s] = true;
    }
    cv_.notify_all();
  }

  void Fail(const Status& status) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stopped_) {
        stopped_ = true;
        error_ = status;
        first = true;
      }
    }
    cv_.notify_all();
    if (first && options_.on_stop) options_.on_stop();
  }

  // The watchdog: reports each (stage, item) that stays busy too long, once.
  void Watch() {
    const auto period = std::chrono::duration<double>(
        std::clamp(options_.watchdog_seconds / 4, 0.001, 1.0));
    std::vector<int64_t> reported(stages_.size(), -1);
    std::unique_lock<std::mutex> lock(mu_);
    while (!finished_) {
      watchdog_cv_.wait_for(lock, period);
      if (finished_) break;
      const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                 Clock::now().time_since_epoch())
                                 .count();
      for (size_t s = 0; s < stages_.size(); ++s) {
        const int64_t since = busy_since_us_[s].load();
        const int64_t item = current_item_[s].load();
        if (since < 0 || reported[s] == item) continue;
        const double seconds = (now_us - since) / 1e6;
        if (seconds < options_.watchdog_seconds) continue;
        reported[s] = item;
        ++stalls_;
        lock.unlock();
        if (options_.on_stall) {
          options_.on_stall(ids_[s], item, seconds);
        } else {
          LOG(WARNING) << "watchdog: stage " << StageName(ids_[s]) << " has been on batch " << item
                       << " for " << seconds << " s without progress";
        }
        lock.lock();
      }
    }
  }

  const std::vector<Stage>& ids_;
  const std::vector<std::function<Status(int)>>& stages_;
  const std::function<void(int64_t, int)>& done_;
  const PipelineOptions& options_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable watchdog_cv_;
  std::deque<int> free_slots_;
  std::vector<std::deque<std::pair<int64_t, int>>> queues_;  // Input of each stage.
  std::vector<bool> closed_;  // No more items will enter stage s's queue.
  bool stopped_ = false;
  bool finished_ = false;
  Status error_;
  int64_t completed_ = 0;
  // Written by one thread each (the reader; worker s), read after the joins.
  double read_seconds_ = 0.0;
  std::vector<double> stage_seconds_ = std::vector<double>(ids_.size(), 0.0);
  std::vector<std::atomic<int64_t>> busy_since_us_;  // -1: idle.
  std::vector<std::atomic<int64_t>> current_item_;
  std::atomic<int64_t> stalls_{0};
};

}  // namespace

Status RunPipelinedSlots(const std::vector<Stage>& ids,
                         const std::vector<std::function<Status(int)>>& stages,
                         const std::function<Result<bool>(int64_t, int)>& read,
                         const std::function<void(int64_t, int)>& done,
                         const PipelineOptions& options, PipelineStats* stats) {
  if (ids.size() != stages.size() || stages.empty()) {
    return Status::InvalidArgument("a pipeline needs one id per stage and at least one stage");
  }
  for (size_t s = 0; s < ids.size(); ++s) {
    const bool repeated = std::find(ids.begin(), ids.begin() + s, ids[s]) != ids.begin() + s;
    if (ids[s] == Stage::kRead || repeated) {
      return Status::InvalidArgument("a pipeline's stages after reading are distinct and not ",
                                     "\"read\"; stage ", s, " is \"", StageName(ids[s]), "\"");
    }
  }
  if (options.slots < 1) {
    return Status::InvalidArgument("a pipeline needs at least one slot, got ", options.slots);
  }
  if (!(options.watchdog_seconds >= 0)) {
    return Status::InvalidArgument("watchdog_seconds must be >= 0, got ", options.watchdog_seconds);
  }
  Run run(ids, stages, done, options);
  return run.Execute(read, stats);
}

}  // namespace ember::pipeline
