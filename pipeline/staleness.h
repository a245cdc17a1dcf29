#pragma once

// Bounded staleness between the pull and push stages of a pipeline. A pull
// reads embedding rows; the pushes of earlier batches still in flight have
// not updated them yet. A pulled row's staleness is the number of earlier,
// not yet pushed batches that will update it. StalenessGate makes the pull
// stage wait until every row it is about to read has staleness at most
// max_staleness:
//  * max_staleness = 0 with early pulls: a pull waits only for the in-flight
//    batches that share a key with it; rows no in-flight batch touches are
//    already final, so the result is exactly that of sequential training.
//  * without early pulls: a pull waits until at most max_staleness earlier
//    batches are in flight, whatever their keys (k = 0: the previous push).
// The staleness each pulled row actually had is counted in a histogram.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <set>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember::pipeline {

struct StalenessHistogram {
  // rows[s]: pulled rows that had staleness s.
  std::vector<int64_t> rows;
  // Pulls that had to wait for a push, and their total wait.
  int64_t waits = 0;
  double wait_seconds = 0.0;

  int64_t total() const;
  double mean() const;
  // "0: 98.2%, 1: 1.8%" (at most `max_entries` entries, the largest last).
  std::string ToString(int max_entries = 6) const;
};

// Thread safety: AwaitPull from one thread (the pull stage, in batch order),
// MarkPushed from another (the push stage, in batch order), AwaitPushed from
// a third, Cancel and histogram() from any.
class StalenessGate {
 public:
  StalenessGate(int max_staleness, bool early_pulls)
      : max_staleness_(max_staleness), early_pulls_(early_pulls) {}

  // Blocks until batch `index` may read the rows of `sorted_keys` (unique,
  // ascending), then records it as in flight. With `after_all_pushes` it
  // waits for every earlier batch instead (e.g. before evicting rows).
  // Cancelled after Cancel().
  Status AwaitPull(int64_t index, const std::vector<uint64_t>& sorted_keys,
                   bool after_all_pushes = false);
  // counts[i]: the in-flight batches that will update sorted_keys[i] (the
  // staleness that row would have if pulled now). Rows with a count of at
  // most max_staleness may be read before AwaitPull: no later pull can add
  // to their count, and pushes only lower it.
  void Staleness(const std::vector<uint64_t>& sorted_keys, std::vector<int>* counts) const;
  int max_staleness() const { return max_staleness_; }
  // Batch `index` has updated its rows. Pulls waiting for it may go on once
  // every batch before it has pushed too (the push stage marks batches in
  // order, so that costs nothing there).
  void MarkPushed(int64_t index);
  // Blocks until every batch before `index` has been marked pushed (a
  // barrier between steps, e.g. for a checkpoint: with no batch after
  // `index` read yet, nothing is in flight then). Cancelled after Cancel().
  Status AwaitPushed(int64_t index);
  // Releases every waiting and later AwaitPull with Cancelled.
  void Cancel();

  StalenessHistogram histogram() const;

 private:
  // Per key of `keys`, the in-flight batches holding it: the largest count,
  // and the counts added to `rows` when set.
  int MaxStaleness(const std::vector<uint64_t>& keys, std::vector<int64_t>* rows) const;
  // The value of pushed_ from which every key of `keys` (sorted) has at most
  // max_staleness_ in-flight holders (pushes come in batch order).
  int64_t PushesNeededLocked(const std::vector<uint64_t>& keys) const;
  void CountLocked(const std::vector<uint64_t>& keys, std::vector<int>* counts) const;

  const int max_staleness_;
  const bool early_pulls_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
  // In-flight batches (pulled, not pushed): index -> sorted unique keys.
  std::map<int64_t, std::vector<uint64_t>> in_flight_;
  // Batches [0, pushed_) have been marked pushed; later ones marked before
  // an earlier one wait in pushed_out_of_order_.
  int64_t pushed_ = 0;
  std::set<int64_t> pushed_out_of_order_;
  StalenessHistogram histogram_;
};

}  // namespace ember::pipeline
