#include "io/stream_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "io/columnar.h"
#include "io/criteo.h"
#include "io/delimited_format.h"
#include "io/text_reader.h"
#include "tests/io/stream_fixture.h"
#include "tests/io/text_fixture.h"

namespace ember::io {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<TextFormat> Criteo() {
  Result<std::unique_ptr<TextFormat>> format = NewCriteoFormat();
  EXPECT_TRUE(format.ok()) << format.status();
  return std::move(*format);
}

// Small pieces, so that a few hundred lines make dozens of pieces.
constexpr int64_t kSmallPieceBytes = 2048;

StreamReaderOptions SmallPieces() {
  StreamReaderOptions options;
  options.piece_bytes = kSmallPieceBytes;
  options.batch_size = 32;
  options.threads = 2;
  options.max_bad_ratio = 1.0;
  return options;
}

class StreamReaderTest : public TextFormatTest {
 protected:
  void SetUp() override {
    TextFormatTest::SetUp();
    format_ = Criteo();
  }

  // Three files of 400, 150 and 700 lines (about 40, 15 and 70 pieces); the
  // second gzip-compressed when `gzip`.
  std::vector<std::string> WriteThreeFiles(bool gzip = false) {
    return {
        Write("a.tsv", CriteoText(0, 400)),
        gzip ? WriteGzip("b.tsv.gz", CriteoText(400, 150)) : Write("b.tsv", CriteoText(400, 150)),
        Write("c.tsv", CriteoText(550, 700))};
  }

  std::unique_ptr<StreamReader> Open(const std::vector<std::string>& paths,
                                     const StreamReaderOptions& options) {
    Result<std::unique_ptr<StreamReader>> reader = StreamReader::OpenText(paths, *format_, options);
    EXPECT_TRUE(reader.ok()) << reader.status();
    return reader.ok() ? std::move(*reader) : nullptr;
  }

  StreamRun Run(const std::vector<std::string>& paths, const StreamReaderOptions& options,
                bool with_positions = false) {
    std::unique_ptr<StreamReader> reader = Open(paths, options);
    if (reader == nullptr) return StreamRun{};
    return ReadStream(reader.get(), with_positions);
  }

  Dataset ReadAll(const std::vector<std::string>& paths) {
    Result<Dataset> data = ReadTextFiles(paths, *format_, Lenient());
    EXPECT_TRUE(data.ok()) << data.status();
    return data.ok() ? *std::move(data) : Dataset();
  }

  std::unique_ptr<TextFormat> format_;
};

TEST_F(StreamReaderTest, ReadsEveryRecordInFileOrderLikeReadTextFiles) {
  const std::vector<std::string> paths = WriteThreeFiles(/*gzip=*/true);
  const Dataset expected = ReadAll(paths);
  for (const int threads : {1, 2, 4}) {
    SCOPED_TRACE(threads);
    StreamReaderOptions options = SmallPieces();
    options.threads = threads;
    const StreamRun run = Run(paths, options);
    ASSERT_TRUE(run.status.ok()) << run.status;
    ExpectSameBatch(expected.all(), Concat(run));
    ASSERT_EQ(40u, run.batches.size());  // 1250 records in batches of 32.
    for (size_t b = 0; b + 1 < run.batches.size(); ++b) EXPECT_EQ(32, run.batches[b].size);
    EXPECT_EQ(1250 % 32, run.batches.back().size);
    for (const Batch& batch : run.batches) ExpectWellFormed(batch);
    EXPECT_EQ(1250, run.stats.bad_lines.lines_read);
    EXPECT_EQ(1250, run.stats.records_delivered);
  }
}

TEST_F(StreamReaderTest, IndexCutsFilesIntoPiecesOfAboutThePieceSize) {
  const std::vector<std::string> paths = WriteThreeFiles();
  std::unique_ptr<StreamReader> reader = Open(paths, SmallPieces());
  int64_t bytes = 0;
  for (const std::string& path : paths) bytes += std::filesystem::file_size(path);
  // One piece per nominal chunk of 2 KiB, give or take the file ends.
  EXPECT_NEAR(bytes / kSmallPieceBytes, reader->num_pieces(), 3);
  EXPECT_EQ(kCriteoSlots, reader->layout().num_slots);
}

TEST_F(StreamReaderTest, DropLastDropsTheShortBatchOfEachEpoch) {
  const std::vector<std::string> paths = WriteThreeFiles();
  StreamReaderOptions options = SmallPieces();
  options.drop_last = true;
  options.num_epochs = 2;
  const StreamRun run = Run(paths, options);
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(2u * (1250 / 32), run.batches.size());
  for (const Batch& batch : run.batches) EXPECT_EQ(32, batch.size);
  EXPECT_EQ(0, run.epochs[38]);
  EXPECT_EQ(1, run.epochs[39]);
}

TEST_F(StreamReaderTest, SameBatchesWhateverTheThreadCountAndQueueDepth) {
  const std::vector<std::string> paths = WriteThreeFiles(/*gzip=*/true);
  StreamReaderOptions options = SmallPieces();
  options.shuffle_files = true;
  options.shuffle_pieces = true;
  options.shuffle_buffer = 100;
  options.num_shards = 2;
  options.shard_index = 1;
  options.num_epochs = 2;
  options.threads = 1;
  options.queue_depth = 1;
  const StreamRun one = Run(paths, options);
  ASSERT_TRUE(one.status.ok()) << one.status;
  for (const auto& [threads, depth] : std::vector<std::pair<int, int>>{{2, 2}, {4, 3}, {3, 16}}) {
    SCOPED_TRACE(std::to_string(threads) + " threads, depth " + std::to_string(depth));
    options.threads = threads;
    options.queue_depth = depth;
    ExpectSameRun(one, Run(paths, options));
  }
}

TEST_F(StreamReaderTest, ShardsTogetherReadEveryRecordExactlyOnce) {
  const std::vector<std::string> paths = WriteThreeFiles(/*gzip=*/true);
  const std::vector<std::string> all = SortedRecords(ReadAll(paths).all());
  for (const int shards : {1, 2, 3, 5}) {
    SCOPED_TRACE(std::to_string(shards) + " shards");
    for (const bool shuffle : {false, true}) {
      std::vector<std::string> union_of_shards;
      for (int shard = 0; shard < shards; ++shard) {
        StreamReaderOptions options = SmallPieces();
        options.num_shards = shards;
        options.shard_index = shard;
        options.equal_shards = false;
        options.shuffle_files = shuffle;
        options.shuffle_pieces = shuffle;
        options.shuffle_buffer = shuffle ? 50 : 0;
        const StreamRun run = Run(paths, options);
        ASSERT_TRUE(run.status.ok()) << run.status;
        EXPECT_EQ(0, run.stats.dropped_for_equal_shards);
        const std::vector<std::string> records = Records(Concat(run));
        union_of_shards.insert(union_of_shards.end(), records.begin(), records.end());
      }
      std::sort(union_of_shards.begin(), union_of_shards.end());
      EXPECT_EQ(all, union_of_shards);
    }
  }
}

TEST_F(StreamReaderTest, EqualShardsReturnTheSameBatchCountAndDropTheRest) {
  const std::vector<std::string> paths = WriteThreeFiles(/*gzip=*/true);
  const std::vector<std::string> all = SortedRecords(ReadAll(paths).all());
  for (const int shards : {1, 2, 3, 5}) {
    for (const bool drop_last : {false, true}) {
      SCOPED_TRACE(std::to_string(shards) + " shards, drop_last " + std::to_string(drop_last));
      std::set<std::string> seen;
      std::vector<size_t> batch_counts;
      int64_t delivered = 0;
      int64_t dropped = 0;
      for (int shard = 0; shard < shards; ++shard) {
        StreamReaderOptions options = SmallPieces();
        options.num_shards = shards;
        options.shard_index = shard;
        options.shuffle_files = true;
        options.shuffle_pieces = true;
        options.shuffle_buffer = 40;
        options.drop_last = drop_last;
        std::unique_ptr<StreamReader> reader = Open(paths, options);
        const int64_t target = reader->EpochRecords(0);
        if (shards == 1) {
          EXPECT_EQ(-1, target);
        } else {
          EXPECT_GT(target, 1250 / shards - 2 * 15);
          EXPECT_LE(target, 1250 / shards);
        }
        const int64_t estimated = reader->EstimatedBatches();
        const StreamRun run = ReadStream(reader.get());
        ASSERT_TRUE(run.status.ok()) << run.status;
        batch_counts.push_back(run.batches.size());
        // No bad lines: the estimate is exact, with or without equal shards.
        EXPECT_EQ(estimated, static_cast<int64_t>(run.batches.size()));
        const Batch records = Concat(run);
        for (const std::string& record : Records(records)) {
          EXPECT_TRUE(seen.insert(record).second) << "a record read twice in an epoch";
        }
        if (shards > 1) {
          EXPECT_EQ(drop_last ? target / 32 * 32 : target, records.size);
        }
        EXPECT_EQ(0, run.stats.padded_for_equal_shards);
        delivered += records.size;
        dropped += run.stats.dropped_for_equal_shards;
      }
      for (const size_t count : batch_counts) EXPECT_EQ(batch_counts.front(), count);
      for (const std::string& record : seen) {
        EXPECT_TRUE(std::binary_search(all.begin(), all.end(), record));
      }
      // Every line is returned or counted as dropped (or, with drop_last,
      // was in a short last batch).
      if (!drop_last) {
        EXPECT_EQ(1250, delivered + dropped);
      }
      if (shards == 1) {
        EXPECT_EQ(0, dropped);
      }
    }
  }
}

// Lines as long as a Criteo line that are all bad ("column count").
std::string BadLines(int count) {
  std::string text;
  for (int i = 0; i < count; ++i) text += std::string(300, 'x') + "\n";
  return text;
}

TEST_F(StreamReaderTest, AShardShortOfGoodRecordsPadsByReadingItsPiecesAgain) {
  // The first file, a little larger than the second, is bad lines but for
  // one in ten: shard 0 of 2 gets only pieces of it.
  std::string mostly_bad;
  for (int i = 0; i < 30; ++i) mostly_bad += CriteoLine(5000 + i) + "\n" + BadLines(9);
  const std::vector<std::string> paths = {Write("bad.tsv", mostly_bad),
                                          Write("good.tsv", CriteoText(0, 300))};
  const std::vector<std::string> good_of_bad = SortedRecords(ReadAll({paths[0]}).all());
  StreamReaderOptions options = SmallPieces();
  options.num_shards = 2;
  std::vector<size_t> batch_counts;
  for (int shard = 0; shard < 2; ++shard) {
    SCOPED_TRACE(shard);
    options.shard_index = shard;
    std::unique_ptr<StreamReader> reader = Open(paths, options);
    const int64_t target = reader->EpochRecords(0);
    const StreamRun run = ReadStream(reader.get());
    ASSERT_TRUE(run.status.ok()) << run.status;
    batch_counts.push_back(run.batches.size());
    const Batch records = Concat(run);
    EXPECT_EQ(target, records.size);
    if (shard == 0) {
      // Its good records, read round and round.
      std::map<std::string, int> counts;
      for (const std::string& record : Records(records)) ++counts[record];
      EXPECT_GT(target, static_cast<int64_t>(counts.size()) * 5);
      EXPECT_EQ(target - static_cast<int64_t>(counts.size()), run.stats.padded_for_equal_shards);
      for (const auto& [record, count] : counts) {
        EXPECT_TRUE(std::binary_search(good_of_bad.begin(), good_of_bad.end(), record));
      }
    } else {
      EXPECT_EQ(0, run.stats.padded_for_equal_shards);
    }
  }
  EXPECT_EQ(batch_counts[0], batch_counts[1]);
}

TEST_F(StreamReaderTest, AShardWithoutGoodRecordsFailsRatherThanLoopForever) {
  const std::vector<std::string> paths = {Write("bad.tsv", BadLines(300)),
                                          Write("good.tsv", CriteoText(0, 100))};
  StreamReaderOptions options = SmallPieces();
  options.num_shards = 2;
  const StreamRun run = Run(paths, options);
  EXPECT_EQ(StatusCode::kInvalidArgument, run.status.code());
  EXPECT_THAT(run.status.message(), HasSubstr("no good records"));
}

TEST_F(StreamReaderTest, EpochsReshuffleButEachIsAPermutationOfTheData) {
  const std::vector<std::string> paths = WriteThreeFiles();
  const std::vector<std::string> all = SortedRecords(ReadAll(paths).all());
  StreamReaderOptions options = SmallPieces();
  options.shuffle_files = true;
  options.shuffle_pieces = true;
  options.shuffle_buffer = 64;
  options.num_epochs = 3;
  const StreamRun run = Run(paths, options);
  ASSERT_TRUE(run.status.ok()) << run.status;
  std::vector<std::vector<std::string>> epochs(3);
  for (size_t b = 0; b < run.batches.size(); ++b) {
    ASSERT_LT(run.epochs[b], 3);
    if (b > 0) {
      EXPECT_LE(run.epochs[b - 1], run.epochs[b]);
    }
    const std::vector<std::string> records = Records(run.batches[b]);
    epochs[run.epochs[b]].insert(epochs[run.epochs[b]].end(), records.begin(), records.end());
  }
  const std::vector<std::string> in_file_order = Records(ReadAll(paths).all());
  for (int e = 0; e < 3; ++e) {
    SCOPED_TRACE(e);
    EXPECT_NE(in_file_order, epochs[e]);
    if (e > 0) {
      EXPECT_NE(epochs[e - 1], epochs[e]);
    }
    std::vector<std::string> sorted = epochs[e];
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(all, sorted);
  }
  // Each epoch ends with its own short batch: batches never span epochs.
  EXPECT_EQ(3u * 40, run.batches.size());
}

TEST_F(StreamReaderTest, SeedChangesTheOrderAndTheSameSeedRepeatsIt) {
  const std::vector<std::string> paths = WriteThreeFiles();
  StreamReaderOptions options = SmallPieces();
  options.shuffle_files = true;
  options.shuffle_pieces = true;
  options.shuffle_buffer = 64;
  const StreamRun first = Run(paths, options);
  ExpectSameRun(first, Run(paths, options));
  options.seed = 2;
  const Batch other = Concat(Run(paths, options));
  EXPECT_NE(Records(Concat(first)), Records(other));
}

TEST_F(StreamReaderTest, GzipStreamsLikeThePlainFile) {
  const std::string text = CriteoText(0, 900, "\r\n") + "\r\n\n";
  StreamReaderOptions options = SmallPieces();
  options.shuffle_files = true;
  options.shuffle_buffer = 30;
  options.num_shards = 3;
  for (int shard = 0; shard < 3; ++shard) {
    options.shard_index = shard;
    const StreamRun plain =
        Run({Write("a.tsv", text), Write("b.tsv", CriteoText(900, 90))}, options);
    const StreamRun gzip =
        Run({WriteGzip("a.tsv.gz", text), WriteGzip("b.tsv.gz", CriteoText(900, 90))}, options);
    ASSERT_TRUE(plain.status.ok()) << plain.status;
    ExpectSameRun(plain, gzip);
  }
}

TEST_F(StreamReaderTest, TruncatedGzipIsDataLossNamingTheFile) {
  const std::string path = WriteGzip("t.tsv.gz", CriteoText(0, 3000));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  Result<std::unique_ptr<StreamReader>> reader =
      StreamReader::OpenText({path}, *format_, SmallPieces());
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(StatusCode::kDataLoss, reader.status().code());
  EXPECT_THAT(reader.status().message(), HasSubstr(path));
}

TEST_F(StreamReaderTest, AFileChangedAfterOpeningIsDataLossWhenReached) {
  const std::string path = Write("a.tsv", CriteoText(0, 400));
  std::unique_ptr<StreamReader> reader = Open({path}, SmallPieces());
  std::filesystem::resize_file(path, 10000);
  const StreamRun run = ReadStream(reader.get());
  EXPECT_EQ(StatusCode::kDataLoss, run.status.code());
  EXPECT_THAT(run.status.message(), HasSubstr(path));
}

// A file with every kind of awkward line: bad lines of several reasons, a
// blank line inside, CRLF endings, a line over 1 MiB, blank lines at the end
// and no final newline before them.
std::string AwkwardText() {
  std::string text = CriteoText(0, 120);
  text += "2\t" + CriteoLine(1).substr(2) + "\n";  // bad label
  text += CriteoText(120, 50, "\r\n");
  text += "\n";                                     // blank: column count
  text += "1\tx" + CriteoLine(3).substr(2) + "\n";  // unparsable integer
  text += CriteoText(170, 80);
  text += std::string(kMaxLineBytes + 5, 'z') + "\n";  // line too long
  text += CriteoText(250, 60);
  text += "just one field\n";
  text += CriteoLine(310) + "\r\n\r\n\n";
  return text;
}

TEST_F(StreamReaderTest, BadLinesAreCountedAndNumberedLikeReadTextFiles) {
  const std::vector<std::string> paths = {Write("a.tsv", AwkwardText()),
                                          WriteGzip("b.tsv.gz", AwkwardText()),
                                          Write("c.tsv", CriteoText(0, 10) + "0\t1\n")};
  const Dataset expected = ReadAll(paths);
  ASSERT_EQ(11, expected.bad_lines().bad_lines);
  for (const int threads : {1, 3}) {
    StreamReaderOptions options = SmallPieces();
    options.threads = threads;
    const StreamRun run = Run(paths, options);
    ASSERT_TRUE(run.status.ok()) << run.status;
    ExpectSameBatch(expected.all(), Concat(run));
    ExpectSameReport(expected.bad_lines(), run.stats.bad_lines);
  }
  EXPECT_THAT(expected.bad_lines().first_examples[0], HasSubstr("a.tsv:121: bad label"));
}

// Plain and gzipped files without a header that start with a byte order mark
// stream the examples the text reader reads, with no bad line.
TEST_F(StreamReaderTest, AByteOrderMarkIsNotPartOfTheFirstLine) {
  Result<std::unique_ptr<TextFormat>> format = NewCriteoFormat();
  ASSERT_TRUE(format.ok()) << format.status();
  std::string text = "\xEF\xBB\xBF";
  for (int i = 0; i < 50; ++i) {
    text += std::to_string(i % 2);
    for (int c = 0; c < 13; ++c) text.append("\t").append(std::to_string(i + c));
    for (int c = 0; c < 26; ++c) text.append("\t").append(std::to_string(1000 + 7 * i + c));
    text += "\n";
  }
  const std::vector<std::string> paths = {Write("bom.tsv", text), WriteGzip("bom.tsv.gz", text)};
  const Result<Dataset> expected = ReadTextFiles(paths, **format, Lenient());
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(100, expected->size());
  EXPECT_EQ(0, expected->bad_lines().bad_lines);
  const Result<std::unique_ptr<StreamReader>> reader =
      StreamReader::OpenText(paths, **format, SmallPieces());
  ASSERT_TRUE(reader.ok()) << reader.status();
  const StreamRun run = ReadStream(reader->get());
  ASSERT_TRUE(run.status.ok()) << run.status;
  ExpectSameBatch(expected->all(), Concat(run));
  EXPECT_EQ(0, run.stats.bad_lines.bad_lines);
}

TEST_F(StreamReaderTest, FilesWithAHeaderNumberTheirLinesFromIt) {
  DelimitedFormatOptions csv;
  csv.schema = *ParseSchemaSpec("y=label,a=cat,b=dense:raw");
  csv.header = true;
  Result<std::unique_ptr<TextFormat>> format = NewDelimitedFormat(csv);
  ASSERT_TRUE(format.ok()) << format.status();
  std::string text =
      "\xEF\xBB\xBF"
      "b,a,y\r\n";
  for (int i = 0; i < 400; ++i) {
    if (i % 97 == 5) {
      text += "1,only two\r\n";
    } else {
      text +=
          std::to_string(i) + ",v" + std::to_string(i % 17) + "," + std::to_string(i % 2) + "\r\n";
    }
  }
  const std::vector<std::string> paths = {Write("a.csv", text), WriteGzip("b.csv.gz", text),
                                          Write("header_only.csv", "b,a,y\n"),
                                          Write("empty.csv", "")};
  const Result<Dataset> expected = ReadTextFiles(paths, **format, Lenient());
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(2 * 395, expected->size());
  StreamReaderOptions options = SmallPieces();
  options.piece_bytes = 256;
  const Result<std::unique_ptr<StreamReader>> reader =
      StreamReader::OpenText(paths, **format, options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const StreamRun run = ReadStream(reader->get());
  ASSERT_TRUE(run.status.ok()) << run.status;
  ExpectSameBatch(expected->all(), Concat(run));
  ExpectSameReport(expected->bad_lines(), run.stats.bad_lines);
  EXPECT_THAT(run.stats.bad_lines.first_examples[0], HasSubstr("a.csv:7: column count"));

  // A header the format rejects is an error naming the file's first line.
  const std::string bad_header = Write("c.csv", "b,x,y\n1,2,3\n");
  const Status status = StreamReader::OpenText({bad_header}, **format, options).status();
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("c.csv:1"));
}

TEST_F(StreamReaderTest, FailPolicyFailsAtTheFirstBadLineLikeReadTextFiles) {
  const std::vector<std::string> paths = {Write("a.tsv", AwkwardText())};
  TextReadOptions strict = Strict();
  const Status expected = ReadTextFiles(paths, *format_, strict).status();
  ASSERT_FALSE(expected.ok());
  StreamReaderOptions options = SmallPieces();
  options.bad_lines = BadLinePolicy::kFail;
  const StreamRun run = Run(paths, options);
  EXPECT_EQ(expected, run.status);
  // The batches before the bad line's piece were returned.
  EXPECT_FALSE(run.batches.empty());
}

TEST_F(StreamReaderTest, TooManyBadLinesFailOnceEnoughLinesWereRead) {
  std::string text;
  for (int i = 0; i < 3000; ++i) text += i % 20 == 0 ? "bad\n" : CriteoLine(i) + "\n";
  StreamReaderOptions options = SmallPieces();
  options.max_bad_ratio = 0.01;
  const StreamRun run = Run({Write("a.tsv", text)}, options);
  EXPECT_EQ(StatusCode::kInvalidArgument, run.status.code());
  EXPECT_THAT(run.status.message(), HasSubstr("too many bad lines"));
  // Checked at the first piece boundary past 1000 lines, not at the end.
  EXPECT_LT(run.stats.bad_lines.lines_read, 1100);
  options.max_bad_ratio = 0.06;
  EXPECT_TRUE(Run({Write("b.tsv", text)}, options).status.ok());
}

TEST_F(StreamReaderTest, TheRatioIsCheckedAtTheEndOfASmallInput) {
  StreamReaderOptions options = SmallPieces();
  options.max_bad_ratio = 0.01;
  const std::string path = Write("a.tsv", CriteoText(0, 50) + "bad\n");
  const StreamRun run = Run({path}, options);
  EXPECT_EQ(StatusCode::kInvalidArgument, run.status.code());
  EXPECT_THAT(run.status.message(), HasSubstr("too many bad lines: 1 of 51"));
  EXPECT_THAT(run.status.message(), HasSubstr("); first: " + path + ":51: "));
}

TEST_F(StreamReaderTest, EmptyFilesGiveNoBatches) {
  const std::vector<std::string> paths = {Write("a.tsv", ""), Write("b.tsv", "\n\n")};
  const StreamRun run = Run(paths, SmallPieces());
  EXPECT_TRUE(run.status.ok()) << run.status;
  EXPECT_TRUE(run.batches.empty());
}

TEST_F(StreamReaderTest, RejectsBadOptionsAndTooFewPiecesForTheShards) {
  const std::vector<std::string> paths = {Write("a.tsv", CriteoText(0, 20))};
  StreamReaderOptions options = SmallPieces();
  options.batch_size = 0;
  EXPECT_THAT(StreamReader::OpenText(paths, *format_, options).status().message(),
              HasSubstr("batch_size"));
  options = SmallPieces();
  options.num_shards = 2;
  options.shard_index = 2;
  EXPECT_THAT(StreamReader::OpenText(paths, *format_, options).status().message(),
              HasSubstr("shard_index"));
  options.shard_index = 1;
  options.piece_bytes = 1 << 20;
  const Status few = StreamReader::OpenText(paths, *format_, options).status();
  EXPECT_EQ(StatusCode::kInvalidArgument, few.code());
  EXPECT_THAT(few.message(), HasSubstr("too few for 2 shards"));
  EXPECT_EQ(StatusCode::kNotFound,
            StreamReader::OpenText({Path("missing.tsv")}, *format_, SmallPieces()).status().code());
}

TEST_F(StreamReaderTest, PositionRoundTripsThroughItsText) {
  std::string text = CriteoText(0, 300);
  text += "bad \"quoted\" line\n";
  StreamReaderOptions options = SmallPieces();
  options.shuffle_buffer = 20;
  options.seed = 0xfedcba9876543210ULL;
  std::unique_ptr<StreamReader> reader = Open({Write("a.tsv", text)}, options);
  Batch batch;
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(reader->Next(&batch).ok());
  const StreamPosition position = reader->position();
  EXPECT_EQ(1, position.bad_lines.bad_lines);
  const std::string serialized = position.Serialize();
  EXPECT_EQ(std::string::npos, serialized.find('\n'));
  Result<StreamPosition> parsed = StreamPosition::Parse(serialized);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(serialized, parsed->Serialize());
  EXPECT_EQ(0xfedcba9876543210ULL, parsed->seed);
  EXPECT_EQ(position.bad_lines.first_examples, parsed->bad_lines.first_examples);

  EXPECT_EQ(StatusCode::kInvalidArgument, StreamPosition::Parse("{").status().code());
  EXPECT_THAT(StreamPosition::Parse("{\"version\": 1}").status().message(), HasSubstr("input"));
  std::string no_epoch = serialized;
  no_epoch.replace(no_epoch.find("\"epoch\""), 7, "\"epoh\"");
  EXPECT_THAT(StreamPosition::Parse(no_epoch).status().message(), HasSubstr("\"epoch\""));
}

TEST_F(StreamReaderTest, SeekingBackOnTheSameReaderRepeatsTheStream) {
  const std::vector<std::string> paths = WriteThreeFiles(/*gzip=*/true);
  StreamReaderOptions options = SmallPieces();
  options.shuffle_files = true;
  options.shuffle_buffer = 45;
  options.num_epochs = 2;
  std::unique_ptr<StreamReader> reader = Open(paths, options);
  const StreamRun full = ReadStream(reader.get(), /*with_positions=*/true);
  ASSERT_TRUE(full.status.ok()) << full.status;
  for (const size_t cut : {size_t{57}, size_t{3}, size_t{40}}) {
    SCOPED_TRACE(cut);
    ASSERT_TRUE(reader->Seek(*StreamPosition::Parse(full.positions[cut])).ok());
    const StreamRun rest = ReadStream(reader.get());
    ASSERT_TRUE(rest.status.ok()) << rest.status;
    EXPECT_EQ(BatchSizes(full, cut), BatchSizes(rest));
    ExpectSameBatch(Concat(full, cut), Concat(rest));
  }
}

TEST_F(StreamReaderTest, APositionOfOtherOptionsOrFilesIsRejectedNamingWhatDiffers) {
  const std::vector<std::string> paths = WriteThreeFiles();
  StreamReaderOptions options = SmallPieces();
  options.shuffle_buffer = 20;
  options.num_shards = 2;
  std::unique_ptr<StreamReader> reader = Open(paths, options);
  Batch batch;
  ASSERT_TRUE(reader->Next(&batch).ok());
  const StreamPosition position = reader->position();

  auto seek_with = [&](StreamReaderOptions other, const std::vector<std::string>& files) {
    std::unique_ptr<StreamReader> fresh = Open(files, other);
    return fresh->Seek(position);
  };
  StreamReaderOptions other = options;
  other.seed = 9;
  EXPECT_THAT(seek_with(other, paths).message(), HasSubstr("seed is 1 in the position, 9"));
  other = options;
  other.shuffle_buffer = 21;
  EXPECT_THAT(seek_with(other, paths).message(), HasSubstr("shuffle_buffer"));
  other = options;
  other.shard_index = 1;
  EXPECT_THAT(seek_with(other, paths).message(), HasSubstr("shard_index"));
  other = options;
  other.batch_size = 64;
  EXPECT_THAT(seek_with(other, paths).message(), HasSubstr("batch_size"));
  other = options;
  other.piece_bytes = 4096;
  EXPECT_THAT(seek_with(other, paths).message(), HasSubstr("piece size"));
  EXPECT_THAT(seek_with(options, {paths[0], paths[1]}).message(), HasSubstr("the number of files"));
  const std::vector<std::string> changed = {paths[0], paths[1],
                                            Write("c2.tsv", CriteoText(550, 699))};
  const Status status = seek_with(options, changed);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("fingerprint"));
  other = options;
  other.bad_lines = BadLinePolicy::kFail;
  EXPECT_THAT(seek_with(other, paths).message(), HasSubstr("bad_lines is skip in the position"));
  // What may differ: threads, queue depth, epochs, the bad-line ratio.
  other = options;
  other.threads = 3;
  other.queue_depth = 1;
  other.num_epochs = 4;
  other.max_bad_ratio = 0.5;
  EXPECT_TRUE(seek_with(other, paths).ok());
}

// One configuration of the resume tests.
struct ResumeCase {
  const char* name;
  bool columnar = false;
  bool gzip = false;
  bool shuffle = false;
  int64_t buffer = 0;
  int shards = 1;
  int shard = 0;
  bool equal_shards = true;
  bool drop_last = false;
  bool bad_lines = false;
  // Input where shard 0 of 2 is short of good records and pads.
  bool padding = false;
};

class StreamResumeTest : public StreamReaderTest,
                         public ::testing::WithParamInterface<ResumeCase> {};

TEST_P(StreamResumeTest, ResumingAtEveryCutPointYieldsTheRestOfTheStream) {
  const ResumeCase& c = GetParam();
  std::vector<std::string> paths = WriteThreeFiles(c.gzip);
  if (c.bad_lines) paths.push_back(Write("awkward.tsv", AwkwardText()));
  if (c.padding) {
    std::string mostly_bad;
    for (int i = 0; i < 120; ++i) mostly_bad += CriteoLine(5000 + i) + "\n" + BadLines(5);
    paths = {Write("bad.tsv", mostly_bad), Write("good.tsv", CriteoText(0, 600))};
  }
  StreamReaderOptions options = SmallPieces();
  options.shuffle_files = c.shuffle;
  options.shuffle_pieces = c.shuffle;
  options.shuffle_buffer = c.buffer;
  options.num_shards = c.shards;
  options.shard_index = c.shard;
  options.equal_shards = c.equal_shards;
  options.drop_last = c.drop_last;
  options.num_epochs = 2;
  options.threads = 3;
  options.piece_rows = 16;
  if (c.columnar) {
    const Dataset data = ReadAll(paths);
    paths.clear();
    const int64_t half = data.size() / 2;
    for (const auto& [name, begin, end] : std::vector<std::tuple<std::string, int64_t, int64_t>>{
             {"a.col", 0, half}, {"b.col", half, data.size()}}) {
      ColumnarShape shape;
      shape.num_dense = data.num_dense();
      shape.num_slots = data.num_slots();
      ColumnarWriteOptions write;
      write.rows_per_group = 100;
      auto writer = ColumnarWriter::Open(Path(name), shape, write);
      ASSERT_TRUE(writer.ok()) << writer.status();
      ASSERT_TRUE((*writer)->Append(data.Slice(begin, end).all()).ok());
      ASSERT_TRUE((*writer)->Finish().ok());
      paths.push_back(Path(name));
    }
  }
  auto open = [&]() -> Result<std::unique_ptr<StreamReader>> {
    return c.columnar ? StreamReader::OpenColumnar(paths, options)
                      : StreamReader::OpenText(paths, *format_, options);
  };
  Result<std::unique_ptr<StreamReader>> reader = open();
  ASSERT_TRUE(reader.ok()) << reader.status();
  const StreamRun full = ReadStream(reader->get(), /*with_positions=*/true);
  ASSERT_TRUE(full.status.ok()) << full.status;
  ASSERT_GT(full.batches.size(), 10u);
  if (c.padding) {
    EXPECT_GT(full.stats.padded_for_equal_shards, 100);
  }
  ExpectResumesAt(full, CutPoints(full.batches.size()), open);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StreamResumeTest,
    ::testing::Values(
        ResumeCase{.name = "Plain"}, ResumeCase{.name = "Shuffled", .shuffle = true},
        ResumeCase{.name = "ShuffleBuffer", .buffer = 37},
        ResumeCase{.name = "ShuffledWithBuffer", .shuffle = true, .buffer = 100},
        ResumeCase{.name = "BufferLargerThanAShard", .shuffle = true, .buffer = 5000},
        ResumeCase{.name = "Sharded", .shuffle = true, .shards = 3, .shard = 1},
        ResumeCase{
            .name = "ShardedWithBuffer", .shuffle = true, .buffer = 50, .shards = 3, .shard = 2},
        ResumeCase{.name = "ShardedUnequal",
                   .shuffle = true,
                   .buffer = 50,
                   .shards = 2,
                   .equal_shards = false},
        ResumeCase{
            .name = "DropLast", .shuffle = true, .buffer = 30, .shards = 2, .drop_last = true},
        ResumeCase{.name = "Gzip", .gzip = true, .shuffle = true, .buffer = 40, .shards = 2},
        ResumeCase{.name = "BadLinesAndPadding",
                   .gzip = true,
                   .shuffle = true,
                   .buffer = 40,
                   .shards = 5,
                   .shard = 4,
                   .bad_lines = true},
        ResumeCase{.name = "Padding", .shards = 2, .padding = true},
        ResumeCase{.name = "PaddingWithBuffer", .buffer = 70, .shards = 2, .padding = true},
        ResumeCase{.name = "Columnar", .columnar = true},
        ResumeCase{.name = "ColumnarShuffledSharded",
                   .columnar = true,
                   .shuffle = true,
                   .buffer = 60,
                   .shards = 3,
                   .shard = 0}),
    [](const ::testing::TestParamInfo<ResumeCase>& info) { return info.param.name; });

TEST_F(StreamReaderTest, ColumnarStreamsTheRowsOfTheTextTheyWereMadeFrom) {
  const std::vector<std::string> paths = WriteThreeFiles();
  const Dataset data = ReadAll(paths);
  ColumnarShape shape;
  shape.num_dense = data.num_dense();
  shape.num_slots = data.num_slots();
  auto writer = ColumnarWriter::Open(Path("all.col"), shape);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Append(data.all()).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  StreamReaderOptions options = SmallPieces();
  options.piece_rows = 50;
  Result<std::unique_ptr<StreamReader>> reader =
      StreamReader::OpenColumnar({Path("all.col")}, options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(25, (*reader)->num_pieces());
  const StreamRun run = ReadStream(reader->get());
  ASSERT_TRUE(run.status.ok()) << run.status;
  ExpectSameBatch(data.all(), Concat(run));
  EXPECT_EQ(1250, run.stats.bad_lines.lines_read);

  // Columnar files of different shapes do not mix.
  shape.num_dense = 2;
  auto other = ColumnarWriter::Open(Path("other.col"), shape);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Finish().ok());
  const Status mixed =
      StreamReader::OpenColumnar({Path("all.col"), Path("other.col")}, options).status();
  EXPECT_EQ(StatusCode::kInvalidArgument, mixed.code());
  EXPECT_THAT(mixed.message(), HasSubstr("other.col"));
}

}  // namespace
}  // namespace ember::io
