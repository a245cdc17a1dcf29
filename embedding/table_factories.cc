// The factories of embedding/'s tables: NewMemoryTable and NewTieredTable,
// each an internal::CachedTable (embedding/internal/cached_table.h) with
// nothing or a given Tier behind its row cache; and the disk tier's row
// size. NewEmbeddingTable, which opens a RocksDB tier, is apart
// (rocksdb_table_factory.cc), so that a program of in-memory tables only
// (libember_serving.so) does not link RocksDB.

#include <memory>
#include <new>
#include <utility>

#include "core/status.h"
#include "embedding/embedding_table.h"
#include "embedding/internal/cached_table.h"
#include "embedding/internal/row_cache.h"
#include "embedding/internal/table_options.h"
#include "embedding/tiered_table.h"

namespace ember::embedding {
namespace internal {

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

}  // namespace internal

int64_t TierRowBytes(const EmbeddingTableOptions& options) {
  return internal::RowCache::RowFloats(options) * int64_t{sizeof(float)};
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

}  // namespace ember::embedding
