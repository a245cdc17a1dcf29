#include "engine/scorer.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/threads.h"
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
  EMBER_RETURN_IF_ERROR(LoadBundleDense(bundle, *model));
  std::unique_ptr<Scorer> scorer(new Scorer(std::move(bundle), options, std::move(table)));
  scorer->Release(std::make_unique<Replica>(std::move(model), scorer->table_.get(),
                                            scorer->options_.threads));
  return scorer;
}

Scorer::Scorer(VerifiedBundle bundle, const ScorerOptions& options,
               std::unique_ptr<embedding::EmbeddingTable> table)
    : bundle_(std::move(bundle)), options_(options), table_(std::move(table)) {}

Scorer::~Scorer() = default;

Result<std::unique_ptr<Scorer::Replica>> Scorer::Acquire() {
  {
    MutexLock lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Replica> replica = std::move(idle_.back());
      idle_.pop_back();
      return replica;
    }
  }
  // Every replica is busy: a new model, with the weights of the bundle.
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<DenseModel> model, NewServingModel(bundle_.config));
  EMBER_RETURN_IF_ERROR(LoadBundleDense(bundle_, *model));
  return std::make_unique<Replica>(std::move(model), table_.get(), options_.threads);
}

void Scorer::Release(std::unique_ptr<Replica> replica) {
  MutexLock lock(mu_);
  idle_.push_back(std::move(replica));
}

Status Scorer::CheckShape(const io::Batch& batch) const {
  const ModelOptions& m = bundle_.config.model;
  if (batch.num_dense == m.num_dense && batch.num_slots == m.num_slots) return Status::OK();
  return Status::InvalidArgument("the input has ", batch.num_dense, " dense features and ",
                                 batch.num_slots, " slots per example, the bundle's model was ",
                                 "trained on ", m.num_dense, " and ", m.num_slots);
}

Status Scorer::Score(const io::Batch& batch, std::vector<float>* scores) {
  EMBER_RETURN_IF_ERROR(CheckShape(batch));
  if (batch.size == 0) return Status::OK();
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
