#pragma once

#include <rocksdb/options.h>

#include "core/status.h"
#include "embedding/rocksdb_tier.h"

// How the disk tier's RocksDB database is tuned (embedding/rocksdb_tier.cc).

namespace ember::embedding::internal {

// The options of the column family of rows: block-based tables of 4 KiB
// blocks with partitioned index and Bloom filters in one LRU cache, no
// compression, leveled compaction after 16 L0 files.
rocksdb::ColumnFamilyOptions MakeRowOptions(const RocksDbTierOptions& options);
// The options of the column family that records the row size.
rocksdb::ColumnFamilyOptions MakeMetaOptions();
rocksdb::DBOptions MakeDbOptions(const RocksDbTierOptions& options);
// InvalidArgument naming the path and the option for options
// NewRocksDbTier refuses.
Status ValidateOptions(const RocksDbTierOptions& options);

}  // namespace ember::embedding::internal
