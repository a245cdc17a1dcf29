#pragma once

// The batches a job trains from examples held in memory: the one path from a
// Dataset to Trainer::Fit(BatchSource&), as from a stream.

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/train_options.h"
#include "io/batch_source.h"
#include "io/dataset.h"
#include "io/rank_shard_source.h"

namespace ember::engine {

// The training batches of `train` for a job of `options`: options.epochs
// epochs of options.batch_size examples per rank, shuffled every epoch by
// (seed, epoch) when options.shuffle. With ranks (options.ranks), every rank
// gives the whole `train` and trains its options.batch_size rows of each
// global batch of ranks x batch_size (io/rank_slice_source.h): the global
// batches are the same on every rank (the shuffle's seed is), so the job
// trains what one rank would with that batch. `train` is borrowed and must
// outlive the source. InvalidArgument when it has no examples.
Result<std::unique_ptr<io::BatchSource>> NewDatasetTrainingSource(const io::Dataset& train,
                                                          const TrainOptions& options);

// The same batches from this rank's share of the examples alone: `share`
// holds the examples at `indices` of the whole training data of `examples`
// examples (every rank's shares a partition of it), and the ranks swap
// examples over options.ranks.data at each epoch's start
// (io/rank_shard_source.h). InvalidArgument without ranks or their data
// communicator, and as RankShardBatchSource::Make.
Result<std::unique_ptr<io::BatchSource>> NewShardTrainingSource(io::Dataset share,
                                                                std::vector<int64_t> indices,
                                                                int64_t examples,
                                                                io::ExampleShape shape,
                                                                const TrainOptions& options);

}  // namespace ember::engine
