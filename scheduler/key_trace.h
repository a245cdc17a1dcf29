#pragma once

// A training set's embedding keys, sampled by key, and what a memory tier
// of a given size does with them: the disk rows a budgeted run reads and
// writes per batch, for the cost model (scheduler/cost_model.cc).

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/random.h"

namespace ember::scheduler {

// What a memory tier of `held_rows` rows does per batch, over the whole
// trace (every key, not the sample: the counts are scaled back up).
struct TierTraffic {
  double distinct = 0.0;  // Distinct ids of a batch.
  double hits = 0.0;      // Of them, rows memory held.
  double reads = 0.0;     // Rows read from disk: seen before, not in memory.
  double writes = 0.0;    // Rows written to disk: evicted.
  double created = 0.0;   // Rows seen for the first time.
};

// The keys of the training data in file order, spatially sampled (SHARDS:
// Waldspurger et al., "Efficient MRC Construction with SHARDS", FAST 2015):
// a key is in the trace, with every occurrence, iff Sampled(key). A cache of
// C rows behaves on the full stream as one of C / kSampleOneIn rows does on
// the sampled one, so the trace predicts a memory tier's reads and writes at
// any budget for 1/kSampleOneIn of the keys' memory and time.
// Thread safety: Add and Truncate need exclusive access; Simulate may be
// called concurrently (its results are memoized under a mutex).
class KeyTrace {
 public:
  static constexpr int kSampleOneIn = 16;
  static bool Sampled(uint64_t key) { return Mix64(key) % kSampleOneIn == 0; }

  KeyTrace() = default;
  KeyTrace(const KeyTrace&) = delete;
  KeyTrace& operator=(const KeyTrace&) = delete;

  // Records `key` of example `example` (examples counted from 0 in file
  // order, non-decreasing across calls) if it is sampled, and that the
  // trace covers examples up to `example`.
  void Add(int64_t example, uint64_t key) {
    examples_ = std::max(examples_, example + 1);
    if (!Sampled(key)) return;
    example_.push_back(static_cast<uint32_t>(example));
    keys_.push_back(key);
  }
  // Records that the trace covers examples [0, examples) (some may hold no
  // sampled key).
  void Cover(int64_t examples) { examples_ = std::max(examples_, examples); }
  // Keeps the first `examples` examples only.
  void Truncate(int64_t examples);
  // Puts the examples in a random order (seeded), as a run that shuffles
  // its examples reads them.
  void Shuffle(uint64_t seed);
  // Examples the trace covers and sampled occurrences in it.
  int64_t examples() const { return examples_; }
  int64_t sampled_ids() const { return static_cast<int64_t>(keys_.size()); }

  // Plays the trace once, in batches of `batch` examples, through a memory
  // tier that holds at most `held_rows` rows after each batch and evicts as
  // the tiered table's LFU policy does (embedding/internal/eviction_policy.h:
  // the smallest (pulled this batch, frequency, last batch) of 8 sampled
  // rows), and returns the mean traffic per batch. Every key of a batch is
  // pulled once (its distinct keys); a key not in memory is read from disk if
  // it was seen before, created otherwise. A `held_rows` of 16 times the
  // trace's keys or more (infinity too) keeps every row. REQUIRES: batch > 0.
  TierTraffic Simulate(double held_rows, int64_t batch) const;

 private:
  int64_t examples_ = 0;
  std::vector<uint32_t> example_;
  std::vector<uint64_t> keys_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<int64_t, int64_t>, TierTraffic> memo_;
};

// The trace of `examples` examples drawn as the generated data's are
// (io/synthetic.h): slot s draws Zipf(`exponent`) ranks over
// slot_vocabulary[s] values, one per example, or for the last
// `multi_hot_slots` slots a bag of 0 to max_bag_size of them (uniform);
// the key of rank r of slot s is (s << 32) | r. Only the sampled keys are
// drawn (a draw lands on one with the probability mass of those of its
// slot), so the cost is that of the slots' sampled ranks plus a uniform
// draw per id. Null when the vocabularies sum to more than 2^28 values
// (then the caller keeps the Zipf model's closed forms).
std::shared_ptr<KeyTrace> ZipfKeyTrace(const std::vector<int64_t>& slot_vocabulary,
                                       double exponent, int multi_hot_slots, int max_bag_size,
                                       int64_t examples, uint64_t seed);

}  // namespace ember::scheduler
