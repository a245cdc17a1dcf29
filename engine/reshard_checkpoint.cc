#include "engine/reshard_checkpoint.h"

#include <glog/logging.h>

#include <string>
#include <vector>

#include "core/file.h"
#include "embedding/rocksdb_tier.h"
#include "embedding/sharded_table.h"
#include "embedding/stored_rows.h"
#include "io/batch_source.h"
#include "io/elastic_stream_source.h"

namespace ember::engine {

Result<int64_t> ReshardRanksCheckpoint(const std::string& dir, const RanksRecord& record,
                                       const ReshardOptions& options,
                                       embedding::EmbeddingTable& table,
                                       const DenseState& dense) {
  const int rank = options.rank, ranks = options.ranks;
  // Another number of ranks: this rank's rows from every old rank's
  // checkpoint, one old rank at a time (its rows in a scratch table).
  LOG(INFO) << "resharding the checkpoint of step " << record.step << " from " << record.ranks
            << " ranks to " << ranks;
  // An old rank's rows pass through a scratch table: in memory, or with a
  // disk tier, a tiered table of the same budget in a directory beside this
  // rank's tier, so that a table larger than memory reshards too.
  embedding::EmbeddingTableOptions scratch_options = options.table;
  const bool tiered = scratch_options.memory_budget_bytes > 0;
  scratch_options.disk_path = tiered ? options.table.disk_path + "/resharding" : "";
  scratch_options.track_changes = true;
  embedding::StoredRows& mine = table.stored_rows();
  int64_t kept = 0;
  std::vector<std::string> old_positions;
  for (int old = 0; old < record.ranks; ++old) {
    TrainingCheckpointOptions old_options = options.checkpoint;
    old_options.dir = RecordedRankDir(dir, record, old);
    if (!FileExists(old_options.dir)) {
      return Status::NotFound(
          "resharding the checkpoint of step ", record.step, " from ", record.ranks,
          " ranks: old rank ", old, "'s directory ", old_options.dir, " is missing (every rank "
          "reads every old rank's directory: put the checkpoint on a file system that every "
          "rank sees, or copy the old ranks' directories there)");
    }
    EMBER_ASSIGN_OR_RETURN(auto scratch, embedding::NewEmbeddingTable(scratch_options));
    EMBER_ASSIGN_OR_RETURN(auto reader, TrainingCheckpointer::Create(*scratch, old_options));
    // Every rank's dense state is the same: each restore leaves it so. The
    // data positions differ when the data was streamed (a shard each).
    EMBER_RETURN_IF_ERROR(reader->RestoreAt(record.step, dense).status().WithContext(
        "resharding from " + old_options.dir));
    old_positions.push_back(*dense.data_position);
    // This rank's rows, written a bounded batch at a time.
    constexpr size_t kRowsPerWrite = size_t{1} << 16;
    std::vector<embedding::Key> keys;
    std::vector<float> rows;
    const int64_t floats = scratch->stored_rows().row_floats();
    const auto write = [&]() -> Status {
      EMBER_RETURN_IF_ERROR(mine.WriteRows(keys, rows.data()));
      kept += static_cast<int64_t>(keys.size());
      keys.clear();
      rows.clear();
      return Status::OK();
    };
    EMBER_RETURN_IF_ERROR(scratch->stored_rows().Scan([&](embedding::Key key, const float* row) {
      if (embedding::KeyOwner(key, ranks) != rank) return Status::OK();
      keys.push_back(key);
      rows.insert(rows.end(), row, row + floats);
      return keys.size() < kRowsPerWrite ? Status::OK() : write();
    }));
    EMBER_RETURN_IF_ERROR(write());
    reader.reset();
    scratch.reset();
    if (tiered) EMBER_RETURN_IF_ERROR(embedding::DestroyRocksDbTier(scratch_options.disk_path));
  }
  LOG(INFO) << "rank " << rank << " of " << ranks << " holds " << kept << " rows after resharding";
  // The data in memory: the same place in batches of the new global size.
  // Streamed data: the old shards' positions, whose rest of the epoch the
  // new ranks read together (io/elastic_stream_source.h).
  if (!dense.data_position->empty()) {
    Result<std::string> moved = io::RebatchDatasetPosition(
        *dense.data_position, options.batch_size * ranks);
    if (!moved.ok()) moved = io::ReshardedStreamPosition(old_positions);
    if (!moved.ok()) {
      return moved.status().WithContext("resuming the checkpoint of " +
                                        std::to_string(record.ranks) + " ranks on " +
                                        std::to_string(ranks) + ": its data positions");
    }
    *dense.data_position = *moved;
  }
  return record.step;
}

}  // namespace ember::engine
