// What only the memory table does: grow its index and arena without limit,
// count its bytes, reserve room ahead, and check its options. What every
// table does is in embedding_table_contract_test.cc and
// stored_rows_contract_test.cc.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "embedding/embedding_table.h"
#include "tests/embedding/table_test_data.h"

namespace ember::embedding {
namespace {

using test::DistinctKeys;
using test::ExpectedInitialRows;
using test::PullAll;
using ::testing::HasSubstr;

std::unique_ptr<EmbeddingTable> MakeTable(const EmbeddingTableOptions& options) {
  Result<std::unique_ptr<EmbeddingTable>> table = NewMemoryTable(options);
  EXPECT_TRUE(table.ok()) << table.status();
  return std::move(table).value();
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

// TableStats::scratch_bytes counts the buffers kept between batches: at
// least the keys, hashes and positions of the largest batch trained so far,
// and no more as the table grows through smaller batches.
TEST(MemoryTableTest, ScratchBytesGrowWithTheBatchNotTheTable) {
  EmbeddingTableOptions options;
  options.dim = 8;
  auto table = MakeTable(options);
  auto train = [&](const std::vector<Key>& keys) {
    std::vector<float> rows(keys.size() * options.dim);
    ASSERT_TRUE(table->Pull(keys, rows.data()).ok());
    const std::vector<float> grads(rows.size(), 0.01f);
    ASSERT_TRUE(table->Push(keys, grads.data()).ok());
  };
  EXPECT_EQ(0, table->stats().scratch_bytes) << "no batch yet";
  train(DistinctKeys(1000, 3));
  const int64_t small = table->stats().scratch_bytes;
  EXPECT_GE(small, 1000 * 3 * 8);
  train(DistinctKeys(20000, 4));
  const int64_t large = table->stats().scratch_bytes;
  EXPECT_GE(large, 20000 * 3 * 8);
  EXPECT_GT(large, small);
  const int64_t rows_bytes = table->memory_bytes();
  for (uint64_t seed = 5; seed < 55; ++seed) train(DistinctKeys(1000, seed));
  EXPECT_GT(table->memory_bytes(), rows_bytes);
  EXPECT_LE(table->stats().scratch_bytes, large);
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

}  // namespace
}  // namespace ember::embedding
