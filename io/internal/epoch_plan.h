#pragma once

#include <cstdint>
#include <vector>

#include "io/internal/stream_index.h"

namespace ember::io::internal {

// What decides which pieces a shard reads in an epoch, and in which order.
struct PlanOptions {
  uint64_t seed = 0;
  bool shuffle_files = false;
  bool shuffle_pieces = false;
  int num_shards = 1;
  int shard_index = 0;
};

// The pieces one shard reads in one epoch.
//
// The epoch's order of all pieces: the files in input order, or permuted by
// (seed, epoch) with shuffle_files; within a file its pieces in file order,
// or, with shuffle_pieces and unless the file is gzip (read front to back),
// permuted by (seed, epoch, file). Shard i of n takes the i-th of n
// contiguous runs of that order, [floor(iM/n), floor((i+1)M/n)) of the M
// pieces: every piece goes to exactly one shard, every shard gets M/n pieces
// give or take one, and a shard reads a gzip file from one place onwards
// rather than a piece here and there.
struct EpochPlan {
  int64_t epoch = 0;
  std::vector<int64_t> pieces;  // Indices into InputIndex::pieces, in reading order.
  int64_t lines = 0;            // Lines (rows) of those pieces.
  int64_t min_shard_lines = 0;  // The fewest lines of any shard in this epoch.
};

// A pure function of its arguments. REQUIRES: 0 <= shard_index < num_shards.
EpochPlan PlanEpoch(const InputIndex& index, const PlanOptions& options, int64_t epoch);

// Pieces each shard reads per epoch: the same in every epoch.
int64_t PiecesPerShard(int64_t pieces, int num_shards, int shard_index);

}  // namespace ember::io::internal
