#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "embedding/tier.h"

namespace ember::embedding {

struct RocksDbTierOptions {
  // Directory of the database. Required.
  std::string path;
  // Bytes per row. Required; must match the row size the database was created
  // with.
  int64_t row_bytes = 0;
  // LRU cache of data, index and filter blocks: the tier's main use of memory
  // besides the write buffers. Default: 256 MiB.
  int64_t block_cache_bytes = int64_t{256} << 20;
  // Rows buffered in memory (per memtable, at most two) before they are
  // written to a file. Default: 64 MiB.
  int64_t write_buffer_bytes = int64_t{64} << 20;
  // Puts and Deletes gather in memory up to this many bytes of rows and are
  // then written as one WriteBatch sorted by key: the memtable's skip list
  // inserts a sorted run of keys next to each other instead of searching
  // from the top for each (measured: a run of 15k rows into a 16 MiB
  // memtable takes half the CPU per row of runs of 128). Gets read the
  // gathered rows; Flush, Scan and closing write them. -1 (default): an
  // eighth of write_buffer_bytes; 0: each Put and Delete is written at once.
  // Up to twice this is held (one gathering while one is written).
  int64_t gather_bytes = -1;
  // The order of the rows in the database: by shard of a table with this
  // many shards (Mix64(key) % key_shards, as the memory tier shards keys),
  // then by Mix64(key), so that the keys of one shard lie in one contiguous
  // range and a batched Get of them reads only that range's index and
  // filter blocks (in embedding_bench at a 10% budget, a table of 64 shards
  // then pulled and pushed 14-29% more keys/s than with keys in numeric
  // order, whose every shard's Get reads blocks across the whole database). 0: numeric key order, the
  // layout of tiers made before this option. Recorded when the database is
  // made: a reopened tier keeps its order whatever this says (one that holds
  // rows and records none is in numeric order). Default: 1 (by Mix64(key)).
  int key_shards = 1;
  // Threads for flushes and compactions. Default: 4.
  int max_background_jobs = 4;
  // Create the database, and the directories of `path`, if `path` holds none.
  // Default: true.
  bool create_if_missing = true;
  // Fail with IOError if `path` already holds a database. Default: false.
  bool error_if_exists = false;
  // Log each write before applying it, so that writes since the last Flush()
  // survive a crash. Default: false. The disk tier is rebuilt from the last
  // checkpoint after a crash (which calls Flush()), so the log would only save
  // rows that training then discards; without it a Put costs a memtable insert.
  bool use_write_ahead_log = false;
};

// Opens (or creates) a disk tier backed by RocksDB at options.path. Rows are
// read with batched MultiGet and written in sorted WriteBatches (see
// gather_bytes); embedding/rocksdb_tier_options.cc says how the database is
// tuned for point lookups of fixed-size rows.
// The database records its row size: opening it with another row_bytes fails
// with InvalidArgument, as does a directory holding a database that is not a
// tier, or invalid options (row_bytes, block_cache_bytes < 0,
// write_buffer_bytes < 1 MiB, gather_bytes < -1, max_background_jobs < 1,
// key_shards < 0).
// Returns IOError naming the path and the operation when RocksDB fails (a
// missing database without create_if_missing, an unwritable path, a lock held
// by another process), and DataLoss when RocksDB reports corruption.
// Every RocksDB failure of the tier's methods becomes IOError (DataLoss for
// corruption or a stored row of the wrong size), naming the path and the
// operation. Destroying the tier closes the database (flushing buffered rows on
// a best-effort basis; errors are logged); only Flush() promises durability.
// The directory stays on disk: removing it is the caller's business.
Result<std::unique_ptr<Tier>> NewRocksDbTier(const RocksDbTierOptions& options);

// The rank under which a RocksDB tier made with this key_shards (see
// RocksDbTierOptions) stores `key`: its rows lie in increasing rank. For
// tools that make their calls in the tier's order (embedding_bench).
uint64_t RocksDbTierRank(Key key, int key_shards);

// Deletes the database at `path` (its files and, if then empty, the
// directory). OK if there is no database there. The tier must be closed.
// Killed halfway, it leaves a marker that makes the next NewRocksDbTier of
// `path` (with create_if_missing) remove what is left and create the tier
// afresh. Returns IOError naming the path on failure.
Status DestroyRocksDbTier(const std::string& path);

}  // namespace ember::embedding
