#include "embedding/tiered_table.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/random.h"
#include "embedding/embedding_table.h"
#include "embedding/faulty_tier.h"
#include "embedding/rocksdb_tier.h"
#include "embedding/stored_rows.h"
#include "embedding/tier.h"
#include "tests/embedding/table_test_data.h"
#include "tests/testing/temp_dir.h"

namespace ember::embedding {
namespace {

using test::BatchKeys;
using test::Gradients;
using test::KeysOf;
using test::RunOptions;
using test::SortedRows;
using test::StoredRow;
using test::TrainOnBatches;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int kDim = 8;
constexpr int kShards = 8;

EmbeddingTableOptions BaseOptions() {
  EmbeddingTableOptions options;
  options.dim = kDim;
  options.num_shards = kShards;
  options.seed = 7;
  options.admission.sketch_width = 1024;
  options.track_changes = true;
  return options;
}

class TieredTableTest : public test::TempDirTest {};

// (optimizer with its admission, budget as a fraction of the in-memory
// table, prefetch, policy)
using EquivalenceParam = std::tuple<int, double, bool, EmbeddingTableOptions::EvictionPolicy>;

class TieredEquivalenceTest : public test::TempDirTest,
                              public ::testing::WithParamInterface<EquivalenceParam> {};

TEST_P(TieredEquivalenceTest, PullsAndRowsAreBitIdenticalToTheMemoryTable) {
  const auto [config, fraction, prefetch, policy] = GetParam();
  EmbeddingTableOptions options = BaseOptions();
  options.ttl_steps = 15;
  switch (config) {
    case 0:
      options.optimizer.type = SparseOptimizer::kAdagrad;
      options.admission.kind = AdmissionOptions::Kind::kFrequency;
      break;
    case 1:
      options.optimizer.type = SparseOptimizer::kAdam;
      options.admission.kind = AdmissionOptions::Kind::kProbability;
      options.admission.probability = 0.5;
      break;
    case 2:
      options.optimizer.type = SparseOptimizer::kFtrl;
      options.optimizer.l1 = 0.01f;
      break;
    case 3:
      // bfloat16 weights: their rounding is a function of the row, the same
      // in either tier.
      options.optimizer.type = SparseOptimizer::kRowWiseAdagrad;
      options.weight_storage = WeightStorage::kBFloat16;
      break;
    default:
      options.optimizer.type = SparseOptimizer::kAdagrad;
      options.admission.kind = AdmissionOptions::Kind::kFrequency;
      options.weight_storage = WeightStorage::kBFloat16;
      options.dim = kDim - 1;  // an odd dim: a spare half word
      break;
  }
  auto memory = NewEmbeddingTable(options);
  ASSERT_TRUE(memory.ok()) << memory.status();
  RunOptions run;
  const std::vector<float> expected_pulls = TrainOnBatches(*memory.value(), run);
  const std::vector<StoredRow> expected_rows = SortedRows(*memory.value());

  options.memory_budget_bytes = static_cast<int64_t>(fraction * memory.value()->memory_bytes());
  options.disk_path = Path("disk");
  options.eviction_policy = policy;
  auto tiered = NewEmbeddingTable(options);
  ASSERT_TRUE(tiered.ok()) << tiered.status();
  run.prefetch = prefetch;
  run.budget_bytes = options.memory_budget_bytes;
  const std::vector<float> pulls = TrainOnBatches(*tiered.value(), run);
  ASSERT_EQ(expected_pulls.size(), pulls.size());
  EXPECT_EQ(0, std::memcmp(expected_pulls.data(), pulls.data(), pulls.size() * sizeof(float)));
  const std::vector<StoredRow> rows = SortedRows(*tiered.value());
  ASSERT_EQ(KeysOf(expected_rows), KeysOf(rows));
  EXPECT_TRUE(expected_rows == rows) << "stored rows differ";

  // Lookup (serving reads) gives the same values whether a row is in memory
  // or on disk, for keys in any order and keys never seen, and changes no
  // row.
  std::vector<Key> lookup_keys = KeysOf(expected_rows);
  for (Key k = 1; k <= 5; ++k) lookup_keys.push_back(k * 0x51ed27 + 3);
  RandomStream shuffle(3, 0);
  for (size_t i = lookup_keys.size(); i > 1; --i) {
    std::swap(lookup_keys[i - 1], lookup_keys[shuffle.NextBelow(i)]);
  }
  std::vector<float> expected_lookup(lookup_keys.size() * options.dim, -1.0f);
  std::vector<float> lookup(lookup_keys.size() * options.dim, -2.0f);
  ASSERT_TRUE(memory.value()->Lookup(lookup_keys, expected_lookup.data()).ok());
  ASSERT_TRUE(tiered.value()->Lookup(lookup_keys, lookup.data()).ok());
  EXPECT_EQ(0, std::memcmp(expected_lookup.data(), lookup.data(), lookup.size() * sizeof(float)));
  EXPECT_TRUE(expected_rows == SortedRows(*tiered.value())) << "Lookup changed rows";

  const TableStats stats = tiered.value()->stats();
  EXPECT_GT(stats.spilled_rows, 0);
  EXPECT_GT(stats.disk_hits + stats.prefetched_rows, 0);
  EXPECT_EQ(stats.memory_rows + stats.disk_rows, stats.rows);
  EXPECT_LE(stats.memory_bytes, options.memory_budget_bytes);
  if (prefetch) {
    EXPECT_GT(stats.prefetched_rows, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    OptimizersBudgetsPolicies, TieredEquivalenceTest,
    ::testing::Combine(::testing::Values(0, 1, 2, 3, 4), ::testing::Values(0.5, 0.25, 0.1),
                       ::testing::Bool(),
                       ::testing::Values(EmbeddingTableOptions::EvictionPolicy::kLru,
                                         EmbeddingTableOptions::EvictionPolicy::kLfu)));

// A budgeted table keeps to its budget: it ignores a reservation.
TEST_F(TieredTableTest, AReservationLeavesTheBudgetAsItIs) {
  EmbeddingTableOptions options = BaseOptions();
  options.memory_budget_bytes = 64 << 10;
  options.disk_path = Path("disk");
  auto table_or = NewEmbeddingTable(options);
  ASSERT_TRUE(table_or.ok()) << table_or.status();
  const int64_t bytes = table_or.value()->memory_bytes();
  ASSERT_TRUE(table_or.value()->Reserve(1000000).ok());
  EXPECT_EQ(bytes, table_or.value()->memory_bytes());
  RunOptions run;
  run.steps = 30;
  run.budget_bytes = options.memory_budget_bytes;
  TrainOnBatches(*table_or.value(), run);
  EXPECT_GT(table_or.value()->stats().disk_rows, 0);
}

// Loading a row leaves a stale copy on disk (memory wins); erasing or
// TTL-evicting the memory row must delete that copy too, and Scan must not
// show it.
TEST_F(TieredTableTest, StaleDiskCopiesAreHiddenAndDeletedWithTheirRows) {
  EmbeddingTableOptions options = BaseOptions();
  options.memory_budget_bytes = 64 << 10;
  options.ttl_steps = 5;
  auto tier_or = NewInMemoryTier(int64_t{4} * (kDim + kDim + 5));
  ASSERT_TRUE(tier_or.ok());
  Tier* tier = tier_or.value().get();
  auto table_or = NewTieredTable(options, std::move(tier_or).value());
  ASSERT_TRUE(table_or.ok()) << table_or.status();
  EmbeddingTable& table = *table_or.value();
  RunOptions run;
  run.steps = 30;
  TrainOnBatches(table, run);
  ASSERT_GT(table.stats().disk_rows, 0);
  const int64_t floats = table.stored_rows().row_floats();
  auto on_disk = [&](Key key) {
    std::vector<char> row(tier->row_bytes());
    std::vector<int64_t> missing;
    EXPECT_TRUE(tier->Get({key}, row.data(), &missing).ok());
    return missing.empty();
  };
  auto consistent = [&] {
    const TableStats stats = table.stats();
    EXPECT_EQ(stats.memory_rows + stats.disk_rows, stats.rows);
    // num_rows also counts expired disk rows not yet looked at; Scan skips
    // them. SortedRows fails if Scan shows a key twice.
    EXPECT_GE(static_cast<size_t>(table.num_rows()), SortedRows(table).size());
  };
  // Two keys that only the disk holds.
  std::vector<Key> disk_keys;
  ASSERT_TRUE(tier->Scan([&](Key key, const char*) {
                    if (disk_keys.size() < 2) disk_keys.push_back(key);
                    return Status::OK();
                  })
                  .ok());
  ASSERT_EQ(2u, disk_keys.size());
  // Load them and change them: memory now holds newer rows than the disk.
  table.set_step(run.steps);
  std::vector<float> out(disk_keys.size() * kDim);
  ASSERT_TRUE(table.Pull(disk_keys, out.data()).ok());
  const std::vector<float> grads(disk_keys.size() * kDim, 0.25f);
  ASSERT_TRUE(table.Push(disk_keys, grads.data()).ok());
  std::vector<float> rows(disk_keys.size() * floats);
  std::vector<int64_t> missing;
  ASSERT_TRUE(table.stored_rows().ReadRows(disk_keys, rows.data(), &missing).ok());
  ASSERT_THAT(missing, IsEmpty());
  // Scan shows each key once, with its memory row.
  const std::vector<StoredRow> scanned = SortedRows(table);
  for (size_t i = 0; i < disk_keys.size(); ++i) {
    auto it = std::find_if(scanned.begin(), scanned.end(),
                           [&](const StoredRow& r) { return r.key == disk_keys[i]; });
    ASSERT_NE(it, scanned.end());
    EXPECT_EQ(0, std::memcmp(it->row.data(), &rows[i * floats], floats * sizeof(float)));
  }
  consistent();

  // Erasing the first removes its disk copy, stale or not.
  const int64_t before = table.num_rows();
  ASSERT_TRUE(table.stored_rows().EraseRows({disk_keys[0]}).ok());
  EXPECT_FALSE(on_disk(disk_keys[0]));
  EXPECT_EQ(before - 1, table.num_rows());
  ASSERT_TRUE(table.stored_rows().ReadRows({disk_keys[0]}, rows.data(), &missing).ok());
  EXPECT_EQ(1u, missing.size());
  consistent();

  // Keep the second in memory while everything else expires, then let it
  // expire too: TTL removes it and its disk copy.
  for (int64_t step = run.steps + 1; step < run.steps + 4; ++step) {
    table.set_step(step);
    ASSERT_TRUE(table.Pull({disk_keys[1]}, out.data()).ok());
  }
  table.set_step(run.steps + 20);
  EXPECT_GT(table.EvictExpired(), 0);
  EXPECT_FALSE(on_disk(disk_keys[1]));
  ASSERT_TRUE(table.stored_rows().ReadRows({disk_keys[1]}, rows.data(), &missing).ok());
  EXPECT_EQ(1u, missing.size());
  consistent();
}

// Runs batches against `table` until a call fails; returns the failed call's
// index (Pull 2i, Push 2i + 1) or -1.
int RunUntilError(EmbeddingTable& table, int steps, Status* error) {
  std::vector<float> out;
  for (int step = 0; step < steps; ++step) {
    const std::vector<Key> keys = BatchKeys(3, step, 200);
    out.resize(keys.size() * kDim);
    *error = table.Pull(keys, out.data());
    if (!error->ok()) return 2 * step;
    const std::vector<float> grads = Gradients(keys, step, kDim);
    *error = table.Push(keys, grads.data());
    if (!error->ok()) return 2 * step + 1;
  }
  return -1;
}

// The memory table after the first `calls` calls of RunUntilError.
std::vector<StoredRow> ReferenceAfter(EmbeddingTableOptions options, int calls) {
  options.memory_budget_bytes = 0;
  auto table = NewMemoryTable(options).value();
  std::vector<float> out;
  for (int step = 0; 2 * step < calls; ++step) {
    const std::vector<Key> keys = BatchKeys(3, step, 200);
    out.resize(keys.size() * kDim);
    EXPECT_TRUE(table->Pull(keys, out.data()).ok());
    if (2 * step + 1 >= calls) break;
    const std::vector<float> grads = Gradients(keys, step, kDim);
    EXPECT_TRUE(table->Push(keys, grads.data()).ok());
  }
  return SortedRows(*table);
}

TEST_F(TieredTableTest, AFailingDiskFailsTheCallWithoutCorruptingTheTable) {
  EmbeddingTableOptions options = BaseOptions();
  // One shard: a failed call is then all or nothing.
  options.num_shards = 1;
  options.memory_budget_bytes = 24 << 10;
  // Call 1 is the Scan of the table's opening (for the keys the disk holds).
  for (int failing = 2; failing <= 40; ++failing) {
    SCOPED_TRACE(failing);
    FaultyTierOptions faults;
    faults.first_failing_call = failing;
    faults.failing_calls = 1;
    auto base = NewInMemoryTier(int64_t{4} * (kDim + kDim + 5));
    ASSERT_TRUE(base.ok());
    auto table_or = NewTieredTable(
        options, std::make_unique<FaultyTier>(std::move(base).value(), faults));
    ASSERT_TRUE(table_or.ok()) << table_or.status();
    Status error;
    const int failed = RunUntilError(*table_or.value(), 20, &error);
    ASSERT_GE(failed, 0);
    EXPECT_EQ(StatusCode::kIOError, error.code()) << error;
    // The failed call either happened completely or not at all.
    const std::vector<StoredRow> rows = SortedRows(*table_or.value());
    const bool before = rows == ReferenceAfter(options, failed);
    const bool after = rows == ReferenceAfter(options, failed + 1);
    EXPECT_TRUE(before || after) << "call " << failed << " left a mixed state";
  }
}

TEST_F(TieredTableTest, ADeadDiskKeepsFailingAndAPrefetchErrorReachesTheNextPull) {
  EmbeddingTableOptions options = BaseOptions();
  options.memory_budget_bytes = 24 << 10;
  FaultyTierOptions faults;
  faults.first_failing_call = 5;
  auto base = NewInMemoryTier(int64_t{4} * (kDim + kDim + 5));
  ASSERT_TRUE(base.ok());
  auto table_or =
      NewTieredTable(options, std::make_unique<FaultyTier>(std::move(base).value(), faults));
  ASSERT_TRUE(table_or.ok());
  EmbeddingTable& table = *table_or.value();
  Status error;
  ASSERT_GE(RunUntilError(table, 50, &error), 0);
  EXPECT_EQ(StatusCode::kIOError, error.code());
  table.Prefetch(BatchKeys(3, 0, 200));
  const std::vector<Key> keys = BatchKeys(3, 1, 200);
  std::vector<float> out(keys.size() * kDim);
  EXPECT_EQ(StatusCode::kIOError, table.Pull(keys, out.data()).code());
}

TEST_F(TieredTableTest, PrefetchErrorIsReturnedByTheNextPull) {
  EmbeddingTableOptions options = BaseOptions();
  options.memory_budget_bytes = 24 << 10;
  // Count the calls a run makes, then fail the first one after it: the
  // Prefetch's read.
  auto counting = std::make_unique<FaultyTier>(
      NewInMemoryTier(int64_t{4} * (kDim + kDim + 5)).value(),
      FaultyTierOptions{.first_failing_call = int64_t{1} << 40});
  FaultyTier* counter = counting.get();
  auto table_or = NewTieredTable(options, std::move(counting));
  ASSERT_TRUE(table_or.ok());
  Status error;
  ASSERT_EQ(-1, RunUntilError(*table_or.value(), 10, &error));
  const int64_t calls = counter->calls();
  table_or.value().reset();

  FaultyTierOptions faults;
  faults.first_failing_call = calls + 1;
  faults.failing_calls = 1;
  auto table = NewTieredTable(options, std::make_unique<FaultyTier>(
                                           NewInMemoryTier(int64_t{4} * (kDim + kDim + 5)).value(),
                                           faults))
                   .value();
  ASSERT_EQ(-1, RunUntilError(*table, 10, &error));
  table->Prefetch(BatchKeys(3, 0, 200));
  std::vector<Key> one = {BatchKeys(3, 0, 200)[0]};
  std::vector<float> out(kDim);
  // The failing read is the Prefetch's, or this Pull's if it reads first. A
  // Prefetch still running when a Pull starts reports its error to a later
  // Pull (a Pull does not wait for the loaders): pull until the error comes,
  // once, and then no more.
  Status status;
  for (int i = 0; i < 2000 && status.ok(); ++i) {
    status = table->Pull(one, out.data());
    if (status.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(StatusCode::kIOError, status.code()) << status;
  EXPECT_TRUE(table->Pull(one, out.data()).ok());
}

TEST_F(TieredTableTest, ConcurrentPullsOfDisjointKeysWithPrefetchMatchTheSequentialRun) {
  EmbeddingTableOptions options = BaseOptions();
  options.optimizer.type = SparseOptimizer::kAdam;
  constexpr int kThreads = 4;
  constexpr int kSteps = 40;
  // Thread t owns the keys with key % kThreads == t.
  auto keys_of = [](int thread, int step) {
    std::vector<Key> keys;
    for (Key key : BatchKeys(5, step, 600)) {
      if (key % kThreads == static_cast<Key>(thread)) keys.push_back(key);
    }
    return keys;
  };
  auto run = [&](EmbeddingTable& table, int thread) {
    std::vector<float> out;
    for (int step = 0; step < kSteps; ++step) {
      const std::vector<Key> keys = keys_of(thread, step);
      out.resize(keys.size() * kDim);
      ASSERT_TRUE(table.Pull(keys, out.data()).ok());
      const std::vector<float> grads = Gradients(keys, step, kDim);
      ASSERT_TRUE(table.Push(keys, grads.data()).ok());
    }
  };
  auto memory = NewMemoryTable(options).value();
  for (int t = 0; t < kThreads; ++t) run(*memory, t);

  options.memory_budget_bytes = memory->memory_bytes() / 5;
  options.disk_path = Path("disk");
  auto tiered_or = NewEmbeddingTable(options);
  ASSERT_TRUE(tiered_or.ok()) << tiered_or.status();
  EmbeddingTable& tiered = *tiered_or.value();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { run(tiered, t); });
  std::thread prefetcher([&] {
    for (int step = 0; step < kSteps; ++step) tiered.Prefetch(BatchKeys(5, step, 600));
  });
  for (std::thread& thread : threads) thread.join();
  prefetcher.join();
  EXPECT_TRUE(SortedRows(*memory) == SortedRows(tiered));
  EXPECT_LE(tiered.memory_bytes(), options.memory_budget_bytes);
}

TEST_F(TieredTableTest, InvalidOptionsAreRejectedNamingTheProblem) {
  EmbeddingTableOptions options = BaseOptions();
  options.memory_budget_bytes = -1;
  EXPECT_THAT(NewEmbeddingTable(options).status().message(), HasSubstr("memory_budget_bytes"));
  options.memory_budget_bytes = 1 << 20;
  EXPECT_THAT(NewEmbeddingTable(options).status().message(), HasSubstr("disk_path"));
  EXPECT_THAT(NewMemoryTable(options).status().message(), HasSubstr("NewEmbeddingTable"));
  options.disk_path = Path("disk");
  options.memory_budget_bytes = 100;
  const Status small = NewEmbeddingTable(options).status();
  EXPECT_EQ(StatusCode::kInvalidArgument, small.code());
  EXPECT_THAT(small.message(), HasSubstr("at least"));
  options.memory_budget_bytes = 1 << 20;
  EXPECT_TRUE(NewEmbeddingTable(options).ok());
  auto wrong_rows = NewInMemoryTier(12);
  EXPECT_EQ(StatusCode::kInvalidArgument,
            NewTieredTable(options, std::move(wrong_rows).value()).status().code());
}

// The disk tier is working space: a table made on a directory an earlier
// table used starts empty, and a directory holding a database that is not a
// tier is refused and left as it was.
TEST_F(TieredTableTest, ANewTableDropsTheRowsAnEarlierTableLeftOnDisk) {
  EmbeddingTableOptions options = BaseOptions();
  options.memory_budget_bytes = 64 << 10;
  options.disk_path = Path("disk");
  {
    auto table = NewEmbeddingTable(options).value();
    RunOptions run;
    run.steps = 10;
    TrainOnBatches(*table, run);
    ASSERT_GT(table->stats().disk_rows, 0);
  }
  auto table = NewEmbeddingTable(options).value();
  EXPECT_EQ(0, table->num_rows());
  EXPECT_EQ(0, table->stats().disk_rows);
  EXPECT_TRUE(SortedRows(*table).empty());
  table.reset();
  // A RocksDB database of another kind: InvalidArgument, and it survives.
  RocksDbTierOptions other;
  other.path = Path("other");
  other.row_bytes = 8;
  {
    auto tier = NewRocksDbTier(other).value();
    ASSERT_TRUE(tier->Put({7}, std::string(8, 'x').data()).ok());
  }
  options.disk_path = other.path;
  EXPECT_EQ(StatusCode::kInvalidArgument, NewEmbeddingTable(options).status().code());
  auto tier = NewRocksDbTier(other).value();
  std::string row(8, '\0');
  std::vector<int64_t> absent;
  ASSERT_TRUE(tier->Get({7}, row.data(), &absent).ok());
  EXPECT_TRUE(absent.empty());
  EXPECT_EQ(std::string(8, 'x'), row);
}

}  // namespace
}  // namespace ember::embedding

namespace ember::embedding {
namespace {

// The memory tier keeps what was used last: a batch pulled twice in a row is
// read from disk at most once, and keys pulled every step stay in memory while
// others come and go. (The equivalence tests cannot see a bad eviction
// choice; only the hit counters can.)
TEST_F(TieredTableTest, RecentAndHotRowsStayInMemory) {
  for (const auto policy :
       {EmbeddingTableOptions::EvictionPolicy::kLru, EmbeddingTableOptions::EvictionPolicy::kLfu}) {
    SCOPED_TRACE(policy == EmbeddingTableOptions::EvictionPolicy::kLru ? "LRU" : "LFU");
    EmbeddingTableOptions options = BaseOptions();
    options.eviction_policy = policy;
    options.memory_budget_bytes = 256 << 10;  // ~1500 rows of this table
    options.disk_path = Path(policy == EmbeddingTableOptions::EvictionPolicy::kLru ? "lru" : "lfu");
    auto table_or = NewEmbeddingTable(options);
    ASSERT_TRUE(table_or.ok()) << table_or.status();
    EmbeddingTable& table = *table_or.value();
    std::vector<float> out;
    int64_t step = 0;
    auto pull = [&](const std::vector<Key>& keys) {
      table.set_step(step++);
      out.resize(keys.size() * kDim);
      ASSERT_TRUE(table.Pull(keys, out.data()).ok());
      ASSERT_TRUE(table.Push(keys, out.data()).ok());
    };
    auto range = [](Key begin, Key end) {
      std::vector<Key> keys;
      for (Key k = begin; k < end; ++k) keys.push_back(k * 0x9e3779b97f4a7c15ULL);
      return keys;
    };
    // 10000 rows, most of them on disk.
    for (Key begin = 0; begin < 10000; begin += 500) pull(range(begin, begin + 500));
    ASSERT_GT(table.stats().disk_rows, 8000);

    const std::vector<Key> batch = range(2000, 2400);
    pull(batch);
    const TableStats before = table.stats();
    pull(batch);
    const TableStats after = table.stats();
    EXPECT_EQ(before.disk_hits, after.disk_hits) << "a batch pulled twice was read from disk twice";
    EXPECT_EQ(before.memory_hits + 2 * static_cast<int64_t>(batch.size()), after.memory_hits);

    // 200 hot keys in every step, 400 cold ones that change every step.
    const std::vector<Key> hot = range(20000, 20200);
    int64_t hot_disk_hits = 0;
    for (int step = 0; step < 30; ++step) {
      std::vector<Key> keys = hot;
      const std::vector<Key> cold = range(30000 + step * 400, 30400 + step * 400);
      keys.insert(keys.end(), cold.begin(), cold.end());
      const TableStats start = table.stats();
      pull(keys);
      if (step >= 3) hot_disk_hits += table.stats().disk_hits - start.disk_hits;
    }
    // From step 3 on only cold keys are new; none of them is on disk yet, so
    // any disk hit is a hot key that was evicted.
    EXPECT_EQ(0, hot_disk_hits);
  }
}

}  // namespace
}  // namespace ember::embedding

namespace ember::embedding {
namespace {

// The same at the scale where shards run in parallel and I/O comes in chunks:
// a Pull's rows are still in memory for its Push and for a second Pull.
TEST_F(TieredTableTest, PushFindsTheRowsItsPullLoadedInLargeParallelBatches) {
  EmbeddingTableOptions options = BaseOptions();
  options.num_shards = 64;
  options.optimizer.type = SparseOptimizer::kAdagrad;
  options.memory_budget_bytes = 4 << 20;
  options.disk_path = Path("disk");
  auto table_or = NewEmbeddingTable(options);
  ASSERT_TRUE(table_or.ok()) << table_or.status();
  EmbeddingTable& table = *table_or.value();
  std::vector<float> out;
  auto range = [](Key begin, Key end) {
    std::vector<Key> keys;
    for (Key k = begin; k < end; ++k) keys.push_back(k * 0x9e3779b97f4a7c15ULL);
    return keys;
  };
  for (Key begin = 0; begin < 100000; begin += 5000) {
    const std::vector<Key> keys = range(begin, begin + 5000);
    out.resize(keys.size() * kDim);
    ASSERT_TRUE(table.Pull(keys, out.data()).ok());
  }
  const std::vector<Key> batch = range(1000, 6000);
  const TableStats start = table.stats();
  ASSERT_TRUE(table.Pull(batch, out.data()).ok());
  const TableStats pulled = table.stats();
  ASSERT_TRUE(table.Push(batch, out.data()).ok());
  const TableStats pushed = table.stats();
  EXPECT_EQ(5000, pulled.disk_hits - start.disk_hits + pulled.memory_hits - start.memory_hits);
  EXPECT_EQ(0, pushed.disk_hits - pulled.disk_hits) << "Push re-read rows its Pull had loaded";
  const TableStats again_start = table.stats();
  ASSERT_TRUE(table.Pull(batch, out.data()).ok());
  EXPECT_EQ(0, table.stats().disk_hits - again_start.disk_hits);
}

}  // namespace
}  // namespace ember::embedding

namespace ember::embedding {
namespace {

std::vector<Key> KeyRange(Key begin, Key end) {
  std::vector<Key> keys;
  for (Key k = begin; k < end; ++k) keys.push_back(k * 0x9e3779b97f4a7c15ULL);
  return keys;
}

// Returns when the table's Prefetch loaders are idle: the snapshot methods
// wait for them before they start (an empty ReadRows does nothing else).
void WaitForPrefetch(EmbeddingTable& table) {
  std::vector<int64_t> missing;
  ASSERT_TRUE(table.stored_rows().ReadRows({}, nullptr, &missing).ok());
}

// LFU would evict the freshly prefetched rows first (they are the least
// frequently pulled); the pin keeps them until the Pull they were for.
TEST_F(TieredTableTest, PrefetchedRowsAreNotEvictedBeforeThePullThatAskedForThem) {
  for (const auto policy :
       {EmbeddingTableOptions::EvictionPolicy::kLru, EmbeddingTableOptions::EvictionPolicy::kLfu}) {
    const bool lru = policy == EmbeddingTableOptions::EvictionPolicy::kLru;
    SCOPED_TRACE(lru ? "LRU" : "LFU");
    EmbeddingTableOptions options = BaseOptions();
    options.eviction_policy = policy;
    options.memory_budget_bytes = 256 << 10;  // ~1500 rows of this table
    options.disk_path = Path(lru ? "lru" : "lfu");
    auto table_or = NewEmbeddingTable(options);
    ASSERT_TRUE(table_or.ok()) << table_or.status();
    EmbeddingTable& table = *table_or.value();
    std::vector<float> out;
    int64_t step = 0;
    auto train = [&](const std::vector<Key>& keys) {
      table.set_step(step++);
      out.resize(keys.size() * kDim);
      ASSERT_TRUE(table.Pull(keys, out.data()).ok());
      ASSERT_TRUE(table.Push(keys, out.data()).ok());
    };
    // 10000 rows, most of them on disk; then 500 hot rows pulled often.
    // Hot, prefetched and new rows together outgrow the budget, but the
    // rows of any one step and the prefetched ones fit with room to spare.
    for (Key begin = 0; begin < 10000; begin += 500) train(KeyRange(begin, begin + 500));
    const std::vector<Key> hot = KeyRange(20000, 20500);
    for (int i = 0; i < 4; ++i) train(hot);

    const std::vector<Key> prefetched = KeyRange(100, 340);  // on disk
    table.Prefetch(prefetched);
    WaitForPrefetch(table);
    ASSERT_EQ(240, table.stats().prefetched_rows);
    // Another batch first, of new keys: room for them is made by evicting.
    train(KeyRange(30000, 30400));
    train(hot);
    const TableStats before = table.stats();
    train(prefetched);
    EXPECT_EQ(before.disk_hits, table.stats().disk_hits)
        << "prefetched rows were evicted before their Pull";
    EXPECT_LE(table.memory_bytes(), options.memory_budget_bytes);
  }
}

// Loaders share each request's shards and read the disk without the shard's lock;
// whatever their number and however far behind or ahead of the Pulls their
// requests are (including keys of batches long gone, or never pulled), every
// Pull and every stored row equals the in-memory table's.
TEST_F(TieredTableTest, PrefetchWithAnyNumberOfLoadersGivesTheValuesOfTheMemoryTable) {
  EmbeddingTableOptions options = BaseOptions();
  options.optimizer.type = SparseOptimizer::kAdagrad;
  options.ttl_steps = 15;
  auto memory = NewEmbeddingTable(options).value();
  RunOptions run;
  const std::vector<float> expected_pulls = TrainOnBatches(*memory, run);
  const std::vector<StoredRow> expected_rows = SortedRows(*memory);

  for (int loaders : {1, 3, 8}) {
    SCOPED_TRACE(loaders);
    options.prefetch_threads = loaders;
    options.memory_budget_bytes = memory->memory_bytes() / 10;
    options.disk_path = Path("disk" + std::to_string(loaders));
    auto tiered_or = NewEmbeddingTable(options);
    ASSERT_TRUE(tiered_or.ok()) << tiered_or.status();
    EmbeddingTable& tiered = *tiered_or.value();
    // A second caller prefetches batches behind, at and ahead of the
    // training loop's, and keys no batch has.
    std::thread prefetcher([&] {
      for (int step = 0; step < run.steps; step += 3) {
        tiered.Prefetch(BatchKeys(1, step, run.draws));
        tiered.Prefetch(BatchKeys(1, step + 5, run.draws));
        tiered.Prefetch(BatchKeys(9, step, 50));
      }
    });
    run.prefetch = true;
    run.budget_bytes = 0;  // the second caller's pins may hold rows during a call
    const std::vector<float> pulls = TrainOnBatches(tiered, run);
    prefetcher.join();
    ASSERT_EQ(expected_pulls.size(), pulls.size());
    EXPECT_EQ(0, std::memcmp(expected_pulls.data(), pulls.data(), pulls.size() * sizeof(float)));
    EXPECT_TRUE(expected_rows == SortedRows(tiered)) << "stored rows differ";
    EXPECT_GT(tiered.stats().prefetched_rows, 0);
    EXPECT_LE(tiered.memory_bytes(), options.memory_budget_bytes);
  }
}

TEST_F(TieredTableTest, PrefetchThreadsOutsideOneToSixtyFourAreRejected) {
  EmbeddingTableOptions options = BaseOptions();
  options.memory_budget_bytes = 1 << 20;
  options.disk_path = Path("disk");
  for (int threads : {0, -1, 65}) {
    options.prefetch_threads = threads;
    EXPECT_THAT(NewEmbeddingTable(options).status().message(), HasSubstr("prefetch_threads"));
  }
  options.prefetch_threads = 64;
  EXPECT_TRUE(NewEmbeddingTable(options).ok());
}

}  // namespace
}  // namespace ember::embedding
