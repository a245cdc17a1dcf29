// Review tests for the streaming reader (io/stream_reader.h): each one
// demonstrates a suspected bug and fails while it is there.

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

std::string CriteoLine(int64_t i) {
  char hex[32];
  std::string line = (i * 7) % 3 == 0 ? "1" : "0";
  for (int j = 0; j < kCriteoDense; ++j) {
    line += '\t';
    if ((i + j) % 11 != 0) line += std::to_string((i * (j + 3)) % 97);
  }
  std::snprintf(hex, sizeof(hex), "%08llx", static_cast<unsigned long long>(i));
  line += '\t';
  line += hex;
  for (int s = 1; s < kCriteoSlots; ++s) {
    line += '\t';
    if ((i + s) % 13 != 0) {
      std::snprintf(hex, sizeof(hex), "%08llx", static_cast<unsigned long long>((i * 31 + s) % 89));
      line += hex;
    }
  }
  return line;
}

std::string CriteoText(int64_t first, int64_t count) {
  std::string text;
  for (int64_t i = first; i < first + count; ++i) text += CriteoLine(i) + "\n";
  return text;
}

std::string BadLines(int count) {
  std::string text;
  for (int i = 0; i < count; ++i) text += std::string(300, 'x') + "\n";
  return text;
}

int CountOpenFds() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++n;
  }
  return n;
}

class StreamReviewTest : public TextFormatTest {
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

// piece_bytes is only validated >= 1; a huge value ("one piece per file")
// overflows (data_end - data_begin + piece_bytes - 1) in IndexPlainFile and
// the file silently has no pieces.
TEST_F(StreamReviewTest, HugePieceBytesStillReadsEveryRecord) {
  const std::vector<std::string> paths = {Write("a.tsv", CriteoText(0, 100))};
  StreamReaderOptions options = Small();
  options.piece_bytes = std::numeric_limits<int64_t>::max();
  std::unique_ptr<StreamReader> reader = Open(paths, options);
  ASSERT_NE(nullptr, reader);
  const StreamRun run = ReadStream(reader.get());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(100, run.stats.records_delivered);
}

// A short shard with a shuffle buffer larger than its deficit keeps
// refilling the buffer with repeats instead of draining it: it reads far
// more padding than it returns, and some of its good records never come out
// while others come out twice.
TEST_F(StreamReviewTest, PaddingWithShuffleBufferReturnsEveryGoodRecord) {
  std::string mostly_bad;
  for (int i = 0; i < 30; ++i) mostly_bad += CriteoLine(5000 + i) + "\n" + BadLines(1);
  const std::vector<std::string> paths = {Write("bad.tsv", mostly_bad),
                                          Write("good.tsv", CriteoText(0, 45))};
  StreamReaderOptions options = Small();
  options.piece_bytes = 1024;
  options.num_shards = 2;
  options.shard_index = 0;
  options.shuffle_buffer = 20;
  std::unique_ptr<StreamReader> reader = Open(paths, options);
  ASSERT_NE(nullptr, reader);
  const int64_t target = reader->EpochRecords(0);
  const StreamRun run = ReadStream(reader.get());
  ASSERT_TRUE(run.status.ok()) << run.status;
  std::map<std::string, int> counts;
  for (const std::string& record : Records(Concat(run))) ++counts[record];
  ASSERT_EQ(target, run.stats.records_delivered);
  const int64_t good = run.stats.bad_lines.lines_read - run.stats.bad_lines.bad_lines;
  ASSERT_LT(good, target) << "the shard must be short";
  std::printf("target %lld good %lld distinct %zu padded %lld\n", (long long)target,
              (long long)good, counts.size(), (long long)run.stats.padded_for_equal_shards);
  // Every good record once, then target - good repeats.
  EXPECT_EQ(good, static_cast<int64_t>(counts.size()));
  EXPECT_EQ(target - good, run.stats.padded_for_equal_shards);
}

// Gzip streams of files a shard stops reading in the middle stay open for
// the reader's life: one per such file, so descriptors (and zlib state)
// grow with the number of gzip files.
TEST_F(StreamReviewTest, GzipStreamsAreNotLeftOpenAcrossEpochs) {
  std::vector<std::string> paths;
  for (int f = 0; f < 40; ++f) {
    paths.push_back(WriteGzip("f" + std::to_string(f) + ".tsv.gz", CriteoText(f * 30, 30)));
  }
  StreamReaderOptions options = Small();
  options.piece_bytes = 2048;  // ~2 pieces a file
  options.num_shards = 7;
  options.shard_index = 3;
  options.shuffle_files = true;
  options.num_epochs = 30;
  options.threads = 1;
  options.equal_shards = true;
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

}  // namespace
}  // namespace ember::io
