#include "engine/training_data.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "io/rank_slice_source.h"

namespace ember::engine {
namespace {

// A DatasetBatchSource, sliced to this rank's rows when there are ranks.
class DatasetTrainingSource final : public io::BatchSource {
 public:
  DatasetTrainingSource(const io::Dataset& train, const io::DatasetBatchSourceOptions& options,
                        int rank, int ranks)
      : whole_(train, options) {
    if (ranks > 1) slice_ = std::make_unique<io::RankSliceBatchSource>(&whole_, rank, ranks);
  }

  Result<bool> Next(io::Batch* out) override { return source().Next(out); }
  int64_t epoch() const override { return source().epoch(); }
  int64_t EstimatedBatches() const override { return source().EstimatedBatches(); }
  int num_labels() const override { return whole_.num_labels(); }
  int num_dense() const override { return whole_.num_dense(); }
  int num_slots() const override { return whole_.num_slots(); }
  Result<std::string> ResumePosition() const override { return source().ResumePosition(); }
  Status ResumeFrom(std::string_view position) override { return source().ResumeFrom(position); }
  const io::Dataset* InMemoryData() const override { return whole_.InMemoryData(); }

 private:
  io::BatchSource& source() { return slice_ ? *slice_ : static_cast<io::BatchSource&>(whole_); }
  const io::BatchSource& source() const {
    return slice_ ? *slice_ : static_cast<const io::BatchSource&>(whole_);
  }

  io::DatasetBatchSource whole_;
  std::unique_ptr<io::RankSliceBatchSource> slice_;
};

}  // namespace

Result<std::unique_ptr<io::BatchSource>> NewDatasetTrainingSource(const io::Dataset& train,
                                                                  const TrainOptions& options) {
  if (train.size() == 0) return Status::InvalidArgument("the training data has no examples");
  io::DatasetBatchSourceOptions source;
  const int ranks = options.ranks.size();
  source.batch_size = int64_t{options.batch_size} * ranks;
  source.num_epochs = options.epochs;
  source.shuffle = options.shuffle;
  source.seed = options.seed;
  return std::unique_ptr<io::BatchSource>(
      std::make_unique<DatasetTrainingSource>(train, source, options.ranks.rank(), ranks));
}

}  // namespace ember::engine
