#pragma once

// Resuming the checkpoint of a job of N ranks on M (elastic; see
// engine/rank_checkpoint.h for the layout): this rank's rows from every old
// rank's checkpoint, one old rank at a time through a scratch table (in
// memory, or a tiered one of the table's budget beside this rank's disk
// tier, so that a table larger than memory reshards too: twice its budget
// at the most), the dense state (the same on every old rank), and the data
// position moved to the new ranks: the same example of the epoch in batches
// of the new global size for data in memory, the old shards' positions for
// streamed data (io/elastic_stream_source.h).

#include <cstdint>
#include <string>

#include "core/status.h"
#include "embedding/embedding_table.h"
#include "engine/rank_checkpoint.h"
#include "engine/training_checkpoint.h"

namespace ember::engine {

struct ReshardOptions {
  int rank = 0;   // This rank, of
  int ranks = 1;  // the new number.
  int64_t batch_size = 0;  // Per rank.
  TrainingCheckpointOptions checkpoint;  // This rank's; dir is replaced by each old rank's.
  embedding::EmbeddingTableOptions table;  // This rank's table's (the scratch tables').
};

// Loads the checkpoint of `record` in `dir` into `table` (this rank's rows
// of it, by embedding::KeyOwner among options.ranks) and `dense`, and
// returns its step. NotFound naming an old rank's directory that is missing
// (every rank reads every old rank's: a file system that all ranks see);
// the restore's errors, naming the old rank's directory; InvalidArgument
// for data positions that do not fit one job.
Result<int64_t> ReshardRanksCheckpoint(const std::string& dir, const RanksRecord& record,
                                       const ReshardOptions& options,
                                       embedding::EmbeddingTable& table,
                                       const DenseState& dense);

}  // namespace ember::engine
