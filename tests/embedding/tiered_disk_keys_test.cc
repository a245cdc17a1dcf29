// The tiered table's filter of the keys its disk tier holds
// (embedding/internal/key_filter.h): first-seen keys cost no disk lookup, a
// false positive changes no result, and the filter is rebuilt from the rows
// a disk tier holds when a table opens it.

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/status.h"
#include "embedding/embedding_table.h"
#include "embedding/rocksdb_tier.h"
#include "embedding/stored_rows.h"
#include "embedding/tier.h"
#include "embedding/tiered_table.h"
#include "tests/embedding/forwarding_tier.h"
#include "tests/embedding/table_test_data.h"
#include "tests/testing/temp_dir.h"

namespace ember::embedding {
namespace {

using test::BatchKeys;
using test::Gradients;
using test::KeysOf;
using test::SortedRows;
using test::StoredRow;
using ::testing::IsEmpty;

constexpr int kDim = 8;
// Stored row of BaseOptions' tables: weights, Adagrad state, RowMeta.
constexpr int64_t kRowBytes = int64_t{4} * (kDim + kDim + 5);

EmbeddingTableOptions BaseOptions() {
  EmbeddingTableOptions options;
  options.dim = kDim;
  options.num_shards = 8;
  options.seed = 7;
  return options;
}

// Forwards to a tier and counts the keys of every call.
class CountingTier : public test::ForwardingTier {
 public:
  using ForwardingTier::ForwardingTier;

  int64_t looked_up() const { return looked_up_.load(); }
  // Keys looked up that the tier did not hold.
  int64_t not_found() const { return not_found_.load(); }
  int64_t written() const { return written_.load(); }

  Status Get(const std::vector<Key>& keys, char* out, std::vector<int64_t>* missing) override {
    Status status = ForwardingTier::Get(keys, out, missing);
    looked_up_ += static_cast<int64_t>(keys.size());
    if (status.ok()) not_found_ += static_cast<int64_t>(missing->size());
    return status;
  }
  Status Put(const std::vector<Key>& keys, const char* rows) override {
    written_ += static_cast<int64_t>(keys.size());
    return ForwardingTier::Put(keys, rows);
  }

 private:
  std::atomic<int64_t> looked_up_{0};
  std::atomic<int64_t> not_found_{0};
  std::atomic<int64_t> written_{0};
};

// `n` keys no other batch of the run has: step * n + i, spread over the key
// space by an odd multiplier.
std::vector<Key> FreshKeys(int64_t step, int64_t n) {
  std::vector<Key> keys(n);
  for (int64_t i = 0; i < n; ++i) keys[i] = static_cast<Key>(step * n + i) * 0x9e3779b97f4a7c15ULL;
  return keys;
}

// Pulls and pushes FreshKeys(step, 300) for `steps` steps; returns every
// pulled value.
std::vector<float> TrainOnFreshKeys(EmbeddingTable& table, int steps) {
  std::vector<float> pulled;
  std::vector<float> out;
  for (int step = 0; step < steps; ++step) {
    table.set_step(step);
    const std::vector<Key> keys = FreshKeys(step, 300);
    out.assign(keys.size() * kDim, -1.0f);
    EXPECT_TRUE(table.Pull(keys, out.data()).ok());
    pulled.insert(pulled.end(), out.begin(), out.end());
    const std::vector<float> grads = Gradients(keys, step, kDim);
    EXPECT_TRUE(table.Push(keys, grads.data()).ok());
  }
  return pulled;
}

class TieredDiskKeysTest : public test::TempDirTest {};

// Every key is new, and most rows end up on disk: without the filter each
// key would be looked up there twice (Pull and Push), with it only the
// filter's false positives are, ~1% (KeyFilter's stated rate), and they
// change no result.
TEST_F(TieredDiskKeysTest, FirstSeenKeysAreLookedUpOnDiskOnlyAsFalsePositives) {
  EmbeddingTableOptions options = BaseOptions();
  constexpr int kSteps = 100;
  auto memory = NewMemoryTable(options).value();
  const std::vector<float> expected_pulls = TrainOnFreshKeys(*memory, kSteps);

  options.memory_budget_bytes = memory->memory_bytes() / 10;
  auto counting = std::make_unique<CountingTier>(NewInMemoryTier(kRowBytes).value());
  CountingTier* disk = counting.get();
  auto table = NewTieredTable(options, std::move(counting)).value();
  const std::vector<float> pulls = TrainOnFreshKeys(*table, kSteps);

  const int64_t keys = int64_t{kSteps} * 300;
  EXPECT_GT(table->stats().spilled_rows, keys / 2);
  EXPECT_EQ(0, table->stats().disk_reads);
  // Every key looked up was a false positive of the filter (none is on
  // disk before its Pull), and there were some: the run went through them.
  EXPECT_EQ(disk->looked_up(), disk->not_found());
  EXPECT_GT(disk->not_found(), 0);
  EXPECT_LT(disk->not_found(), keys * 3 / 100);
  ASSERT_EQ(expected_pulls.size(), pulls.size());
  EXPECT_EQ(0, std::memcmp(expected_pulls.data(), pulls.data(), pulls.size() * sizeof(float)));
  EXPECT_TRUE(SortedRows(*memory) == SortedRows(*table)) << "stored rows differ";
  EXPECT_LE(table->memory_bytes(), options.memory_budget_bytes);
}

// Pulls and pushes the batches BatchKeys(1, step, 400) of steps [begin, end).
std::vector<float> Train(EmbeddingTable& table, int begin, int end) {
  std::vector<float> pulled;
  std::vector<float> out;
  for (int step = begin; step < end; ++step) {
    table.set_step(step);
    const std::vector<Key> keys = BatchKeys(1, step, 400);
    out.assign(keys.size() * kDim, -1.0f);
    EXPECT_TRUE(table.Pull(keys, out.data()).ok());
    pulled.insert(pulled.end(), out.begin(), out.end());
    const std::vector<float> grads = Gradients(keys, step, kDim);
    EXPECT_TRUE(table.Push(keys, grads.data()).ok());
  }
  return pulled;
}

// A table made on a tier that holds rows takes them as its own (their keys
// go into its filter): it goes on training from them exactly as the table
// that made them.
TEST_F(TieredDiskKeysTest, ATableOnATierHoldingRowsTrainsOnFromThem) {
  EmbeddingTableOptions options = BaseOptions();
  auto memory = NewMemoryTable(options).value();
  Train(*memory, 0, 60);
  const std::vector<StoredRow> rows = SortedRows(*memory);
  ASSERT_GT(rows.size(), 1000u);
  auto tier = NewInMemoryTier(kRowBytes).value();
  std::vector<char> bytes(rows.size() * kRowBytes);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(&bytes[i * kRowBytes], rows[i].row.data(), kRowBytes);
  }
  ASSERT_TRUE(tier->Put(KeysOf(rows), bytes.data()).ok());

  options.memory_budget_bytes = memory->memory_bytes() / 4;
  auto table = NewTieredTable(options, std::move(tier)).value();
  EXPECT_EQ(static_cast<int64_t>(rows.size()), table->stats().disk_rows);
  EXPECT_EQ(static_cast<int64_t>(rows.size()), table->num_rows());
  const std::vector<float> expected_pulls = Train(*memory, 60, 120);
  const std::vector<float> pulls = Train(*table, 60, 120);
  ASSERT_EQ(expected_pulls.size(), pulls.size());
  EXPECT_EQ(0, std::memcmp(expected_pulls.data(), pulls.data(), pulls.size() * sizeof(float)));
  EXPECT_TRUE(SortedRows(*memory) == SortedRows(*table)) << "stored rows differ";
  EXPECT_GT(table->stats().disk_hits, 0);
}

// Reopening a RocksDB tier rebuilds the filter from the rows it holds: the
// rows an earlier table wrote back are read, not created afresh.
TEST_F(TieredDiskKeysTest, ReopeningARocksDbTierRebuildsTheFilterFromItsRows) {
  EmbeddingTableOptions options = BaseOptions();
  options.memory_budget_bytes = 64 << 10;
  RocksDbTierOptions disk_options;
  disk_options.path = Path("disk");
  disk_options.row_bytes = kRowBytes;
  disk_options.block_cache_bytes = 1 << 20;
  disk_options.write_buffer_bytes = 1 << 20;
  {
    auto table = NewTieredTable(options, NewRocksDbTier(disk_options).value()).value();
    Train(*table, 0, 30);
    ASSERT_GT(table->stats().disk_rows, 0);
  }  // memory rows are dropped; closing the tier keeps its rows
  std::vector<StoredRow> on_disk;
  {
    auto tier = NewRocksDbTier(disk_options).value();
    ASSERT_TRUE(tier->Scan([&](Key key, const char* row) {
                      StoredRow stored{key, std::vector<float>(kRowBytes / 4)};
                      std::memcpy(stored.row.data(), row, kRowBytes);
                      on_disk.push_back(std::move(stored));
                      return Status::OK();
                    })
                    .ok());
  }
  ASSERT_GT(on_disk.size(), 100u);

  auto table = NewTieredTable(options, NewRocksDbTier(disk_options).value()).value();
  EXPECT_EQ(static_cast<int64_t>(on_disk.size()), table->stats().disk_rows);
  const std::vector<Key> keys = KeysOf(on_disk);
  std::vector<float> rows(keys.size() * kRowBytes / 4);
  std::vector<int64_t> missing;
  ASSERT_TRUE(table->stored_rows().ReadRows(keys, rows.data(), &missing).ok());
  EXPECT_THAT(missing, IsEmpty());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(on_disk[i].row.data(), &rows[i * kRowBytes / 4], kRowBytes))
        << "row of key " << keys[i];
  }
  // A Pull reads them from disk too.
  std::vector<float> out(keys.size() * kDim);
  ASSERT_TRUE(table->Pull(keys, out.data()).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(on_disk[i].row.data(), &out[i * kDim], kDim * sizeof(float)));
  }
  EXPECT_EQ(static_cast<int64_t>(keys.size()), table->stats().disk_hits);
}

}  // namespace
}  // namespace ember::embedding
