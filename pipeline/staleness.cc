#include "pipeline/staleness.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace ember::pipeline {
namespace {

// Calls shared(i) for every keys[i] that is also in batch_keys (both sorted
// and unique): a merge of the two lists.
template <typename Fn>
void ForEachSharedKey(const std::vector<uint64_t>& keys, const std::vector<uint64_t>& batch_keys,
                      Fn&& shared) {
  size_t i = 0, j = 0;
  while (i < keys.size() && j < batch_keys.size()) {
    if (keys[i] < batch_keys[j]) {
      ++i;
    } else if (batch_keys[j] < keys[i]) {
      ++j;
    } else {
      shared(i);
      ++i;
      ++j;
    }
  }
}

}  // namespace

int64_t StalenessHistogram::total() const {
  int64_t sum = 0;
  for (const int64_t n : rows) sum += n;
  return sum;
}

double StalenessHistogram::mean() const {
  const int64_t n = total();
  if (n == 0) return 0.0;
  double sum = 0.0;
  for (size_t s = 0; s < rows.size(); ++s) sum += static_cast<double>(s) * rows[s];
  return sum / static_cast<double>(n);
}

std::string StalenessHistogram::ToString(int max_entries) const {
  const int64_t n = total();
  if (n == 0) return "no rows pulled";
  std::string out;
  const int shown = std::min<int>(static_cast<int>(rows.size()), std::max(1, max_entries));
  for (int s = 0; s < shown; ++s) {
    // The last entry shown gathers every larger staleness.
    int64_t count = rows[s];
    if (s + 1 == shown) {
      for (size_t t = s + 1; t < rows.size(); ++t) count += rows[t];
    }
    char entry[48];
    std::snprintf(entry, sizeof(entry), "%s%d%s: %.2f%%", out.empty() ? "" : ", ", s,
                  s + 1 == shown && shown < static_cast<int>(rows.size()) ? "+" : "",
                  100.0 * static_cast<double>(count) / static_cast<double>(n));
    out += entry;
  }
  return out;
}

void StalenessGate::Staleness(const std::vector<uint64_t>& sorted_keys,
                              std::vector<int>* counts) const {
  std::lock_guard<std::mutex> lock(mu_);
  CountLocked(sorted_keys, counts);
}

void StalenessGate::CountLocked(const std::vector<uint64_t>& keys, std::vector<int>* out) const {
  std::vector<int>& counts = *out;
  counts.assign(keys.size(), 0);
  for (const auto& [index, batch_keys] : in_flight_) {
    ForEachSharedKey(keys, batch_keys, [&](size_t i) { ++counts[i]; });
  }
}

int StalenessGate::MaxStaleness(const std::vector<uint64_t>& keys,
                                std::vector<int64_t>* rows) const {
  std::vector<int> counts;
  CountLocked(keys, &counts);
  int max_count = 0;
  for (const int c : counts) {
    max_count = std::max(max_count, c);
    if (rows != nullptr) {
      if (static_cast<size_t>(c) >= rows->size()) rows->resize(c + 1, 0);
      ++(*rows)[c];
    }
  }
  return max_count;
}

int64_t StalenessGate::PushesNeededLocked(const std::vector<uint64_t>& keys) const {
  // Walk the in-flight batches from the newest: the (k+1)-th newest holder
  // of a key must have pushed (and, pushes coming in batch order, every
  // batch before it) for the key to miss at most k pushes.
  std::vector<int> holders(keys.size(), 0);
  int64_t needed = 0;
  for (auto it = in_flight_.rbegin(); it != in_flight_.rend(); ++it) {
    const auto& [index, batch_keys] = *it;
    if (index + 1 <= needed) break;  // Older batches cannot raise it.
    ForEachSharedKey(keys, batch_keys, [&, index = index](size_t i) {
      if (++holders[i] == max_staleness_ + 1) needed = std::max(needed, index + 1);
    });
  }
  return needed;
}

Status StalenessGate::AwaitPull(int64_t index, const std::vector<uint64_t>& sorted_keys,
                                bool after_all_pushes) {
  std::unique_lock<std::mutex> lock(mu_);
  // With early pulls, one pass over the keys says how many pushes the pull
  // needs; waking up then costs a comparison, not another pass.
  const int64_t pushes_needed =
      early_pulls_ && !after_all_pushes ? PushesNeededLocked(sorted_keys) : 0;
  const auto ready = [&] {
    if (cancelled_) return true;
    if (after_all_pushes) return in_flight_.empty();
    if (early_pulls_) return pushed_ >= pushes_needed;
    return static_cast<int64_t>(in_flight_.size()) <= max_staleness_;
  };
  if (!ready()) {
    const auto start = std::chrono::steady_clock::now();
    cv_.wait(lock, ready);
    ++histogram_.waits;
    histogram_.wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (cancelled_) return Status::Cancelled("the pipeline stopped");
  if (max_staleness_ == 0 || in_flight_.empty()) {
    // Nothing in flight holds these keys now: every row is fresh.
    if (histogram_.rows.empty()) histogram_.rows.resize(1, 0);
    histogram_.rows[0] += static_cast<int64_t>(sorted_keys.size());
  } else {
    MaxStaleness(sorted_keys, &histogram_.rows);
  }
  in_flight_[index] = sorted_keys;
  return Status::OK();
}

void StalenessGate::MarkPushed(int64_t index) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.erase(index);
    pushed_out_of_order_.insert(index);
    while (!pushed_out_of_order_.empty() && *pushed_out_of_order_.begin() == pushed_) {
      pushed_out_of_order_.erase(pushed_out_of_order_.begin());
      ++pushed_;
    }
  }
  cv_.notify_all();
}

Status StalenessGate::AwaitPushed(int64_t index) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return cancelled_ || pushed_ >= index; });
  if (cancelled_) return Status::Cancelled("the pipeline stopped");
  return Status::OK();
}

void StalenessGate::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
}

StalenessHistogram StalenessGate::histogram() const {
  std::lock_guard<std::mutex> lock(mu_);
  return histogram_;
}

}  // namespace ember::pipeline
