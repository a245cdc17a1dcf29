#pragma once

// One training step of a CTR model, stage by stage (scheduler/stage.h):
//
//   read    a Batch from the data (the loops in pipeline/training_loop.h)
//   unique  its distinct keys, and the step's input tensors   (Prepare)
//   pull    their rows from the embedding table                (Pull)
//   dense   pooling, the dense model's forward, the loss, its
//           backward and the dense optimizer, pooling's backward (DenseTrain)
//   push    the row gradients into the table (sparse optimizer) (Push)
//
// A StepState carries one batch through the stages; the TrainingStep holds
// what every batch shares (the table, the dense model) and runs the stages
// on a state. Which thread runs which stage, and when, is the loops' business.

#include <cstdint>
#include <memory>
#include <vector>

#include "core/communicator.h"
#include "core/status.h"
#include "core/tensor.h"
#include "embedding/embedding_table.h"
#include "io/batch.h"
#include "ops/dense_model.h"
#include "ops/dense_optimizer.h"
#include "pipeline/gradient_buckets.h"
#include "pipeline/pipeline_parallel.h"

namespace ember::pipeline {

// Everything one batch carries through the stages.
struct StepState {
  int64_t index = 0;  // The batch's index in this run of the loop.
  int64_t step = 0;   // Its step in the job (index + steps trained before).
  int64_t epoch = 0;  // The epoch of the batch.
  io::Batch batch;
  std::vector<embedding::Key> unique_keys;
  std::vector<int64_t> key_rows;  // Row of each key occurrence in `rows`.
  Tensor row_index;               // i64 [nnz], copy of key_rows for the pooling op.
  Tensor offsets;                 // i64 [B * S + 1]
  Tensor rows;                    // [U, D] pulled rows.
  Tensor pooled;                  // [B, S * D]
  Tensor dense;                   // [B, num_dense]
  Tensor labels;                  // [B, T] for T tasks
  Tensor logits;                  // [B, T]
  Tensor dlogits;                 // [B, T]
  Tensor dpooled;                 // [B, S * D]
  Tensor drows;                   // [U, D]
  std::vector<embedding::Key> sorted_keys;  // unique_keys, ascending (pipelined)
  std::vector<int64_t> sorted_order;        // sorted_keys[i] = unique_keys[sorted_order[i]]
  std::vector<int> staleness;               // Per sorted key (scratch)
  std::vector<embedding::Key> part_keys;    // A part of a split pull (scratch)
  std::vector<int64_t> part_rows;
  Tensor part_values;
  double loss = 0.0;
  // What the model's MoE layers did with this batch (zeros without them).
  ops::MoeStepStats moe;
  bool prepared = false;  // Prepare ran on this batch (sequential read-ahead).
};

// The stages' work on a StepState. The table and the model are not owned
// and must outlive it. Thread safety: Prepare, SortKeys and Lookup may run on
// any thread for different states; Pull/PullPart, DenseTrain and Push each
// run on one thread at a time (the table allows Pull and Push to overlap;
// the model belongs to the dense stage alone).
class TrainingStep {
 public:
  // `dense_comm` (not owned; null: one rank) all-reduces the dense
  // gradients; only DenseTrain uses it, on the dense stage's thread.
  TrainingStep(embedding::EmbeddingTable* table, ops::DenseModel* model,
               const ops::DenseOptimizerOptions& dense_optimizer,
               Communicator* dense_comm = nullptr);
  ~TrainingStep();
  TrainingStep(const TrainingStep&) = delete;
  TrainingStep& operator=(const TrainingStep&) = delete;

  // unique: the batch's distinct keys (in first-seen order), each key
  // occurrence's row among them, and the step's input tensors.
  Status Prepare(StepState& state) const;
  // The unique keys in ascending order with their positions (for the
  // staleness gate, pipeline/staleness.h).
  static void SortKeys(StepState& state);
  // pull: the rows of every unique key, at the table's step state.step.
  Status Pull(StepState& state);
  // Pulls the unique keys at positions `rows` of state.unique_keys into
  // their rows of state.rows (part of an early pull). REQUIRES: the table's
  // step is state.step.
  Status PullPart(StepState& state, const std::vector<int64_t>& rows);
  // dense: pooling, forward, loss (state.loss: the mean over this batch; the
  // gradients are those of the mean over every rank's batch), backward, the
  // gradients' all-reduce over ranks, one dense optimizer step, and the rows'
  // gradients (state.drows).
  Status DenseTrain(StepState& state);
  // push: the rows' gradients into the table.
  Status Push(StepState& state);
  // Evaluation: the rows without changing the table, then the forward
  // (state.logits, the model's buffer until the next forward), an inference
  // (DenseModel::Forward: a MoE model's scores depend on each example alone).
  Status Lookup(StepState& state);
  Status Forward(StepState& state);

  embedding::EmbeddingTable& table() { return *table_; }
  ops::DenseModel& model() { return *model_; }
  // Dense optimizer steps taken (a checkpoint saves and restores it).
  int64_t* optimizer_steps() { return &optimizer_steps_; }
  // Runs the dense model's forward, loss, backward and optimizer step in
  // `stage` (not owned; rank 0 of a pipeline, pipeline/pipeline_parallel.h)
  // instead of the model, whose parameters are then the stage's business
  // until it copies them back. Null: the model itself.
  void set_pipeline(PipelineDenseStage* stage) { pipeline_ = stage; }
  // All-reduces the dense gradients in buckets of about `bucket_bytes` over
  // `comm` (not owned; a communicator of its own, of the dense one's ranks)
  // while the backward runs (pipeline/gradient_buckets.h), instead of all at
  // once after it: the same bits. Only for a host model of several ranks;
  // InvalidArgument otherwise, or for bucket_bytes < 1.
  Status UseGradientBuckets(Communicator* comm, int64_t bucket_bytes);
  // The buckets in use, or null.
  const GradientBuckets* gradient_buckets() const { return buckets_.get(); }
  // Ranks training together (1 without a dense communicator).
  int ranks() const { return dense_comm_ == nullptr ? 1 : dense_comm_->size(); }

 private:
  // The forward of DenseTrain (training: expert layers may exchange with
  // the other ranks) or of an evaluation (an inference).
  Status Forward(StepState& state, bool training);
  // Pooling: state.pooled from state.rows.
  Status PoolEmbeddings(StepState& state) const;
  // Pooling's backward: state.drows from state.dpooled, summed per row
  // range of `ranges` and then over the ranges.
  Status RowGradients(StepState& state, int ranges) const;
  // Sums every parameter's gradient over the ranks, in rank order.
  Status AllReduceGradients();

  embedding::EmbeddingTable* table_;
  ops::DenseModel* model_;
  ops::DenseOptimizerOptions dense_optimizer_;
  Communicator* dense_comm_;
  PipelineDenseStage* pipeline_ = nullptr;
  int64_t optimizer_steps_ = 0;
  std::vector<float> gradients_;  // The all-reduce's buffer (host models).
  std::unique_ptr<GradientBuckets> buckets_;
};

}  // namespace ember::pipeline
