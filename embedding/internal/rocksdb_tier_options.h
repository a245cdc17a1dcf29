#pragma once

#include <rocksdb/comparator.h>
#include <rocksdb/options.h>

#include <cstdint>
#include <cstring>

#include "core/status.h"
#include "embedding/rocksdb_tier.h"

// How the disk tier's RocksDB database is tuned (embedding/rocksdb_tier.cc).

namespace ember::embedding::internal {

// A key as the tier stores it: 8 big-endian bytes, so that RocksDB's
// bytewise order is the numeric order of keys.
inline constexpr int kTierKeyBytes = 8;
inline void EncodeTierKey(uint64_t key, char* out) {
  const uint64_t big_endian = __builtin_bswap64(key);
  std::memcpy(out, &big_endian, kTierKeyBytes);
}
inline uint64_t DecodeTierKey(const char* in) {
  uint64_t big_endian;
  std::memcpy(&big_endian, in, kTierKeyBytes);
  return __builtin_bswap64(big_endian);
}

// The order of the tier's keys: RocksDB's bytewise order, computed on two
// encoded keys as the order of their decoded integers instead of byte by
// byte (memcmp). Every memtable insert and lookup, index seek and
// compaction merge compares keys, and they were the largest CPU item of a
// tier-bound table (issue 38). Measured with embedding_bench's disk_tier
// case (dim 16, Zipf, 2 threads, 4 alternating pairs): the tier reads and
// writes back 9-15% more rows/s (0.30-0.34M against 0.26-0.31M).
// It orders any two byte strings exactly as BytewiseComparator() does (keys
// of other lengths are compared bytewise), so a database made with either
// may be read with the other; RocksDB records the comparator's name,
// though, and refuses to open a database under another one (NewRocksDbTier
// opens one made with BytewiseComparator() with that). Shortening index
// separators is left out: keys are 8 bytes already.
const rocksdb::Comparator* FixedKeyComparator();

// The options of the column family of rows: block-based tables of 4 KiB
// blocks with partitioned index and Bloom filters (none on the last level)
// in one LRU cache, no compression, leveled compaction after 16 L0 files.
// `comparator` is FixedKeyComparator() unless the database was made with
// another (order-equivalent) one.
rocksdb::ColumnFamilyOptions MakeRowOptions(const RocksDbTierOptions& options,
                                            const rocksdb::Comparator* comparator);
// The options of the column family that records the row size.
rocksdb::ColumnFamilyOptions MakeMetaOptions();
rocksdb::DBOptions MakeDbOptions(const RocksDbTierOptions& options);
// InvalidArgument naming the path and the option for options
// NewRocksDbTier refuses.
Status ValidateOptions(const RocksDbTierOptions& options);

}  // namespace ember::embedding::internal
