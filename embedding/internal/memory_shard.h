#pragma once

// One shard of the memory tier (see row_cache.h): its rows, their layout,
// and the bookkeeping that its mutex guards.
//
// A shard is a mutex, a flat open-addressing index (key -> slot, linear
// probing), an arena of rows in fixed-size chunks, so that growing never
// moves a row, and, with frequency admission, its own count-min sketch (the
// shard's keys are the only ones it counts, and it is updated under the
// shard's lock in batch order, so its counts do not depend on thread count).
// A row in the arena is
//
//   [dim weights][optimizer state][key: 2][last_seen_step: 2][frequency: 1]
//   [change epoch: 1][LRU links: 2, kLru with a budget only]
//
// floats. The first row_floats() of them are the stored row (what Scan shows
// and a tier behind holds); the rest is bookkeeping that stays in memory.
// RowMeta integers are bit-copied: metadata lives in the row, whose cache
// line Pull touches anyway, and the key lets eviction walk the arena and move
// rows. Removing a row fills its hole with the shard's last row, so slots
// stay dense and emptied chunks are freed.

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/mutex.h"
#include "embedding/embedding_table.h"
#include "embedding/internal/count_min_sketch.h"
#include "embedding/internal/eviction_policy.h"
#include "embedding/internal/row_store.h"

namespace ember::embedding::internal {

// Floats of RowMeta at the end of a stored row: key (2), last_seen_step (2),
// frequency (1).
constexpr int64_t kMetaFloats = 5;

// The RowMeta of a row, at `meta` = row + weight words + state floats (see
// RowCache::meta_offset). Bit-copied so
// that no float arithmetic ever touches the integers.
struct StoredMeta {
  Key key;
  int64_t last_seen_step;
  uint32_t frequency;
};
static_assert(sizeof(Key) + sizeof(int64_t) + sizeof(uint32_t) == kMetaFloats * sizeof(float));

inline StoredMeta ReadMeta(const float* meta) {
  StoredMeta m;
  std::memcpy(&m.key, meta, sizeof(m.key));
  std::memcpy(&m.last_seen_step, meta + 2, sizeof(m.last_seen_step));
  std::memcpy(&m.frequency, meta + 4, sizeof(m.frequency));
  return m;
}

inline void WriteMeta(const StoredMeta& m, float* meta) {
  std::memcpy(meta, &m.key, sizeof(m.key));
  std::memcpy(meta + 2, &m.last_seen_step, sizeof(m.last_seen_step));
  std::memcpy(meta + 4, &m.frequency, sizeof(m.frequency));
}

// Counters of the memory tier's rows of one shard, summed by stats().
struct MemoryCounters {
  int64_t admitted = 0;
  int64_t rejected = 0;
  int64_t dropped = 0;
  // Rows TTL removed from memory.
  int64_t evicted = 0;
};

// The keys written to or deleted from the tier behind while `readers`
// loaders read a shard's rows from it without the shard's lock, so that a
// loader coming back to insert what it read can tell which rows the tier no
// longer holds as read. `lost` says a key could not be added (out of
// memory): a reader then trusts none of its rows.
struct ChangeLog {
  int readers = 0;
  bool lost = false;
  std::vector<Key> keys;
};

// What the tier behind the memory tier (CachedTable's disk tier) keeps about
// this shard's keys. It lives in the shard so that the shard's mutex guards
// it together with the rows: a row moves between memory and the tier behind
// under that one lock. The memory tier itself never reads or writes it.
struct NextTierShard {
  // While loaders read this shard's rows from the tier behind without the
  // lock (Prefetch), the keys of every write or delete of them there (see
  // ChangeLog); null otherwise. A pointer, so that a shard, and with it the
  // least budget, stays as small as without.
  std::unique_ptr<ChangeLog> reading;
  int64_t memory_hits = 0;
  int64_t disk_hits = 0;
  int64_t prefetched = 0;
  int64_t spilled = 0;
  int64_t disk_reads = 0;
  int64_t disk_writes = 0;
  // Keys whose row is in the tier behind and not in memory (stale copies of
  // memory rows are not counted), counting rows that expired there but were
  // not yet looked at. Exact unless deleting a TTL-evicted row's copy
  // failed.
  int64_t disk_rows = 0;
  // Rows found expired (TTL) when read back from the tier behind.
  int64_t expired = 0;
};

// A key whose row a Prefetch asked for, spared by eviction until the table's
// step passes `until_step` or a Pull reads the key.
struct PinnedKey {
  Key key;
  int64_t until_step;
};

// Thread safety: fields are guarded by mu. Aligned so that neighbouring
// shards' mutexes do not share a cache line.
struct alignas(64) Shard {
  Shard(int64_t stride_floats, int64_t chunk_bytes, ChunkPool* pool,
        std::unique_ptr<CountMinSketch> sketch, const EvictionPolicy& policy)
      : rows(stride_floats, chunk_bytes, pool), sketch(std::move(sketch)), policy(policy) {}

  mutable Mutex mu;
  KeyIndex index GUARDED_BY(mu);
  RowArena rows GUARDED_BY(mu);
  // Pulls of keys without a row; null unless admission is kFrequency.
  std::unique_ptr<CountMinSketch> sketch PT_GUARDED_BY(mu);
  EvictionPolicy policy GUARDED_BY(mu);
  // Rows whose epoch float equals `epoch` are in `changed` already. Starts
  // at 1 so that 0 means "not marked" (new and loaded rows).
  uint32_t epoch GUARDED_BY(mu) = 1;
  // Bytes the table with a tier behind keeps in memory for this shard
  // outside it (CachedTable's filter of the keys on disk), counted in
  // ShardBytes and so in the budget. (In the padding after `epoch`: a
  // larger Shard would raise every table's least budget.)
  uint32_t next_tier_bytes GUARDED_BY(mu) = 0;
  // Keys changed / removed since the last TakeChanges, possibly repeated.
  // Outside memory_bytes() and the budget: they are the checkpoints'
  // bookkeeping, 8 bytes per key whichever tier holds its row (at a 10%
  // budget, counting them would leave no room for rows between two
  // checkpoints).
  std::vector<Key> changed GUARDED_BY(mu);
  std::vector<Key> removed GUARDED_BY(mu);
  MemoryCounters counters GUARDED_BY(mu);
  // Keys of pending Prefetches, sorted by key, one entry per key (see
  // PinnedKey). Outside the budget: at most the keys of the queued and
  // running Prefetches of the last few steps, 16 bytes each.
  std::vector<PinnedKey> pinned GUARDED_BY(mu);
  NextTierShard next GUARDED_BY(mu);
};

// Bytes a shard holds: the shard itself, its index, its arena, its sketch
// and what the tier behind keeps for it. The change lists and pins are
// outside (see above).
inline int64_t ShardBytes(const Shard& shard) REQUIRES(shard.mu) {
  return static_cast<int64_t>(sizeof(Shard)) + shard.index.bytes() + shard.rows.bytes() +
         (shard.sketch != nullptr ? shard.sketch->bytes() : 0) + shard.next_tier_bytes;
}

}  // namespace ember::embedding::internal
