#pragma once

#include <cstdint>
#include <vector>

#include "io/batch.h"
#include "io/text_format.h"

namespace ember::io::internal {

// Where a record came from: the sequence index of its piece in the epoch
// (PipelineCursor::index), its row in the piece, and its input count (the
// records that entered the shuffle stage before it in the epoch).
struct RecordOrigin {
  int64_t piece = 0;
  int64_t row = 0;
  int64_t input = 0;
};

// A reservoir-style shuffle buffer of `capacity` records whose slot choices
// do not depend on its contents: input record t (counted from 0 in an
// epoch) goes to slot t while the buffer fills (t < capacity); after that it
// takes the place of the record in slot SlotFor(t), a pure function of
// (key, t), which is emitted. When the input ends the records left are
// emitted in a random order drawn from the key.
//
// Because the slots are a function of t alone, the buffer after t inputs is
// determined by the last input written to each slot: a reader can rebuild it
// by writing inputs [t0, t) again, where t0 is the oldest live record's input
// count (OldestLive), without the data before t0. In steady state that is
// about capacity x ln(capacity) records back (every slot chosen at least once).
// Thread safety: none.
class ShuffleBuffer {
 public:
  // REQUIRES: capacity >= 1.
  ShuffleBuffer(int64_t capacity, const TextLayout& layout);

  int64_t capacity() const { return capacity_; }
  // Empties the buffer; `key` draws the slots and the drain order.
  void Reset(uint64_t key);
  // The slot of input record t.
  int64_t SlotFor(int64_t t) const;
  // Copies row `row` of `rows` into `slot`.
  void Put(int64_t slot, const Batch& rows, int64_t row, const RecordOrigin& origin);
  // Appends the record in `slot` to `out`.
  void Emit(int64_t slot, Batch* out) const;

  // The input ended with `occupied` slots filled (0 .. occupied - 1); the
  // drain order is then fixed. Steps already taken: drain_step().
  void StartDrain(int64_t occupied);
  bool draining() const { return draining_; }
  int64_t drain_step() const { return drain_step_; }
  void set_drain_step(int64_t step) { drain_step_ = step; }
  bool drained() const { return drain_step_ == static_cast<int64_t>(drain_order_.size()); }
  // The next slot to emit while draining. REQUIRES: draining() && !drained().
  int64_t NextDrainSlot() { return drain_order_[drain_step_++]; }

  // The origin with the smallest input count among the records still to be
  // emitted: the first `occupied` slots, or while draining those not drained
  // yet. REQUIRES: at least one such record.
  RecordOrigin OldestLive(int64_t occupied) const;

 private:
  const int64_t capacity_;
  const TextLayout layout_;
  uint64_t key_ = 0;
  std::vector<float> labels_;           // [capacity x num_labels]
  std::vector<float> dense_;            // [capacity x num_dense]
  std::vector<int64_t> bag_ends_;       // [capacity x num_slots], from the slot's first key
  std::vector<std::vector<Key>> keys_;  // [capacity]
  std::vector<RecordOrigin> origins_;   // [capacity]
  bool draining_ = false;
  std::vector<int64_t> drain_order_;
  int64_t drain_step_ = 0;
};

}  // namespace ember::io::internal
