#include "core/heartbeat.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

namespace ember {
namespace {

constexpr int kBeatTag = 7;

}  // namespace

double Heartbeat::IntervalSeconds(double timeout_seconds) {
  return std::clamp(timeout_seconds / 4, 0.01, 5.0);
}

Heartbeat::Heartbeat(Communicator* comm, int root, double timeout_seconds,
                     std::function<void(const Status&)> on_silence)
    : comm_(comm), root_(root), on_silence_(std::move(on_silence)) {
  if (comm_->rank() == root_) {
    thread_ = std::thread([this, timeout_seconds] { Send(IntervalSeconds(timeout_seconds)); });
  } else {
    thread_ = std::thread([this] { Watch(); });
  }
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  // A watcher blocked in its Recv leaves at once; a sender's peers see the
  // heartbeat end (Unavailable), which is not silence.
  comm_->Abort(Status::Cancelled("the heartbeat ended"));
  thread_.join();
}

void Heartbeat::Send(double interval_seconds) {
  const std::vector<int32_t> beat = {1};
  const auto interval = std::chrono::duration<double>(interval_seconds);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    for (int r = 0; r < comm_->size(); ++r) {
      if (r == root_) continue;
      // A peer that left (its job failed or ended) needs no more beats.
      if (!comm_->Send(beat, r, kBeatTag).ok()) return;
    }
    lock.lock();
    stop_cv_.wait_for(lock, interval, [this] { return stop_; });
  }
}

void Heartbeat::Watch() {
  std::vector<int32_t> beat(1);
  for (;;) {
    const Status received = comm_->Recv(beat, root_, kBeatTag);
    if (received.ok()) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    // The root ending its heartbeat (Unavailable, Cancelled) is not silence:
    // its other communicators say why it ended, if it failed.
    if (received.code() == StatusCode::kDeadlineExceeded) {
      on_silence_(received.WithContext("heartbeat"));
    }
    return;
  }
}

}  // namespace ember
