// NewEmbeddingTable: a table in memory, or in front of a RocksDB tier in
// options.disk_path (embedding/embedding_table.h), and the tier's options.
// Apart from the other factories (table_factories.cc) so that only programs
// that open a disk tier link RocksDB.

#include <memory>
#include <utility>

#include "core/status.h"
#include "embedding/embedding_table.h"
#include "embedding/internal/table_options.h"
#include "embedding/rocksdb_tier.h"
#include "embedding/tiered_table.h"

namespace ember::embedding {

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
