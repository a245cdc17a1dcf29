// The factories of embedding/'s tables: NewMemoryTable, NewTieredTable and
// NewEmbeddingTable, each an internal::CachedTable (embedding/internal/
// cached_table.h) with nothing, a given Tier or a RocksDB tier behind its
// row cache; and the disk tier's row size and options.

#include <memory>
#include <new>
#include <utility>

#include "core/status.h"
#include "embedding/embedding_table.h"
#include "embedding/internal/cached_table.h"
#include "embedding/internal/row_cache.h"
#include "embedding/internal/table_options.h"
#include "embedding/rocksdb_tier.h"
#include "embedding/tiered_table.h"

namespace ember::embedding {
namespace internal {
namespace {

// The checks of a tiered table's options beyond ValidateTableOptions.
Status ValidateTieredOptions(const EmbeddingTableOptions& options) {
  const int64_t minimum = CachedTable::OverheadBytes(options.num_shards, /*with_disk=*/true) +
                          options.num_shards * RowCache::MinShardBytes(options);
  if (options.memory_budget_bytes < minimum) {
    return Status::InvalidArgument("memory_budget_bytes must be at least ", minimum,
                                   " (one row in each of ", options.num_shards,
                                   " shards) for this dim, optimizer and admission, got ",
                                   options.memory_budget_bytes);
  }
  if (options.disk_block_cache_bytes < 0) {
    return Status::InvalidArgument("disk_block_cache_bytes must be >= 0, got ",
                                   options.disk_block_cache_bytes);
  }
  return Status::OK();
}

}  // namespace
}  // namespace internal

int64_t TierRowBytes(const EmbeddingTableOptions& options) {
  return internal::RowCache::RowFloats(options) * int64_t{sizeof(float)};
}

RocksDbTierOptions DiskTierOptions(const EmbeddingTableOptions& options) {
  RocksDbTierOptions disk_options;
  disk_options.path = options.disk_path;
  disk_options.row_bytes = TierRowBytes(options);
  disk_options.block_cache_bytes = options.disk_block_cache_bytes;
  disk_options.write_buffer_bytes = options.disk_write_buffer_bytes;
  // One shard's disk rows in one range of the database.
  disk_options.key_shards = options.num_shards;
  return disk_options;
}

Result<std::unique_ptr<EmbeddingTable>> NewMemoryTable(const EmbeddingTableOptions& options) {
  EMBER_RETURN_IF_ERROR(internal::ValidateTableOptions(options));
  if (options.memory_budget_bytes != 0) {
    return Status::InvalidArgument("NewMemoryTable: memory_budget_bytes must be 0, got ",
                                   options.memory_budget_bytes,
                                   "; use NewEmbeddingTable for a table with a disk tier");
  }
  try {
    return std::unique_ptr<EmbeddingTable>(
        std::make_unique<internal::CachedTable>(options, /*disk=*/nullptr));
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("embedding table: out of memory creating ", options.num_shards,
                                     " shards");
  }
}

Result<std::unique_ptr<EmbeddingTable>> NewTieredTable(const EmbeddingTableOptions& options,
                                                       std::unique_ptr<Tier> disk) {
  EMBER_RETURN_IF_ERROR(internal::ValidateTableOptions(options));
  if (options.memory_budget_bytes == 0) {
    return Status::InvalidArgument("NewTieredTable: memory_budget_bytes must be > 0");
  }
  EMBER_RETURN_IF_ERROR(internal::ValidateTieredOptions(options));
  if (disk == nullptr) return Status::InvalidArgument("NewTieredTable: disk tier is null");
  const int64_t row_bytes = TierRowBytes(options);
  if (disk->row_bytes() != row_bytes) {
    return Status::InvalidArgument("NewTieredTable: disk tier rows have ", disk->row_bytes(),
                                   " bytes, the table's have ", row_bytes);
  }
  std::unique_ptr<internal::CachedTable> table;
  try {
    table = std::make_unique<internal::CachedTable>(options, std::move(disk));
    EMBER_RETURN_IF_ERROR(table->LoadDiskKeys());
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("embedding table: out of memory creating ", options.num_shards,
                                     " shards");
  }
  return std::unique_ptr<EmbeddingTable>(std::move(table));
}

Result<std::unique_ptr<EmbeddingTable>> NewEmbeddingTable(const EmbeddingTableOptions& options) {
  if (options.memory_budget_bytes == 0) return NewMemoryTable(options);
  EMBER_RETURN_IF_ERROR(internal::ValidateTableOptions(options));
  EMBER_RETURN_IF_ERROR(internal::ValidateTieredOptions(options));
  if (options.disk_path.empty()) {
    return Status::InvalidArgument(
        "disk_path is required when memory_budget_bytes > 0 (the disk tier's "
        "directory)");
  }
  const RocksDbTierOptions disk_options = DiskTierOptions(options);
  // A table starts empty: rows an earlier table left in disk_path are
  // dropped (the tier is working space; checkpoints are what persists).
  // Opening first checks that the directory holds a tier, not some other
  // database, before anything is deleted.
  EMBER_ASSIGN_OR_RETURN(auto disk, NewRocksDbTier(disk_options));
  disk.reset();
  EMBER_RETURN_IF_ERROR(DestroyRocksDbTier(disk_options.path));
  EMBER_ASSIGN_OR_RETURN(disk, NewRocksDbTier(disk_options));
  return NewTieredTable(options, std::move(disk));
}

}  // namespace ember::embedding
