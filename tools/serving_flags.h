#pragma once

// The flags of the serving commands (`ember export`, `ember eval`, `ember
// predict`) and what they share: opening a bundle and reading input the way
// the bundle's training read it. Defined in serving_flags.cc.

#include <gflags/gflags_declare.h>

#include <memory>
#include <string>
#include <vector>

#include "core/json_fwd.h"
#include "core/status.h"
#include "engine/bundle.h"
#include "engine/metrics.h"
#include "engine/scorer.h"
#include "engine/train_options.h"
#include "io/stream_reader.h"

DECLARE_string(bundle);
DECLARE_string(delta_base);
DECLARE_string(apply_deltas);
DECLARE_string(data);
DECLARE_bool(labelled);
DECLARE_int32(score_batch_size);
DECLARE_string(predictions_out);

namespace ember::tools {

// How `ember train` read the input it trains on (the format flags, or
// columnar files, `*columnar`), for the bundle's manifest, from the format
// flags and the files of `train_paths` (empty: generated data, criteo when
// it has Criteo's shape, else columnar).
Result<io::FormatSpec> TrainingInputSpec(const std::vector<std::string>& train_paths,
                                         bool* columnar);

// The same from the format flags alone, for a job whose input is known to
// be columnar or not without reading it (tools/job_flags.h: JobInput);
// `generated_data`: the job generated its data (no --train_data).
Result<io::FormatSpec> RecordedTrainingInputSpec(bool generated_data);

// Opens the files of --data (comma-separated, globs allowed) for scoring
// with the bundle of `config`, in order and in --score_batch_size batches:
// columnar files as they are; text in the bundle's recorded format, or in
// the format the format flags give when any of them is set (their
// --slot_bits must be the bundle's), without label columns when --labelled
// is false. `fail_on_bad_line` makes a bad line an error (predict: one score
// per input line). Errors name the flag.
Result<std::unique_ptr<io::StreamReader>> OpenScoringInput(const engine::BundleConfig& config,
                                                           bool fail_on_bad_line);

// --embedding_memory_budget in bytes (0: unset, everything in memory), for
// training and scoring alike. InvalidArgument for a size it cannot read or 0.
Result<int64_t> EmbeddingMemoryBudgetFromFlags();

// How `ember eval` and `ember predict` open a bundle: --threads, and with
// --embedding_memory_budget the rows beyond it in a RocksDB tier in
// --embedding_dir (required then): a bundle larger than memory, such as a
// job of ranks' shards. InvalidArgument naming the flag.
Result<engine::ScorerOptions> ScorerOptionsFromFlags();

// The scorer of --bundle (ScorerOptionsFromFlags), with --apply_deltas
// applied in order. Errors with the flag as context.
Result<std::unique_ptr<engine::Scorer>> OpenScorerFromFlags();

// The "test" object of the metrics JSON of `ember train` and `ember eval`
// (auc, logloss, calibration, examples; task_auc and task_logloss for a
// multi-task model), and the lines both print for it.
Json TestMetricsJson(const engine::Metrics& test);
void PrintTestMetrics(const engine::Metrics& test);

// The training options `ember train` takes from its flags (train_command.cc).
Result<engine::TrainOptions> TrainOptionsFromFlags();

}  // namespace ember::tools
