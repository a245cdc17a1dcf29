#include "engine/training_data.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// The whole job's batches: global batches of ranks x batch_size examples.
io::DatasetBatchSourceOptions GlobalBatches(const TrainOptions& options) {
  io::DatasetBatchSourceOptions source;
  source.batch_size = int64_t{options.batch_size} * options.ranks.size();
  source.num_epochs = options.epochs;
  source.shuffle = options.shuffle;
  source.seed = options.seed;
  return source;
}

}  // namespace

Result<std::unique_ptr<io::BatchSource>> NewDatasetTrainingSource(const io::Dataset& train,
                                                                  const TrainOptions& options) {
  if (train.size() == 0) return Status::InvalidArgument("the training data has no examples");
  return std::unique_ptr<io::BatchSource>(std::make_unique<DatasetTrainingSource>(
      train, GlobalBatches(options), options.ranks.rank(), options.ranks.size()));
}

Result<std::unique_ptr<io::BatchSource>> NewShardTrainingSource(io::Dataset share,
                                                                std::vector<int64_t> indices,
                                                                int64_t examples,
                                                                io::ExampleShape shape,
                                                                const TrainOptions& options) {
  if (examples == 0) return Status::InvalidArgument("the training data has no examples");
  if (options.ranks.data == nullptr) {
    return Status::InvalidArgument("a share of the training data needs the ranks' data "
                                   "communicator (RankGroup::data)");
  }
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<io::RankShardBatchSource> source,
                         io::RankShardBatchSource::Make(std::move(share), std::move(indices),
                                                        examples, shape, GlobalBatches(options),
                                                        options.ranks.data));
  return std::unique_ptr<io::BatchSource>(std::move(source));
}

}  // namespace ember::engine
