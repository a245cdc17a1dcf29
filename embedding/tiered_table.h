#pragma once

#include <memory>

#include "core/status.h"
#include "embedding/embedding_table.h"
#include "embedding/rocksdb_tier.h"
#include "embedding/tier.h"

namespace ember::embedding {

// A table whose memory tier holds at most options.memory_budget_bytes, in
// front of `disk` (which the table owns); NewEmbeddingTable calls it with a
// RocksDB tier at options.disk_path. Tests pass an in-memory or a faulty
// tier. `disk` must hold rows as memory holds them (the row's words with
// float or bfloat16 weights, see WeightStorage), 4 bytes a word; rows it
// holds already (a tier reopened) are the table's rows, as if written back
// by it. Fails with InvalidArgument as NewEmbeddingTable does (disk_path is
// not used), if disk is null, or if its row_bytes() does not match, and with
// the errors of disk->Scan, which reads the keys it holds.
//
// Design: the table is a row cache (embedding/internal/row_cache.h, the
// memory tier, here with a budget and an eviction policy) that wraps `disk`:
// the same table as NewMemoryTable's, whose cache has nothing behind it
// (embedding/internal/cached_table.h and its .cc files have the details).
// The cache holds rows and picks the rows to evict; the table reads what the
// cache lacks from `disk` and writes its victims there, shard by shard under
// the cache's shard lock.
// * Budget: each of the num_shards shards may hold
//   (memory_budget_bytes - table overhead) / num_shards bytes, counting its
//   row arena (weights, optimizer state, RowMeta, change epoch, LRU links),
//   its index and its share of the admission sketch. Not counted: the change
//   lists TakeChanges empties (8 bytes per key changed since the last call,
//   in either tier), per-batch I/O buffers, and the disk tier's own block
//   cache and write buffers (disk_block_cache_bytes, RocksDB memtables). After
//   every Pull, Push or Prefetch a shard over budget writes its coldest rows
//   to disk (in Puts of at most 512 rows, so that the I/O buffers each shard
//   keeps stay small) and drops them, so memory_bytes()
//   <= memory_budget_bytes between calls. During a call a shard holds every
//   row of the call's keys, even beyond its budget.
// * Tiers are disjoint: a row is in memory or on disk. Keys not in memory are
//   read with batched Gets (512 keys each) before rows are created, so
//   a row on disk is never created afresh; a loaded row's disk copy stays,
//   stale and hidden, until a spill overwrites it or the row is erased.
//   Values and RowMeta are identical to those of a table without a disk tier
//   under any budget and policy.
// * Disk keys: each shard keeps a Bloom filter of the keys the disk may hold
//   (embedding/internal/key_filter.h: 2 to 3.3 bytes per key, ~1% false
//   positives), filled from disk->Scan when the table is made and by every
//   write to disk, and counted in the shard's bytes. Only keys it lets
//   through are looked up on disk, so a key seen for the first time costs no
//   disk work (but for false positives, which find nothing and change no
//   result). A filter may take a quarter of its shard's budget; one that
//   would outgrow that saturates and lets every key through.
// * TTL: EvictExpired removes memory rows as NewMemoryTable's does and
//   remembers its step; a disk row that had expired by then is dropped when
//   it is next read (Pull, Push, Prefetch), counted in evicted_rows and
//   reported by TakeChanges then, and is invisible to Lookup, row_meta, Scan
//   and ReadRows from the start. Until read it stays in the disk tier's
//   files and in stats().disk_rows.
// * Prefetch hands keys to options.prefetch_threads background loaders, each
//   request to all of them (a queue of at most 4 requests each; Prefetch
//   blocks while one is full), which take its shards one at a time, so
//   that none idles while another has shards left (with shards owned by
//   loader, one loader idled ~16% of a step in embedding_bench). A loader
//   reads a shard's disk rows without holding the shard's lock, 512 at a time,
//   then inserts, under it, the rows that memory still lacks, except those
//   whose key the shard wrote to or deleted from disk meanwhile (the shard
//   notes such keys while a loader reads) and those pulled after the
//   Prefetch (their Pull has come and gone). Once a Pull of the same keys
//   has begun (a set fingerprint of its keys matches the request's), the
//   loaders read no more of the request: they are behind, and the Pull
//   reads the rows. Values never change. The first error is returned by the
//   next Pull or Push.
// * Eviction passes over rows pulled at the current step (their Push is
//   coming) and rows of pending Prefetches (pinned until a Pull reads them or
//   the step passes the Prefetch's step + 5), as long as other rows are left:
//   the budget always holds.
Result<std::unique_ptr<EmbeddingTable>> NewTieredTable(const EmbeddingTableOptions& options,
                                                       std::unique_ptr<Tier> disk);

// Bytes of a row in the disk tier of a table with `options`: its weights in
// options.weight_storage, its optimizer state and RowMeta (for float weights,
// StoredRows::row_floats() * 4).
int64_t TierRowBytes(const EmbeddingTableOptions& options);

// The RocksDB tier NewEmbeddingTable puts behind a table with `options`: at
// options.disk_path, with rows of TierRowBytes(options) and the table's
// block cache and write buffer sizes.
RocksDbTierOptions DiskTierOptions(const EmbeddingTableOptions& options);

}  // namespace ember::embedding
