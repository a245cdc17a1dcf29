#include "engine/scorer.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/threads.h"
#include "engine/bundle_delta.h"
#include "engine/model.h"
#include "engine/prediction.h"
#include "pipeline/training_step.h"

namespace ember::engine {

// One dense model with the step and the arena a Score call runs it in.
struct Scorer::Replica {
  Replica(std::unique_ptr<DenseModel> dense, embedding::EmbeddingTable* table, int threads)
      : model(std::move(dense)), step(table, model.get(), {}), arena(threads) {}
  std::unique_ptr<DenseModel> model;
  pipeline::TrainingStep step;
  ThreadArena arena;
  pipeline::StepState state;
};

namespace {

Result<std::unique_ptr<DenseModel>> NewServingModel(const BundleConfig& config) {
  Result<std::unique_ptr<DenseModel>> model = NewDenseModel(config.model);
  if (!model.ok()) return model.status().WithContext("the bundle's model");
  return model;
}

}  // namespace

Result<std::unique_ptr<Scorer>> Scorer::Open(const std::string& path,
                                             const ScorerOptions& options) {
  EMBER_ASSIGN_OR_RETURN(VerifiedBundle bundle, VerifyBundle(path));
  embedding::EmbeddingTableOptions table_options = ServingTableOptions(bundle.config);
  table_options.memory_budget_bytes = options.memory_budget_bytes;
  table_options.disk_path = options.disk_path;
  if (!options.make_table && options.memory_budget_bytes > 0) {
    return Status::InvalidArgument("a scorer's memory budget needs a table with a disk tier "
                                   "(ScorerOptions::make_table)");
  }
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<embedding::EmbeddingTable> table,
                         options.make_table ? options.make_table(table_options)
                                            : embedding::NewMemoryTable(table_options));
  EMBER_RETURN_IF_ERROR(LoadBundleEmbedding(bundle, *table));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<DenseModel> model, NewServingModel(bundle.config));
  EMBER_ASSIGN_OR_RETURN(std::string dense, ReadBundleDense(bundle));
  EMBER_RETURN_IF_ERROR(LoadBundleDenseBytes(bundle, dense, *model));
  std::unique_ptr<Scorer> scorer(
      new Scorer(std::move(bundle), std::move(dense), options, std::move(table)));
  scorer->Release(std::make_unique<Replica>(std::move(model), scorer->table_.get(),
                                            scorer->options_.threads));
  return scorer;
}

Scorer::Scorer(VerifiedBundle bundle, std::string dense, const ScorerOptions& options,
               std::unique_ptr<embedding::EmbeddingTable> table)
    : config_(bundle.config),
      options_(options),
      bundle_(std::move(bundle)),
      dense_(std::move(dense)),
      table_(std::move(table)) {}

Scorer::~Scorer() = default;

std::shared_lock<std::shared_mutex> Scorer::LockModel() const {
  MutexLock gate(gate_);
  return std::shared_lock<std::shared_mutex>(model_mu_);
}

int64_t Scorer::embedding_rows() const {
  const auto lock = LockModel();
  return table_->num_rows();
}

int64_t Scorer::step() const {
  const auto lock = LockModel();
  return bundle_.config.step;
}

std::string Scorer::manifest_hash() const {
  const auto lock = LockModel();
  return bundle_.manifest_hash;
}

Result<std::unique_ptr<Scorer::Replica>> Scorer::Acquire() {
  {
    MutexLock lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Replica> replica = std::move(idle_.back());
      idle_.pop_back();
      return replica;
    }
  }
  // Every replica is busy: a new model, with the weights of the newest bundle.
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<DenseModel> model, NewServingModel(config_));
  EMBER_RETURN_IF_ERROR(LoadBundleDenseBytes(bundle_, dense_, *model));
  return std::make_unique<Replica>(std::move(model), table_.get(), options_.threads);
}

Status Scorer::ApplyDelta(const std::string& path) {
  // Everything is read and checked before the model changes.
  EMBER_ASSIGN_OR_RETURN(VerifiedBundle delta, VerifyBundle(path));
  if (!delta.is_delta()) {
    return Status::InvalidArgument(path, ": a full bundle, not a delta (open it instead)");
  }
  EMBER_RETURN_IF_ERROR(CheckSameModel(config_, delta.config).WithContext(path));
  EMBER_ASSIGN_OR_RETURN(const BundleDeltaRows rows, ReadBundleDeltaRows(delta));
  EMBER_ASSIGN_OR_RETURN(std::string dense, ReadBundleDense(delta));
  {
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<DenseModel> model, NewServingModel(config_));
    EMBER_RETURN_IF_ERROR(LoadBundleDenseBytes(delta, dense, *model));
  }
  MutexLock gate(gate_);
  std::unique_lock<std::shared_mutex> lock(model_mu_);
  EMBER_RETURN_IF_ERROR(broken_);
  if (delta.delta.base_hash != bundle_.manifest_hash) {
    return Status::FailedPrecondition(
        path, ": a delta of the bundle ", delta.delta.base_hash, " (step ", delta.delta.base_step,
        ", ", delta.delta.base_path, "), but the model is the bundle ", bundle_.manifest_hash,
        " (step ", bundle_.config.step, ", ", bundle_.path, ")");
  }
  Status applied = ApplyBundleDeltaRows(rows, *table_);
  if (applied.ok() && table_->num_rows() != delta.embedding_rows) {
    applied = Status::DataLoss(path, ": the model holds ", table_->num_rows(),
                               " rows after the delta, its manifest lists ",
                               delta.embedding_rows);
  }
  if (!applied.ok()) {
    broken_ = Status::FailedPrecondition(
        "the model is neither the bundle of step ", bundle_.config.step, " nor the delta ", path,
        " (applying it failed: ", applied.message(), "); reopen the model");
    return applied;
  }
  bundle_ = std::move(delta);
  dense_ = std::move(dense);
  MutexLock replicas(mu_);
  idle_.clear();  // Models of the old weights; new ones load dense_.
  return Status::OK();
}

void Scorer::Release(std::unique_ptr<Replica> replica) {
  MutexLock lock(mu_);
  idle_.push_back(std::move(replica));
}

Status Scorer::CheckShape(const io::Batch& batch) const {
  const ModelOptions& m = config_.model;
  if (batch.num_dense == m.num_dense && batch.num_slots == m.num_slots) return Status::OK();
  return Status::InvalidArgument("the input has ", batch.num_dense, " dense features and ",
                                 batch.num_slots, " slots per example, the bundle's model was ",
                                 "trained on ", m.num_dense, " and ", m.num_slots);
}

Status Scorer::Score(const io::Batch& batch, std::vector<float>* scores) {
  EMBER_RETURN_IF_ERROR(CheckShape(batch));
  if (batch.size == 0) return Status::OK();
  const auto lock = LockModel();
  EMBER_RETURN_IF_ERROR(broken_);
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Replica> replica, Acquire());
  Status status;
  replica->arena.Execute([&] {
    SetOpenMpThreads(replica->arena.threads());
    replica->state.batch = batch;
    status = PredictBatch(replica->step, replica->state, scores);
  });
  Release(std::move(replica));
  return status;
}

Status Scorer::ScoreAll(io::BatchSource& data,
                        const std::function<Status(const io::Batch&, const float*)>& visit) {
  io::Batch batch;
  std::vector<float> scores;
  while (true) {
    Result<bool> more = data.Next(&batch);
    if (!more.ok()) return more.status().WithContext("reading the input");
    if (!*more) return Status::OK();
    scores.clear();
    EMBER_RETURN_IF_ERROR(Score(batch, &scores));
    EMBER_RETURN_IF_ERROR(visit(batch, scores.data()));
  }
}

}  // namespace ember::engine
