// Streamed data resumed on another number of ranks (io/elastic_stream_source.h):
// N shards stopped mid-epoch, resumed on M ranks, train every example of
// the epoch once between the N before and the M after, and the next epoch
// is the M shards' own.

#include "io/elastic_stream_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/criteo.h"
#include "tests/io/stream_fixture.h"
#include "tests/io/text_fixture.h"

namespace ember::io {
namespace {

// Examples counted by their first categorical key (unique to a line).
using Seen = std::map<Key, int>;

void Count(const Batch& batch, Seen* seen) {
  for (int64_t i = 0; i < batch.size; ++i) ++(*seen)[batch.keys[batch.offsets[i * batch.num_slots]]];
}

int64_t Total(const Seen& seen) {
  int64_t total = 0;
  for (const auto& [key, n] : seen) total += n;
  return total;
}

class ElasticStreamSourceTest : public TextFormatTest {
 protected:
  void SetUp() override {
    TextFormatTest::SetUp();
    Result<std::unique_ptr<TextFormat>> format = NewCriteoFormat();
    ASSERT_TRUE(format.ok()) << format.status();
    format_ = std::move(*format);
    paths_ = {Write("a.tsv", CriteoText(0, 500)), Write("b.tsv", CriteoText(500, 333))};
  }

  // Shard `index` of `count`: shuffled files, pieces and records, 2 epochs.
  Result<std::unique_ptr<StreamReader>> Open(int index, int count) {
    StreamReaderOptions options;
    options.batch_size = 16;
    options.num_epochs = 2;
    options.seed = 5;
    options.shuffle_files = true;
    options.shuffle_pieces = true;
    options.shuffle_buffer = 40;
    options.piece_bytes = 1500 + 300 * count;  // Pieces of another size per shard count.
    options.threads = 2;
    options.num_shards = count;
    options.shard_index = index;
    return StreamReader::OpenText(paths_, *format_, options);
  }

  // What shards 0..count-1 of `count` read in `epoch`, uninterrupted.
  Seen EpochOf(int count, int64_t epoch) {
    Seen seen;
    for (int r = 0; r < count; ++r) {
      auto reader = Open(r, count);
      EXPECT_TRUE(reader.ok()) << reader.status();
      Batch batch;
      for (;;) {
        Result<bool> more = (*reader)->Next(&batch);
        EXPECT_TRUE(more.ok()) << more.status();
        if (!more.ok() || !*more) break;
        if ((*reader)->epoch() == epoch) Count(batch, &seen);
      }
    }
    return seen;
  }

  // The positions of an old job of `count` ranks after `batches` batches
  // each (rank r: batches + extra[r], to make a job that did not step
  // together), counting what it read in `seen`.
  std::vector<std::string> OldPositions(int count, int batches, Seen* seen,
                                        std::vector<int> extra = {}) {
    extra.resize(static_cast<size_t>(count), 0);
    std::vector<std::string> positions;
    for (int r = 0; r < count; ++r) {
      auto reader = Open(r, count);
      EXPECT_TRUE(reader.ok()) << reader.status();
      if (!reader.ok()) return {};
      Batch batch;
      for (int b = 0; b < batches + extra[r]; ++b) {
        Result<bool> more = (*reader)->Next(&batch);
        EXPECT_TRUE(more.ok() && *more);
        Count(batch, seen);
      }
      positions.push_back((*reader)->position().Serialize());
    }
    return positions;
  }

  // Rank `rank` of `ranks` resumed from `position`: what it reads of epoch 0.
  void RestOfEpochZero(const std::string& position, int rank, int ranks, Seen* seen) {
    auto main = Open(rank, ranks);
    ASSERT_TRUE(main.ok()) << main.status();
    ElasticStreamSource source(main->get(), [this](int i, int n) { return Open(i, n); }, rank,
                               ranks);
    ASSERT_TRUE(source.ResumeFrom(position).ok());
    Batch batch;
    for (;;) {
      Result<bool> more = source.Next(&batch);
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more || source.epoch() != 0) return;
      Count(batch, seen);
    }
  }

  std::unique_ptr<TextFormat> format_;
  std::vector<std::string> paths_;
};

TEST_F(ElasticStreamSourceTest, EveryExampleOfTheEpochIsTrainedOnceAcrossTheResume) {
  struct Case {
    int from, to, batches_before;
  };
  for (const Case c : {Case{2, 3, 5}, Case{3, 2, 4}, Case{2, 1, 7}, Case{3, 1, 1}, Case{1, 3, 9},
                       Case{2, 2, 6}}) {
    SCOPED_TRACE(std::to_string(c.from) + " -> " + std::to_string(c.to) + " ranks after " +
                 std::to_string(c.batches_before) + " batches");
    // The old job: every shard reads the same number of batches.
    Seen before;
    Result<std::string> resharded =
        ReshardedStreamPosition(OldPositions(c.from, c.batches_before, &before));
    ASSERT_TRUE(resharded.ok()) << resharded.status();

    // The new job: M ranks, stepping together.
    std::vector<std::unique_ptr<StreamReader>> mains;
    std::vector<std::unique_ptr<ElasticStreamSource>> ranks;
    for (int s = 0; s < c.to; ++s) {
      auto main = Open(s, c.to);
      ASSERT_TRUE(main.ok()) << main.status();
      mains.push_back(std::move(*main));
      ranks.push_back(std::make_unique<ElasticStreamSource>(
          mains.back().get(), [this](int index, int count) { return Open(index, count); }, s,
          c.to));
      ASSERT_TRUE(ranks.back()->ResumeFrom(*resharded).ok());
    }
    Seen after_epoch0, epoch1;
    int64_t steps = 0;
    for (bool more = true; more; ++steps) {
      std::vector<int64_t> epochs;
      for (int s = 0; s < c.to; ++s) {
        Batch batch;
        Result<bool> next = ranks[s]->Next(&batch);
        ASSERT_TRUE(next.ok()) << next.status();
        if (s == 0) more = *next;
        ASSERT_EQ(more, *next) << "rank " << s << " ended at another step than rank 0";
        if (!*next) break;
        epochs.push_back(ranks[s]->epoch());
        Count(batch, ranks[s]->epoch() == 0 ? &after_epoch0 : &epoch1);
      }
      for (int64_t e : epochs) ASSERT_EQ(e, epochs[0]) << "the ranks' step is of one epoch";
    }
    // Epoch 0: what the old job had not trained, each once, and nothing of
    // what it had.
    const Seen whole = EpochOf(c.from, 0);
    Seen together = before;
    for (const auto& [key, n] : after_epoch0) together[key] += n;
    EXPECT_EQ(together, whole);
    for (const auto& [key, n] : after_epoch0) {
      ASSERT_EQ(1, n) << "key " << key << " trained " << n << " times after the resume";
      ASSERT_EQ(0u, before.count(key)) << "key " << key << " trained before and after";
    }
    EXPECT_GT(Total(after_epoch0), 0);
    // Epoch 1: the new number of shards' own epoch.
    EXPECT_EQ(epoch1, EpochOf(c.to, 1));
  }
}

TEST_F(ElasticStreamSourceTest, AResumeDuringTheOldEpochResumesOnAnyNumberOfRanks) {
  // 2 ranks stopped after 3 batches; resumed on 3, which stop after 2 more
  // steps (their position is resharded still); resumed again on 1 and on 2.
  Seen before;
  Result<std::string> resharded = ReshardedStreamPosition(OldPositions(2, 3, &before));
  ASSERT_TRUE(resharded.ok());
  std::vector<std::string> later;
  for (int s = 0; s < 3; ++s) {
    auto main = Open(s, 3);
    ASSERT_TRUE(main.ok());
    ElasticStreamSource rank(main->get(), [this](int i, int n) { return Open(i, n); }, s, 3);
    ASSERT_TRUE(rank.ResumeFrom(*resharded).ok());
    Batch batch;
    for (int b = 0; b < 2; ++b) ASSERT_TRUE(*rank.Next(&batch));
    Result<std::string> position = rank.ResumePosition();
    ASSERT_TRUE(position.ok()) << position.status();
    EXPECT_THAT(*position, ::testing::HasSubstr("resharded_stream"));
    later.push_back(*position);
  }
  Result<std::string> again = ReshardedStreamPosition(later);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, later[0]) << "every rank's resharded position is the same";

  // On 2 ranks (the old number) each reads its own old shard from there; on
  // 1 the two together: the same examples for the rest of epoch 0.
  Seen on_two, on_one;
  for (int s = 0; s < 2; ++s) RestOfEpochZero(*again, s, 2, &on_two);
  RestOfEpochZero(*again, 0, 1, &on_one);
  EXPECT_EQ(on_two, on_one);
  EXPECT_GT(Total(on_one), 0);
}

TEST_F(ElasticStreamSourceTest, PositionsThatAreNotOneJobsAreRefusedNamingTheRank) {
  Seen seen;
  const std::vector<std::string> positions = OldPositions(2, 2, &seen, {0, 1});
  ASSERT_EQ(2u, positions.size());
  Result<std::string> uneven = ReshardedStreamPosition(positions);
  EXPECT_EQ(StatusCode::kInvalidArgument, uneven.status().code());
  EXPECT_THAT(uneven.status().message(), ::testing::HasSubstr("old rank 1 stopped at batch 3"));
  Result<std::string> swapped = ReshardedStreamPosition({positions[1], positions[0]});
  EXPECT_THAT(swapped.status().message(), ::testing::HasSubstr("old rank 0's stream position is of shard 1"));
  Result<std::string> junk = ReshardedStreamPosition({"not a position"});
  EXPECT_EQ(StatusCode::kInvalidArgument, junk.status().code());
}

}  // namespace
}  // namespace ember::io
