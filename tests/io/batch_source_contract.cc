// The contract of io/batch_source.h, run against every BatchSource that
// instantiates BatchSourceContractTest (see batch_source_contract.h).

#include "tests/io/batch_source_contract.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "io/columnar_convert.h"
#include "io/criteo.h"
#include "io/text_reader.h"
#include "tests/io/stream_fixture.h"

namespace ember::test {

using io::Batch;
using io::BatchSource;

void PrintTo(const BatchSourceEntry& entry, std::ostream* out) { *out << entry.name; }

std::string BatchSourceName(const ::testing::TestParamInfo<BatchSourceEntry>& info) {
  return info.param.name;
}

MadeSource Own(std::unique_ptr<BatchSource> source) {
  MadeSource made;
  made.source = std::move(source);
  return made;
}

namespace {

using ::testing::HasSubstr;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Rows [0, rows) of io::CriteoLine in `dir` as a.tsv (the first 23 rows, or
// fewer) and b.tsv (the rest); with `bad_line` > 0, that line of b.tsv is
// replaced by a line of one column.
ContractData WriteData(const std::filesystem::path& dir, int64_t rows, int64_t bad_line = 0) {
  std::filesystem::create_directories(dir);
  ContractData data;
  const int64_t first = std::min<int64_t>(23, rows);
  data.text_files = {(dir / "a.tsv").string(), (dir / "b.tsv").string()};
  WriteFile(data.text_files[0], io::CriteoText(0, first));
  std::string second = io::CriteoText(first, rows - first);
  if (bad_line > 0) {
    size_t start = 0;
    for (int64_t line = 1; line < bad_line; ++line) start = second.find('\n', start) + 1;
    second.replace(start, second.find('\n', start) - start, "1");
  }
  WriteFile(data.text_files[1], second);
  // Text with a bad line is only read by the sources under test.
  if (bad_line > 0) return data;

  Result<std::unique_ptr<io::TextFormat>> format = io::NewCriteoFormat();
  EXPECT_TRUE(format.ok()) << format.status();
  if (!format.ok()) return data;
  io::TextReadOptions read;
  read.bad_lines = io::BadLinePolicy::kFail;
  Result<io::Dataset> examples = io::ReadTextFiles(data.text_files, **format, read);
  EXPECT_TRUE(examples.ok()) << examples.status();
  if (examples.ok()) data.examples = *std::move(examples);
  data.columnar_file = (dir / "data.col").string();
  io::ConvertOptions convert;
  convert.read.bad_lines = io::BadLinePolicy::kFail;
  Result<io::ConvertReport> report =
      io::ConvertTextToColumnar(data.text_files, **format, data.columnar_file, convert);
  EXPECT_TRUE(report.ok()) << report.status();
  return data;
}

// What a source returned: its batches, the epoch() after each, the position
// before the first and after each (when it resumes), and the error that
// ended it, if any.
struct SourceRun {
  std::vector<Batch> batches;
  std::vector<int64_t> epochs;
  std::vector<std::string> positions;
  Status status;
};

SourceRun ReadToEnd(BatchSource& source, bool with_positions) {
  SourceRun run;
  const auto position = [&] {
    Result<std::string> at = source.ResumePosition();
    EXPECT_TRUE(at.ok()) << at.status();
    run.positions.push_back(at.ok() ? *at : "");
  };
  if (with_positions) position();
  Batch batch;
  while (true) {
    Result<bool> more = source.Next(&batch);
    if (!more.ok()) {
      run.status = more.status();
      return run;
    }
    if (!*more) return run;
    run.batches.push_back(batch);
    run.epochs.push_back(source.epoch());
    if (with_positions) position();
  }
}

void ExpectSameBatches(const std::vector<Batch>& expected, const std::vector<Batch>& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t b = 0; b < expected.size(); ++b) {
    SCOPED_TRACE("batch " + std::to_string(b));
    io::ExpectSameBatch(expected[b], actual[b]);
  }
}

}  // namespace

void BatchSourceContractTest::SetUp() {
  TempDirTest::SetUp();
  data_ = WriteData(dir_ / "data", kRows);
  other_data_ = WriteData(dir_ / "other" / "data", kOtherRows);
  bad_data_ = WriteData(dir_ / "bad" / "data", kRows, kBadLine);
  ASSERT_EQ(kRows, data_.examples.size());
  ASSERT_EQ(kOtherRows, other_data_.examples.size());
}

MadeSource BatchSourceContractTest::Make(const SourceRequest& request) const {
  Result<MadeSource> made = entry().make(request);
  EXPECT_TRUE(made.ok()) << made.status();
  if (!made.ok()) return {};
  EXPECT_NE(nullptr, made->source);
  return *std::move(made);
}

namespace {

TEST_P(BatchSourceContractTest, EveryExampleComesOutOncePerEpochInBatchesOfOneEpoch) {
  const std::vector<std::string> all = io::SortedRecords(data().examples.all());
  ASSERT_EQ(all.end(), std::adjacent_find(all.begin(), all.end())) << "the rows must differ";
  // Per epoch, the records of every rank's batches.
  std::map<int64_t, std::vector<std::string>> by_epoch;
  for (int rank = 0; rank < entry().ranks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    MadeSource made = Make({&data(), rank});
    ASSERT_NE(nullptr, made.source);
    BatchSource& source = *made.source;
    EXPECT_EQ(-1, source.epoch());
    const SourceRun run = ReadToEnd(source, false);
    ASSERT_TRUE(run.status.ok()) << run.status;
    ASSERT_FALSE(run.epochs.empty());
    EXPECT_EQ(0, run.epochs.front());
    EXPECT_EQ(entry().epochs - 1, run.epochs.back());
    EXPECT_TRUE(std::is_sorted(run.epochs.begin(), run.epochs.end()));
    for (size_t b = 0; b < run.batches.size(); ++b) {
      // A batch of the epoch epoch() says: a batch that spanned two epochs
      // would leave one epoch short and the other with a repeat.
      for (std::string& record : io::Records(run.batches[b])) {
        by_epoch[run.epochs[b]].push_back(std::move(record));
      }
    }
    // The end stays the end.
    Batch batch;
    for (int again = 0; again < 2; ++again) {
      Result<bool> more = source.Next(&batch);
      ASSERT_TRUE(more.ok()) << more.status();
      EXPECT_FALSE(*more);
      EXPECT_EQ(entry().epochs - 1, source.epoch());
    }
  }
  ASSERT_EQ(static_cast<size_t>(entry().epochs), by_epoch.size());
  for (auto& [epoch, records] : by_epoch) {
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    std::sort(records.begin(), records.end());
    EXPECT_EQ(all.size(), records.size());
    EXPECT_EQ(all, records) << "not every example once (labels, dense values and keys)";
  }
}

TEST_P(BatchSourceContractTest, EstimatedBatchesIsTheBatchesItReturnsWhenExact) {
  for (int rank = 0; rank < entry().ranks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    MadeSource made = Make({&data(), rank});
    ASSERT_NE(nullptr, made.source);
    const int64_t estimate = made.source->EstimatedBatches();
    const SourceRun run = ReadToEnd(*made.source, false);
    ASSERT_TRUE(run.status.ok()) << run.status;
    const int64_t batches = static_cast<int64_t>(run.batches.size());
    if (entry().exact_estimate) {
      EXPECT_EQ(batches, estimate);
      EXPECT_EQ(batches, made.source->EstimatedBatches()) << "after the end";
    } else if (estimate != -1) {
      // An estimate for progress: of the right order.
      EXPECT_GE(estimate, batches / 2);
      EXPECT_LE(estimate, batches * 2);
    }
  }
}

TEST_P(BatchSourceContractTest, AResumedSourceReturnsTheBatchesAfterItsPosition) {
  for (int rank = 0; rank < entry().ranks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    MadeSource made = Make({&data(), rank});
    ASSERT_NE(nullptr, made.source);
    if (!entry().resumes) {
      EXPECT_EQ(StatusCode::kUnimplemented, made.source->ResumePosition().status().code());
      EXPECT_EQ(StatusCode::kUnimplemented, made.source->ResumeFrom("{}").code());
      continue;
    }
    const SourceRun full = ReadToEnd(*made.source, true);
    ASSERT_TRUE(full.status.ok()) << full.status;
    ASSERT_EQ(full.batches.size() + 1, full.positions.size());
    for (size_t k = 0; k <= full.batches.size(); ++k) {
      SCOPED_TRACE("resumed after batch " + std::to_string(k));
      MadeSource resumed = Make({&data(), rank});
      ASSERT_NE(nullptr, resumed.source);
      const Status status = resumed.source->ResumeFrom(full.positions[k]);
      ASSERT_TRUE(status.ok()) << status;
      const SourceRun rest = ReadToEnd(*resumed.source, false);
      ASSERT_TRUE(rest.status.ok()) << rest.status;
      EXPECT_EQ(std::vector<int64_t>(full.epochs.begin() + k, full.epochs.end()), rest.epochs);
      ExpectSameBatches(std::vector<Batch>(full.batches.begin() + k, full.batches.end()),
                        rest.batches);
      if (k == full.batches.size()) {
        EXPECT_EQ(entry().epochs - 1, resumed.source->epoch());
      }
    }
  }
}

TEST_P(BatchSourceContractTest, APositionOfOtherDataOrOptionsIsInvalidArgument) {
  if (!entry().resumes) GTEST_SKIP() << entry().name << " cannot resume (see the resume case)";
  // After one batch, where the data and options both show.
  const auto position_after_one = [&](const SourceRequest& request) -> std::string {
    MadeSource made = Make(request);
    if (made.source == nullptr) return "";
    Batch batch;
    Result<bool> more = made.source->Next(&batch);
    EXPECT_TRUE(more.ok() && *more) << more.status();
    Result<std::string> position = made.source->ResumePosition();
    EXPECT_TRUE(position.ok()) << position.status();
    return position.ok() ? *position : "";
  };
  const std::vector<std::pair<std::string, std::string>> foreign = {
      {"other data", position_after_one({&other_data(), 0})},
      {"other options", position_after_one({&data(), 0, /*other_options=*/true})},
      {"not a position", "{\"what\": \"not a position\"}"},
      {"not json", "after batch 1"},
  };
  for (const auto& [what, position] : foreign) {
    SCOPED_TRACE(what + ": " + position);
    ASSERT_FALSE(position.empty());
    MadeSource made = Make({&data(), 0});
    ASSERT_NE(nullptr, made.source);
    EXPECT_EQ(StatusCode::kInvalidArgument, made.source->ResumeFrom(position).code());
  }
}

TEST_P(BatchSourceContractTest, ABadLineIsNamedWithItsFileAndLine) {
  if (!entry().reads_text) GTEST_SKIP() << entry().name << " reads no text";
  const std::string where = bad_data().text_files[1] + ":" + std::to_string(kBadLine) + ": ";
  int failed = 0;
  for (int rank = 0; rank < entry().ranks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    MadeSource made = Make({&bad_data(), rank});
    ASSERT_NE(nullptr, made.source);
    const SourceRun run = ReadToEnd(*made.source, false);
    if (run.status.ok()) continue;  // The rank whose share does not hold the line.
    ++failed;
    EXPECT_EQ(StatusCode::kInvalidArgument, run.status.code());
    EXPECT_THAT(run.status.message(), HasSubstr(where));
  }
  EXPECT_LE(1, failed) << "no rank reported the bad line";
}

TEST_P(BatchSourceContractTest, ItsShapeIsItsBatchesAndInMemoryDataIsItsExamples) {
  const io::Dataset& examples = data().examples;
  for (int rank = 0; rank < entry().ranks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    MadeSource made = Make({&data(), rank});
    ASSERT_NE(nullptr, made.source);
    BatchSource& source = *made.source;
    // Known before the first batch: a trainer sizes its model from them.
    EXPECT_EQ(examples.num_labels(), source.num_labels());
    EXPECT_EQ(examples.num_dense(), source.num_dense());
    EXPECT_EQ(examples.num_slots(), source.num_slots());
    const io::Dataset* in_memory = source.InMemoryData();
    if (entry().in_memory) {
      ASSERT_NE(nullptr, in_memory);
      io::ExpectSameBatch(examples.all(), in_memory->all());
    } else {
      EXPECT_EQ(nullptr, in_memory);
    }
    const SourceRun run = ReadToEnd(source, false);
    ASSERT_TRUE(run.status.ok()) << run.status;
    for (const Batch& batch : run.batches) {
      EXPECT_EQ(source.num_labels(), batch.num_labels);
      EXPECT_EQ(source.num_dense(), batch.num_dense);
      EXPECT_EQ(source.num_slots(), batch.num_slots);
      io::ExpectWellFormed(batch);
    }
  }
}

}  // namespace
}  // namespace ember::test
