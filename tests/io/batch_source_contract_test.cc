// The BatchSource contract (batch_source_contract.h) for the sources of io:
// one entry each, over the suite's data, in the configurations that change
// how they order, split or resume (shuffled, sharded, sliced, columnar).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/in_process_communicator.h"
#include "io/criteo.h"
#include "io/elastic_stream_source.h"
#include "io/rank_shard_source.h"
#include "io/rank_slice_source.h"
#include "io/stream_reader.h"
#include "tests/io/batch_source_contract.h"

namespace ember::test {
namespace {

constexpr int64_t kBatchSize = 5;
constexpr int64_t kEpochs = 2;

int64_t BatchSize(const SourceRequest& request) {
  return request.other_options ? kBatchSize - 1 : kBatchSize;
}

io::DatasetBatchSourceOptions DatasetOptions(const SourceRequest& request, bool shuffle) {
  io::DatasetBatchSourceOptions options;
  options.batch_size = BatchSize(request);
  options.num_epochs = kEpochs;
  options.shuffle = shuffle;
  options.seed = 7;
  return options;
}

BatchSourceEntry DatasetEntry(const std::string& name, bool shuffle) {
  BatchSourceEntry entry;
  entry.name = name;
  entry.epochs = kEpochs;
  entry.in_memory = true;
  entry.make = [shuffle](const SourceRequest& request) -> Result<MadeSource> {
    return Own(std::make_unique<io::DatasetBatchSource>(request.data->examples,
                                                        DatasetOptions(request, shuffle)));
  };
  return entry;
}

// Rank r of 2 slicing a shuffled DatasetBatchSource of global batches of
// 2 x kBatchSize.
BatchSourceEntry RankSliceEntry() {
  BatchSourceEntry entry;
  entry.name = "RankSliceOfShuffledDataset";
  entry.ranks = 2;
  entry.epochs = kEpochs;
  entry.in_memory = true;
  entry.make = [ranks = entry.ranks](const SourceRequest& request) -> Result<MadeSource> {
    io::DatasetBatchSourceOptions options = DatasetOptions(request, true);
    options.batch_size *= ranks;
    auto global = std::make_shared<io::DatasetBatchSource>(request.data->examples, options);
    MadeSource made;
    made.source = std::make_unique<io::RankSliceBatchSource>(global.get(), request.rank, ranks);
    made.parts.push_back(std::move(global));
    return made;
  };
  return entry;
}

// A RankShardBatchSource of a world of one holding every example (the
// contract drives the ranks of an entry one after the other, and the ranks
// of a shard source swap examples together: tests/io/rank_shard_source_test.cc
// checks several ranks against RankSliceOfShuffledDataset).
BatchSourceEntry RankShardEntry() {
  BatchSourceEntry entry;
  entry.name = "RankShardOfShuffledDatasetOneRank";
  entry.epochs = kEpochs;
  entry.in_memory = true;
  entry.make = [](const SourceRequest& request) -> Result<MadeSource> {
    EMBER_ASSIGN_OR_RETURN(auto group, NewInProcessCommunicators(1, {}));
    std::shared_ptr<Communicator> comm = std::move(group[0]);
    const io::Dataset& data = request.data->examples;
    std::vector<int64_t> indices(data.size());
    for (int64_t i = 0; i < data.size(); ++i) indices[i] = i;
    EMBER_ASSIGN_OR_RETURN(
        auto source, io::RankShardBatchSource::Make(
                         data.Slice(0, data.size()), std::move(indices), data.size(),
                         {data.num_dense(), data.num_slots(), data.num_labels()},
                         DatasetOptions(request, true), comm.get()));
    MadeSource made;
    made.parts.push_back(std::move(comm));
    made.source = std::move(source);
    return made;
  };
  return entry;
}

io::StreamReaderOptions StreamOptions(const SourceRequest& request) {
  io::StreamReaderOptions options;
  options.batch_size = BatchSize(request);
  options.num_epochs = kEpochs;
  options.seed = 11;
  options.threads = 2;
  options.piece_bytes = 1000;  // about 4 lines a piece
  options.piece_rows = 4;
  options.bad_lines = io::BadLinePolicy::kFail;
  return options;
}

Result<std::unique_ptr<io::StreamReader>> OpenText(const SourceRequest& request,
                                                   const io::StreamReaderOptions& options) {
  EMBER_ASSIGN_OR_RETURN(auto format, io::NewCriteoFormat());
  return io::StreamReader::OpenText(request.data->text_files, *format, options);
}

// A StreamReader over the text files, `shards` of them unequal (each reads
// its pieces, so that together they read every line).
BatchSourceEntry TextStreamEntry(const std::string& name, int shards, bool shuffle) {
  BatchSourceEntry entry;
  entry.name = name;
  entry.ranks = shards;
  entry.epochs = kEpochs;
  entry.reads_text = true;
  entry.make = [shards, shuffle](const SourceRequest& request) -> Result<MadeSource> {
    io::StreamReaderOptions options = StreamOptions(request);
    options.num_shards = shards;
    options.shard_index = request.rank;
    options.equal_shards = false;
    options.shuffle_files = shuffle;
    options.shuffle_pieces = shuffle;
    options.shuffle_buffer = shuffle ? 8 : 0;
    EMBER_ASSIGN_OR_RETURN(auto reader, OpenText(request, options));
    return Own(std::move(reader));
  };
  return entry;
}

BatchSourceEntry ColumnarStreamEntry() {
  BatchSourceEntry entry;
  entry.name = "ShuffledColumnarStream";
  entry.epochs = kEpochs;
  entry.make = [](const SourceRequest& request) -> Result<MadeSource> {
    io::StreamReaderOptions options = StreamOptions(request);
    options.shuffle_pieces = true;
    options.shuffle_buffer = 6;
    EMBER_ASSIGN_OR_RETURN(auto reader,
                           io::StreamReader::OpenColumnar({request.data->columnar_file}, options));
    return Own(std::move(reader));
  };
  return entry;
}

// Rank r of 2 of an ElasticStreamSource over shuffled text shards, read as a
// fresh job (its resharded positions have their own tests).
BatchSourceEntry ElasticStreamEntry() {
  BatchSourceEntry entry;
  entry.name = "ElasticStreamOfTwoRanks";
  entry.ranks = 2;
  entry.epochs = kEpochs;
  entry.reads_text = true;
  entry.make = [ranks = entry.ranks](const SourceRequest& request) -> Result<MadeSource> {
    io::StreamReaderOptions options = StreamOptions(request);
    options.shuffle_pieces = true;
    options.shuffle_buffer = 4;
    options.equal_shards = false;
    auto open = [request, options](int shard, int shards) {
      io::StreamReaderOptions shard_options = options;
      shard_options.num_shards = shards;
      shard_options.shard_index = shard;
      return OpenText(request, shard_options);
    };
    EMBER_ASSIGN_OR_RETURN(std::shared_ptr<io::StreamReader> main, open(request.rank, ranks));
    MadeSource made;
    made.source = std::make_unique<io::ElasticStreamSource>(main.get(), open, request.rank, ranks);
    made.parts.push_back(std::move(main));
    return made;
  };
  return entry;
}

std::vector<BatchSourceEntry> IoBatchSources() {
  return {DatasetEntry("DatasetInOrder", false),
          DatasetEntry("ShuffledDataset", true),
          RankSliceEntry(),
          RankShardEntry(),
          TextStreamEntry("TextStream", 1, false),
          TextStreamEntry("ShuffledTextStream", 1, true),
          TextStreamEntry("ShuffledTextStreamOfTwoShards", 2, true),
          ColumnarStreamEntry(),
          ElasticStreamEntry()};
}

INSTANTIATE_TEST_SUITE_P(Io, BatchSourceContractTest, ::testing::ValuesIn(IoBatchSources()),
                         BatchSourceName);

}  // namespace
}  // namespace ember::test
