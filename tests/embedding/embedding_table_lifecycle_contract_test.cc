// The contract of EmbeddingTable (embedding/embedding_table.h), part two: row
// metadata, admission, TTL eviction, statistics and Lookup, run against
// every implementation (instantiated in embedding_table_contract_test.cc).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/random.h"
#include "core/threads.h"
#include "embedding/embedding_table.h"
#include "embedding/stored_rows.h"
#include "tests/embedding/table_contract.h"
#include "tests/embedding/table_test_data.h"

namespace ember::test {
namespace {

using embedding::AdmissionOptions;
using embedding::RowMeta;
using embedding::SparseOptimizer;
using embedding::TableStats;
using ::testing::Each;
using ::testing::Optional;

EmbeddingTableOptions SgdOptions(int dim) {
  EmbeddingTableOptions options;
  options.dim = dim;
  options.num_shards = 4;
  options.optimizer.type = SparseOptimizer::kSgd;
  options.optimizer.learning_rate = 1.0f;
  return options;
}

TEST_P(EmbeddingTableContractTest, PullsCountFrequencyAndStampTheStepWhilePushesDoNot) {
  auto table = MakeTable(SgdOptions(2));
  EXPECT_EQ(0, table->step());
  table->set_step(3);
  PullAll(*table, {10, 20});
  table->set_step(5);
  PullAll(*table, {10});
  table->set_step(7);
  PushAll(*table, {10, 20, 30}, std::vector<float>(6, 0.5f));
  EXPECT_EQ(7, table->step());
  EXPECT_THAT(table->stored_rows().row_meta(10), Optional(RowMeta{2, 5}));
  EXPECT_THAT(table->stored_rows().row_meta(20), Optional(RowMeta{1, 3}));
  // Created by the Push: no Pull yet, stamped with the step of its creation.
  EXPECT_THAT(table->stored_rows().row_meta(30), Optional(RowMeta{0, 7}));
  EXPECT_EQ(std::nullopt, table->stored_rows().row_meta(40));
}

TEST_P(EmbeddingTableContractTest, FrequencyAdmissionReadsZerosAndDropsGradientsUntilMinCount) {
  EmbeddingTableOptions options = SgdOptions(4);
  options.admission.kind = AdmissionOptions::Kind::kFrequency;
  options.admission.min_count = 3;
  auto table = MakeTable(options);
  const Key key = 12345;
  EXPECT_THAT(PullAll(*table, {key}), Each(0.0f));
  PushAll(*table, {key}, std::vector<float>(4, 1.0f));  // dropped
  EXPECT_THAT(PullAll(*table, {key}), Each(0.0f));
  EXPECT_EQ(0, table->num_rows());
  // The third Pull admits the key with its usual initial row.
  EXPECT_EQ(InitialRow(options, key), PullAll(*table, {key}));
  EXPECT_EQ(1, table->num_rows());
  PushAll(*table, {key}, std::vector<float>(4, 1.0f));
  std::vector<float> expected = InitialRow(options, key);
  for (float& w : expected) w -= 1.0f;
  EXPECT_EQ(expected, PullAll(*table, {key}));

  const TableStats stats = table->stats();
  EXPECT_EQ(1, stats.rows);
  EXPECT_EQ(1, stats.admitted_keys);
  EXPECT_EQ(2, stats.rejected_keys);
  EXPECT_EQ(1, stats.dropped_gradients);
  EXPECT_EQ(0, stats.evicted_rows);
  EXPECT_EQ(table->memory_bytes(), stats.memory_bytes);
}

TEST_P(EmbeddingTableContractTest, FrequencyAdmissionCountsEveryPullOfManyKeys) {
  EmbeddingTableOptions options = SgdOptions(2);
  options.admission.kind = AdmissionOptions::Kind::kFrequency;
  options.admission.min_count = 3;
  auto table = MakeTable(options);
  const std::vector<Key> keys = RandomKeys(20000, 11);
  PullAll(*table, keys);
  PullAll(*table, keys);
  EXPECT_EQ(0, table->num_rows());
  PullAll(*table, keys);
  EXPECT_EQ(static_cast<int64_t>(keys.size()), table->num_rows());
  EXPECT_EQ(static_cast<int64_t>(2 * keys.size()), table->stats().rejected_keys);
}

TEST_P(EmbeddingTableContractTest, ProbabilityAdmissionDependsOnSeedKeyAndStepOnly) {
  EmbeddingTableOptions options = SgdOptions(2);
  options.admission.kind = AdmissionOptions::Kind::kProbability;
  options.admission.probability = 0.25;
  const std::vector<Key> keys = RandomKeys(20000, 12);
  const double n = static_cast<double>(keys.size());
  auto table = MakeTable(options);
  const std::vector<float> first = PullAll(*table, keys);
  const int64_t admitted = table->num_rows();
  EXPECT_NEAR(0.25, admitted / n, 0.02);
  // Pulling again in the same step decides the same.
  PullAll(*table, keys);
  EXPECT_EQ(admitted, table->num_rows());
  // Another table with the same options, other batches: the same rows.
  auto other = MakeTable(options);
  std::vector<float> second(first.size());
  for (size_t begin = 0; begin < keys.size(); begin += 999) {
    const size_t end = std::min(keys.size(), begin + 999);
    const std::vector<Key> batch(keys.begin() + begin, keys.begin() + end);
    const std::vector<float> rows = PullAll(*other, batch);
    std::copy(rows.begin(), rows.end(), second.begin() + begin * 2);
  }
  EXPECT_EQ(first, second);
  // A later step is a new chance: 1 - 0.75^2 of the keys have rows.
  table->set_step(1);
  PullAll(*table, keys);
  EXPECT_NEAR(1 - 0.75 * 0.75, table->num_rows() / n, 0.02);
  // Pushes never admit under kProbability.
  const std::vector<Key> fresh = RandomKeys(100, 13);
  PushAll(*table, fresh, std::vector<float>(fresh.size() * 2, 1.0f));
  EXPECT_EQ(100, table->stats().dropped_gradients);
}

TEST_P(EmbeddingTableContractTest, TtlEvictsRowsNotPulledForMoreThanTtlStepsAndTheyComeBackFresh) {
  EmbeddingTableOptions options = SgdOptions(3);
  options.ttl_steps = 2;
  auto table = MakeTable(options);
  const Key a = 1;
  const Key b = 2;
  table->set_step(0);
  PullAll(*table, {a, b});
  PushAll(*table, {a, b}, std::vector<float>(6, 0.5f));
  table->set_step(1);
  PullAll(*table, {a});
  table->set_step(2);
  EXPECT_EQ(0, table->EvictExpired());  // b is 2 steps old: kept
  table->set_step(3);
  EXPECT_EQ(1, table->EvictExpired());  // b is 3 steps old
  EXPECT_EQ(std::nullopt, table->stored_rows().row_meta(b));
  EXPECT_THAT(table->stored_rows().row_meta(a), Optional(RowMeta{2, 1}));
  EXPECT_EQ(1, table->num_rows());
  EXPECT_EQ(1, table->stats().evicted_rows);

  EXPECT_EQ(InitialRow(options, b), PullAll(*table, {b}));
  std::vector<float> trained_a = InitialRow(options, a);
  for (float& w : trained_a) w -= 0.5f;
  EXPECT_EQ(trained_a, PullAll(*table, {a}));
  EXPECT_EQ(3, table->stats().admitted_keys);  // a, b, and b again
}

TEST_P(EmbeddingTableContractTest, EvictExpiredDoesNothingWithoutTtl) {
  auto table = MakeTable(SgdOptions(2));
  PullAll(*table, RandomKeys(100, 14));
  table->set_step(1000000);
  EXPECT_EQ(0, table->EvictExpired());
  EXPECT_EQ(100, table->num_rows());
}

TEST_P(EmbeddingTableContractTest, AFrequencyAdmittedKeyEvictedAndPushedGetsAFreshRow) {
  EmbeddingTableOptions options = SgdOptions(2);
  options.admission.kind = AdmissionOptions::Kind::kFrequency;
  options.admission.min_count = 2;
  options.ttl_steps = 1;
  auto table = MakeTable(options);
  PullAll(*table, {7});
  PullAll(*table, {7});
  table->set_step(5);
  EXPECT_EQ(1, table->EvictExpired());
  // Its count already reached min_count: the Push recreates and updates it.
  PushAll(*table, {7}, {1.0f, 1.0f});
  std::vector<float> expected = InitialRow(options, 7);
  for (float& w : expected) w -= 1.0f;
  EXPECT_EQ(expected, PullAll(*table, {7}));
  EXPECT_EQ(2, table->stats().admitted_keys);
}

// Training steps over overlapping batches with frequency admission, lazy Adam
// and TTL eviction; returns every key's final row and the table's stats.
struct RunResult {
  std::vector<float> rows;
  TableStats stats;
};

RunResult RunTraining(TableContractTest& fixture, int threads) {
  EmbeddingTableOptions options;
  options.dim = 8;
  options.num_shards = 16;
  options.seed = 3;
  options.optimizer.type = SparseOptimizer::kAdam;
  options.optimizer.learning_rate = 0.01f;
  options.admission.kind = AdmissionOptions::Kind::kFrequency;
  options.admission.min_count = 2;
  options.admission.sketch_width = 1 << 12;  // small, so that keys collide
  options.ttl_steps = 2;
  auto table = fixture.MakeTable(options);
  const std::vector<Key> pool = RandomKeys(30000, 17);
  RunResult result;
  ThreadArena arena(threads);
  arena.Execute([&] {
    for (int step = 0; step < 10; ++step) {
      table->set_step(step);
      // A sliding window of the pool: keys come and go.
      std::vector<Key> batch(pool.begin() + step * 2000, pool.begin() + step * 2000 + 8000);
      std::vector<float> grads = PullAll(*table, batch);
      for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.5f * grads[i] + 0.01f * (i % 7);
      PushAll(*table, batch, grads);
      if (step % 2 == 1) table->EvictExpired();
    }
    result.rows = PullAll(*table, pool);
  });
  result.stats = table->stats();
  return result;
}

TEST_P(EmbeddingTableContractTest, AdmissionEvictionAndAdamGiveTheSameTableForOneAndFourThreads) {
  const RunResult one = RunTraining(*this, 1);
  const RunResult four = RunTraining(*this, 4);
  EXPECT_EQ(one.rows, four.rows);
  EXPECT_EQ(one.stats.rows, four.stats.rows);
  EXPECT_EQ(one.stats.admitted_keys, four.stats.admitted_keys);
  EXPECT_EQ(one.stats.rejected_keys, four.stats.rejected_keys);
  EXPECT_EQ(one.stats.evicted_rows, four.stats.evicted_rows);
  // The run exercised what it claims to.
  EXPECT_GT(one.stats.rejected_keys, 0);
  EXPECT_GT(one.stats.evicted_rows, 0);
}

TEST_P(EmbeddingTableContractTest, LookupReadsRowsWithoutCreatingRowsOrChangingState) {
  EmbeddingTableOptions options = SgdOptions(4);
  auto table = MakeTable(options);
  const std::vector<Key> seen = {11, 22};
  PullAll(*table, seen);
  PushAll(*table, seen, std::vector<float>(8, 0.5f));
  table->set_step(7);
  const std::vector<float> pulled_before = PullAll(*table, seen);
  const TableStats stats_before = table->stats();
  const std::optional<RowMeta> meta_before = table->stored_rows().row_meta(11);

  std::vector<float> out(3 * 4, std::nanf(""));
  ASSERT_TRUE(table->Lookup({11, 33, 22}, out.data()).ok());
  EXPECT_EQ(std::vector<float>(pulled_before.begin(), pulled_before.begin() + 4),
            std::vector<float>(out.begin(), out.begin() + 4));
  EXPECT_EQ(InitialRow(options, 33), std::vector<float>(out.begin() + 4, out.begin() + 8));
  EXPECT_EQ(std::vector<float>(pulled_before.begin() + 4, pulled_before.end()),
            std::vector<float>(out.begin() + 8, out.end()));
  EXPECT_EQ(2, table->num_rows());
  EXPECT_EQ(meta_before, table->stored_rows().row_meta(11));
  EXPECT_EQ(stats_before.rejected_keys, table->stats().rejected_keys);
  EXPECT_FALSE(table->stored_rows().row_meta(33).has_value());
}

TEST_P(EmbeddingTableContractTest, LookupOfUnknownKeysReadsZerosUnderAdmissionAndCountsNothing) {
  EmbeddingTableOptions options = SgdOptions(2);
  options.admission.kind = AdmissionOptions::Kind::kFrequency;
  options.admission.min_count = 2;
  auto table = MakeTable(options);
  std::vector<float> out(2, 1.0f);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(table->Lookup({99}, out.data()).ok());
  EXPECT_EQ((std::vector<float>{0.0f, 0.0f}), out);
  // Lookups did not count towards admission: one Pull still reads zeros.
  EXPECT_EQ((std::vector<float>{0.0f, 0.0f}), PullAll(*table, {99}));
  EXPECT_EQ(0, table->num_rows());
}

}  // namespace
}  // namespace ember::test
