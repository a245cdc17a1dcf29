#include "scheduler/key_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "scheduler/program.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace ember::scheduler {
namespace {

// The first `n` keys the trace samples: a trace of them holds every
// occurrence, so that expectations need no scaling by chance.
std::vector<uint64_t> SampledKeys(int n) {
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; static_cast<int>(keys.size()) < n; ++k) {
    if (KeyTrace::Sampled(k)) keys.push_back(k);
  }
  return keys;
}

// Examples of `per_example` keys drawn (deterministically, with repeats)
// from `keys`, with some keys of other (unsampled) values mixed in.
std::vector<std::vector<uint64_t>> Examples(const std::vector<uint64_t>& keys, int examples,
                                            int per_example) {
  std::vector<std::vector<uint64_t>> out(examples);
  uint64_t random = 7;
  for (auto& example : out) {
    for (int j = 0; j < per_example; ++j) {
      random = random * 6364136223846793005ULL + 1442695040888963407ULL;
      // Skewed: low indices are drawn more often.
      const uint64_t r = (random >> 33) % keys.size();
      example.push_back(keys[(r * r) / keys.size()]);
    }
  }
  return out;
}

void Fill(KeyTrace& trace, const std::vector<std::vector<uint64_t>>& examples) {
  for (size_t e = 0; e < examples.size(); ++e) {
    for (uint64_t key : examples[e]) trace.Add(static_cast<int64_t>(e), key);
  }
}

TEST(KeyTraceTest, SamplesOneKeyInSixteenWithEveryOccurrence) {
  KeyTrace trace;
  int64_t sampled = 0;
  for (uint64_t k = 0; k < 160000; ++k) {
    trace.Add(static_cast<int64_t>(k / 10), k);
    trace.Add(static_cast<int64_t>(k / 10), k);  // Twice: both or neither are kept.
    sampled += KeyTrace::Sampled(k) ? 2 : 0;
  }
  EXPECT_EQ(16000, trace.examples());
  EXPECT_EQ(sampled, trace.sampled_ids());
  EXPECT_NEAR(2 * 160000 / 16, sampled, 2 * 160000 / 16 * 0.05);
}

// Counted directly: what a tier that keeps nothing between batches does is
// read every key a batch shares with an earlier one and write every row.
TEST(KeyTraceTest, ATierThatKeepsNothingReadsEveryKeySeenBeforeAndWritesEveryRow) {
  const std::vector<uint64_t> keys = SampledKeys(200);
  const auto examples = Examples(keys, 1000, 5);
  KeyTrace trace;
  Fill(trace, examples);
  constexpr int64_t kBatch = 64;
  std::set<uint64_t> seen;
  double distinct = 0, reads = 0, created = 0;
  int64_t batches = 0;
  for (size_t begin = 0; begin < examples.size(); begin += kBatch, ++batches) {
    std::set<uint64_t> batch;
    for (size_t e = begin; e < std::min(examples.size(), begin + kBatch); ++e) {
      batch.insert(examples[e].begin(), examples[e].end());
    }
    distinct += batch.size();
    for (uint64_t key : batch) (seen.insert(key).second ? created : reads) += 1;
  }
  const double scale = KeyTrace::kSampleOneIn / static_cast<double>(batches);
  const TierTraffic none = trace.Simulate(0.0, kBatch);
  EXPECT_DOUBLE_EQ(distinct * scale, none.distinct);
  EXPECT_DOUBLE_EQ(0.0, none.hits);
  EXPECT_DOUBLE_EQ(reads * scale, none.reads);
  EXPECT_DOUBLE_EQ(created * scale, none.created);
  EXPECT_DOUBLE_EQ(distinct * scale, none.writes);
  EXPECT_GT(none.reads, 0.0);

  // One that holds every row reads and writes nothing: a key is created
  // once and hit ever after.
  const TierTraffic all = trace.Simulate(1e9, kBatch);
  EXPECT_DOUBLE_EQ(distinct * scale, all.distinct);
  EXPECT_DOUBLE_EQ(created * scale, all.created);
  EXPECT_DOUBLE_EQ(reads * scale, all.hits);
  EXPECT_DOUBLE_EQ(0.0, all.reads);
  EXPECT_DOUBLE_EQ(0.0, all.writes);
}

TEST(KeyTraceTest, MoreMemoryReadsAndWritesFewerRows) {
  const auto examples = Examples(SampledKeys(2000), 4000, 8);
  KeyTrace trace;
  Fill(trace, examples);
  double reads = 1e18, writes = 1e18;
  for (double held : {0.0, 16.0 * 50, 16.0 * 200, 16.0 * 800, 16.0 * 1600}) {
    const TierTraffic t = trace.Simulate(held, 128);
    EXPECT_LE(t.reads, reads) << held;
    EXPECT_LE(t.writes, writes) << held;
    EXPECT_NEAR(t.distinct, t.hits + t.reads + t.created, 1e-9 * t.distinct);
    reads = t.reads;
    writes = t.writes;
  }
  EXPECT_LT(reads, trace.Simulate(0.0, 128).reads / 4);
}

// A hot key pulled by every batch outlives the cold keys that come and go
// beside it: the policy is least-frequently-used.
TEST(KeyTraceTest, TheHotKeyStaysInMemory) {
  const std::vector<uint64_t> keys = SampledKeys(1001);
  KeyTrace trace;
  for (int e = 0; e < 1000; ++e) {
    trace.Add(e, keys[0]);
    trace.Add(e, keys[1 + e]);
  }
  // Room for 4 rows in the sample: the hot key and the last cold ones.
  const TierTraffic t = trace.Simulate(4.0 * KeyTrace::kSampleOneIn, 1);
  const double scale = KeyTrace::kSampleOneIn / 1000.0;
  EXPECT_DOUBLE_EQ(1001 * scale, t.created);
  EXPECT_DOUBLE_EQ(999 * scale, t.hits);  // The hot key after its first batch.
  EXPECT_DOUBLE_EQ(0.0, t.reads);
}

TEST(KeyTraceTest, TruncateKeepsTheFirstExamplesAndShuffleKeepsEachExamplesKeys) {
  const auto examples = Examples(SampledKeys(300), 500, 3);
  KeyTrace trace;
  Fill(trace, examples);
  const TierTraffic before = trace.Simulate(16.0 * 40, 32);
  trace.Shuffle(5);
  EXPECT_EQ(500, trace.examples());
  EXPECT_EQ(1500, trace.sampled_ids());
  // The same batches' worth of keys, in another order: the same rows made.
  const TierTraffic after = trace.Simulate(16.0 * 40, 32);
  EXPECT_DOUBLE_EQ(before.created, after.created);
  EXPECT_NE(before.reads, after.reads);
  // Played one example per batch, each example's keys are one of the
  // originals': the multiset of per-example key sets is unchanged.
  trace.Truncate(100);
  EXPECT_EQ(100, trace.examples());
  EXPECT_EQ(300, trace.sampled_ids());
}

// A Program with a trace takes the memory tier's traffic from it, and a
// batch's distinct ids too unless the slots' vocabularies are known (their
// closed form is exact).
TEST(KeyTraceTest, AProgramWithATraceUsesIt) {
  const auto examples = Examples(SampledKeys(500), 2000, 26);
  auto trace = std::make_shared<KeyTrace>();
  Fill(*trace, examples);
  SparseFeatures features = test::Features(1000, 100000);
  features.key_trace = trace;
  auto known = BuildProgram("mlp", *test::MlpGraph(features.num_dense, features.num_slots,
                                                   features.embedding_dim, 64),
                            features);
  ASSERT_TRUE(known.ok());
  EXPECT_DOUBLE_EQ(known->DistinctIds(256), known->UniqueIdsPerBatch(256));
  EXPECT_DOUBLE_EQ(trace->Simulate(16.0 * 100, 256).reads,
                   known->MemoryTierTraffic(16.0 * 100, 256).reads);
  features.slot_vocabulary.clear();
  auto graph = test::MlpGraph(features.num_dense, features.num_slots, features.embedding_dim, 64);
  Result<Program> program = BuildProgram("mlp", *graph, features);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  EXPECT_DOUBLE_EQ(trace->Simulate(0.0, 256).distinct, program->UniqueIdsPerBatch(256));
  const TierTraffic t = program->MemoryTierTraffic(16.0 * 100, 256);
  EXPECT_DOUBLE_EQ(trace->Simulate(16.0 * 100, 256).reads, t.reads);
  EXPECT_DOUBLE_EQ(trace->Simulate(16.0 * 100, 256).writes, t.writes);
  // Without one, the Zipf model of the slots.
  features.key_trace = nullptr;
  Result<Program> zipf = BuildProgram("mlp", *graph, features);
  ASSERT_TRUE(zipf.ok());
  EXPECT_DOUBLE_EQ(zipf->DistinctIds(256), zipf->UniqueIdsPerBatch(256));
}

}  // namespace
}  // namespace ember::scheduler
