#pragma once

// The checks of EmbeddingTableOptions shared by the table factories
// (NewMemoryTable, NewTieredTable, NewEmbeddingTable).

#include "core/status.h"
#include "embedding/embedding_table.h"

namespace ember::embedding::internal {

// InvalidArgument naming the field unless dim, num_shards, init_scale,
// ttl_steps, prefetch_threads, memory_budget_bytes (>= 0), the admission
// options and the optimizer options are in their documented ranges.
Status ValidateTableOptions(const EmbeddingTableOptions& options);

// The checks of a tiered table's options beyond ValidateTableOptions: a
// memory budget of at least one row in every shard, a block cache >= 0
// (embedding/table_factories.cc).
Status ValidateTieredOptions(const EmbeddingTableOptions& options);

}  // namespace ember::embedding::internal
