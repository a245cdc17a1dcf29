#pragma once

// `ember train`'s data (tools/train_command.cc): the training and test data
// its flags name (files, read whole or streamed, or generated with --rows),
// checked for the same shape, and what a run reports about each source.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/json_fwd.h"
#include "core/status.h"
#include "engine/train_options.h"
#include "io/dataset.h"
#include "io/elastic_stream_source.h"
#include "io/stream_reader.h"

namespace ember::tools {

// Data read from one source (the training or the test files).
struct Source {
  std::string format;     // "criteo", ..., "columnar"
  int slot_bits = 0;
  io::BadLineReport bad_lines;
  // Streamed sources: the reader's counts, filled in when it is done.
  std::optional<io::StreamStats> stream;
};

// The training and test data: in memory, or in stream readers.
struct Data {
  io::Dataset train;
  // With several ranks and --shard_in_memory_data: `train` holds only this
  // rank's share of the training examples (engine::NewShardTrainingSource),
  // train_indices their indices in the whole training data of
  // train_examples examples.
  bool train_is_share = false;
  std::vector<int64_t> train_indices;
  int64_t train_examples = 0;
  io::Dataset test;
  std::unique_ptr<io::StreamReader> train_stream;
  // What training reads of a stream: train_stream, or, resuming a job of
  // another number of ranks, the rest of its shards' epoch first
  // (io/elastic_stream_source.h).
  std::unique_ptr<io::ElasticStreamSource> train_elastic;
  std::unique_ptr<io::StreamReader> test_stream;
  // Streamed test data: its files and reader options, to read it again
  // (each evaluation during training reads it afresh).
  std::vector<std::string> test_paths;
  io::StreamReaderOptions test_options;
  Source train_source;
  std::optional<Source> test_source;  // Unset when the test data is held out.
  // Bayes AUC of generated data, per task.
  std::vector<double> ceiling_auc;
  int num_labels = 1;
  int num_dense = 0;
  int num_slots = 0;
};

// Which part of the training files this process reads: --num_shards and
// --shard_index, or under mpirun the rank's.
struct Shard {
  int count = 1;
  int index = 0;
};

// With `several_ranks` (mpirun: --num_shards/--shard_index are the ranks'),
// each rank reads data in memory whole but keeps only its share (every
// ranks-th example; --shard_in_memory_data, over batching.ranks.data), every
// rank then holding the whole held-out part, or, without that, keeps it all
// and trains its rows of each global batch; streamed data is sharded.
// Streamed data comes in the batches and epochs of `batching` (its
// batch_size, epochs, seed and shuffle: the trainer's own). `threads` read
// and parse; generated data goes under `temp_dir`.
Result<Data> LoadData(TempDir* temp_dir, const engine::TrainOptions& batching, int threads,
                      Shard shard, bool several_ranks);

// "criteo, 3 of 1000 lines bad (bad label: 3)", or for columnar input
// "columnar (lines were checked when it was written)".
std::string SourceSummary(const Source& source);
// The same, for --metrics_out.
Json SourceJson(const Source& source);

}  // namespace ember::tools
