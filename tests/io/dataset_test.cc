#include "io/dataset.h"

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ember::io {
namespace {

using ::testing::ElementsAre;

// Example i has label i, dense {10i, 10i+1}, slot 0 bag {100i}, slot 1 bag of
// i keys {1000i + k} (so example 0 has an empty bag): bags of varying size
// exercise the CSR offsets.
Batch MakeBatch(int examples) {
  Batch batch;
  batch.Clear(2, 2);
  for (int i = 0; i < examples; ++i) {
    batch.labels.push_back(static_cast<float>(i));
    batch.dense.push_back(10.0f * i);
    batch.dense.push_back(10.0f * i + 1);
    batch.keys.push_back(100 * i);
    batch.offsets.push_back(static_cast<int64_t>(batch.keys.size()));
    for (int k = 0; k < i; ++k) batch.keys.push_back(1000 * i + k);
    batch.offsets.push_back(static_cast<int64_t>(batch.keys.size()));
    ++batch.size;
  }
  return batch;
}

// The keys of example i, slot s of `batch`.
std::vector<Key> Bag(const Batch& batch, int64_t i, int s) {
  const int64_t bag = i * batch.num_slots + s;
  return std::vector<Key>(batch.keys.begin() + batch.offsets[bag],
                          batch.keys.begin() + batch.offsets[bag + 1]);
}

// Checks that example `i` of `batch` is example `source` of MakeBatch.
void ExpectExample(const Batch& batch, int64_t i, int source) {
  SCOPED_TRACE(::testing::Message() << "example " << i << " from " << source);
  EXPECT_EQ(static_cast<float>(source), batch.labels[i]);
  EXPECT_EQ(10.0f * source, batch.dense[i * 2]);
  EXPECT_EQ(10.0f * source + 1, batch.dense[i * 2 + 1]);
  EXPECT_EQ(std::vector<Key>{Key(100 * source)}, Bag(batch, i, 0));
  std::vector<Key> second;
  for (int k = 0; k < source; ++k) second.push_back(1000 * source + k);
  EXPECT_EQ(second, Bag(batch, i, 1));
}

void ExpectWellFormed(const Batch& batch) {
  EXPECT_EQ(static_cast<size_t>(batch.size), batch.labels.size());
  EXPECT_EQ(static_cast<size_t>(batch.size * batch.num_dense), batch.dense.size());
  ASSERT_EQ(static_cast<size_t>(batch.size * batch.num_slots + 1), batch.offsets.size());
  EXPECT_EQ(0, batch.offsets.front());
  EXPECT_EQ(static_cast<int64_t>(batch.keys.size()), batch.offsets.back());
}

TEST(DatasetTest, GetBatchCopiesARangeWithOffsetsStartingAtZero) {
  const Dataset data(MakeBatch(6));
  Batch batch;
  data.GetBatch(2, 5, &batch);
  ExpectWellFormed(batch);
  ASSERT_EQ(3, batch.size);
  for (int i = 0; i < 3; ++i) ExpectExample(batch, i, 2 + i);
}

TEST(DatasetTest, GetBatchReusesTheBatchAndAcceptsAnEmptyRange) {
  const Dataset data(MakeBatch(6));
  Batch batch;
  data.GetBatch(0, 6, &batch);
  data.GetBatch(4, 4, &batch);
  ExpectWellFormed(batch);
  EXPECT_EQ(0, batch.size);
  data.GetBatch(5, 6, &batch);
  ExpectWellFormed(batch);
  ExpectExample(batch, 0, 5);
}

TEST(DatasetTest, GatherBatchTakesExamplesInTheGivenOrderWithRepeats) {
  const Dataset data(MakeBatch(6));
  Batch batch;
  data.GatherBatch({5, 0, 3, 3}, &batch);
  ExpectWellFormed(batch);
  ASSERT_EQ(4, batch.size);
  ExpectExample(batch, 0, 5);
  ExpectExample(batch, 1, 0);
  ExpectExample(batch, 2, 3);
  ExpectExample(batch, 3, 3);
  EXPECT_EQ(2, batch.num_dense);
  EXPECT_EQ(2, batch.num_slots);
  // Into the same batch again: fewer examples, nothing left of the last ones.
  data.GatherBatch({4, 1}, &batch);
  ExpectWellFormed(batch);
  ASSERT_EQ(2, batch.size);
  ExpectExample(batch, 0, 4);
  ExpectExample(batch, 1, 1);
  EXPECT_EQ(batch.offsets.back(), static_cast<int64_t>(batch.keys.size()));
}

TEST(DatasetTest, SliceIsACopyOfTheRangeThatKeepsTheBadLineReport) {
  BadLineReport report;
  report.lines_read = 7;
  report.bad_lines = 1;
  const Dataset data(MakeBatch(6), report);
  const Dataset slice = data.Slice(1, 4);
  ASSERT_EQ(3, slice.size());
  ExpectWellFormed(slice.all());
  for (int i = 0; i < 3; ++i) ExpectExample(slice.all(), i, 1 + i);
  EXPECT_EQ(7, slice.bad_lines().lines_read);
  EXPECT_EQ(6, data.size());
}

TEST(DatasetTest, AppendAddsTheOtherExamplesAfterOursAndSumsReports) {
  BadLineReport first_report;
  first_report.lines_read = 5;
  first_report.bad_lines = 1;
  first_report.by_reason["bad label"] = 1;
  first_report.first_examples = {"a:3: bad label"};
  BadLineReport second_report;
  second_report.lines_read = 4;
  second_report.bad_lines = 2;
  second_report.by_reason["bad label"] = 2;
  second_report.first_examples = {"b:1: bad label", "b:2: bad label"};
  Dataset data(MakeBatch(3), first_report);
  data.Append(Dataset(MakeBatch(6), second_report).Slice(3, 6));
  ExpectWellFormed(data.all());
  ASSERT_EQ(6, data.size());
  for (int i = 0; i < 6; ++i) ExpectExample(data.all(), i, i);
  EXPECT_EQ(9, data.bad_lines().lines_read);
  EXPECT_EQ(3, data.bad_lines().bad_lines);
  EXPECT_EQ(3, data.bad_lines().by_reason.at("bad label"));
  EXPECT_THAT(data.bad_lines().first_examples,
              ElementsAre("a:3: bad label", "b:1: bad label", "b:2: bad label"));
}

TEST(DatasetTest, AppendToAnEmptyDatasetTakesTheOtherShape) {
  Dataset data;
  EXPECT_EQ(0, data.size());
  data.Append(Dataset(MakeBatch(2)));
  EXPECT_EQ(2, data.num_dense());
  EXPECT_EQ(2, data.num_slots());
  ExpectWellFormed(data.all());
  ExpectExample(data.all(), 1, 1);
}

// Example i of a two-task batch has labels {i, 10 + i} and slot bag {i}.
Batch MakeTwoLabelBatch(int examples) {
  Batch batch;
  batch.Clear(0, 1, 2);
  for (int i = 0; i < examples; ++i) {
    batch.labels.push_back(static_cast<float>(i));
    batch.labels.push_back(static_cast<float>(10 + i));
    batch.keys.push_back(i);
    batch.offsets.push_back(static_cast<int64_t>(batch.keys.size()));
    ++batch.size;
  }
  return batch;
}

TEST(DatasetTest, SeveralLabelsPerExampleTravelTogether) {
  Dataset data(MakeTwoLabelBatch(4));
  EXPECT_EQ(2, data.num_labels());
  Batch batch;
  data.GetBatch(1, 3, &batch);
  EXPECT_EQ(2, batch.num_labels);
  EXPECT_THAT(batch.labels, ElementsAre(1, 11, 2, 12));
  data.GatherBatch({3, 0}, &batch);
  EXPECT_THAT(batch.labels, ElementsAre(3, 13, 0, 10));
  EXPECT_THAT(data.Slice(2, 3).all().labels, ElementsAre(2, 12));
  data.Append(data.Slice(0, 1));
  EXPECT_EQ(5, data.size());
  EXPECT_THAT(data.all().labels, ElementsAre(0, 10, 1, 11, 2, 12, 3, 13, 0, 10));
  Dataset empty;
  empty.Append(data);
  EXPECT_EQ(2, empty.num_labels());
  Batch all = MakeTwoLabelBatch(1);
  AppendBatch(MakeTwoLabelBatch(2), &all);
  EXPECT_THAT(all.labels, ElementsAre(0, 10, 0, 10, 1, 11));
}

TEST(BatchTest, AppendBatchShiftsTheOffsetsOfTheAppendedExamples) {
  Batch all = MakeBatch(3);
  Batch more;
  Dataset(MakeBatch(5)).GetBatch(3, 5, &more);
  AppendBatch(more, &all);
  ExpectWellFormed(all);
  ASSERT_EQ(5, all.size);
  for (int i = 0; i < 5; ++i) ExpectExample(all, i, i);
}

}  // namespace
}  // namespace ember::io
