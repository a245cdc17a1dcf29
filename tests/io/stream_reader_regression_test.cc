// Regression tests for the streaming reader (io/stream_reader.h): each one
// guards a bug found in review, and failed while it was there.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/criteo.h"
#include "io/stream_reader.h"
#include "io/text_reader.h"
#include "tests/io/stream_fixture.h"
#include "tests/io/text_fixture.h"

namespace ember::io {
namespace {

int CountOpenFds() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++n;
  }
  return n;
}

class StreamRegressionTest : public TextFormatTest {
 protected:
  void SetUp() override {
    TextFormatTest::SetUp();
    Result<std::unique_ptr<TextFormat>> format = NewCriteoFormat();
    ASSERT_TRUE(format.ok());
    format_ = std::move(*format);
  }
  std::unique_ptr<StreamReader> Open(const std::vector<std::string>& paths,
                                     const StreamReaderOptions& options) {
    Result<std::unique_ptr<StreamReader>> reader = StreamReader::OpenText(paths, *format_, options);
    EXPECT_TRUE(reader.ok()) << reader.status();
    return reader.ok() ? std::move(*reader) : nullptr;
  }
  std::unique_ptr<TextFormat> format_;
};

StreamReaderOptions Small() {
  StreamReaderOptions options;
  options.piece_bytes = 2048;
  options.batch_size = 32;
  options.threads = 2;
  options.max_bad_ratio = 1.0;
  return options;
}

// Guards: a piece_bytes near INT64_MAX overflowed the chunk count and gave no pieces.
TEST_F(StreamRegressionTest, HugePieceBytesStillReadsEveryRecord) {
  const std::vector<std::string> paths = {Write("a.tsv", CriteoText(0, 100))};
  StreamReaderOptions options = Small();
  options.piece_bytes = std::numeric_limits<int64_t>::max();
  std::unique_ptr<StreamReader> reader = Open(paths, options);
  ASSERT_NE(nullptr, reader);
  const StreamRun run = ReadStream(reader.get());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(100, run.stats.records_delivered);
}

// Guards: padding through a shuffle buffer returns every good record once, then the shortfall.
TEST_F(StreamRegressionTest, PaddingWithShuffleBufferReturnsEveryGoodRecord) {
  std::string mostly_good;
  for (int i = 0; i < 100; ++i) {
    std::string line = CriteoLine(i);
    if (i % 10 == 5) line[0] = '2';  // bad label, same length
    mostly_good += line + "\n";
  }
  const std::vector<std::string> paths = {Write("a.tsv", mostly_good),
                                          Write("b.tsv", CriteoText(1000, 100))};
  for (const int64_t buffer : {int64_t{0}, int64_t{20}, int64_t{1000}}) {
    SCOPED_TRACE("shuffle_buffer " + std::to_string(buffer));
    StreamReaderOptions options = Small();
    options.piece_bytes = 1024;
    options.num_shards = 2;
    options.shard_index = 0;
    options.shuffle_buffer = buffer;
    std::unique_ptr<StreamReader> reader = Open(paths, options);
    ASSERT_NE(nullptr, reader);
    const int64_t target = reader->EpochRecords(0);
    ASSERT_EQ(100, target);
    ASSERT_EQ(100, reader->EpochLines(0)) << "shard 0 must be exactly a.tsv";
    const StreamRun run = ReadStream(reader.get());
    ASSERT_TRUE(run.status.ok()) << run.status;
    std::map<std::string, int> counts;
    for (const std::string& record : Records(Concat(run))) ++counts[record];
    ASSERT_EQ(target, run.stats.records_delivered);
    std::printf("buffer %lld: target %lld distinct %zu padded %lld lines_read %lld\n",
                (long long)buffer, (long long)target, counts.size(),
                (long long)run.stats.padded_for_equal_shards,
                (long long)run.stats.bad_lines.lines_read);
    // Every one of the 90 good records once, then 10 repeats.
    EXPECT_EQ(90u, counts.size());
    EXPECT_EQ(10, run.stats.padded_for_equal_shards);
  }
}

// Guards: gzip streams a shard stops reading mid-file are closed, not kept for the reader's life.
TEST_F(StreamRegressionTest, GzipStreamsAreNotLeftOpenAcrossEpochs) {
  std::vector<std::string> paths;
  for (int f = 0; f < 120; ++f) {
    paths.push_back(WriteGzip(std::string("f").append(std::to_string(f)).append(".tsv.gz"),
                              CriteoText(f * 24, 24)));
  }
  StreamReaderOptions options = Small();
  options.piece_bytes = 1024;  // ~4 pieces a file
  options.num_shards = 200;
  options.shard_index = 77;
  options.shuffle_files = true;
  options.num_epochs = 100;
  options.threads = 1;
  options.queue_depth = 1;
  options.equal_shards = false;
  const int before = CountOpenFds();
  std::unique_ptr<StreamReader> reader = Open(paths, options);
  ASSERT_NE(nullptr, reader);
  const StreamRun run = ReadStream(reader.get());
  ASSERT_TRUE(run.status.ok()) << run.status;
  const int after = CountOpenFds();
  std::printf("fds before %d after %d (pieces %lld)\n", before, after,
              (long long)reader->num_pieces());
  EXPECT_LE(after - before, 3);
}

// Guards: a shard that pads read every line, so it counts none as dropped_for_equal_shards.
TEST_F(StreamRegressionTest, AShardThatPadsLeavesNoLineUnread) {
  std::string text;
  for (int i = 0; i < 110; ++i) {
    std::string line = CriteoLine(i);
    if (i % 10 == 5 || i == 0 || i == 1 || i == 2 || i == 3 || i == 4) line[0] = '2';
    text += line + "\n";
  }
  const std::vector<std::string> paths = {Write("a.tsv", text),
                                          Write("b.tsv", CriteoText(1000, 100))};
  StreamReaderOptions options = Small();
  options.piece_bytes = 1 << 20;  // one piece a file
  options.num_shards = 2;
  options.shard_index = 0;
  std::unique_ptr<StreamReader> reader = Open(paths, options);
  ASSERT_NE(nullptr, reader);
  ASSERT_EQ(100, reader->EpochRecords(0));
  ASSERT_EQ(110, reader->EpochLines(0)) << "shard 0 must be exactly a.tsv";
  const StreamRun run = ReadStream(reader.get());
  ASSERT_TRUE(run.status.ok()) << run.status;
  std::printf("padded %lld dropped %lld\n", (long long)run.stats.padded_for_equal_shards,
              (long long)run.stats.dropped_for_equal_shards);
  EXPECT_GT(run.stats.padded_for_equal_shards, 0);
  EXPECT_EQ(0, run.stats.dropped_for_equal_shards);
}

// Guards: EstimatedBatches rounds up without overflow for a batch_size near INT64_MAX.
TEST_F(StreamRegressionTest, EstimatedBatchesWithAHugeBatchSize) {
  const std::vector<std::string> paths = {Write("a.tsv", CriteoText(0, 100))};
  StreamReaderOptions options = Small();
  options.batch_size = std::numeric_limits<int64_t>::max();
  std::unique_ptr<StreamReader> reader = Open(paths, options);
  ASSERT_NE(nullptr, reader);
  EXPECT_EQ(1, reader->EstimatedBatches());
  const StreamRun run = ReadStream(reader.get());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(1u, run.batches.size());
}

// Guards: many Seeks on one reader (gzip turns, small window) resume exactly; early destruction.
TEST_F(StreamRegressionTest, ManySeeksOnOneReaderWithGzipAndSmallWindow) {
  const std::vector<std::string> paths = {WriteGzip("a.tsv.gz", CriteoText(0, 300)),
                                          Write("b.tsv", CriteoText(300, 200)),
                                          WriteGzip("c.tsv.gz", CriteoText(500, 400))};
  for (const int depth : {1, 3}) {
    StreamReaderOptions options = Small();
    options.threads = 4;
    options.queue_depth = depth;
    options.shuffle_files = true;
    options.shuffle_pieces = true;
    options.shuffle_buffer = 37;
    options.num_shards = 2;
    options.shard_index = 1;
    options.num_epochs = 3;
    std::unique_ptr<StreamReader> first = Open(paths, options);
    ASSERT_NE(nullptr, first);
    const StreamRun full = ReadStream(first.get(), /*with_positions=*/true);
    ASSERT_TRUE(full.status.ok()) << full.status;
    std::unique_ptr<StreamReader> reader = Open(paths, options);
    ASSERT_NE(nullptr, reader);
    uint64_t state = 12345;
    for (int round = 0; round < 200; ++round) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const size_t cut = (state >> 33) % full.positions.size();
      Result<StreamPosition> position = StreamPosition::Parse(full.positions[cut]);
      ASSERT_TRUE(position.ok());
      ASSERT_TRUE(reader->Seek(*position).ok());
      Batch batch;
      for (size_t b = cut; b < std::min(full.batches.size(), cut + 2); ++b) {
        Result<bool> more = reader->Next(&batch);
        ASSERT_TRUE(more.ok()) << more.status();
        ASSERT_TRUE(*more);
        ExpectSameBatch(full.batches[b], batch);
      }
    }
    for (int round = 0; round < 50; ++round) {
      std::unique_ptr<StreamReader> doomed = Open(paths, options);
      Batch batch;
      for (int b = 0; b < round % 5; ++b) ASSERT_TRUE(doomed->Next(&batch).ok());
    }
  }
}

// Guards: exact resume at every cut while a short shard pads through a buffer larger than it.
TEST_F(StreamRegressionTest, ResumesWhilePaddingThroughALargeBuffer) {
  std::string mostly_good;
  for (int i = 0; i < 100; ++i) {
    std::string line = CriteoLine(i);
    if (i % 10 == 5) line[0] = '2';
    mostly_good += line + "\n";
  }
  const std::vector<std::string> paths = {WriteGzip("a.tsv.gz", mostly_good),
                                          Write("b.tsv", CriteoText(1000, 100))};
  for (const int64_t buffer : {int64_t{7}, int64_t{150}}) {
    SCOPED_TRACE(buffer);
    StreamReaderOptions options = Small();
    options.piece_bytes = 1024;
    options.num_shards = 2;
    options.shard_index = 0;
    options.shuffle_buffer = buffer;
    options.num_epochs = 2;
    options.batch_size = 7;
    options.threads = 3;
    auto open = [&]() { return StreamReader::OpenText(paths, *format_, options); };
    Result<std::unique_ptr<StreamReader>> reader = open();
    ASSERT_TRUE(reader.ok());
    const StreamRun full = ReadStream(reader->get(), true);
    ASSERT_TRUE(full.status.ok()) << full.status;
    ExpectResumesAt(full, CutPoints(full.batches.size()), open);
  }
}

// Guards: Seek rejects a position whose piece lies past the shard's pieces, not an endless stream.
TEST_F(StreamRegressionTest, APositionPastTheShardsPiecesIsRejectedNotEndless) {
  const std::vector<std::string> paths = {Write("a.tsv", CriteoText(0, 200))};
  StreamReaderOptions options = Small();
  std::unique_ptr<StreamReader> reader = Open(paths, options);
  ASSERT_NE(nullptr, reader);
  Batch batch;
  ASSERT_TRUE(*reader->Next(&batch));
  StreamPosition position = reader->position();
  const int64_t pieces = reader->num_pieces();
  position.piece = pieces + 5;
  position.counted_through = pieces + 5;
  position.piece_row = 0;
  Result<StreamPosition> parsed = StreamPosition::Parse(position.Serialize());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  std::unique_ptr<StreamReader> other = Open(paths, options);
  const Status seek = other->Seek(*parsed);
  if (!seek.ok()) return;  // Rejected: fine.
  int64_t batches = 0;
  while (batches < 10000) {
    Result<bool> more = other->Next(&batch);
    if (!more.ok() || !*more) break;
    ++batches;
  }
  EXPECT_LT(batches, 10000) << "the stream does not end";
}

}  // namespace
}  // namespace ember::io
