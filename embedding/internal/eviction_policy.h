#pragma once

#include <cstdint>
#include <functional>

#include "embedding/internal/row_store.h"

// Which rows of a shard's memory tier leave first when the shard is over its
// byte budget.

namespace ember::embedding {

// The order in which rows of one RowArena are evicted.
//
// kLru is exact least-recently-used: an intrusive doubly-linked list threaded
// through the arena. Each row carries LinkFloats() = 2 extra floats at
// `links_offset` (previous and next slot, bit-copied uint32, kNil at the
// ends), so the list costs 8 bytes per row, lives in the memory the budget
// already counts, and moves with the row. The head is the row used last.
//
// kLfu approximates least-frequently-used by sampling (as Redis does): a
// victim is the row with the smallest (pulled at the current step, RowMeta
// frequency, last_seen_step) among kLfuSamples slots drawn from a per-shard
// random stream. Rows pulled at the current step go last: a new row has the
// lowest frequency of all, and evicting it between its Pull and its Push
// would only make the Push read it back. A row the caller spares (one a
// Prefetch pinned) is passed over for the next coldest of the same sample:
// prefetched rows are mostly cold ones, and drawing a fresh sample for each
// (as it once did, 2.2 draws per victim in embedding_bench's dim 16 Prefetch
// case) cost more than the victim's choice was worth. It needs no
// bookkeeping besides the RowMeta every row has; its choice is approximate
// (a victim is colder than most rows, not necessarily the coldest).
//
// kNone keeps no state and picks nothing: the policy of a table without a
// disk tier.
//
// Which row is evicted never changes a value: evicted rows are written back
// and read again on their next use.
// Thread safety: none; the owning shard serialises access.
class EvictionPolicy {
 public:
  enum class Kind { kNone, kLru, kLfu };
  static constexpr uint32_t kNil = UINT32_MAX;
  static constexpr int kLfuSamples = 8;

  // `links_offset`: floats from a row's start to its two link floats (kLru);
  // `meta_offset`: to its RowMeta (kLfu). `seed` seeds kLfu's sampling.
  EvictionPolicy(Kind kind, int64_t links_offset, int64_t meta_offset, uint64_t seed)
      : kind_(kind), links_offset_(links_offset), meta_offset_(meta_offset), random_(seed) {}

  // Extra floats per row the policy keeps in the arena.
  static int64_t LinkFloats(Kind kind) { return kind == Kind::kLru ? 2 : 0; }

  Kind kind() const { return kind_; }

  // `slot` was just added: it becomes the most recently used row.
  void Inserted(RowArena& rows, int64_t slot);
  // `slot` was just added or is to stay but as the coldest row (a victim
  // whose write-back failed goes back to where it was).
  void InsertedCold(RowArena& rows, int64_t slot);
  // `slot` was read or updated.
  void Accessed(RowArena& rows, int64_t slot) {
    if (kind_ != Kind::kLru || static_cast<uint32_t>(slot) == head_) return;
    Unlink(rows, slot);
    Inserted(rows, slot);
  }
  // `slot` leaves the policy (its row is about to be removed or set aside).
  void Removed(RowArena& rows, int64_t slot) {
    if (kind_ == Kind::kLru) Unlink(rows, slot);
  }
  // The row of `from`, still linked, was copied (links included) to `to`;
  // points its neighbours at `to`.
  void Moved(RowArena& rows, int64_t from, int64_t to);
  // The coldest row among slots [0, live), which all are in the policy, that
  // spared(slot) does not pass over. Each row passed over costs one of
  // *passes_left; with none left, the coldest row is returned as it is. kLru
  // moves a row passed over to the hot end; kLfu goes on to the next coldest
  // row of its sample, then draws another.
  // REQUIRES: live > 0; kind() != kNone.
  // `step`: the table's current step (kLfu ranks rows pulled at it last).
  int64_t PickVictim(RowArena& rows, int64_t live, int64_t step,
                     const std::function<bool(int64_t slot)>& spared, int64_t* passes_left);
  // Forgets every row (the arena was emptied).
  void Clear() { head_ = tail_ = kNil; }

 private:
  uint32_t Prev(const RowArena& rows, int64_t slot) const;
  uint32_t Next(const RowArena& rows, int64_t slot) const;
  void SetPrev(RowArena& rows, int64_t slot, uint32_t prev);
  void SetNext(RowArena& rows, int64_t slot, uint32_t next);
  void Unlink(RowArena& rows, int64_t slot);

  Kind kind_;
  int64_t links_offset_;
  int64_t meta_offset_;
  uint64_t random_;
  uint32_t head_ = kNil;  // most recently used
  uint32_t tail_ = kNil;  // least recently used
};

}  // namespace ember::embedding
