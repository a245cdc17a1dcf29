#pragma once

// Scores examples with a serving bundle (engine/bundle.h): the bundle's
// embedding vectors in an in-memory table and its dense model, run through
// the trainer's own evaluation path (engine/prediction.h), so that a batch
// scores to the same bits as the trainer's evaluation of it (same batch,
// threads and row shards).

#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "embedding/embedding_table.h"
#include "engine/bundle.h"
#include "io/batch.h"
#include "io/batch_source.h"

namespace ember::engine {

struct ScorerOptions {
  // CPU threads each Score call runs its batch on (its own arena); the
  // trainer's evaluation of a batch and a Score of it give the same bits
  // with the same threads. <= 0: every hardware thread. Default: 1.
  int threads = 1;
  // A bundle whose rows exceed memory (a job of ranks' shards): keep at
  // most this many bytes of rows in memory and the rest in a RocksDB tier in
  // `disk_path` (a scratch directory the scorer owns while open), streamed
  // there as the bundle loads. 0 (the default): every row in memory. The
  // scores are the same bits either way.
  int64_t memory_budget_bytes = 0;
  std::string disk_path;
  // Makes the table the rows load into, from the bundle's table options with
  // the two fields above. Null: embedding::NewMemoryTable, which refuses a
  // budget: libember_serving links no disk tier. The ember tools pass
  // embedding::NewEmbeddingTable (a memory tier before RocksDB).
  std::function<Result<std::unique_ptr<embedding::EmbeddingTable>>(
      const embedding::EmbeddingTableOptions&)>
      make_table;
};

// Thread safety: Score, ScoreAll and ApplyDelta may be called
// concurrently; each Score takes a replica of the dense model (made on first
// need, kept for reuse), and the embedding table is only read while no
// ApplyDelta writes it: each Score call sees the model before a delta or
// after it, never a mix.
class Scorer {
 public:
  // Verifies the bundle at `path` (VerifyBundle), builds its model on the
  // CPU and loads its weights and vectors. Errors: VerifyBundle's, the
  // model's (a model this build does not know: InvalidArgument), and the
  // loading's (DataLoss naming the file).
  static Result<std::unique_ptr<Scorer>> Open(const std::string& path,
                                              const ScorerOptions& options = {});
  ~Scorer();
  Scorer(const Scorer&) = delete;
  Scorer& operator=(const Scorer&) = delete;

  // Appends the probabilities of every example of `batch` to `*scores`,
  // example-major (example i's task t at i * num_tasks() + t).
  // InvalidArgument when the batch's dense or slot count is not the
  // model's; the labels are not read (any num_labels).
  Status Score(const io::Batch& batch, std::vector<float>* scores);

  // Scores every batch of `data`, in order, calling `visit` with each batch
  // and its scores (batch.size * num_tasks(), valid during the call); stops
  // at the first error (a read error, with context, or `visit`'s).
  Status ScoreAll(io::BatchSource& data,
                  const std::function<Status(const io::Batch&, const float*)>& visit);

  // Applies the delta bundle at `path` (engine/bundle_delta.h) to the open
  // model: its changed rows, removed keys and dense weights, so that the
  // model scores as the full bundle of the delta's step does. Everything is
  // read and checked before the model changes; scoring calls meanwhile wait
  // only while the rows are written. Errors, the model unchanged: VerifyBundle's;
  // InvalidArgument for a full bundle or another model (CheckSameModel);
  // FailedPrecondition for a delta of another base than the model's newest
  // (naming both, hash, step and path); ReadBundleDeltaRows'. A failure while
  // the rows are written (a disk tier's IOError) leaves a model that only
  // reports it: every later call returns FailedPrecondition; reopen it.
  Status ApplyDelta(const std::string& path);

  // The bundle's configuration (a delta changes none of it but the step).
  const BundleConfig& config() const { return config_; }
  int num_tasks() const { return config_.model.num_tasks; }
  int64_t embedding_rows() const;
  // Training steps behind the model now, and its newest bundle's
  // manifest_hash (what the next delta must name as its base).
  int64_t step() const;
  std::string manifest_hash() const;

 private:
  struct Replica;
  Scorer(VerifiedBundle bundle, std::string dense, const ScorerOptions& options,
         std::unique_ptr<embedding::EmbeddingTable> table);
  // A replica no other call uses (a new one when all are busy). REQUIRES:
  // model_mu_ held shared.
  Result<std::unique_ptr<Replica>> Acquire();
  void Release(std::unique_ptr<Replica> replica);
  Status CheckShape(const io::Batch& batch) const;
  // Takes model_mu_ shared, behind a waiting ApplyDelta (gate_).
  std::shared_lock<std::shared_mutex> LockModel() const;

  const BundleConfig config_;
  const ScorerOptions options_;
  // Readers (Score) hold model_mu_ shared, ApplyDelta exclusive; gate_ keeps
  // new readers out while ApplyDelta waits for the lock (no writer
  // starvation under a steady stream of scoring calls).
  mutable Mutex gate_;
  mutable std::shared_mutex model_mu_;
  // The newest bundle applied (the opened one, or the last delta) and its
  // dense.bin's bytes, which new replicas load; the table of its rows.
  VerifiedBundle bundle_;
  std::string dense_;
  std::unique_ptr<embedding::EmbeddingTable> table_;
  Status broken_;  // A delta that failed halfway (see ApplyDelta).
  Mutex mu_;
  std::vector<std::unique_ptr<Replica>> idle_ GUARDED_BY(mu_);
};

}  // namespace ember::engine
