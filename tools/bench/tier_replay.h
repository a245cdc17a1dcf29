// A disk tier that times and records what a table asks of it, and the replay
// of that record on a tier alone: the tier's own ceiling on the rows a table
// sends it. A budgeted table sends its disk tier only the rows its memory
// lacks, the cold ones, in calls of one shard each; the same tier reading and
// writing whole batches of a key stream serves the hot keys from its memtable
// and cache and does more rows per second than it can for a table. The replay
// does the table's own disk work, step for step, without the table. Made in
// lock step with the table (each step replayed right after the table made
// it, on a tier that has seen every call before it), the two are a paired
// measurement: a machine that slows down for a while slows both alike.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/status.h"
#include "core/threads.h"
#include "embedding/embedding_table.h"
#include "embedding/tier.h"

namespace ember::bench {

// The keys of one step's calls to a tier, by kind, each call in the order
// made.
struct TierStep {
  std::vector<std::vector<embedding::Key>> gets;
  std::vector<std::vector<embedding::Key>> puts;
  std::vector<std::vector<embedding::Key>> deletes;
  // Keys over all calls.
  int64_t rows() const;
};

// Forwards every call to the tier it wraps, adds up the time callers spend
// inside Get, Put and Delete, and records their keys, step by step.
// Thread safety: as Tier's. TakeSteps() and EndStep() may run beside calls; a
// call running during EndStep is recorded in either step.
class RecordingTier final : public embedding::Tier {
 public:
  explicit RecordingTier(std::unique_ptr<embedding::Tier> tier);

  // Nanoseconds spent in Get, Put and Delete so far, summed over threads.
  int64_t nanos() const { return nanos_.load(std::memory_order_relaxed); }
  // Closes the step being recorded; later calls belong to the next one.
  void EndStep();
  // Moves out the steps closed since the last call, oldest first.
  std::vector<TierStep> TakeSteps();

  int64_t row_bytes() const override { return tier_->row_bytes(); }
  Status Get(const std::vector<embedding::Key>& keys, char* out,
             std::vector<int64_t>* missing) override;
  Status Put(const std::vector<embedding::Key>& keys, const char* rows) override;
  Status Delete(const std::vector<embedding::Key>& keys) override;
  Result<int64_t> ApproximateCount() override { return tier_->ApproximateCount(); }
  Status Flush() override { return tier_->Flush(); }
  Status Scan(const RowVisitor& visit) override { return tier_->Scan(visit); }

 private:
  enum class Kind { kGet, kPut, kDelete };
  // Runs `call`, adds its time and records `keys` as a call of `kind` in
  // the open step.
  template <typename Call>
  Status Timed(Kind kind, const std::vector<embedding::Key>& keys, const Call& call);

  const std::unique_ptr<embedding::Tier> tier_;
  std::atomic<int64_t> nanos_{0};
  std::mutex mu_;
  TierStep open_;                // guarded by mu_
  std::vector<TierStep> ended_;  // guarded by mu_
};

// Where a tier stores a key (embedding::RocksDbTierRank): rows lie in
// increasing rank.
using KeyRank = std::function<uint64_t(embedding::Key)>;

// Replays `steps` on `tier`, in order, and returns the wall seconds of their
// calls. Each step is served as a tier alone serves it at its best: all its
// Gets, then all its Puts (rows of arbitrary bytes), then all its Deletes,
// each kind's keys joined, sorted by `rank` (if not empty: each part is then
// one range of the tier's rows, as it stores them) and cut into whole parts
// that the `arena`'s threads serve in parallel.
Result<double> ReplayTierSteps(const std::vector<TierStep>& steps, embedding::Tier& tier,
                               ThreadArena& arena, const KeyRank& rank = {});

}  // namespace ember::bench
