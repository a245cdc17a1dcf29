#pragma once

// A checkpoint's job record: what a job is, as options, so that its
// checkpoint can be exported (or inspected) without its flags or its data.
// A job's first run writes it beside its checkpoints,
//
//   <checkpoint_dir>/job.json   {"version", "model", "table",
//                                "dense_optimizer", "seed", "batch_size",
//                                "input", "columnar_input", "shape"}
//
// each part the to_json of its layer's options struct (engine/model_options.h,
// embedding/embedding_table.h, ops/dense_optimizer.h, io/format_spec.h).
// ExportCheckpoint reads it back strictly: a missing or unknown field is
// DataLoss naming the file and the field.

#include <cstdint>
#include <string>

#include "core/json_fwd.h"
#include "core/status.h"
#include "embedding/embedding_table.h"
#include "engine/model_options.h"
#include "engine/train_options.h"
#include "io/format_spec.h"
#include "ops/dense_optimizer.h"
#include "scheduler/layout.h"

namespace ember::engine {

inline constexpr int kJobRecordVersion = 1;

// Examples' shape: what the model's inputs and outputs are made for.
struct DataShape {
  int num_dense = 0;
  int num_slots = 0;
  int num_labels = 1;
};

struct JobRecord {
  // What the trainer was made with (as Trainer::Create filled them in).
  ModelOptions model;
  embedding::EmbeddingTableOptions table;
  ops::DenseOptimizerOptions dense_optimizer;
  uint64_t seed = 1;
  // Examples per step of one rank (a resharded restore needs it).
  int batch_size = 256;
  // How training read its input: a text format, or Ember's columnar files.
  io::FormatSpec input;
  bool columnar_input = false;
  DataShape shape;
  // How the job spread over its ranks (scheduler/layout.h). Records written
  // before layouts hold none and read as one rank's (data:1); their ranks
  // are in the checkpoint's RANKS record (engine/rank_checkpoint.h).
  scheduler::Layout layout;
};

// The record as JSON (the layout above); from_json is strict.
void to_json(Json& j, const JobRecord& record);
void from_json(const Json& j, JobRecord& record);
void to_json(Json& j, const DataShape& shape);
void from_json(const Json& j, DataShape& shape);

// The record of a trainer made with `options` (Trainer::options()) that
// reads `input`.
JobRecord JobRecordOf(const TrainOptions& options, const io::FormatSpec& input,
                      bool columnar_input);

// "<checkpoint_dir>/job.json".
std::string JobRecordPath(const std::string& checkpoint_dir);
// Writes `record` atomically. IOError naming the file on failure.
Status WriteJobRecord(const std::string& checkpoint_dir, const JobRecord& record);
// NotFound when the directory has no record (a checkpoint of an Ember
// before it); DataLoss naming the file and the field when it is malformed.
Result<JobRecord> ReadJobRecord(const std::string& checkpoint_dir);

// The options a trainer restores the recorded job's checkpoint with, into a
// table in memory (what training placed on disk included), quietly.
TrainOptions RestoreOptionsOf(const JobRecord& record, const std::string& checkpoint_dir);

struct ExportedCheckpoint {
  std::string model;       // The model's name.
  int64_t step = 0;        // The checkpoint's.
  int64_t rows = 0;        // Embedding rows in the bundle (base + delta's for a delta).
  int64_t changed_rows = -1;  // A delta's rows changed and removed; -1 for a full bundle.
  int64_t removed_rows = -1;
};

// Writes the serving bundle (engine/bundle.h) of the newest checkpoint in
// `checkpoint_dir` to `bundle`, configured by `record` (a record read, or
// one rebuilt for a checkpoint older than records); with `delta_base`, the
// delta bundle against the bundle there (engine/bundle_delta.h). Errors:
// Trainer::Restore's (with the directory), WriteBundle's or
// WriteDeltaBundle's (with the bundle), ReadBundleRowPrints' (with the
// base); FailedPrecondition while a job trains in the directory (its lock).
Result<ExportedCheckpoint> ExportRecordedJob(const JobRecord& record,
                                             const std::string& checkpoint_dir,
                                             const std::string& bundle,
                                             const std::string& delta_base = "");

// Writes the serving bundle (engine/bundle.h) of the newest checkpoint in
// `checkpoint_dir` to `bundle`, configured by the directory's job record:
// neither the flags nor the data of the job are needed. The errors of
// ReadJobRecord, of Trainer::Restore (with context) and of WriteBundle;
// FailedPrecondition while a job trains in the directory (its lock).
Result<ExportedCheckpoint> ExportCheckpoint(const std::string& checkpoint_dir,
                                            const std::string& bundle,
                                            const std::string& delta_base = "");

}  // namespace ember::engine
