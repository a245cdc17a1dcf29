#pragma once

// Checkpoints of a training job: the dense model (weights and optimizer
// state), the embedding table and the training position, all of one step,
// so that a job stopped at any point (a signal, a crash, a preempted
// machine) resumes to exactly what it would have computed uninterrupted.
//
// Layout of a checkpoint directory `dir`:
//
//   dir/embedding/         the table's snapshots (embedding/checkpoint.h)
//   dir/dense-<step>.bin   the dense state after <step> training steps
//
// <step> is written with 20 digits. dense-<step>.bin, all little-endian:
//
//   "EMBERDNS" (8 bytes), version (u32, 3; 1 and 2 are read too), 0 (u32)
//   step (i64): training steps done (the batches of the job consumed)
//   optimizer_steps (i64): dense optimizer updates done (Adam's t)
//   descriptor length (u32), descriptor (bytes): the model and optimizer the
//       state belongs to ("dlrm adam 512x13 512 ..."), compared on restore
//   parameters (u32), then for each: the value, Adam's first moment and the
//   second moment (Adam/Adagrad), each as element count (i64) and f32s
//   (count 0 for state the optimizer does not keep)
//   admission state length (u64) and bytes: the table's
//   SaveAdmissionState (frequency admission's counts of keys without a
//   row), taken with the rows
//   data position length (u64) and bytes (version 2): where the training
//   data's BatchSource was after the batch of <step> (its ResumePosition),
//   empty when the source cannot say
//   hash (u64): XXH64 of every byte before it (core/checksum.h; versions 1
//       and 2: Fnv1a64Words)
//
// A save writes dense-<step>.bin atomically (temporary file, fsync, rename),
// then the embedding snapshot of <step>; the snapshot's rename commits the
// checkpoint. A restore takes the step S of the newest embedding snapshot
// chain and reads dense-S.bin, so a crash between the two writes leaves a
// dense file nothing refers to (ignored, and removed by the next save) and
// the previous checkpoint restorable. After a save, dense files of steps no
// embedding snapshot has any more are removed, and so are the temporary
// files of dense writes that a crash interrupted.
//
// Full and delta embedding snapshots: the first save of a checkpointer and
// every full_every-th one after it write every row; the others only the rows
// changed since the previous save.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "embedding/checkpoint.h"
#include "embedding/embedding_table.h"
#include "engine/model.h"

namespace ember::engine {

// The dense half of a training job's state, borrowed from the trainer.
struct DenseState {
  // What the state belongs to; a restore refuses a file whose descriptor
  // differs (another model, other shapes, another optimizer).
  std::string descriptor;
  std::vector<Parameter*> parameters;
  int64_t* optimizer_steps = nullptr;
  // Saved when set; set by a restore (empty for a checkpoint without one).
  std::string* data_position = nullptr;
};

// "dlrm adam 512x13 512 ...": the model name, the optimizer and every
// parameter's shape, in order.
std::string DenseStateDescriptor(const std::string& model_name, const std::string& optimizer,
                                 const std::vector<Parameter*>& parameters);

struct TrainingCheckpointOptions {
  // Where checkpoints go; empty: no checkpoints.
  std::string dir;
  // Training (engine/trainer.h) writes one every every_steps steps (0: none
  // on the way) and when it ends, finished or stopped.
  int64_t every_steps = 0;
  // An embedding snapshot with every row on the first save and every
  // full_every-th save after it; deltas otherwise. >= 1.
  int full_every = 10;
  // Full embedding snapshots kept (older checkpoints are removed); >= 1.
  int keep_full_snapshots = 2;
  // Name of the sparse optimizer, checked on restore (the trainer sets it).
  std::string sparse_optimizer;
  // Test seam: called after the dense file is committed and before the
  // embedding snapshot is written; an error stops the save there, as a
  // crash between the two writes would.
  std::function<Status()> after_dense_write;
};

// Saves and restores one job's checkpoints in one directory.
// Thread safety: none. The table must have been created with
// track_changes, outlive the checkpointer, and be quiescent (no Pull, Push
// or Prefetch) during Save and Restore; the parameters likewise.
class TrainingCheckpointer {
 public:
  // Creates `dir` (and dir/embedding) if missing. InvalidArgument for bad
  // options, IOError if the directories cannot be made.
  static Result<std::unique_ptr<TrainingCheckpointer>> Create(
      embedding::EmbeddingTable& table, TrainingCheckpointOptions options);

  // Writes the checkpoint of `step` (> the step of every checkpoint in dir).
  // On error the previous checkpoint stays restorable.
  Status Save(int64_t step, const DenseState& dense);

  // The step of the newest checkpoint in dir, or -1 if there is none. By the
  // snapshots' names: reads nothing in them.
  Result<int64_t> NewestStep() const;

  // Loads the newest undamaged checkpoint into the table and `dense` and
  // returns its step. A checkpoint is damaged (DataLoss) when its dense file
  // is missing, short, malformed or fails its hash, or its embedding
  // snapshots are (see embedding/checkpoint.h); then the one before it is
  // tried, and so on, with a warning naming what was skipped, and the
  // snapshots newer than the one restored are set aside as damaged-* so
  // that saves go on from it. NotFound if dir holds none; the newest one's
  // DataLoss if none is undamaged; InvalidArgument if the checkpoint belongs
  // to another model or optimizer. The dense state is only changed once the
  // whole file has been checked; on error the table's contents are
  // unspecified (restore again or start afresh).
  Result<int64_t> Restore(const DenseState& dense);
  // Loads the checkpoint of exactly `step` (the one every rank of a job has:
  // engine/rank_checkpoint.h), with no fallback: NotFound if dir has none of
  // that step, DataLoss if it is damaged. Newer snapshots (a save that not
  // every rank finished) are set aside as damaged-* so that saves go on
  // from `step`.
  Result<int64_t> RestoreAt(int64_t step, const DenseState& dense);

  // Sets aside (as damaged-*) the snapshots of steps after `step` (-1: all):
  // in a job of ranks, the saves of this rank that the job never committed
  // (engine/rank_checkpoint.h), which a fresh start or a resume from an
  // older commit would otherwise write again. OK when there are none.
  Status SetAsideAfter(int64_t step);

  const std::string& dir() const { return options_.dir; }

 private:
  TrainingCheckpointer(embedding::EmbeddingTable& table, TrainingCheckpointOptions options);
  std::string DensePath(int64_t step) const;
  // Restore from the checkpoint of `step` (its dense file and the embedding
  // snapshots up to it).
  Result<int64_t> RestoreStep(int64_t step, const DenseState& dense);
  // Removes dense files whose step no embedding snapshot has.
  Status RemoveUnreferencedDenseFiles();

  TrainingCheckpointOptions options_;
  embedding::EmbeddingTable& table_;
  embedding::Checkpointer embedding_;
  int saves_ = 0;
};

}  // namespace ember::engine
