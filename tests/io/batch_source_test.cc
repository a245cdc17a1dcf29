#include "io/batch_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

namespace ember::io {
namespace {

// n examples with one dense feature equal to the example's index, one slot
// and label index % 2.
Dataset Numbered(int n) {
  Batch all;
  all.Clear(1, 1);
  for (int i = 0; i < n; ++i) {
    all.labels.push_back(static_cast<float>(i % 2));
    all.dense.push_back(static_cast<float>(i));
    all.keys.push_back(static_cast<Key>(i));
    all.offsets.push_back(static_cast<int64_t>(all.keys.size()));
  }
  all.size = n;
  return Dataset(std::move(all));
}

// The example indices of every batch, per epoch.
std::vector<std::vector<int>> Drain(BatchSource& source, std::vector<int>* batch_sizes) {
  std::vector<std::vector<int>> epochs;
  Batch batch;
  while (true) {
    Result<bool> more = source.Next(&batch);
    EXPECT_TRUE(more.ok());
    if (!more.ok() || !*more) break;
    if (source.epoch() >= static_cast<int64_t>(epochs.size())) epochs.emplace_back();
    for (int64_t i = 0; i < batch.size; ++i) {
      const int index = static_cast<int>(batch.dense[i]);
      EXPECT_EQ(static_cast<Key>(index), batch.keys[batch.offsets[i]]);
      epochs.back().push_back(index);
    }
    batch_sizes->push_back(static_cast<int>(batch.size));
  }
  return epochs;
}

TEST(DatasetBatchSourceTest, WithoutShuffleBatchesAreConsecutiveExamples) {
  const Dataset data = Numbered(10);
  DatasetBatchSourceOptions options;
  options.batch_size = 4;
  options.num_epochs = 2;
  DatasetBatchSource source(data, options);
  EXPECT_EQ(6, source.EstimatedBatches());
  EXPECT_EQ(-1, source.epoch());
  std::vector<int> sizes;
  const std::vector<std::vector<int>> epochs = Drain(source, &sizes);
  std::vector<int> in_order(10);
  std::iota(in_order.begin(), in_order.end(), 0);
  ASSERT_EQ(2u, epochs.size());
  EXPECT_EQ(in_order, epochs[0]);
  EXPECT_EQ(in_order, epochs[1]);
  // Batches never span epochs: the last of each is short.
  EXPECT_EQ((std::vector<int>{4, 4, 2, 4, 4, 2}), sizes);
}

TEST(DatasetBatchSourceTest, ShuffleGivesEachEpochItsOwnPermutationFixedByTheSeed) {
  const Dataset data = Numbered(100);
  DatasetBatchSourceOptions options;
  options.batch_size = 7;
  options.num_epochs = 3;
  options.shuffle = true;
  options.seed = 9;
  std::vector<int> sizes;
  DatasetBatchSource first(data, options), again(data, options);
  const std::vector<std::vector<int>> epochs = Drain(first, &sizes);
  EXPECT_EQ(epochs, Drain(again, &sizes));
  ASSERT_EQ(3u, epochs.size());
  for (const std::vector<int>& epoch : epochs) {
    std::vector<int> sorted = epoch;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> all(100);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(all, sorted) << "every example once per epoch";
  }
  EXPECT_NE(epochs[0], epochs[1]);
  options.seed = 10;
  DatasetBatchSource other_seed(data, options);
  EXPECT_NE(epochs, Drain(other_seed, &sizes));
}

// An epoch's order is pinned by (seed, epoch): tools/bench/ember_random.py
// reproduces it, so that the PyTorch baseline can train on Ember's batches,
// and tests/tools/bench_data_test.py pins the same orders.
TEST(DatasetBatchSourceTest, TheShuffledOrderIsPinnedAcrossPlatforms) {
  const Dataset data = Numbered(10);
  DatasetBatchSourceOptions options;
  options.batch_size = 3;
  options.num_epochs = 2;
  options.shuffle = true;
  options.seed = 1;
  std::vector<int> sizes;
  DatasetBatchSource seed1(data, options);
  const std::vector<std::vector<int>> epochs = Drain(seed1, &sizes);
  ASSERT_EQ(2u, epochs.size());
  EXPECT_EQ((std::vector<int>{6, 4, 3, 1, 7, 0, 5, 8, 2, 9}), epochs[0]);
  options.seed = 7;
  DatasetBatchSource seed7(data, options);
  EXPECT_EQ((std::vector<int>{7, 3, 0, 8, 9, 1, 6, 4, 5, 2}), Drain(seed7, &sizes)[1]);
}

TEST(DatasetBatchSourceTest, EmptyDataHasNoBatches) {
  const Dataset data;
  DatasetBatchSource source(data, {});
  Batch batch;
  Result<bool> more = source.Next(&batch);
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(*more);
  EXPECT_EQ(0, source.EstimatedBatches());
}

// Batches of 7 in an order of seed 4, for `num_epochs` epochs.
DatasetBatchSourceOptions ShuffledInSevens(int64_t num_epochs) {
  DatasetBatchSourceOptions options;
  options.batch_size = 7;
  options.num_epochs = num_epochs;
  options.shuffle = true;
  options.seed = 4;
  return options;
}

TEST(DatasetBatchSourceTest, AFreshSourceResumedFromAPositionGoesOnWithTheSameBatches) {
  const Dataset data = Numbered(50);
  DatasetBatchSourceOptions options = ShuffledInSevens(3);
  // Before the first batch, mid-epoch, at an epoch's end, after the last.
  for (int taken : {0, 5, 8, 14, 21, 30}) {
    SCOPED_TRACE(taken);
    DatasetBatchSource source(data, options);
    Batch batch;
    for (int i = 0; i < taken; ++i) ASSERT_TRUE(source.Next(&batch).ok());
    Result<std::string> position = source.ResumePosition();
    ASSERT_TRUE(position.ok()) << position.status();
    DatasetBatchSource resumed(data, options);
    ASSERT_TRUE(resumed.ResumeFrom(*position).ok());
    EXPECT_EQ(source.epoch(), resumed.epoch());
    std::vector<int> sizes, resumed_sizes;
    const std::vector<std::vector<int>> expected = Drain(source, &sizes);
    EXPECT_EQ(expected, Drain(resumed, &resumed_sizes));
    EXPECT_EQ(sizes, resumed_sizes);
    EXPECT_EQ(taken >= 24 ? 0u : 24u - taken, sizes.size());  // 8 batches an epoch
  }
}

TEST(DatasetBatchSourceTest, APositionOfOtherDataOrOptionsOrNotAPositionIsRefused) {
  const Dataset data = Numbered(50);
  DatasetBatchSourceOptions options = ShuffledInSevens(2);
  DatasetBatchSource source(data, options);
  Batch batch;
  ASSERT_TRUE(source.Next(&batch).ok());
  const std::string position = *source.ResumePosition();
  auto refused = [&](const Dataset& other_data, const DatasetBatchSourceOptions& other,
                     const std::string& text, const std::string& says) {
    DatasetBatchSource target(other_data, other);
    const Status status = target.ResumeFrom(text);
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << text;
    EXPECT_NE(std::string::npos, status.message().find(says)) << status;
  };
  DatasetBatchSourceOptions other = options;
  other.batch_size = 8;
  refused(data, other, position, "batches of 7, these are of 8");
  other = options;
  other.seed = 5;
  refused(data, other, position, "another order");
  refused(Numbered(49), options, position, "data with 50 examples, this has 49");
  refused(data, options, "{\"epoch\": 0}", "not a position of in-memory data");
  refused(data, options, "not json", "data position not json");
  std::string far = position;
  far.replace(far.find("\"next\":7"), 8, "\"next\":99");  // past the last example
  refused(data, options, far, "is no place in this data");
  // A position of the base class's sources: Unimplemented, not a crash.
  struct Silent : BatchSource {
    Result<bool> Next(Batch*) override { return false; }
    int64_t epoch() const override { return -1; }
    int64_t EstimatedBatches() const override { return 0; }
    int num_labels() const override { return 1; }
    int num_dense() const override { return 0; }
    int num_slots() const override { return 0; }
  } silent;
  EXPECT_EQ(StatusCode::kUnimplemented, silent.ResumePosition().status().code());
  EXPECT_EQ(StatusCode::kUnimplemented, silent.ResumeFrom(position).code());
}

// A position as DatasetBatchSource wrote it before nlohmann: one line of
// JSON (with its newline).
constexpr char kOlderPosition[] =
    "{\"dataset\":50,\"batch_size\":7,\"shuffle\":true,\"seed\":4,\"epoch\":1,\"next\":14}\n";

TEST(DatasetBatchSourceTest, APositionWrittenByTheOlderWriterResumesAtItsPlace) {
  const Dataset data = Numbered(50);
  DatasetBatchSourceOptions options = ShuffledInSevens(3);
  DatasetBatchSource source(data, options);
  Batch batch;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(source.Next(&batch).ok());  // 8 + 2
  EXPECT_EQ(kOlderPosition, *source.ResumePosition());
  DatasetBatchSource resumed(data, options);
  ASSERT_TRUE(resumed.ResumeFrom(kOlderPosition).ok());
  std::vector<int> sizes, resumed_sizes;
  EXPECT_EQ(Drain(source, &sizes), Drain(resumed, &resumed_sizes));
  // In batches of 14: the same place, every other field as it was.
  Result<std::string> rebatched = RebatchDatasetPosition(kOlderPosition, 14);
  ASSERT_TRUE(rebatched.ok()) << rebatched.status();
  EXPECT_EQ(
      "{\"dataset\":50,\"batch_size\":14,\"shuffle\":true,\"seed\":4,\"epoch\":1,\"next\":14}\n",
      *rebatched);
}

TEST(DatasetBatchSourceTest, APositionWithAMissingOrUnknownFieldIsRefusedNamingIt) {
  const Dataset data = Numbered(50);
  DatasetBatchSource source(data, ShuffledInSevens(1));
  Status status =
      source.ResumeFrom(R"({"dataset":50,"batch_size":7,"shuffle":true,"seed":4,"next":14})");
  EXPECT_THAT(status.message(), ::testing::HasSubstr("field \"epoch\" is missing"));
  status = source.ResumeFrom(
      R"({"dataset":50,"batch_size":7,"shuffle":true,"seed":4,"epoch":1,"next":14,"rank":0})");
  EXPECT_THAT(status.message(), ::testing::HasSubstr("field \"rank\" is not a known field"));
  EXPECT_THAT(RebatchDatasetPosition(R"({"batch_size":7})", 14).status().message(),
              ::testing::HasSubstr("not a position of in-memory data"));
}

}  // namespace
}  // namespace ember::io
