#include "pipeline/training_step.h"

#include <algorithm>
#include <cstring>

#include "core/sorted_order.h"
#include "embedding/unique_keys.h"
#include "ops/dense_ops.h"

namespace ember::pipeline {

TrainingStep::TrainingStep(embedding::EmbeddingTable* table, ops::DenseModel* model,
                           const ops::DenseOptimizerOptions& dense_optimizer,
                           Communicator* dense_comm)
    : table_(table), model_(model), dense_optimizer_(dense_optimizer), dense_comm_(dense_comm) {}

TrainingStep::~TrainingStep() {
  if (buckets_ != nullptr) model_->set_on_gradient_ready(nullptr);
}

Status TrainingStep::Prepare(StepState& state) const {
  const io::Batch& batch = state.batch;
  const int64_t b = batch.size;
  const int dim = table_->dim();
  embedding::UniqueKeys(batch.keys, &state.unique_keys, &state.key_rows);
  const int64_t nnz = static_cast<int64_t>(batch.keys.size());
  const int64_t unique = static_cast<int64_t>(state.unique_keys.size());
  state.row_index = Tensor::Empty({nnz}, DType::kI64);
  // std::copy, not memcpy: any of these may be empty (no dense features, no
  // keys), whose data() may be null, which memcpy may not be given.
  std::copy_n(state.key_rows.data(), nnz, state.row_index.data<int64_t>());
  state.offsets = Tensor::Empty({static_cast<int64_t>(batch.offsets.size())}, DType::kI64);
  std::copy(batch.offsets.begin(), batch.offsets.end(), state.offsets.data<int64_t>());
  state.rows = Tensor::Empty({unique, dim});
  // The dense model's host tensors: page-locked for a model on a GPU.
  Allocator* staging = model_->host_allocator();
  EMBER_ASSIGN_OR_RETURN(state.pooled, Tensor::Allocate({b, int64_t{batch.num_slots} * dim},
                                                        DType::kF32, Device::Cpu(), staging));
  EMBER_ASSIGN_OR_RETURN(state.dense,
                         Tensor::Allocate({b, batch.num_dense}, DType::kF32, Device::Cpu(), staging));
  std::copy(batch.dense.begin(), batch.dense.end(), state.dense.data<float>());
  state.labels = Tensor::Empty({b, batch.num_labels});
  std::copy(batch.labels.begin(), batch.labels.end(), state.labels.data<float>());
  return Status::OK();
}

void TrainingStep::SortKeys(StepState& state) {
  SortedOrder(state.unique_keys, &state.sorted_order, &state.sorted_keys);
}

Status TrainingStep::Pull(StepState& state) {
  // The step stamps rows for TTL eviction and drives probabilistic admission.
  table_->set_step(state.step);
  return table_->Pull(state.unique_keys, state.rows.data<float>());
}

Status TrainingStep::PullPart(StepState& state, const std::vector<int64_t>& rows) {
  const int dim = table_->dim();
  state.part_keys.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) state.part_keys[i] = state.unique_keys[rows[i]];
  state.part_values = Tensor::Empty({static_cast<int64_t>(rows.size()), dim});
  EMBER_RETURN_IF_ERROR(table_->Pull(state.part_keys, state.part_values.data<float>()));
  const float* values = state.part_values.data<float>();
  float* out = state.rows.data<float>();
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(out + rows[i] * dim, values + i * dim, dim * sizeof(float));
  }
  return Status::OK();
}

Status TrainingStep::Lookup(StepState& state) {
  return table_->Lookup(state.unique_keys, state.rows.data<float>());
}

Status TrainingStep::Forward(StepState& state) { return Forward(state, /*training=*/false); }

Status TrainingStep::PoolEmbeddings(StepState& state) const {
  Tensor pooled_bags = state.pooled.Reshape({state.batch.size * state.batch.num_slots,
                                             table_->dim()});
  return ops::EmbeddingBagForward(state.rows, state.row_index, state.offsets, ops::Pooling::kSum,
                                  &pooled_bags);
}

Status TrainingStep::RowGradients(StepState& state, int ranges) const {
  state.drows = Tensor::Empty(state.rows.shape());
  const Tensor dbags =
      state.dpooled.Reshape({state.batch.size * state.batch.num_slots, table_->dim()});
  return ops::EmbeddingBagBackward(dbags, state.row_index, state.offsets, ops::Pooling::kSum,
                                   &state.drows, ranges, state.batch.num_slots);
}

Status TrainingStep::Forward(StepState& state, bool training) {
  EMBER_RETURN_IF_ERROR(PoolEmbeddings(state));
  return model_->Forward(state.dense, state.pooled, &state.logits, training);
}

Status TrainingStep::DenseTrain(StepState& state) {
  const int64_t b = state.batch.size;
  const int dim = table_->dim();
  if (pipeline_ != nullptr) {
    // The model's forward, loss, backward and optimizer step, split over
    // the pipeline's ranks.
    EMBER_RETURN_IF_ERROR(PoolEmbeddings(state));
    state.logits = Tensor::Empty({b, model_->num_tasks()});
    state.dpooled = Tensor::Empty({b, int64_t{state.batch.num_slots} * dim});
    EMBER_RETURN_IF_ERROR(pipeline_->Train(state.dense, state.pooled, state.labels,
                                           optimizer_steps_, &state.logits, &state.dpooled,
                                           &state.loss));
    ++optimizer_steps_;
    state.moe = {};
    return RowGradients(state, /*ranges=*/1);
  }
  const int64_t exchanged_before = model_->expert_exchange_bytes();
  const double exchange_seconds_before = model_->expert_exchange_seconds();
  EMBER_RETURN_IF_ERROR(Forward(state, /*training=*/true));
  const int64_t outputs = b * model_->num_tasks();
  state.dlogits = Tensor::Empty(state.logits.shape());
  Tensor flat_logits = state.logits.Reshape({outputs});
  Tensor flat_dlogits = state.dlogits.Reshape({outputs});
  const Tensor flat_labels = state.labels.Reshape({outputs});
  // With ranks, the mean runs over every rank's outputs.
  int64_t mean_over = 0;
  if (ranks() > 1) {
    std::vector<int64_t> all_outputs = {outputs};
    EMBER_RETURN_IF_ERROR(dense_comm_->AllReduce(all_outputs, all_outputs)
                              .WithContext("summing the ranks' batch sizes"));
    mean_over = all_outputs[0];
  }
  EMBER_ASSIGN_OR_RETURN(state.loss, ops::SigmoidCrossEntropyWithLogits(
                                         flat_logits, flat_labels, &flat_dlogits, mean_over));
  // Reported: this batch's own mean (the loss above is its share of the
  // ranks' mean).
  if (mean_over > 0) state.loss *= static_cast<double>(mean_over) / static_cast<double>(outputs);
  state.moe = model_->moe_stats();
  // The model's logits are its buffer, which the next batch's forward
  // overwrites; the state keeps its own for what reads them after the
  // pipeline's later stages (the progress line's AUC).
  state.logits = state.logits.Clone();
  EMBER_ASSIGN_OR_RETURN(state.dpooled,
                         Tensor::Allocate({b, int64_t{state.batch.num_slots} * dim}, DType::kF32,
                                          Device::Cpu(), model_->host_allocator()));
  if (buckets_ != nullptr) buckets_->Start();
  Status backward =
      model_->Backward(state.dlogits, &state.dpooled, mean_over / model_->num_tasks());
  // The buckets in flight finish (or fail) before anything else.
  if (buckets_ != nullptr) {
    Status reduced = buckets_->Wait();
    if (backward.ok()) backward = std::move(reduced);
  }
  EMBER_RETURN_IF_ERROR(backward);
  state.moe.exchanged_bytes = model_->expert_exchange_bytes() - exchanged_before;
  state.moe.exchange_seconds = model_->expert_exchange_seconds() - exchange_seconds_before;
  if (ranks() > 1 && buckets_ == nullptr) EMBER_RETURN_IF_ERROR(AllReduceGradients());
  ++optimizer_steps_;
  EMBER_RETURN_IF_ERROR(model_->OptimizerStep(dense_optimizer_, optimizer_steps_));
  // Summed per row range of the dense model, then over the ranges: the
  // order in which ranks that each ran one range sum (see the header).
  return RowGradients(state, model_->row_ranges());
}

Status TrainingStep::UseGradientBuckets(Communicator* comm, int64_t bucket_bytes) {
  if (comm == nullptr || ranks() < 2 || comm->size() != ranks() ||
      comm->rank() != dense_comm_->rank()) {
    return Status::InvalidArgument("gradient buckets need a communicator of the dense one's ",
                                   ranks(), " ranks");
  }
  if (!model_->device().is_cpu()) {
    return Status::InvalidArgument("gradient buckets: the dense model on ",
                                   model_->device().ToString(),
                                   " all-reduces its gradients one parameter at a time");
  }
  if (bucket_bytes < 1) {
    return Status::InvalidArgument("gradient buckets of ", bucket_bytes, " bytes");
  }
  buckets_ = std::make_unique<GradientBuckets>(model_->parameters(), bucket_bytes, comm);
  GradientBuckets* buckets = buckets_.get();
  model_->set_on_gradient_ready([buckets](int parameter) { buckets->Ready(parameter); });
  return Status::OK();
}

Status TrainingStep::AllReduceGradients() {
  const std::vector<ops::Parameter*> parameters = model_->parameters();
  if (!model_->device().is_cpu()) {
    // Device gradients go to a communicator that takes device buffers
    // (NCCL) one parameter at a time; a host-only one refuses them.
    for (ops::Parameter* p : parameters) {
      EMBER_RETURN_IF_ERROR(
          dense_comm_->AllReduce(p->grad, p->grad).WithContext("all-reducing the dense gradients"));
    }
    return Status::OK();
  }
  // One collective for the whole model: pack, sum, unpack.
  size_t total = 0;
  for (const ops::Parameter* p : parameters) total += static_cast<size_t>(p->grad.numel());
  gradients_.resize(total);
  size_t at = 0;
  for (const ops::Parameter* p : parameters) {
    const float* g = p->grad.data<float>();
    std::copy(g, g + p->grad.numel(), gradients_.begin() + at);
    at += static_cast<size_t>(p->grad.numel());
  }
  EMBER_RETURN_IF_ERROR(dense_comm_->AllReduce(gradients_, gradients_)
                            .WithContext("all-reducing the dense gradients"));
  at = 0;
  for (ops::Parameter* p : parameters) {
    std::copy_n(gradients_.begin() + at, p->grad.numel(), p->grad.data<float>());
    at += static_cast<size_t>(p->grad.numel());
  }
  return Status::OK();
}

Status TrainingStep::Push(StepState& state) {
  return table_->Push(state.unique_keys, state.drows.data<float>());
}

}  // namespace ember::pipeline
