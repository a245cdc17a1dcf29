// StreamReader on the real samples of the shared data directory (Criteo,
// TalkingData, MovieLens, Frappe): sharding, equal shards, resume,
// determinism and epochs, each checked against a plain ReadTextFiles.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/file.h"
#include "io/criteo.h"
#include "io/delimited_format.h"
#include "io/libsvm_format.h"
#include "io/stream_reader.h"
#include "io/text_reader.h"
#include "tests/io/stream_fixture.h"
#include "tests/io/text_fixture.h"

namespace ember::io {
namespace {

struct DataCase {
  const char* name;
  std::vector<std::string> files;  // Relative to the shared data directory.
  std::function<Result<std::unique_ptr<TextFormat>>()> format;
  int64_t records;  // In all files.
};

Result<std::unique_ptr<TextFormat>> Delimited(const std::string& spec, char delimiter,
                                              bool header) {
  DelimitedFormatOptions options;
  EMBER_ASSIGN_OR_RETURN(options.schema, ParseSchemaSpec(spec));
  options.delimiter = delimiter;
  options.header = header;
  return NewDelimitedFormat(options);
}

std::vector<DataCase> DataCases() {
  return {
      {"Criteo", {"criteo/criteo_kaggle_8k.tsv"}, [] { return NewCriteoFormat(); }, 8000},
      {"TalkingData",
       {"talkingdata/train_sample.csv"},
       [] {
         return Delimited(
             "ip=cat,app=cat,device=cat,os=cat,channel=cat,click_time=ignore,"
             "attributed_time=ignore,is_attributed=label",
             ',', /*header=*/true);
       },
       100000},
      {"MovieLens",
       {"movielens-100k/u.data"},
       [] {
         return Delimited("user=cat,item=cat,rating=label:threshold=4,timestamp=dense:raw", '\t',
                          /*header=*/false);
       },
       100000},
      {"Frappe",
       {"frappe/frappe.validation.libfm", "frappe/frappe.test.libfm"},
       [] {
         LibSvmFormatOptions options;
         // Frappe's fields as global index ranges (shared/data/README.md).
         options.field_starts = {0, 957, 5039, 5046, 5053, 5055, 5058, 5060, 5069, 5149};
         options.require_binary_values = true;
         return NewLibSvmFormat(options);
       },
       57722 + 28860},
  };
}

class StreamDataTest : public ::testing::TestWithParam<DataCase> {
 protected:
  void SetUp() override {
    for (const std::string& file : GetParam().files) {
      paths_.push_back(SharedDataPath(file));
      if (!FileExists(paths_.back())) {
        GTEST_SKIP() << "no shared data at " << paths_.back()
                     << " (the samples live in ../shared/data next to the repository)";
      }
    }
    Result<std::unique_ptr<TextFormat>> format = GetParam().format();
    ASSERT_TRUE(format.ok()) << format.status();
    format_ = std::move(*format);
    TextReadOptions strict;
    strict.bad_lines = BadLinePolicy::kFail;
    Result<Dataset> all = ReadTextFiles(paths_, *format_, strict);
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(GetParam().records, all->size());
    all_ = SortedRecords(all->all());
  }

  // 64 KiB pieces: 30 to 100 of them in each sample.
  static StreamReaderOptions Options() {
    StreamReaderOptions options;
    options.piece_bytes = 64 << 10;
    options.batch_size = 500;
    options.threads = 2;
    options.bad_lines = BadLinePolicy::kFail;
    return options;
  }

  Result<std::unique_ptr<StreamReader>> Open(const StreamReaderOptions& options) const {
    return StreamReader::OpenText(paths_, *format_, options);
  }

  StreamRun Run(const StreamReaderOptions& options, bool with_positions = false) const {
    Result<std::unique_ptr<StreamReader>> reader = Open(options);
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return StreamRun{};
    StreamRun run = ReadStream(reader->get(), with_positions);
    EXPECT_TRUE(run.status.ok()) << run.status;
    return run;
  }

  std::vector<std::string> paths_;
  std::unique_ptr<TextFormat> format_;
  std::vector<std::string> all_;  // Every record, sorted.
};

TEST_P(StreamDataTest, ShardsTogetherReadEveryRecordExactlyOnce) {
  for (const int shards : {1, 2, 3, 5}) {
    SCOPED_TRACE(std::to_string(shards) + " shards");
    std::vector<std::string> union_of_shards;
    for (int shard = 0; shard < shards; ++shard) {
      StreamReaderOptions options = Options();
      options.num_shards = shards;
      options.shard_index = shard;
      options.equal_shards = false;
      options.shuffle_files = true;
      options.shuffle_pieces = true;
      options.shuffle_buffer = 1000;
      const std::vector<std::string> records = Records(Concat(Run(options)));
      union_of_shards.insert(union_of_shards.end(), records.begin(), records.end());
    }
    std::sort(union_of_shards.begin(), union_of_shards.end());
    EXPECT_EQ(all_, union_of_shards);
  }
}

TEST_P(StreamDataTest, EqualShardsRunTheSameNumberOfBatches) {
  for (const int shards : {1, 2, 3, 5}) {
    SCOPED_TRACE(std::to_string(shards) + " shards");
    std::vector<size_t> batch_counts;
    std::vector<std::string> union_of_shards;
    int64_t dropped = 0;
    for (int shard = 0; shard < shards; ++shard) {
      StreamReaderOptions options = Options();
      options.num_shards = shards;
      options.shard_index = shard;
      options.shuffle_files = true;
      options.shuffle_pieces = true;
      options.shuffle_buffer = 1000;
      options.num_epochs = 2;
      const StreamRun run = Run(options);
      batch_counts.push_back(run.batches.size());
      dropped += run.stats.dropped_for_equal_shards;
      for (size_t b = 0; b < run.batches.size(); ++b) {
        if (run.epochs[b] != 0) continue;
        const std::vector<std::string> records = Records(run.batches[b]);
        union_of_shards.insert(union_of_shards.end(), records.begin(), records.end());
      }
    }
    for (const size_t count : batch_counts) EXPECT_EQ(batch_counts.front(), count);
    // Epoch 0 of all shards is part of the data, each record at most once;
    // what is missing was counted as dropped (over both epochs).
    std::sort(union_of_shards.begin(), union_of_shards.end());
    EXPECT_TRUE(
        std::includes(all_.begin(), all_.end(), union_of_shards.begin(), union_of_shards.end()));
    if (shards == 1) {
      EXPECT_EQ(all_.size(), union_of_shards.size());
      EXPECT_EQ(0, dropped);
    }
    EXPECT_LE(all_.size() - union_of_shards.size(), static_cast<size_t>(dropped));
  }
}

TEST_P(StreamDataTest, ResumingAtCutPointsYieldsTheRestOfTheStream) {
  StreamReaderOptions options = Options();
  options.num_shards = 3;
  options.shard_index = 1;
  options.shuffle_files = true;
  options.shuffle_pieces = true;
  options.shuffle_buffer = 1000;
  options.num_epochs = 2;
  const StreamRun full = Run(options, /*with_positions=*/true);
  ExpectResumesAt(full, CutPoints(full.batches.size(), 12), [&] { return Open(options); });
}

TEST_P(StreamDataTest, SameBatchesOnOneAndThreeThreads) {
  StreamReaderOptions options = Options();
  options.shuffle_files = true;
  options.shuffle_pieces = true;
  options.shuffle_buffer = 2000;
  options.threads = 1;
  const StreamRun one = Run(options);
  options.threads = 3;
  options.queue_depth = 5;
  ExpectSameRun(one, Run(options));
}

TEST_P(StreamDataTest, EachEpochIsAnotherPermutationOfTheData) {
  StreamReaderOptions options = Options();
  options.shuffle_pieces = true;
  options.shuffle_buffer = 1000;
  options.num_epochs = 2;
  const StreamRun run = Run(options);
  std::vector<std::vector<std::string>> epochs(2);
  for (size_t b = 0; b < run.batches.size(); ++b) {
    const std::vector<std::string> records = Records(run.batches[b]);
    epochs[run.epochs[b]].insert(epochs[run.epochs[b]].end(), records.begin(), records.end());
  }
  EXPECT_NE(epochs[0], epochs[1]);
  for (std::vector<std::string>& epoch : epochs) {
    std::sort(epoch.begin(), epoch.end());
    EXPECT_EQ(all_, epoch);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedData, StreamDataTest, ::testing::ValuesIn(DataCases()),
                         [](const ::testing::TestParamInfo<DataCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace ember::io
