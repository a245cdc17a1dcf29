#pragma once

// Program: one training step of a CTR model as a task graph. Nodes are ops,
// each marked sparse (embedding work: unique, pull, pooling's lookups, push,
// on CPU memory and disk) or dense (the model's operators, loss and
// optimizer), each with a forward and a backward task whose FLOPs and bytes
// are given per example; edges are tensors with their bytes per example.
// Every op also names the trainer stage that runs it (read -> unique ->
// pull -> dense -> push), which is what the planner overlaps.
//
// The dense ops come from the model's ops::Graph (built by the model zoo),
// so the Program never repeats a model's layer shapes.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "ops/graph.h"
#include "ops/op_cost.h"
#include "scheduler/key_trace.h"
#include "scheduler/stage.h"

namespace ember::scheduler {

struct ProgramOp {
  std::string name;
  std::string op;
  bool sparse = false;
  Stage stage = Stage::kDense;
  // Work per example of the forward and the backward task (ops/op_cost.h).
  ops::OpCost forward;
  ops::OpCost backward;
  std::vector<int> inputs;  // Indices into Program::tensors.
  std::vector<int> outputs;
};

struct ProgramTensor {
  std::string name;
  int producer = -1;  // Index into Program::ops; -1 for the batch's inputs.
  double bytes_per_example = 0.0;
  // False for an intermediate its op saves for its own backward
  // (ops::OpDef::saved_outputs): held until the backward, but no gradient
  // of it is ever made, and no other op reads it.
  bool has_gradient = true;
};

// What the data and the sparse side look like.
struct SparseFeatures {
  int num_dense = 13;
  int num_slots = 26;
  int num_labels = 1;
  int embedding_dim = 16;
  // Ids per example over all slots (num_slots for single-valued slots).
  double ids_per_example = 26.0;
  // Distinct ids of each slot; empty: unknown (then every id of a batch is
  // taken as distinct and the table as holding every id seen).
  std::vector<int64_t> slot_vocabulary;
  // Zipf exponent of the ids of a slot.
  double zipf_exponent = 1.05;
  // Examples one run trains on (epochs included): sets the table's size.
  int64_t training_examples = 1000000;
  // Optimizer state floats per embedding float (sgd and row-wise adagrad 0,
  // adagrad 1, adam and ftrl 2) and per dense parameter (sgd 0, adagrad 1,
  // adam 2).
  int sparse_state_per_float = 1;
  // Bytes of a stored embedding weight: 4 (f32) or 2 (bf16).
  int sparse_weight_bytes = 4;
  int dense_state_per_param = 2;
  // The training data's keys, sampled (ember plan --train_data reads them);
  // null: unknown. When set, a batch's distinct ids and a memory tier's
  // traffic come from it rather than from the fields above.
  std::shared_ptr<const KeyTrace> key_trace;
};

struct Program {
  std::string model;
  std::vector<ProgramOp> ops;
  std::vector<ProgramTensor> tensors;
  SparseFeatures sparse;
  int64_t dense_parameters = 0;
  // The expert MLPs (chains of moe_expert_fc layers, ops/expert_parallel.h):
  // their count, and the floats per example that expert parallelism moves
  // each way in a forward: for each chain the rows its routing keeps for an
  // example (experts x capacity / batch) times its first layer's input width
  // plus its last layer's output width.
  int expert_chains = 0;
  double expert_floats_per_example = 0.0;

  // Expected distinct ids in a batch of `batch` examples (the rows a pull
  // reads), from the slots' Zipf distributions.
  double UniqueIdsPerBatch(int64_t batch) const;
  // The expected fraction of a batch's distinct ids that more than
  // `staleness` of the `in_flight` batches before it also hold (independent
  // batches): the rows a pull must wait for under that staleness bound.
  // sum q P(Binomial(in_flight, q) > staleness) / sum q over the ids, q the
  // chance that a batch holds the id.
  double LateFraction(int64_t batch, int in_flight, int staleness) const;
  // Expected rows of the embedding table after training_examples examples.
  double TableRows() const;
  // Zipf probability mass of the `rows` most frequent ids, spread over the
  // slots in proportion to their vocabularies: the hit rate of a memory tier
  // that holds `rows` rows (an LFU cache in steady state).
  double HitRate(double rows) const;
  // What a memory tier of `held_rows` rows does per batch of `batch`
  // examples: played on the key trace when there is one; else a batch's
  // distinct ids miss at 1 - HitRate(held_rows), every id is new once
  // (TableRows() over the run's batches), and the new rows memory cannot
  // keep are written to disk besides the rows read back.
  TierTraffic MemoryTierTraffic(double held_rows, int64_t batch) const;
  // Sum of the forward (or backward) work of the ops of `stage`, per example.
  ops::OpCost StageCost(Stage stage, bool backward) const;
  // Ops of `stage` (calls per step: each op is at least one call).
  int OpsIn(Stage stage) const;
  // The dense parameters and their optimizer state, bytes.
  double DenseStateBytes() const;
  // Expected distinct ids in `examples` examples (unknown vocabularies:
  // every id distinct).
  double DistinctIds(double examples) const;
};

// Expected distinct values among `draws` draws from a Zipf(`exponent`)
// distribution over `vocabulary` values: sum_k 1 - (1 - p_k)^draws.
double ExpectedDistinct(int64_t vocabulary, double exponent, double draws);

// The Program of a model whose dense half is `dense` (the model zoo's graph)
// over the data `sparse`: read, unique, embedding pull, embedding-bag
// pooling, the graph's nodes, the loss, the dense optimizer and the
// embedding push. InvalidArgument when `dense` lacks the "pooled" input or
// its width is not num_slots * embedding_dim.
Result<Program> BuildProgram(const std::string& model, const ops::Graph& dense,
                             const SparseFeatures& sparse);

}  // namespace ember::scheduler
