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

}  // namespace ember::embedding::internal
