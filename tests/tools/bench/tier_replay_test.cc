#include "tools/bench/tier_replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/random.h"
#include "core/status.h"
#include "core/threads.h"
#include "embedding/faulty_tier.h"
#include "embedding/tier.h"

namespace ember::bench {
namespace {

using embedding::Key;
using embedding::Tier;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kRowBytes = 16;

std::unique_ptr<Tier> InMemoryTier() {
  Result<std::unique_ptr<Tier>> tier = embedding::NewInMemoryTier(kRowBytes);
  EXPECT_TRUE(tier.ok()) << tier.status();
  return std::move(tier).value();
}

// Row i of `keys`: kRowBytes bytes, all the low byte of its key.
std::vector<char> RowsOf(const std::vector<Key>& keys) {
  std::vector<char> rows;
  for (Key key : keys) rows.insert(rows.end(), kRowBytes, static_cast<char>(key));
  return rows;
}

Status Put(Tier& tier, const std::vector<Key>& keys) {
  const std::vector<char> rows = RowsOf(keys);
  return tier.Put(keys, rows.data());
}

// The keys `tier` holds, in increasing order.
std::vector<Key> HeldKeys(Tier& tier) {
  std::vector<Key> keys;
  const Status scanned = tier.Scan([&](Key key, const char*) {
    keys.push_back(key);
    return Status::OK();
  });
  EXPECT_TRUE(scanned.ok()) << scanned;
  return keys;
}

// The keys of every call of one kind, joined and sorted.
std::vector<Key> Joined(const std::vector<std::vector<Key>>& calls) {
  std::vector<Key> keys;
  for (const std::vector<Key>& call : calls) keys.insert(keys.end(), call.begin(), call.end());
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::vector<Key> Range(Key begin, Key end) {
  std::vector<Key> keys;
  for (Key k = begin; k < end; ++k) keys.push_back(k);
  return keys;
}

TEST(RecordingTierTest, ForwardsEveryCallAndRecordsItsKeysInTheStepItWasMadeIn) {
  RecordingTier tier(InMemoryTier());
  EXPECT_EQ(tier.row_bytes(), kRowBytes);
  ASSERT_TRUE(Put(tier, {1, 2, 3}).ok());
  std::vector<char> out(2 * kRowBytes);
  std::vector<int64_t> missing;
  ASSERT_TRUE(tier.Get({3, 4}, out.data(), &missing).ok());
  EXPECT_THAT(missing, ElementsAre(1));
  EXPECT_EQ(out[0], 3);  // the wrapped tier's row of key 3
  // No step closed yet.
  EXPECT_THAT(tier.TakeSteps(), IsEmpty());
  tier.EndStep();
  ASSERT_TRUE(tier.Delete({2}).ok());
  ASSERT_TRUE(Put(tier, {5}).ok());
  ASSERT_TRUE(Put(tier, {6, 7}).ok());
  tier.EndStep();
  ASSERT_TRUE(tier.Delete({1}).ok());  // the open step: not taken

  const std::vector<TierStep> steps = tier.TakeSteps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_THAT(steps[0].puts, ElementsAre(ElementsAre(1, 2, 3)));
  EXPECT_THAT(steps[0].gets, ElementsAre(ElementsAre(3, 4)));
  EXPECT_THAT(steps[0].deletes, IsEmpty());
  EXPECT_EQ(steps[0].rows(), 5);
  EXPECT_THAT(steps[1].gets, IsEmpty());
  EXPECT_THAT(steps[1].puts, ElementsAre(ElementsAre(5), ElementsAre(6, 7)));
  EXPECT_THAT(steps[1].deletes, ElementsAre(ElementsAre(2)));
  EXPECT_EQ(steps[1].rows(), 4);
  EXPECT_THAT(HeldKeys(tier), ElementsAre(3, 5, 6, 7));
  // Taken steps are gone; the open one is taken once closed.
  tier.EndStep();
  const std::vector<TierStep> later = tier.TakeSteps();
  ASSERT_EQ(later.size(), 1u);
  EXPECT_THAT(later[0].deletes, ElementsAre(ElementsAre(1)));
}

TEST(RecordingTierTest, AnErrorOfTheWrappedTierIsReturnedAndTheCallStillRecorded) {
  RecordingTier tier(
      std::make_unique<embedding::FaultyTier>(InMemoryTier(), embedding::FaultyTierOptions{}));
  EXPECT_EQ(Put(tier, {1}).code(), StatusCode::kIOError);
  tier.EndStep();
  EXPECT_THAT(tier.TakeSteps()[0].puts, ElementsAre(ElementsAre(1)));
}

// Steps of random Gets, Puts and Deletes, made on a recording tier, one of
// them with more keys than a replayed part holds.
std::vector<TierStep> RecordRandomSteps() {
  RecordingTier tier(InMemoryTier());
  RandomStream random(7, 0);
  auto some_keys = [&](int64_t n) {
    std::vector<Key> keys(n);
    for (Key& key : keys) key = random.NextBelow(5000);
    return keys;
  };
  EXPECT_TRUE(Put(tier, Range(0, 40000)).ok());  // as a table's population spills
  tier.EndStep();
  for (int step = 0; step < 6; ++step) {
    for (int call = 0; call < 3; ++call) {
      std::vector<Key> keys = some_keys(50 + 30 * call);
      std::vector<char> out(keys.size() * kRowBytes);
      std::vector<int64_t> missing;
      EXPECT_TRUE(tier.Get(keys, out.data(), &missing).ok());
      EXPECT_TRUE(Put(tier, some_keys(40)).ok());
    }
    if (step % 2 == 1) {
      EXPECT_TRUE(tier.Delete(some_keys(20)).ok());
    }
    tier.EndStep();
  }
  return tier.TakeSteps();
}

TEST(ReplayTierStepsTest, MakesEveryRecordedCallOnceInWholeParts) {
  const std::vector<TierStep> steps = RecordRandomSteps();
  ASSERT_EQ(steps.size(), 7u);
  RecordingTier replayed(InMemoryTier());
  ThreadArena arena(2);
  Result<double> seconds = ReplayTierSteps(steps, replayed, arena);
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  EXPECT_GE(*seconds, 0.0);
  replayed.EndStep();

  TierStep expected;
  for (const TierStep& step : steps) {
    for (auto kind : {&TierStep::gets, &TierStep::puts, &TierStep::deletes}) {
      (expected.*kind).insert((expected.*kind).end(), (step.*kind).begin(), (step.*kind).end());
    }
  }
  const std::vector<TierStep> made_steps = replayed.TakeSteps();
  ASSERT_EQ(made_steps.size(), 1u);
  const TierStep& made = made_steps[0];
  EXPECT_EQ(Joined(made.gets), Joined(expected.gets));
  EXPECT_EQ(Joined(made.puts), Joined(expected.puts));
  EXPECT_EQ(Joined(made.deletes), Joined(expected.deletes));
  // The 40000 keys of step 0 in parts of at most 16384, a multiple of the
  // arena's threads (4 of 10000).
  int64_t step0_parts = 0;
  for (const std::vector<Key>& call : made.puts) step0_parts += call.size() == 10000;
  EXPECT_EQ(step0_parts, 4);
}

// With a rank, a step's keys are cut into parts in the order of their
// ranks: every call holds one range of ranks, in order, and no two overlap.
// (Step 0: 40000 distinct keys put, as a table's population spills.)
TEST(ReplayTierStepsTest, WithARankEachPartIsOneRangeOfRanks) {
  const std::vector<TierStep> steps = RecordRandomSteps();
  RecordingTier replayed(InMemoryTier());
  ThreadArena arena(2);
  const KeyRank rank = [](Key key) { return Mix64(key); };
  Result<double> seconds = ReplayTierSteps({steps[0]}, replayed, arena, rank);
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  replayed.EndStep();
  const std::vector<TierStep> made = replayed.TakeSteps();
  ASSERT_EQ(made.size(), 1u);
  ASSERT_EQ(made[0].puts.size(), 4u) << "40000 keys in parts of at most 16384";
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // (first, last) rank of each call
  for (const std::vector<Key>& call : made[0].puts) {
    ASSERT_FALSE(call.empty());
    for (size_t i = 1; i < call.size(); ++i) {
      ASSERT_LT(rank(call[i - 1]), rank(call[i])) << "a call out of rank order";
    }
    ranges.emplace_back(rank(call.front()), rank(call.back()));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    EXPECT_LT(ranges[i - 1].second, ranges[i].first) << "two calls' ranges overlap";
  }
  EXPECT_EQ(Joined(made[0].puts), Joined(steps[0].puts));
}

// Replayed in lock step, a step at a time as the recording closes them, the
// tier alone ends up with the rows of the recorded one.
TEST(ReplayTierStepsTest, StepByStepLeavesTheTierHoldingTheKeysTheRecordedOneHeld) {
  RecordingTier recorded(InMemoryTier());
  std::unique_ptr<Tier> replayed = InMemoryTier();
  ThreadArena arena(2);
  auto follow = [&] {
    Result<double> seconds = ReplayTierSteps(recorded.TakeSteps(), *replayed, arena);
    ASSERT_TRUE(seconds.ok()) << seconds.status();
  };
  ASSERT_TRUE(Put(recorded, Range(0, 100)).ok());
  recorded.EndStep();
  follow();
  ASSERT_TRUE(recorded.Delete(Range(10, 30)).ok());
  ASSERT_TRUE(Put(recorded, {500, 501}).ok());
  recorded.EndStep();
  follow();
  ASSERT_TRUE(Put(recorded, {900}).ok());
  recorded.EndStep();
  follow();
  EXPECT_EQ(HeldKeys(*replayed), HeldKeys(recorded));
  // Replaying no step leaves a tier as it was.
  std::unique_ptr<Tier> untouched = InMemoryTier();
  Result<double> seconds = ReplayTierSteps({}, *untouched, arena);
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  EXPECT_THAT(HeldKeys(*untouched), IsEmpty());
}

TEST(ReplayTierStepsTest, ReturnsTheFirstErrorOfTheTier) {
  RecordingTier recorded(InMemoryTier());
  ASSERT_TRUE(Put(recorded, {1, 2}).ok());
  recorded.EndStep();
  embedding::FaultyTierOptions options;
  options.first_failing_call = 1;
  embedding::FaultyTier failing(InMemoryTier(), options);
  ThreadArena arena(2);
  Result<double> seconds = ReplayTierSteps(recorded.TakeSteps(), failing, arena);
  ASSERT_FALSE(seconds.ok());
  EXPECT_EQ(seconds.status().code(), StatusCode::kIOError);
}

}  // namespace
}  // namespace ember::bench
