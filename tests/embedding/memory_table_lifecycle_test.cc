// What only the memory table does at the end of a row's life: TTL eviction
// compacts the arena and gives memory back, and the admission sketch counts
// in memory_bytes(). Row metadata, admission and TTL as every table does
// them are in embedding_table_lifecycle_contract_test.cc.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "embedding/embedding_table.h"
#include "embedding/stored_rows.h"
#include "tests/embedding/table_test_data.h"

namespace ember::embedding {
namespace {

using test::InitialRow;
using test::PullAll;
using test::PushAll;
using test::RandomKeys;

std::unique_ptr<EmbeddingTable> MakeTable(const EmbeddingTableOptions& options) {
  Result<std::unique_ptr<EmbeddingTable>> table = NewMemoryTable(options);
  EXPECT_TRUE(table.ok()) << table.status();
  return std::move(table).value();
}

EmbeddingTableOptions SgdOptions(int dim) {
  EmbeddingTableOptions options;
  options.dim = dim;
  options.num_shards = 4;
  options.optimizer.type = SparseOptimizer::kSgd;
  options.optimizer.learning_rate = 1.0f;
  return options;
}

TEST(MemoryTableLifecycleTest, EvictingMostRowsReleasesMemoryAndKeepsTheOthersIntact) {
  EmbeddingTableOptions options = SgdOptions(4);
  options.ttl_steps = 5;
  auto table = MakeTable(options);
  const std::vector<Key> keys = RandomKeys(100000, 15);
  const int dim = options.dim;
  // Every row trained to a value that identifies its key.
  std::vector<float> grads(keys.size() * dim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(keys[i / dim] % 1009);
  PushAll(*table, keys, grads);
  const std::vector<float> trained = PullAll(*table, keys);
  const int64_t full_bytes = table->memory_bytes();

  std::vector<Key> kept;
  for (size_t i = 0; i < keys.size(); i += 10) kept.push_back(keys[i]);
  table->set_step(10);
  PullAll(*table, kept);
  EXPECT_EQ(static_cast<int64_t>(keys.size() - kept.size()), table->EvictExpired());
  EXPECT_EQ(static_cast<int64_t>(kept.size()), table->num_rows());
  EXPECT_LT(table->memory_bytes(), full_bytes * 3 / 10);

  // Rows that stayed read as trained, through the moved slots and the
  // rebuilt index; new keys land beside them without disturbing them.
  const std::vector<Key> fresh = RandomKeys(5000, 16);
  PullAll(*table, fresh);
  const std::vector<float> kept_rows = PullAll(*table, kept);
  for (size_t j = 0; j < kept.size(); ++j) {
    const size_t i = j * 10;
    ASSERT_EQ(std::vector<float>(trained.begin() + i * dim, trained.begin() + (i + 1) * dim),
              std::vector<float>(kept_rows.begin() + j * dim, kept_rows.begin() + (j + 1) * dim))
        << j;
  }
  // Evicted keys are absent, and come back with their initial rows.
  EXPECT_EQ(std::nullopt, table->stored_rows().row_meta(keys[1]));
  EXPECT_EQ(InitialRow(options, keys[1]), PullAll(*table, {keys[1]}));
}

// Room reserved ahead stays with the table when rows are evicted, and new
// rows take it again: the table holds no more memory than the room.
TEST(MemoryTableLifecycleTest, EvictedRowsLeaveTheirReservedRoomToNewRows) {
  EmbeddingTableOptions options = SgdOptions(4);
  options.ttl_steps = 5;
  auto table = MakeTable(options);
  const std::vector<Key> keys = RandomKeys(40000, 31);
  ASSERT_TRUE(table->Reserve(static_cast<int64_t>(keys.size())).ok());
  const int64_t room_bytes = table->memory_bytes();
  PullAll(*table, keys);
  EXPECT_EQ(room_bytes, table->memory_bytes());

  const std::vector<Key> kept(keys.begin(), keys.begin() + 4000);
  table->set_step(10);
  PullAll(*table, kept);
  EXPECT_EQ(36000, table->EvictExpired());
  // The index shrank; the rows' chunks went back to the room.
  EXPECT_LT(table->memory_bytes(), room_bytes);
  EXPECT_GT(table->memory_bytes(), room_bytes / 2);

  const std::vector<Key> fresh = RandomKeys(36000, 32);
  const std::vector<float> fresh_rows = PullAll(*table, fresh);
  EXPECT_EQ(40000, table->num_rows());
  EXPECT_LE(table->memory_bytes(), room_bytes);
  for (size_t i = 0; i < fresh.size(); i += 997) {
    ASSERT_EQ(InitialRow(options, fresh[i]),
              std::vector<float>(fresh_rows.begin() + i * 4, fresh_rows.begin() + (i + 1) * 4))
        << i;
  }
}

TEST(MemoryTableLifecycleTest, MemoryBytesCountTheSketch) {
  EmbeddingTableOptions options = SgdOptions(2);
  const int64_t plain = MakeTable(options)->memory_bytes();
  options.admission.kind = AdmissionOptions::Kind::kFrequency;
  options.admission.sketch_width = 1 << 16;
  options.admission.sketch_depth = 4;
  const int64_t with_sketch = MakeTable(options)->memory_bytes();
  EXPECT_EQ(plain + (int64_t{1} << 16) * 4 * 4, with_sketch);
}

}  // namespace
}  // namespace ember::embedding
