#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "core/random.h"
#include "core/threads.h"
#include "embedding/embedding_table.h"
#include "embedding/row_init.h"
#include "embedding/sparse_optimizer.h"
#include "tests/embedding/optimizer_reference.h"

namespace ember::embedding {

// Names parameterised tests' optimizers in gtest's output.
void PrintTo(SparseOptimizer optimizer, std::ostream* out) {
  *out << SparseOptimizerName(optimizer);
}

namespace {

using ::testing::HasSubstr;

constexpr Key kMaxKey = std::numeric_limits<Key>::max();

std::unique_ptr<EmbeddingTable> MakeTable(const EmbeddingTableOptions& options) {
  Result<std::unique_ptr<EmbeddingTable>> table = NewMemoryTable(options);
  EXPECT_TRUE(table.ok()) << table.status();
  return std::move(table).value();
}

// `n` distinct keys spread over the whole 64-bit range, 0 and kMaxKey included.
std::vector<Key> DistinctKeys(int64_t n, uint64_t seed) {
  std::vector<Key> keys = {0, kMaxKey};
  RandomStream random(seed);
  while (static_cast<int64_t>(keys.size()) < n) keys.push_back(random.NextU64());
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  keys.resize(std::min<int64_t>(n, keys.size()));
  return keys;
}

std::vector<float> PullAll(EmbeddingTable& table, const std::vector<Key>& keys) {
  std::vector<float> out(keys.size() * table.dim(), std::nanf(""));
  Status status = table.Pull(keys, out.data());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

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

std::vector<float> ExpectedInitialRows(const EmbeddingTableOptions& options,
                                       const std::vector<Key>& keys) {
  std::vector<float> rows(keys.size() * options.dim);
  for (size_t i = 0; i < keys.size(); ++i) {
    InitRowWeights(options.seed, keys[i], InitScale(options), options.dim,
                   rows.data() + i * options.dim);
  }
  return rows;
}

TEST(MemoryTableTest, InitialRowsDependOnlyOnSeedAndKey) {
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

TEST(MemoryTableTest, DifferentSeedsGiveDifferentRows) {
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

TEST(MemoryTableTest, InitialValuesSpanTheInitScale) {
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

TEST(MemoryTableTest, PullCreatesRowsForUnseenKeysOnlyOnce) {
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

TEST(MemoryTableTest, EmptyBatchesDoNothingAndNullBuffersAreRejected) {
  auto table = MakeTable(EmbeddingTableOptions{});
  EXPECT_TRUE(table->Pull({}, nullptr).ok());
  EXPECT_TRUE(table->Push({}, nullptr).ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, table->Pull({1}, nullptr).code());
  EXPECT_EQ(StatusCode::kInvalidArgument, table->Push({1}, nullptr).code());
  EXPECT_EQ(0, table->num_rows());
}

class MemoryTablePushTest : public ::testing::TestWithParam<SparseOptimizer> {};

TEST_P(MemoryTablePushTest, StepsMatchTheFormulaInDouble) {
  EmbeddingTableOptions options;
  options.dim = 16;
  options.num_shards = 5;
  options.seed = 7;
  options.optimizer.type = GetParam();
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

INSTANTIATE_TEST_SUITE_P(AllOptimizers, MemoryTablePushTest,
                         ::testing::Values(SparseOptimizer::kSgd, SparseOptimizer::kAdagrad,
                                           SparseOptimizer::kAdam, SparseOptimizer::kFtrl,
                                           SparseOptimizer::kRowWiseAdagrad),
                         [](const auto& info) { return SparseOptimizerName(info.param); });

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

TEST(MemoryTableTest, ConcurrentTrainingOnDisjointKeysEqualsSequential) {
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

// A Push of the array a Pull just read reuses the Pull's grouping and rows
// (MemoryTable::TakeKept). `between` runs on each table between its
// Pull and its Push, given the array the Pull read. The table under test
// pushes that same array; the reference pushes a copy, which it never pulled,
// so it resolves every key afresh. Their rows must end up bit-identical.
void ExpectPushAfterPullResolvesAsAfresh(
    const EmbeddingTableOptions& options, const std::vector<Key>& warm_up,
    const std::vector<Key>& keys,
    const std::function<void(EmbeddingTable&, std::vector<Key>&)>& between) {
  const int dim = options.dim;
  std::vector<Key> all = warm_up;
  all.insert(all.end(), keys.begin(), keys.end());
  std::vector<std::vector<float>> rows;
  for (bool reuse : {true, false}) {
    SCOPED_TRACE(reuse ? "pushing the pulled array" : "pushing a copy");
    auto table = MakeTable(options);
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

TEST(MemoryTableTest, PushOfThePulledKeysUpdatesTheirRowsAfterOtherRowsAreRemoved) {
  // Erasing rows made before the batch's moves the shards' last rows (the
  // batch's) into the holes: the Pull's row addresses are stale.
  EmbeddingTableOptions options;
  options.num_shards = 4;
  const std::vector<Key> keys = DistinctKeys(3000, 31);
  const std::vector<Key> warm_up(keys.begin(), keys.begin() + 1000);
  const std::vector<Key> batch(keys.begin() + 1000, keys.end());
  ExpectPushAfterPullResolvesAsAfresh(
      options, warm_up, batch, [&](EmbeddingTable& table, std::vector<Key>&) {
        const std::vector<Key> erased(warm_up.begin(), warm_up.begin() + 500);
        ASSERT_TRUE(table.EraseRows(erased).ok());
      });
}

TEST(MemoryTableTest, PushOfThePulledArrayRefilledWithOtherKeysUpdatesTheNewKeys) {
  EmbeddingTableOptions options;
  options.num_shards = 4;
  const std::vector<Key> keys = DistinctKeys(3000, 32);
  const std::vector<Key> warm_up(keys.begin(), keys.begin() + 1500);
  const std::vector<Key> batch(keys.begin() + 1500, keys.end());
  ExpectPushAfterPullResolvesAsAfresh(
      options, warm_up, batch, [&](EmbeddingTable&, std::vector<Key>& pulled) {
        std::copy(warm_up.begin(), warm_up.end(), pulled.begin());  // same size, same array
      });
}

TEST(MemoryTableTest, PushOfThePulledKeysUpdatesRowsAdmittedSinceThePull) {
  // The Pull read the keys before admission gave them rows (zeros, no row);
  // a second Pull admits them, and the first batch's gradients must reach them.
  EmbeddingTableOptions options;
  options.num_shards = 4;
  options.admission.kind = AdmissionOptions::Kind::kFrequency;
  options.admission.min_count = 2;
  const std::vector<Key> batch = DistinctKeys(2000, 33);
  ExpectPushAfterPullResolvesAsAfresh(
      options, {}, batch, [&](EmbeddingTable& table, std::vector<Key>&) {
        EXPECT_EQ(0, table.num_rows());
        PullAll(table, batch);
        EXPECT_EQ(static_cast<int64_t>(batch.size()), table.num_rows());
      });
}

// A Pull of keys grouped ahead (PrepareKeys) skips its own grouping, and
// reads what a Pull without it reads, also when the array was refilled with
// other keys in between (then it groups them itself).
TEST(MemoryTableTest, PullOfPreparedKeysReadsAsAPullWithout) {
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
TEST(MemoryTableTest, KeysPreparedWhileOtherBatchesTrainEndAsSequential) {
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

TEST(MemoryTableTest, KeysZeroAndMaxAreOrdinaryKeys) {
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

TEST(MemoryTableTest, ManyKeysKeepTheirRowsThroughIndexGrowth) {
  EmbeddingTableOptions options;
  options.dim = 4;
  options.num_shards = 4;  // 50k rows per shard: many rehashes and chunks
  options.optimizer.type = SparseOptimizer::kSgd;
  options.optimizer.learning_rate = 0.5f;
  auto table = MakeTable(options);
  const std::vector<Key> keys = DistinctKeys(200000, 7);
  ASSERT_EQ(200000u, keys.size());
  const std::vector<float> init = ExpectedInitialRows(options, keys);
  EXPECT_EQ(init, PullReversedInBatches(*table, keys, 10000));
  EXPECT_EQ(200000, table->num_rows());

  std::vector<float> grads(init.size());
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(keys[i / 4] % 97);
  ASSERT_TRUE(table->Push(keys, grads.data()).ok());
  std::vector<float> expected = init;
  for (size_t i = 0; i < expected.size(); ++i) expected[i] -= 0.5f * grads[i];
  EXPECT_EQ(expected, PullAll(*table, keys));
  EXPECT_EQ(200000, table->num_rows());
}

TEST(MemoryTableTest, InvalidOptionsAreRejectedNamingTheField) {
  struct Case {
    void (*mutate)(EmbeddingTableOptions&);
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](EmbeddingTableOptions& o) { o.dim = 0; }, "dim"},
      {[](EmbeddingTableOptions& o) { o.dim = -3; }, "dim"},
      {[](EmbeddingTableOptions& o) { o.num_shards = 0; }, "num_shards"},
      {[](EmbeddingTableOptions& o) { o.num_shards = 1 << 30; }, "num_shards"},
      {[](EmbeddingTableOptions& o) { o.init_scale = std::nanf(""); }, "init_scale"},
      {[](EmbeddingTableOptions& o) { o.optimizer.learning_rate = 0.0f; }, "learning_rate"},
      {[](EmbeddingTableOptions& o) { o.optimizer.learning_rate = -0.1f; }, "learning_rate"},
      {[](EmbeddingTableOptions& o) { o.optimizer.initial_accumulator = -1.0f; },
       "initial_accumulator"},
      {[](EmbeddingTableOptions& o) { o.optimizer.beta2 = 1.0f; }, "beta2"},
      {[](EmbeddingTableOptions& o) { o.ttl_steps = -1; }, "ttl_steps"},
      {[](EmbeddingTableOptions& o) {
         o.admission.kind = AdmissionOptions::Kind::kFrequency;
         o.admission.min_count = 0;
       },
       "min_count"},
      {[](EmbeddingTableOptions& o) {
         o.admission.kind = AdmissionOptions::Kind::kFrequency;
         o.admission.sketch_width = 0;
       },
       "sketch_width"},
      {[](EmbeddingTableOptions& o) {
         o.admission.kind = AdmissionOptions::Kind::kFrequency;
         o.admission.sketch_depth = 17;
       },
       "sketch_depth"},
      {[](EmbeddingTableOptions& o) {
         o.admission.kind = AdmissionOptions::Kind::kProbability;
         o.admission.probability = 0.0;
       },
       "probability"},
      {[](EmbeddingTableOptions& o) {
         o.admission.kind = AdmissionOptions::Kind::kProbability;
         o.admission.probability = std::nan("");
       },
       "probability"},
      {[](EmbeddingTableOptions& o) { o.admission.kind = static_cast<AdmissionOptions::Kind>(9); },
       "admission.kind"},
  };
  for (const Case& c : cases) {
    EmbeddingTableOptions options;
    c.mutate(options);
    Result<std::unique_ptr<EmbeddingTable>> table = NewMemoryTable(options);
    ASSERT_FALSE(table.ok()) << c.field;
    EXPECT_EQ(StatusCode::kInvalidArgument, table.status().code()) << c.field;
    EXPECT_THAT(table.status().message(), HasSubstr(c.field));
  }
}

TEST(MemoryTableTest, MemoryBytesGrowWithRowsAndCountOptimizerState) {
  EmbeddingTableOptions options;
  options.dim = 16;
  options.optimizer.type = SparseOptimizer::kAdagrad;
  auto adagrad = MakeTable(options);
  options.optimizer.type = SparseOptimizer::kSgd;
  auto sgd = MakeTable(options);
  const int64_t empty_bytes = adagrad->memory_bytes();
  EXPECT_GT(empty_bytes, 0);

  PullAll(*adagrad, DistinctKeys(1000, 8));
  const int64_t small_bytes = adagrad->memory_bytes();
  EXPECT_GT(small_bytes, empty_bytes);

  const std::vector<Key> keys = DistinctKeys(100000, 8);
  PullAll(*adagrad, keys);
  PullAll(*sgd, keys);
  const int64_t adagrad_bytes = adagrad->memory_bytes();
  const int64_t sgd_bytes = sgd->memory_bytes();
  EXPECT_GT(adagrad_bytes, small_bytes);
  // Weights + accumulators + at least a key per row for the index.
  EXPECT_GE(adagrad_bytes, 100000 * (2 * 16 * 4 + 8));
  EXPECT_GE(sgd_bytes, 100000 * (16 * 4 + 8));
  EXPECT_LT(sgd_bytes, adagrad_bytes);
  // Not wildly over: chunks and a hash index at load >= 0.35.
  EXPECT_LT(adagrad_bytes, 100000 * (2 * 16 * 4) * 2);
}

// Rows made in room reserved ahead read and train exactly as in a table
// without it, and making them allocates nothing: memory_bytes(), which
// counts every chunk and index entry, stays where the reservation put it.
TEST(MemoryTableTest, RowsMadeInReservedRoomAllocateNothingAndMatchATableWithout) {
  EmbeddingTableOptions options;
  options.dim = 16;
  options.num_shards = 16;
  options.optimizer.type = SparseOptimizer::kAdagrad;
  auto reserved = MakeTable(options);
  auto plain = MakeTable(options);
  const std::vector<Key> keys = DistinctKeys(30000, 21);
  const int64_t empty_bytes = reserved->memory_bytes();
  ASSERT_TRUE(reserved->Reserve(static_cast<int64_t>(keys.size())).ok());
  const int64_t room_bytes = reserved->memory_bytes();
  // At least the weights and accumulators of every row.
  EXPECT_GE(room_bytes - empty_bytes, 30000 * 2 * 16 * 4);
  EXPECT_EQ(room_bytes, reserved->stats().memory_bytes);
  EXPECT_EQ(0, reserved->num_rows());

  RandomStream random(4);
  for (size_t begin = 0; begin < keys.size(); begin += 1000) {
    const std::vector<Key> batch(keys.begin() + begin, keys.begin() + begin + 1000);
    ASSERT_EQ(PullAll(*plain, batch), PullAll(*reserved, batch)) << begin;
    std::vector<float> grads(batch.size() * options.dim);
    for (float& g : grads) g = static_cast<float>(random.NextBelow(1000)) / 500.0f - 1.0f;
    ASSERT_TRUE(plain->Push(batch, grads.data()).ok());
    ASSERT_TRUE(reserved->Push(batch, grads.data()).ok());
    ASSERT_EQ(room_bytes, reserved->memory_bytes()) << begin;
  }
  EXPECT_EQ(PullAll(*plain, keys), PullAll(*reserved, keys));
  // Room for what it holds already: nothing more.
  ASSERT_TRUE(reserved->Reserve(static_cast<int64_t>(keys.size())).ok());
  EXPECT_EQ(room_bytes, reserved->memory_bytes());
  // Beyond the room, rows are made as without it.
  const std::vector<Key> more = DistinctKeys(5000, 22);
  EXPECT_EQ(PullAll(*plain, more), PullAll(*reserved, more));
  EXPECT_GT(reserved->memory_bytes(), room_bytes);
}

TEST(MemoryTableTest, ReservingMoreThanTheMachineHasIsRefusedAndChangesNothing) {
  EmbeddingTableOptions options;
  options.dim = 16;
  auto table = MakeTable(options);
  const std::vector<Key> keys = DistinctKeys(100, 23);
  const std::vector<float> rows = PullAll(*table, keys);
  const int64_t bytes = table->memory_bytes();
  const Status status = table->Reserve(int64_t{1} << 50);
  EXPECT_EQ(StatusCode::kResourceExhausted, status.code()) << status;
  EXPECT_THAT(status.message(), HasSubstr("embedding rows"));
  EXPECT_EQ(bytes, table->memory_bytes());
  EXPECT_EQ(StatusCode::kInvalidArgument, table->Reserve(-1).code());
  EXPECT_EQ(rows, PullAll(*table, keys));
  EXPECT_EQ(100, table->num_rows());
}

TEST(MemoryTableTest, ReportsItsDim) {
  EmbeddingTableOptions options;
  options.dim = 24;
  EXPECT_EQ(24, MakeTable(options)->dim());
}

}  // namespace
}  // namespace ember::embedding
