#include "io/rank_slice_source.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/io/numbered_dataset.h"

namespace ember::io {
namespace {

using test::Numbered;

TEST(SliceBatchTest, CopiesTheExamplesOfTheRange) {
  const Dataset data = Numbered(10);
  Batch slice;
  SliceBatch(data.all(), 3, 7, &slice);
  Batch expected;
  data.GetBatch(3, 7, &expected);
  EXPECT_EQ(4, slice.size);
  EXPECT_EQ(expected.labels, slice.labels);
  EXPECT_EQ(expected.dense, slice.dense);
  EXPECT_EQ(expected.keys, slice.keys);
  EXPECT_EQ(expected.offsets, slice.offsets);
  SliceBatch(data.all(), 5, 5, &slice);
  EXPECT_EQ(0, slice.size);
  EXPECT_EQ(std::vector<int64_t>{0}, slice.offsets);
}

// The ranks' batches of each step, in rank order, are the global batch.
TEST(RankSliceBatchSourceTest, RanksBatchesInRankOrderAreTheGlobalBatch) {
  const Dataset data = Numbered(23);
  for (int ranks : {1, 2, 3}) {
    DatasetBatchSourceOptions options;
    options.batch_size = 4 * ranks;
    options.num_epochs = 2;
    options.shuffle = true;
    options.seed = 9;
    DatasetBatchSource global(data, options);
    std::vector<std::unique_ptr<DatasetBatchSource>> copies;
    std::vector<std::unique_ptr<RankSliceBatchSource>> slices;
    for (int r = 0; r < ranks; ++r) {
      copies.push_back(std::make_unique<DatasetBatchSource>(data, options));
      slices.push_back(std::make_unique<RankSliceBatchSource>(copies.back().get(), r, ranks));
      EXPECT_EQ(global.EstimatedBatches(), slices.back()->EstimatedBatches());
    }
    Batch whole, part;
    int steps = 0;
    while (true) {
      Result<bool> more = global.Next(&whole);
      ASSERT_TRUE(more.ok());
      std::vector<float> joined;
      for (int r = 0; r < ranks; ++r) {
        Result<bool> got = slices[r]->Next(&part);
        ASSERT_TRUE(got.ok());
        ASSERT_EQ(*more, *got) << "rank " << r << " step " << steps;
        if (!*got) break;
        EXPECT_EQ(global.epoch(), slices[r]->epoch());
        // Within one row of an even split.
        EXPECT_LE(part.size, (whole.size + ranks - 1) / ranks);
        EXPECT_GE(part.size, whole.size / ranks);
        joined.insert(joined.end(), part.dense.begin(), part.dense.end());
      }
      if (!*more) break;
      EXPECT_EQ(whole.dense, joined) << ranks << " ranks, step " << steps;
      ++steps;
    }
    EXPECT_EQ(global.EstimatedBatches(), steps);
  }
}

}  // namespace
}  // namespace ember::io

namespace ember::io {
namespace {

// A position moved to another batch size resumes at the same example of the
// same epoch order.
TEST(RebatchDatasetPositionTest, ResumesAtTheSameExampleInBatchesOfAnotherSize) {
  const Dataset data = Numbered(50);
  DatasetBatchSourceOptions four;
  four.batch_size = 4;
  four.num_epochs = 2;
  four.shuffle = true;
  four.seed = 3;
  DatasetBatchSource first(data, four);
  Batch batch;
  for (int i = 0; i < 15; ++i) ASSERT_TRUE(*first.Next(&batch));  // Into epoch 1.
  auto position = first.ResumePosition();
  ASSERT_TRUE(position.ok());
  std::vector<float> rest;
  while (*first.Next(&batch)) rest.insert(rest.end(), batch.dense.begin(), batch.dense.end());

  auto moved = RebatchDatasetPosition(*position, 6);
  ASSERT_TRUE(moved.ok()) << moved.status();
  DatasetBatchSourceOptions six = four;
  six.batch_size = 6;
  DatasetBatchSource second(data, six);
  ASSERT_TRUE(second.ResumeFrom(*moved).ok());
  std::vector<float> got;
  while (*second.Next(&batch)) got.insert(got.end(), batch.dense.begin(), batch.dense.end());
  EXPECT_EQ(rest, got);
  // Unmoved, the batch size is refused.
  EXPECT_FALSE(DatasetBatchSource(data, six).ResumeFrom(*position).ok());
  EXPECT_FALSE(RebatchDatasetPosition("{\"stream\": 1}", 6).ok());
  EXPECT_FALSE(RebatchDatasetPosition(*position, 0).ok());
}

}  // namespace
}  // namespace ember::io
