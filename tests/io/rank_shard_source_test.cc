#include "io/rank_shard_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/in_process_communicator.h"
#include "io/rank_slice_source.h"
#include "tests/io/numbered_dataset.h"
#include "tests/testing/in_process_ranks.h"

namespace ember::io {
namespace {

using test::Numbered;

constexpr ExampleShape kShape{1, 2, 1};

// The examples of `data` whose index `keep` admits, with their indices.
std::pair<Dataset, std::vector<int64_t>> Share(const Dataset& data,
                                               const std::function<bool(int64_t)>& keep) {
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < data.size(); ++i) {
    if (keep(i)) indices.push_back(i);
  }
  Batch batch;
  data.GatherBatch(indices, &batch);
  return {Dataset(std::move(batch)), indices};
}

using ::ember::test::OnInProcessRanks;

void ExpectSameBatch(const Batch& expected, const Batch& got, const std::string& where) {
  EXPECT_EQ(expected.size, got.size) << where;
  EXPECT_EQ(expected.labels, got.labels) << where;
  EXPECT_EQ(expected.dense, got.dense) << where;
  EXPECT_EQ(expected.offsets, got.offsets) << where;
  EXPECT_EQ(expected.keys, got.keys) << where;
}

// Reads `shard` and `reference` to the end side by side, checking every
// batch, epoch and position; returns the most examples the shard held
// after a batch.
int64_t ExpectSameStream(RankShardBatchSource& shard, BatchSource& reference,
                         const std::string& where) {
  Batch want, got;
  int64_t most = 0;
  for (int step = 0;; ++step) {
    Result<bool> more = reference.Next(&want);
    Result<bool> have = shard.Next(&got);
    EXPECT_TRUE(more.ok() && have.ok()) << where << ": " << have.status();
    if (!more.ok() || !have.ok()) return most;
    EXPECT_EQ(*more, *have) << where << " step " << step;
    if (!*more || !*have) return most;
    const std::string at = where + " step " + std::to_string(step);
    ExpectSameBatch(want, got, at);
    EXPECT_EQ(reference.epoch(), shard.epoch()) << at;
    EXPECT_EQ(*reference.ResumePosition(), *shard.ResumePosition()) << at;
    most = std::max(most, shard.held_examples());
  }
}

// Every rank's batches are RankSliceBatchSource's of the whole data, in every
// epoch, shuffled or not, with a short last batch (and, for 4 ranks, one
// smaller than the ranks), from strided shares or all on rank 0; and each
// rank holds only its slices' examples.
TEST(RankShardBatchSourceTest, RanksGetTheSlicesOfTheGlobalBatchesFromTheirShareAlone) {
  const Dataset data = Numbered(23);
  for (int ranks : {1, 2, 3, 4}) {
    for (bool shuffle : {true, false}) {
      for (bool strided : {true, false}) {
        DatasetBatchSourceOptions options;
        options.batch_size = 4 * ranks;
        options.num_epochs = 3;
        options.shuffle = shuffle;
        options.seed = 9;
        OnInProcessRanks(ranks, [&](int r, Communicator& comm) {
          auto [share, indices] = Share(data, [&](int64_t i) {
            return strided ? i % ranks == r : r == 0;
          });
          auto shard = RankShardBatchSource::Make(std::move(share), std::move(indices),
                                                  data.size(), kShape, options, &comm);
          ASSERT_TRUE(shard.ok()) << shard.status();
          DatasetBatchSource whole(data, options);
          RankSliceBatchSource slice(&whole, r, ranks);
          EXPECT_EQ(slice.EstimatedBatches(), (*shard)->EstimatedBatches());
          const std::string where = std::to_string(ranks) + " ranks, rank " + std::to_string(r) +
                                    (shuffle ? ", shuffled" : ", in order") +
                                    (strided ? ", strided" : ", all on rank 0");
          const int64_t most = ExpectSameStream(**shard, slice, where);
          // Exactly its slices of an epoch: every example is on one rank.
          int64_t slices = 0;
          for (int64_t begin = 0; begin < 23; begin += options.batch_size) {
            const int64_t b = std::min<int64_t>(options.batch_size, 23 - begin);
            slices += (r + 1) * b / ranks - r * b / ranks;
          }
          EXPECT_EQ(slices, most) << where;
          if (ranks > 1) EXPECT_LT((*shard)->held_examples(), 23) << where;
        });
      }
    }
  }
}

// A job resumed mid-epoch (from a checkpoint's position, on fresh shares)
// reads what the whole data's source resumed there reads.
TEST(RankShardBatchSourceTest, ResumesAtAPositionMidEpoch) {
  const Dataset data = Numbered(37);
  constexpr int kRanks = 3;
  DatasetBatchSourceOptions options;
  options.batch_size = 6;
  options.num_epochs = 2;
  options.shuffle = true;
  options.seed = 4;
  // The position after 8 batches (the second epoch's second).
  DatasetBatchSource reference(data, options);
  Batch skipped;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(*reference.Next(&skipped));
  const std::string position = *reference.ResumePosition();
  OnInProcessRanks(kRanks, [&](int r, Communicator& comm) {
    auto [share, indices] = Share(data, [&](int64_t i) { return i % kRanks == r; });
    auto shard = RankShardBatchSource::Make(std::move(share), std::move(indices), data.size(),
                                            kShape, options, &comm);
    ASSERT_TRUE(shard.ok()) << shard.status();
    ASSERT_TRUE((*shard)->ResumeFrom(position).ok());
    DatasetBatchSource whole(data, options);
    ASSERT_TRUE(whole.ResumeFrom(position).ok());
    RankSliceBatchSource slice(&whole, r, kRanks);
    ExpectSameStream(**shard, slice, "rank " + std::to_string(r));
    EXPECT_EQ(StatusCode::kInvalidArgument,
              (*shard)->ResumeFrom(*RebatchDatasetPosition(position, 7)).code())
        << "a position of other batches";
  });
}

TEST(RankShardBatchSourceTest, SharesThatDoNotPartitionTheDataAreRefused) {
  const Dataset data = Numbered(10);
  DatasetBatchSourceOptions options;
  options.batch_size = 4;
  bool refused = false;
  std::mutex mu;
  OnInProcessRanks(2, [&](int r, Communicator& comm) {
    // Both ranks hold example 0; nobody holds example 9.
    auto [share, indices] = Share(data, [&](int64_t i) { return i == 0 || (i < 9 && i % 2 == r); });
    auto shard = RankShardBatchSource::Make(std::move(share), std::move(indices), data.size(),
                                            kShape, options, &comm);
    ASSERT_TRUE(shard.ok()) << shard.status();
    Batch batch;
    Result<bool> got = (*shard)->Next(&batch);
    if (!got.ok()) {
      EXPECT_EQ(StatusCode::kInvalidArgument, got.status().code());
      EXPECT_NE(std::string::npos, got.status().message().find("do not partition"))
          << got.status();
      std::lock_guard<std::mutex> lock(mu);
      refused = true;
    }
  });
  EXPECT_TRUE(refused);
}

TEST(AllGatherExamplesTest, EveryRankGetsEveryShareInIndexOrder) {
  const Dataset data = Numbered(17);
  for (int ranks : {1, 2, 3}) {
    OnInProcessRanks(ranks, [&](int r, Communicator& comm) {
      // Rank 0 holds none of them for 3 ranks: an empty share.
      auto [share, indices] = Share(data, [&](int64_t i) {
        return ranks == 3 ? i % 2 == r - 1 : i % ranks == r;
      });
      Result<Dataset> all = AllGatherExamples(comm, share, indices, kShape);
      ASSERT_TRUE(all.ok()) << all.status();
      ExpectSameBatch(data.all(), all->all(), std::to_string(ranks) + " ranks, rank " +
                                                  std::to_string(r));
    });
  }
}

TEST(AppendEveryNthTest, KeepsTheExamplesAtTheOffsetOfTheirIndex) {
  const Dataset data = Numbered(11);
  for (int64_t first : {0, 4, 5}) {
    Batch kept;
    kept.Clear(1, 2);
    AppendEveryNth(data.all(), first, 3, 1, &kept);
    std::vector<int64_t> expected;
    for (int64_t i = 0; i < 11; ++i) {
      if ((first + i) % 3 == 1) expected.push_back(i);
    }
    Batch want;
    data.GatherBatch(expected, &want);
    ExpectSameBatch(want, kept, "first " + std::to_string(first));
  }
}

TEST(RankShardBatchSourceTest, InvalidArgumentsAreRefused) {
  const Dataset data = Numbered(5);
  DatasetBatchSourceOptions options;
  OnInProcessRanks(1, [&](int, Communicator& comm) {
    EXPECT_EQ(StatusCode::kInvalidArgument,
              RankShardBatchSource::Make(data.Slice(0, 2), {0}, 5, kShape, options, &comm)
                  .status()
                  .code())
        << "fewer indices than examples";
    EXPECT_EQ(StatusCode::kInvalidArgument,
              RankShardBatchSource::Make(data.Slice(0, 1), {5}, 5, kShape, options, &comm)
                  .status()
                  .code())
        << "an index outside the data";
    EXPECT_EQ(StatusCode::kInvalidArgument,
              RankShardBatchSource::Make(data.Slice(0, 1), {0}, 5, {3, 2, 1}, options, &comm)
                  .status()
                  .code())
        << "another shape";
    EXPECT_EQ(StatusCode::kInvalidArgument,
              RankShardBatchSource::Make(data, {0, 1, 2, 3, 4}, 5, kShape, options, nullptr)
                  .status()
                  .code())
        << "no communicator";
  });
}

}  // namespace
}  // namespace ember::io
