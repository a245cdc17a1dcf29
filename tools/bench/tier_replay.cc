#include "tools/bench/tier_replay.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

namespace ember::bench {
namespace {

using embedding::Key;

// Keys per part of a replayed kind at most: bounds the rows one call holds
// (a step of populating a table writes back hundreds of thousands).
constexpr int64_t kMaxPartKeys = 16384;

int64_t CountKeys(const std::vector<std::vector<Key>>& calls) {
  int64_t n = 0;
  for (const std::vector<Key>& call : calls) n += static_cast<int64_t>(call.size());
  return n;
}

// One kind of a step's calls, joined, sorted by `rank` if given, and cut
// into parts (a multiple of the arena's threads, each of at most
// kMaxPartKeys keys), served in parallel; adds the wall seconds of serving
// them to *seconds. `serve(part, buffer)` makes one call; `buffer` has room
// for the part's rows.
Status ReplayKind(const std::vector<std::vector<Key>>& calls, int64_t row_bytes, ThreadArena& arena,
                  const KeyRank& rank,
                  const std::function<Status(const std::vector<Key>&, char*)>& serve,
                  double* seconds) {
  std::vector<Key> keys;
  keys.reserve(CountKeys(calls));
  for (const std::vector<Key>& call : calls) keys.insert(keys.end(), call.begin(), call.end());
  if (keys.empty()) return Status::OK();
  if (rank) {
    std::vector<std::pair<uint64_t, Key>> ranked(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) ranked[i] = {rank(keys[i]), keys[i]};
    std::sort(ranked.begin(), ranked.end());
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = ranked[i].second;
  }
  const int64_t n = static_cast<int64_t>(keys.size());
  const int64_t threads = arena.threads();
  int64_t parts = std::max<int64_t>(threads, (n + kMaxPartKeys - 1) / kMaxPartKeys);
  parts = (parts + threads - 1) / threads * threads;
  const int64_t part_keys = (n + parts - 1) / parts;
  std::vector<Status> statuses(parts);
  const auto start = std::chrono::steady_clock::now();
  arena.Execute([&] {
    ParallelFor(0, parts, 1, [&](int64_t first, int64_t last) {
      // Arbitrary bytes: the rows a Put writes; room for the rows a Get reads.
      std::vector<char> buffer(part_keys * row_bytes, 'r');
      std::vector<Key> part;
      for (int64_t p = first; p < last; ++p) {
        const int64_t begin = p * part_keys, end = std::min(n, begin + part_keys);
        if (begin >= end) continue;
        part.assign(keys.begin() + begin, keys.begin() + end);
        statuses[p] = serve(part, buffer.data());
      }
    });
  });
  *seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (Status& status : statuses) {
    if (!status.ok()) return std::move(status);
  }
  return Status::OK();
}

Status ReplayStep(const TierStep& step, embedding::Tier& tier, ThreadArena& arena,
                  const KeyRank& rank, double* seconds) {
  const int64_t row_bytes = tier.row_bytes();
  EMBER_RETURN_IF_ERROR(ReplayKind(
      step.gets, row_bytes, arena, rank,
      [&](const std::vector<Key>& keys, char* rows) {
        std::vector<int64_t> missing;
        return tier.Get(keys, rows, &missing);
      },
      seconds));
  EMBER_RETURN_IF_ERROR(ReplayKind(
      step.puts, row_bytes, arena, rank,
      [&](const std::vector<Key>& keys, char* rows) { return tier.Put(keys, rows); }, seconds));
  return ReplayKind(
      step.deletes, row_bytes, arena, rank,
      [&](const std::vector<Key>& keys, char*) { return tier.Delete(keys); }, seconds);
}

}  // namespace

int64_t TierStep::rows() const { return CountKeys(gets) + CountKeys(puts) + CountKeys(deletes); }

RecordingTier::RecordingTier(std::unique_ptr<embedding::Tier> tier) : tier_(std::move(tier)) {}

void RecordingTier::EndStep() {
  std::lock_guard<std::mutex> lock(mu_);
  ended_.push_back(std::move(open_));
  open_ = TierStep();
}

std::vector<TierStep> RecordingTier::TakeSteps() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TierStep> steps;
  steps.swap(ended_);
  return steps;
}

template <typename Call>
Status RecordingTier::Timed(Kind kind, const std::vector<Key>& keys, const Call& call) {
  const auto start = std::chrono::steady_clock::now();
  Status status = call();
  nanos_.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count(),
      std::memory_order_relaxed);
  std::vector<Key> copy(keys);  // outside the lock: the table's threads share it
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::vector<Key>>& calls = kind == Kind::kGet   ? open_.gets
                                         : kind == Kind::kPut ? open_.puts
                                                              : open_.deletes;
  calls.push_back(std::move(copy));
  return status;
}

Status RecordingTier::Get(const std::vector<Key>& keys, char* out, std::vector<int64_t>* missing) {
  return Timed(Kind::kGet, keys, [&] { return tier_->Get(keys, out, missing); });
}

Status RecordingTier::Put(const std::vector<Key>& keys, const char* rows) {
  return Timed(Kind::kPut, keys, [&] { return tier_->Put(keys, rows); });
}

Status RecordingTier::Delete(const std::vector<Key>& keys) {
  return Timed(Kind::kDelete, keys, [&] { return tier_->Delete(keys); });
}

Result<double> ReplayTierSteps(const std::vector<TierStep>& steps, embedding::Tier& tier,
                               ThreadArena& arena, const KeyRank& rank) {
  double seconds = 0;
  for (const TierStep& step : steps) {
    EMBER_RETURN_IF_ERROR(ReplayStep(step, tier, arena, rank, &seconds));
  }
  return seconds;
}

}  // namespace ember::bench
