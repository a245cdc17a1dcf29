#pragma once

// The batches of several ranks that train one model (issue 31) cut from one
// stream of global batches: rank r of n gets rows [r * b / n, (r + 1) * b / n)
// of each global batch of b rows. The n ranks then train, between them,
// exactly the batches one rank would train on the global stream, each
// global batch being the ranks' batches in rank order: what makes n ranks
// comparable with one (a data-parallel step sums the ranks' gradients). Every
// rank reads the whole stream, so this suits data in memory; files are split
// between ranks by StreamReaderOptions::num_shards instead.

#include <cstdint>
#include <string>
#include <string_view>

#include "io/batch_source.h"

namespace ember::io {

class RankSliceBatchSource final : public BatchSource {
 public:
  // `global` is borrowed and must outlive this source; its batches should
  // hold at least `ranks` rows (a rank may otherwise get an empty batch).
  // REQUIRES: 0 <= rank < ranks.
  RankSliceBatchSource(BatchSource* global, int rank, int ranks);

  Result<bool> Next(Batch* out) override;
  int64_t epoch() const override { return global_->epoch(); }
  int64_t EstimatedBatches() const override { return global_->EstimatedBatches(); }
  int num_labels() const override { return global_->num_labels(); }
  int num_dense() const override { return global_->num_dense(); }
  int num_slots() const override { return global_->num_slots(); }
  // The global stream's position: every rank's is the same.
  Result<std::string> ResumePosition() const override { return global_->ResumePosition(); }
  Status ResumeFrom(std::string_view position) override { return global_->ResumeFrom(position); }
  const Dataset* InMemoryData() const override { return global_->InMemoryData(); }

 private:
  BatchSource* global_;
  int rank_;
  int ranks_;
  Batch whole_;
};

}  // namespace ember::io
