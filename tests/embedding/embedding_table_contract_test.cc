// The contract of EmbeddingTable (embedding/embedding_table.h), part one: the
// values Pull, Push and Lookup give, run against every implementation
// (tests/embedding/table_contract.h). Part two (RowMeta, admission, TTL) is
// embedding_table_lifecycle_contract_test.cc.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "core/random.h"
#include "core/threads.h"
#include "embedding/embedding_table.h"
#include "embedding/sparse_optimizer.h"
#include "embedding/stored_rows.h"
#include "tests/embedding/optimizer_reference.h"
#include "tests/embedding/table_contract.h"
#include "tests/embedding/table_test_data.h"

namespace ember::test {
namespace {

using embedding::AdmissionOptions;
using embedding::ReferenceRow;
using embedding::ReferenceStep;
using embedding::SparseOptimizer;
using embedding::SparseOptimizerName;

constexpr Key kMaxKey = std::numeric_limits<Key>::max();

// Pulls `keys` in batches of `batch_size`, in reverse order; returns rows in
// the order of `keys`.
std::vector<float> PullReversedInBatches(EmbeddingTable& table, const std::vector<Key>& keys,
                                         size_t batch_size) {
  const int dim = table.dim();
  std::vector<float> out(keys.size() * dim);
  std::vector<Key> reversed(keys.rbegin(), keys.rend());
  for (size_t begin = 0; begin < reversed.size(); begin += batch_size) {
    const size_t end = std::min(reversed.size(), begin + batch_size);
    std::vector<Key> batch(reversed.begin() + begin, reversed.begin() + end);
    std::vector<float> rows = PullAll(table, batch);
    for (size_t i = 0; i < batch.size(); ++i) {
      const size_t position = keys.size() - 1 - (begin + i);
      std::copy_n(rows.begin() + i * dim, dim, out.begin() + position * dim);
    }
  }
  return out;
}

TEST_P(EmbeddingTableContractTest, InitialRowsDependOnlyOnSeedAndKey) {
  EmbeddingTableOptions options;
  options.dim = 8;
  options.seed = 42;
  const std::vector<Key> keys = DistinctKeys(5000, 1);
  const std::vector<float> expected = ExpectedInitialRows(options, keys);

  auto one_batch = MakeTable(options);
  EXPECT_EQ(expected, PullAll(*one_batch, keys));

  options.num_shards = 3;
  auto small_batches_one_thread = MakeTable(options);
  ThreadArena one_thread(1);
  std::vector<float> rows;
  one_thread.Execute([&] { rows = PullReversedInBatches(*small_batches_one_thread, keys, 7); });
  EXPECT_EQ(expected, rows);

  options.num_shards = 1;
  auto one_shard_two_threads = MakeTable(options);
  ThreadArena two_threads(2);
  two_threads.Execute([&] { rows = PullReversedInBatches(*one_shard_two_threads, keys, 2500); });
  EXPECT_EQ(expected, rows);
}

TEST_P(EmbeddingTableContractTest, DifferentSeedsGiveDifferentRows) {
  EmbeddingTableOptions options;
  const std::vector<Key> keys = DistinctKeys(100, 2);
  options.seed = 1;
  const std::vector<float> first = PullAll(*MakeTable(options), keys);
  options.seed = 2;
  const std::vector<float> second = PullAll(*MakeTable(options), keys);
  int64_t equal = 0;
  for (size_t i = 0; i < first.size(); ++i) equal += first[i] == second[i];
  EXPECT_EQ(0, equal);
}

TEST_P(EmbeddingTableContractTest, InitialValuesSpanTheInitScale) {
  struct Case {
    int dim;
    float init_scale;
    float expected_scale;
  };
  for (const Case& c : {Case{16, 0.0f, 0.25f}, Case{4, -1.0f, 0.5f}, Case{8, 0.01f, 0.01f}}) {
    EmbeddingTableOptions options;
    options.dim = c.dim;
    options.init_scale = c.init_scale;
    const std::vector<float> rows = PullAll(*MakeTable(options), DistinctKeys(2000, 3));
    const auto [min, max] = std::minmax_element(rows.begin(), rows.end());
    EXPECT_GE(*min, -c.expected_scale) << c.dim;
    EXPECT_LE(*max, c.expected_scale) << c.dim;
    EXPECT_LT(*min, -0.95f * c.expected_scale) << c.dim;
    EXPECT_GT(*max, 0.95f * c.expected_scale) << c.dim;
  }
}

TEST_P(EmbeddingTableContractTest, PullCreatesRowsForUnseenKeysOnlyOnce) {
  auto table = MakeTable(EmbeddingTableOptions{});
  EXPECT_EQ(0, table->num_rows());
  const std::vector<Key> keys = DistinctKeys(300, 4);
  const std::vector<Key> first(keys.begin(), keys.begin() + 100);
  const std::vector<float> first_rows = PullAll(*table, first);
  EXPECT_EQ(100, table->num_rows());
  const std::vector<float> all_rows = PullAll(*table, keys);
  EXPECT_EQ(300, table->num_rows());
  EXPECT_EQ(first_rows, std::vector<float>(all_rows.begin(), all_rows.begin() + 100 * 16));
  EXPECT_EQ(all_rows, PullAll(*table, keys));
  EXPECT_EQ(300, table->num_rows());
}

TEST_P(EmbeddingTableContractTest, EmptyBatchesDoNothingAndNullBuffersAreRejected) {
  auto table = MakeTable(EmbeddingTableOptions{});
  EXPECT_TRUE(table->Pull({}, nullptr).ok());
  EXPECT_TRUE(table->Push({}, nullptr).ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, table->Pull({1}, nullptr).code());
  EXPECT_EQ(StatusCode::kInvalidArgument, table->Push({1}, nullptr).code());
  EXPECT_EQ(0, table->num_rows());
}

TEST_P(EmbeddingTableContractTest, PushStepsMatchTheFormulaInDouble) {
  for (SparseOptimizer optimizer :
       {SparseOptimizer::kSgd, SparseOptimizer::kAdagrad, SparseOptimizer::kAdam,
        SparseOptimizer::kFtrl, SparseOptimizer::kRowWiseAdagrad}) {
    SCOPED_TRACE(SparseOptimizerName(optimizer));
    EmbeddingTableOptions options;
    options.dim = 16;
    options.num_shards = 5;
    options.seed = 7;
    options.optimizer.type = optimizer;
    options.optimizer.learning_rate = 0.05f;
    options.optimizer.initial_accumulator = 0.1f;
    auto table = MakeTable(options);
    const std::vector<Key> keys = DistinctKeys(3000, 5);
    const int dim = options.dim;
    const std::vector<float> init = ExpectedInitialRows(options, keys);
    // Half the keys are pulled first; the other half are created by Push.
    EXPECT_EQ(std::vector<float>(init.begin(), init.begin() + 1500 * dim),
              PullAll(*table, std::vector<Key>(keys.begin(), keys.begin() + 1500)));

    std::vector<ReferenceRow> ref;
    for (size_t i = 0; i < keys.size(); ++i) {
      ref.emplace_back(options.optimizer, &init[i * dim], dim);
    }
    RandomStream random(9);
    std::vector<float> grads(keys.size() * dim);
    for (int step = 0; step < 6; ++step) {
      for (float& g : grads) g = static_cast<float>(random.Uniform(-1.0, 1.0));
      ASSERT_TRUE(table->Push(keys, grads.data()).ok());
      for (size_t i = 0; i < keys.size(); ++i) {
        ReferenceStep(options.optimizer, &grads[i * dim], ref[i]);
      }
    }
    const std::vector<float> rows = PullAll(*table, keys);
    for (size_t i = 0; i < rows.size(); ++i) {
      const double expected = ref[i / dim].w[i % dim];
      ASSERT_NEAR(expected, rows[i], 1e-6 * std::max(1.0, std::abs(expected))) << i;
    }
    EXPECT_EQ(static_cast<int64_t>(keys.size()), table->num_rows());
  }
}

// A few training steps on `keys`: pull, a gradient that depends on the pulled
// row, push. Returns the final rows.
std::vector<float> Train(EmbeddingTable& table, const std::vector<Key>& keys, int steps) {
  for (int step = 0; step < steps; ++step) {
    std::vector<float> rows = PullAll(table, keys);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = 0.5f * rows[i] + 0.01f * (step + 1);
    Status status = table.Push(keys, rows.data());
    EXPECT_TRUE(status.ok()) << status;
  }
  return PullAll(table, keys);
}

TEST_P(EmbeddingTableContractTest, ConcurrentTrainingOnDisjointKeysEqualsSequential) {
  EmbeddingTableOptions options;
  options.num_shards = 8;  // few shards, so that threads contend for them
  const int kThreads = 4;
  const std::vector<Key> all_keys = DistinctKeys(kThreads * 3000, 6);
  std::vector<std::vector<Key>> keys(kThreads);
  for (size_t i = 0; i < all_keys.size(); ++i) keys[i % kThreads].push_back(all_keys[i]);

  auto sequential = MakeTable(options);
  std::vector<std::vector<float>> expected(kThreads);
  for (int t = 0; t < kThreads; ++t) expected[t] = Train(*sequential, keys[t], 5);

  auto concurrent = MakeTable(options);
  std::vector<std::vector<float>> actual(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] { actual[t] = Train(*concurrent, keys[t], 5); });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(expected[t], actual[t]) << t;
  EXPECT_EQ(sequential->num_rows(), concurrent->num_rows());
}

// A Push of the array a Pull just read may reuse the Pull's work (the memory
// table keeps its grouping and rows). `between` runs on each table between
// its Pull and its Push, given the array the Pull read. The table under test
// pushes that same array; the reference pushes a copy, which it never
// pulled, so it resolves every key afresh. Their rows must end up
// bit-identical.
void ExpectPushAfterPullResolvesAsAfresh(
    TableContractTest& fixture, const EmbeddingTableOptions& options,
    const std::vector<Key>& warm_up, const std::vector<Key>& keys,
    const std::function<void(EmbeddingTable&, std::vector<Key>&)>& between) {
  const int dim = options.dim;
  std::vector<Key> all = warm_up;
  all.insert(all.end(), keys.begin(), keys.end());
  std::vector<std::vector<float>> rows;
  for (bool reuse : {true, false}) {
    SCOPED_TRACE(reuse ? "pushing the pulled array" : "pushing a copy");
    auto table = fixture.MakeTable(options);
    table->set_step(1);
    PullAll(*table, warm_up);
    std::vector<Key> pulled = keys;
    PullAll(*table, pulled);
    between(*table, pulled);
    const std::vector<Key> copy = pulled;
    const std::vector<Key>& pushed = reuse ? pulled : copy;
    std::vector<float> grads(pushed.size() * dim);
    for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
    ASSERT_TRUE(table->Push(pushed, grads.data()).ok());
    std::vector<float> out(all.size() * dim);
    ASSERT_TRUE(table->Lookup(all, out.data()).ok());
    rows.push_back(out);
  }
  EXPECT_EQ(rows[0], rows[1]);
}

TEST_P(EmbeddingTableContractTest, PushOfThePulledKeysUpdatesTheirRowsAfterOtherRowsAreRemoved) {
  // Erasing rows made before the batch's moves the shards' last rows (the
  // batch's) into the holes: the Pull's row addresses are stale.
  EmbeddingTableOptions options;
  options.num_shards = 4;
  const std::vector<Key> keys = DistinctKeys(3000, 31);
  const std::vector<Key> warm_up(keys.begin(), keys.begin() + 1000);
  const std::vector<Key> batch(keys.begin() + 1000, keys.end());
  ExpectPushAfterPullResolvesAsAfresh(
      *this, options, warm_up, batch, [&](EmbeddingTable& table, std::vector<Key>&) {
        const std::vector<Key> erased(warm_up.begin(), warm_up.begin() + 500);
        ASSERT_TRUE(table.stored_rows().EraseRows(erased).ok());
      });
}

TEST_P(EmbeddingTableContractTest, PushOfThePulledArrayRefilledWithOtherKeysUpdatesTheNewKeys) {
  EmbeddingTableOptions options;
  options.num_shards = 4;
  const std::vector<Key> keys = DistinctKeys(3000, 32);
  const std::vector<Key> warm_up(keys.begin(), keys.begin() + 1500);
  const std::vector<Key> batch(keys.begin() + 1500, keys.end());
  ExpectPushAfterPullResolvesAsAfresh(
      *this, options, warm_up, batch, [&](EmbeddingTable&, std::vector<Key>& pulled) {
        std::copy(warm_up.begin(), warm_up.end(), pulled.begin());  // same size, same array
      });
}

TEST_P(EmbeddingTableContractTest, PushOfThePulledKeysUpdatesRowsAdmittedSinceThePull) {
  // The Pull read the keys before admission gave them rows (zeros, no row);
  // a second Pull admits them, and the first batch's gradients must reach them.
  EmbeddingTableOptions options;
  options.num_shards = 4;
  options.admission.kind = AdmissionOptions::Kind::kFrequency;
  options.admission.min_count = 2;
  const std::vector<Key> batch = DistinctKeys(2000, 33);
  ExpectPushAfterPullResolvesAsAfresh(
      *this, options, {}, batch, [&](EmbeddingTable& table, std::vector<Key>&) {
        EXPECT_EQ(0, table.num_rows());
        PullAll(table, batch);
        EXPECT_EQ(static_cast<int64_t>(batch.size()), table.num_rows());
      });
}

// A Pull of keys grouped ahead (PrepareKeys) skips its own grouping, and
// reads what a Pull without it reads, also when the array was refilled with
// other keys in between (then it groups them itself).
TEST_P(EmbeddingTableContractTest, PullOfPreparedKeysReadsAsAPullWithout) {
  EmbeddingTableOptions options;
  options.num_shards = 8;
  const std::vector<Key> keys = DistinctKeys(4000, 41);
  const std::vector<Key> first(keys.begin(), keys.begin() + 2000);
  const std::vector<Key> second(keys.begin() + 1000, keys.begin() + 3000);
  auto reference = MakeTable(options);
  const std::vector<float> first_rows = PullAll(*reference, first);
  const std::vector<float> second_rows = PullAll(*reference, second);

  auto table = MakeTable(options);
  std::vector<Key> batch = first;
  table->PrepareKeys(batch);
  EXPECT_EQ(first_rows, PullAll(*table, batch));
  EXPECT_EQ(1, table->stats().prepared_pulls);
  // Prepared, then refilled with other keys of the same count.
  table->PrepareKeys(batch);
  batch = second;
  EXPECT_EQ(second_rows, PullAll(*table, batch));
  EXPECT_EQ(1, table->stats().prepared_pulls);
  // Another array with the same keys is not the one prepared.
  table->PrepareKeys(batch);
  const std::vector<Key> copy = batch;
  EXPECT_EQ(second_rows, PullAll(*table, copy));
  EXPECT_EQ(1, table->stats().prepared_pulls);
  EXPECT_EQ(second_rows, PullAll(*table, batch));
  EXPECT_EQ(2, table->stats().prepared_pulls);
  EXPECT_EQ(reference->num_rows(), table->num_rows());
}

// The trainer's read-ahead: batch i + 1's keys are prepared on another
// thread while batch i is pulled and pushed. The rows end as when nothing
// is prepared.
TEST_P(EmbeddingTableContractTest, KeysPreparedWhileOtherBatchesTrainEndAsSequential) {
  EmbeddingTableOptions options;
  options.num_shards = 8;
  options.dim = 4;
  constexpr int kBatches = 40;
  const std::vector<Key> pool = DistinctKeys(3000, 42);
  std::vector<std::vector<Key>> batches(kBatches);
  RandomStream random(43);
  for (std::vector<Key>& batch : batches) {
    std::vector<char> taken(pool.size(), 0);
    for (int i = 0; i < 500; ++i) {
      const size_t k = random.NextU64() % pool.size();
      if (!taken[k]) batch.push_back(pool[k]);
      taken[k] = 1;
    }
  }
  const auto train = [&](EmbeddingTable& table, bool prepare) {
    std::thread reader;
    for (int b = 0; b < kBatches; ++b) {
      if (reader.joinable()) reader.join();
      if (prepare && b + 1 < kBatches) {
        reader = std::thread([&, b] { table.PrepareKeys(batches[b + 1]); });
      }
      std::vector<float> rows = PullAll(table, batches[b]);
      for (float& v : rows) v = 0.5f * v + 0.01f;  // some gradient
      const Status pushed = table.Push(batches[b], rows.data());
      EXPECT_TRUE(pushed.ok()) << pushed;
    }
    if (reader.joinable()) reader.join();
    return PullAll(table, pool);
  };
  auto sequential = MakeTable(options);
  auto prepared = MakeTable(options);
  EXPECT_EQ(train(*sequential, false), train(*prepared, true));
  EXPECT_EQ(0, sequential->stats().prepared_pulls);
  EXPECT_EQ(kBatches - 1, prepared->stats().prepared_pulls);
}

TEST_P(EmbeddingTableContractTest, KeysZeroAndMaxAreOrdinaryKeys) {
  EmbeddingTableOptions options;
  options.dim = 4;
  options.optimizer.type = SparseOptimizer::kSgd;
  options.optimizer.learning_rate = 1.0f;
  auto table = MakeTable(options);
  const std::vector<Key> keys = {0, kMaxKey, 1, kMaxKey - 1};
  const std::vector<float> init = ExpectedInitialRows(options, keys);
  EXPECT_EQ(init, PullAll(*table, keys));
  EXPECT_EQ(4, table->num_rows());

  const std::vector<Key> pushed = {kMaxKey, 0};
  const std::vector<float> grads = {1, 1, 1, 1, 2, 2, 2, 2};
  ASSERT_TRUE(table->Push(pushed, grads.data()).ok());
  std::vector<float> expected = init;
  for (int e = 0; e < 4; ++e) {
    expected[e] -= 2.0f;
    expected[4 + e] -= 1.0f;
  }
  EXPECT_EQ(expected, PullAll(*table, keys));
  EXPECT_EQ(4, table->num_rows());
}

TEST_P(EmbeddingTableContractTest, ReportsItsDim) {
  EmbeddingTableOptions options;
  options.dim = 24;
  EXPECT_EQ(24, MakeTable(options)->dim());
}

TEST_P(EmbeddingTableContractTest, ReserveRefusesANegativeCountAndChangesNoRow) {
  EmbeddingTableOptions options;
  options.dim = 4;
  auto table = MakeTable(options);
  const std::vector<Key> keys = DistinctKeys(100, 23);
  const std::vector<float> rows = PullAll(*table, keys);
  EXPECT_EQ(StatusCode::kInvalidArgument, table->Reserve(-1).code());
  EXPECT_TRUE(table->Reserve(1000).ok());
  EXPECT_EQ(rows, PullAll(*table, keys));
  EXPECT_EQ(100, table->num_rows());
}

// Prefetch is a hint: with or without it, training reads and leaves the
// same values.
TEST_P(EmbeddingTableContractTest, PrefetchChangesNoValue) {
  EmbeddingTableOptions options;
  options.dim = 4;
  const std::vector<Key> keys = DistinctKeys(3000, 24);
  const auto run = [&](EmbeddingTable& table, bool prefetch) {
    if (prefetch) table.Prefetch(keys);
    Train(table, keys, 2);
    if (prefetch) table.Prefetch(keys);
    return Train(table, keys, 1);
  };
  auto reference = MakeTable(options);
  auto table = MakeTable(options);
  EXPECT_EQ(run(*reference, false), run(*table, true));
  EXPECT_EQ(reference->num_rows(), table->num_rows());
}

INSTANTIATE_TEST_SUITE_P(AllTables, EmbeddingTableContractTest,
                         ::testing::ValuesIn(AllTableImpls()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ember::test
