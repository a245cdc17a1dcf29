// The tiered table's Prefetch loaders when the table moves on while they
// read (embedding/cached_table_prefetch.cc): a row written back to disk during a
// loader's read is not inserted, while the rest of what it read is; and a
// loader whose request has been pulled reads no more of it; loaders share a
// request's shards. All with the values of a table without a disk tier.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/status.h"
#include "embedding/embedding_table.h"
#include "embedding/tier.h"
#include "embedding/tiered_table.h"
#include "tests/embedding/forwarding_tier.h"
#include "tests/embedding/table_test_data.h"

namespace ember::embedding {
namespace {

using test::Gradients;
using test::SortedRows;

constexpr int kDim = 8;

EmbeddingTableOptions BaseOptions() {
  EmbeddingTableOptions options;
  options.dim = kDim;
  // One shard and one loader: the loader reads the Prefetch's keys in their
  // order, kIoChunkRows (512) at a time.
  options.num_shards = 1;
  options.prefetch_threads = 1;
  // Exact LRU: the rows a test pushes to disk are surely all there.
  options.eviction_policy = EmbeddingTableOptions::EvictionPolicy::kLru;
  options.seed = 7;
  return options;
}

// Forwards to a tier. Once armed, the next Get reads its rows and then holds
// them until Release: a loader caught in a slow read, with the rows it read
// in hand while the table moves on. Counts the keys looked up, and keeps the
// keys written while a Get is held.
class GatedTier : public test::ForwardingTier {
 public:
  using ForwardingTier::ForwardingTier;

  void ArmNextGet() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
  }
  // Whether an armed Get holds its rows within 30 s; if so, its keys.
  bool WaitUntilHeld(std::vector<Key>* keys) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return holding_; })) return false;
    *keys = held_keys_;
    return true;
  }
  // Lets a held Get return; later Gets are not held. Idempotent.
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int64_t looked_up() const {
    std::lock_guard<std::mutex> lock(mu_);
    return looked_up_;
  }
  std::vector<Key> written_while_held() const {
    std::lock_guard<std::mutex> lock(mu_);
    return written_while_held_;
  }

  Status Get(const std::vector<Key>& keys, char* out, std::vector<int64_t>* missing) override {
    Status status = ForwardingTier::Get(keys, out, missing);
    std::unique_lock<std::mutex> lock(mu_);
    looked_up_ += static_cast<int64_t>(keys.size());
    if (armed_) {
      armed_ = false;
      holding_ = true;
      held_keys_ = keys;
      cv_.notify_all();
      cv_.wait(lock, [&] { return released_; });
      holding_ = false;
    }
    return status;
  }
  Status Put(const std::vector<Key>& keys, const char* rows) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (holding_) written_while_held_.insert(written_while_held_.end(), keys.begin(), keys.end());
    }
    return ForwardingTier::Put(keys, rows);
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool holding_ = false;
  bool released_ = false;
  std::vector<Key> held_keys_;
  int64_t looked_up_ = 0;
  std::vector<Key> written_while_held_;
};

// `n` keys [first, first + n) spread over the key space by an odd multiplier.
std::vector<Key> Keys(int64_t first, int64_t n) {
  std::vector<Key> keys(n);
  for (int64_t i = 0; i < n; ++i) keys[i] = static_cast<Key>(first + i) * 0x9e3779b97f4a7c15ULL;
  return keys;
}

// The same calls on a table without a disk tier (`memory`) and on a tiered
// one over a GatedTier (`tiered`), every Pull compared bit for bit.
class TwoTables {
 public:
  explicit TwoTables(int64_t budget_rows, int num_shards = 1, int loaders = 1) {
    EmbeddingTableOptions options = BaseOptions();
    options.num_shards = num_shards;
    options.prefetch_threads = loaders;
    memory_ = NewMemoryTable(options).value();
    // The budget: what a table without a disk tier takes for budget_rows rows.
    auto sized = NewMemoryTable(options).value();
    Train(*sized, Keys(1 << 20, budget_rows), 0);
    options.memory_budget_bytes = sized->memory_bytes();
    auto gated = std::make_unique<GatedTier>(NewInMemoryTier(TierRowBytes(options)).value());
    disk_ = gated.get();
    tiered_ = NewTieredTable(options, std::move(gated)).value();
  }
  TwoTables(const TwoTables&) = delete;
  TwoTables& operator=(const TwoTables&) = delete;
  // A held Get would keep the table's loader from stopping.
  ~TwoTables() { disk_->Release(); }

  EmbeddingTable& tiered() { return *tiered_; }
  GatedTier& disk() { return *disk_; }

  // Pull and Push of `keys` at the next step on both tables.
  void Train(const std::vector<Key>& keys) {
    const std::vector<float> expected = Train(*memory_, keys, step_);
    const std::vector<float> pulled = Train(*tiered_, keys, step_);
    ++step_;
    ASSERT_EQ(expected.size(), pulled.size());
    EXPECT_EQ(0, std::memcmp(expected.data(), pulled.data(), pulled.size() * sizeof(float)))
        << "pulled values differ at step " << step_ - 1;
  }
  void Erase(const std::vector<Key>& keys) {
    ASSERT_TRUE(memory_->stored_rows().EraseRows(keys).ok());
    ASSERT_TRUE(tiered_->stored_rows().EraseRows(keys).ok());
  }
  // Prefetches `keys` on the tiered table with the next Get held; whether a
  // loader's Get is held within 30 s, and if so its keys.
  bool PrefetchUntilHeld(const std::vector<Key>& keys, std::vector<Key>* held) {
    disk_->ArmNextGet();
    tiered_->Prefetch(keys);
    return disk_->WaitUntilHeld(held);
  }
  // Whether the tiered table's prefetched_rows reach `rows` within 30 s.
  bool WaitForPrefetchedRows(int64_t rows) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (tiered_->stats().prefetched_rows < rows) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  // Returns when the loader is idle (the snapshot methods wait for it).
  void WaitForPrefetch() {
    std::vector<int64_t> missing;
    ASSERT_TRUE(tiered_->stored_rows().ReadRows({}, nullptr, &missing).ok());
  }
  void ExpectSameStoredRows() {
    EXPECT_TRUE(SortedRows(*memory_) == SortedRows(*tiered_)) << "stored rows differ";
  }

 private:
  static std::vector<float> Train(EmbeddingTable& table, const std::vector<Key>& keys,
                                  int64_t step) {
    table.set_step(step);
    std::vector<float> out(keys.size() * kDim);
    EXPECT_TRUE(table.Pull(keys, out.data()).ok());
    EXPECT_TRUE(table.Push(keys, Gradients(keys, step, kDim).data()).ok());
    return out;
  }

  std::unique_ptr<EmbeddingTable> memory_;
  std::unique_ptr<EmbeddingTable> tiered_;
  GatedTier* disk_ = nullptr;
  int64_t step_ = 1;
};

// Lets the held read go and waits for the loaders; then expects `prefetched`
// rows loaded since `before`, a Pull of `a` to read `disk_hits` rows from
// disk, and the stored rows of the table without a disk tier.
void ReleaseThenExpect(TwoTables& tables, const TableStats& before, const std::vector<Key>& a,
                       int64_t prefetched, int64_t disk_hits) {
  tables.disk().Release();
  tables.WaitForPrefetch();
  EXPECT_EQ(prefetched, tables.tiered().stats().prefetched_rows - before.prefetched_rows);
  const TableStats after_prefetch = tables.tiered().stats();
  tables.Train(a);
  EXPECT_EQ(disk_hits, tables.tiered().stats().disk_hits - after_prefetch.disk_hits);
  tables.ExpectSameStoredRows();
}

// A loader read rows; before it could insert them, 10 of them were loaded by
// a Pull, updated and written back again. Its copies of those 10 are stale
// and must not be inserted; the other rows it read, and the rest of its
// request, are still current and are.
TEST(TieredPrefetchTest, RowsWrittenBackDuringALoadersReadAreNotInsertedTheRestAre) {
  TwoTables tables(/*budget_rows=*/2000);
  const std::vector<Key> a = Keys(0, 1200);
  tables.Train(a);
  // 3200 newer rows push every row of `a` to disk (the Prefetch reads them all).
  for (int i = 1; i <= 8; ++i) tables.Train(Keys(10000 * i, 400));
  const TableStats before = tables.tiered().stats();

  std::vector<Key> held;
  ASSERT_TRUE(tables.PrefetchUntilHeld(a, &held)) << "the loader never read";
  ASSERT_EQ(512u, held.size()) << "the loader's first chunk";
  // Ten of the rows the loader holds: loaded, updated, then written back by
  // 2100 newer rows (in 3 steps: the Prefetch's pins, 5 steps, still hold
  // when `a` is pulled).
  const std::vector<Key> updated(held.begin(), held.begin() + 10);
  tables.Train(updated);
  for (int i = 9; i <= 11; ++i) tables.Train(Keys(10000 * i, 700));
  const std::vector<Key> written = tables.disk().written_while_held();
  for (Key key : updated) {
    ASSERT_NE(written.end(), std::find(written.begin(), written.end(), key))
        << "an updated row was not written back during the loader's read";
  }
  // All of `a` is loaded but the ten, the held chunk's other 502 rows
  // included; the ten are read from disk again, with their updates.
  ReleaseThenExpect(tables, before, a, /*prefetched=*/1190, /*disk_hits=*/10);
}

// Trains `a` (1200 keys) on both tables, then pushes it to disk and erases
// the newer rows that pushed it: memory has room for `a`, so that pulling
// it writes nothing back.
void TrainThenLeaveOnDisk(TwoTables& tables, const std::vector<Key>& a) {
  tables.Train(a);
  std::vector<Key> newer;
  for (int i = 1; i <= 8; ++i) {
    const std::vector<Key> keys = Keys(10000 * i, 400);
    tables.Train(keys);
    newer.insert(newer.end(), keys.begin(), keys.end());
  }
  tables.Erase(newer);
  const TableStats stats = tables.tiered().stats();
  ASSERT_EQ(1200, stats.disk_rows) << "the rows of `a` are not all on disk";
  ASSERT_EQ(0, stats.memory_rows);
}

// A loader caught in a read while the Pull its request was for came and
// went: it reads no more of the request (the Pull read it).
TEST(TieredPrefetchTest, ALoaderWhosePullCameFirstReadsNoMoreOfIt) {
  TwoTables tables(/*budget_rows=*/2000);
  const std::vector<Key> a = Keys(0, 1200);  // three chunks
  ASSERT_NO_FATAL_FAILURE(TrainThenLeaveOnDisk(tables, a));
  const TableStats before = tables.tiered().stats();

  std::vector<Key> held;
  ASSERT_TRUE(tables.PrefetchUntilHeld(a, &held)) << "the loader never read";
  tables.Train(a);  // the Pull the Prefetch was for
  EXPECT_EQ(1200, tables.tiered().stats().disk_hits - before.disk_hits);
  // 2400 newer rows push `a` back to disk: memory alone no longer tells the
  // loader that its rows were pulled.
  for (int i = 9; i <= 14; ++i) tables.Train(Keys(10000 * i, 400));
  const int64_t looked_up = tables.disk().looked_up();
  tables.disk().Release();
  tables.WaitForPrefetch();

  EXPECT_EQ(looked_up, tables.disk().looked_up()) << "the loader read on after the Pull";
  EXPECT_EQ(0, tables.tiered().stats().prefetched_rows - before.prefetched_rows);
  tables.ExpectSameStoredRows();
}

// Loaders share a request's shards rather than each owning some: while one
// loader is caught in a slow read of one shard, another loads every other
// shard of the request (with shards owned by loader, half of them would
// wait for the held one).
TEST(TieredPrefetchTest, WhileOneLoaderIsHeldAnotherLoadsEveryOtherShard) {
  TwoTables tables(/*budget_rows=*/2000, /*num_shards=*/4, /*loaders=*/2);
  const std::vector<Key> a = Keys(0, 1200);  // ~300 a shard: one read each
  ASSERT_NO_FATAL_FAILURE(TrainThenLeaveOnDisk(tables, a));
  const TableStats before = tables.tiered().stats();

  std::vector<Key> held;
  ASSERT_TRUE(tables.PrefetchUntilHeld(a, &held)) << "no loader read";
  ASSERT_GT(held.size(), 0u);
  ASSERT_LT(held.size(), 600u) << "the held read is one shard's";
  // The other three shards' rows, while the held read is still held.
  EXPECT_TRUE(tables.WaitForPrefetchedRows(before.prefetched_rows + 1200 -
                                           static_cast<int64_t>(held.size())))
      << "shards waited for the held loader: "
      << tables.tiered().stats().prefetched_rows - before.prefetched_rows << " rows loaded";
  ReleaseThenExpect(tables, before, a, /*prefetched=*/1200, /*disk_hits=*/0);
}

}  // namespace
}  // namespace ember::embedding
