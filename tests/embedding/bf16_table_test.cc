// Tables that hold their weights as bfloat16 (WeightStorage::kBFloat16):
// what they store, what they show as stored rows, and how closely they train
// to float tables. Their equivalence across tiers is in tiered_table_test.cc.

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/random.h"
#include "embedding/embedding_table.h"
#include "embedding/stored_rows.h"
#include "tests/embedding/table_test_data.h"
#include "tests/testing/temp_dir.h"

namespace ember::embedding {
namespace {

using test::KeysOf;
using test::RunOptions;
using test::SortedRows;
using test::StoredRow;
using test::TrainOnBatches;

constexpr int kDim = 8;

EmbeddingTableOptions Options(WeightStorage storage) {
  EmbeddingTableOptions options;
  options.dim = kDim;
  options.num_shards = 8;
  options.seed = 7;
  options.weight_storage = storage;
  return options;
}

bool IsBFloat16(float value) { return (std::bit_cast<uint32_t>(value) & 0xffffu) == 0; }

class BFloat16TableTest : public test::TempDirTest {};

TEST_F(BFloat16TableTest, TrainsWithFloatStateAndWeightsWithinRoundingOfFloat32) {
  auto f32 = NewEmbeddingTable(Options(WeightStorage::kFloat32));
  auto bf16 = NewEmbeddingTable(Options(WeightStorage::kBFloat16));
  ASSERT_TRUE(f32.ok() && bf16.ok());
  const RunOptions run;
  const std::vector<float> f32_pulls = TrainOnBatches(*f32.value(), run);
  const std::vector<float> bf16_pulls = TrainOnBatches(*bf16.value(), run);
  ASSERT_EQ(f32_pulls.size(), bf16_pulls.size());
  double sum = 0, worst = 0;
  for (size_t i = 0; i < f32_pulls.size(); ++i) {
    ASSERT_TRUE(IsBFloat16(bf16_pulls[i])) << "pull " << i << ": " << bf16_pulls[i];
    const double diff = std::abs(static_cast<double>(f32_pulls[i]) - bf16_pulls[i]);
    sum += diff;
    worst = std::max(worst, diff);
  }
  // Weights start in [-0.35, 0.35], where a bfloat16 step is at most 2^-9.
  // The test's gradients do not depend on the weights, so the difference is
  // the rounding alone: a random walk of one rounding per update, no drift.
  // Measured: mean 7e-4, worst 0.020 (a key pushed in most of the 120 steps);
  // a lost update (nearest rounding) or a wrong widening is far larger.
  RecordProperty("mean_abs_diff", std::to_string(sum / f32_pulls.size()));
  RecordProperty("worst_abs_diff", std::to_string(worst));
  EXPECT_LT(sum / f32_pulls.size(), 3e-3);
  EXPECT_LT(worst, 0.06);
  EXPECT_GT(worst, 0.0) << "bfloat16 storage rounded nothing";

  // The stored rows are float rows of the float layout: weights rounded,
  // optimizer state and RowMeta the same bits as the float table's (the
  // state depends on the gradients only).
  const std::vector<StoredRow> f32_rows = SortedRows(*f32.value());
  const std::vector<StoredRow> bf16_rows = SortedRows(*bf16.value());
  ASSERT_EQ(KeysOf(f32_rows), KeysOf(bf16_rows));
  EXPECT_EQ(f32.value()->stored_rows().row_floats(), bf16.value()->stored_rows().row_floats());
  for (size_t r = 0; r < f32_rows.size(); ++r) {
    const std::vector<float>& a = f32_rows[r].row;
    const std::vector<float>& b = bf16_rows[r].row;
    for (int e = 0; e < kDim; ++e) ASSERT_TRUE(IsBFloat16(b[e])) << r << " " << e;
    ASSERT_EQ(0, std::memcmp(a.data() + kDim, b.data() + kDim, (a.size() - kDim) * sizeof(float)))
        << "state or metadata of key " << f32_rows[r].key;
  }
}

TEST_F(BFloat16TableTest, WrittenRowsReadBackRoundedToNearestAndRewriteExactly) {
  for (bool tiered : {false, true}) {
    EmbeddingTableOptions options = Options(WeightStorage::kBFloat16);
    if (tiered) {
      // A few rows per shard in memory: most written rows go to disk.
      options.memory_budget_bytes = 64 << 10;
      options.disk_path = Path("disk");
    }
    auto table = NewEmbeddingTable(options);
    ASSERT_TRUE(table.ok()) << table.status();
    StoredRows& stored = table.value()->stored_rows();
    const int64_t floats = stored.row_floats();
    const std::vector<Key> keys = test::DistinctKeys(2000, 3);
    std::vector<float> rows(keys.size() * floats);
    RandomStream random(11, 0);
    for (float& v : rows) v = static_cast<float>(random.Uniform(-1, 1));
    // RowMeta: any bits (the key is overwritten by WriteRows).
    ASSERT_TRUE(stored.WriteRows(keys, rows.data()).ok());
    std::vector<float> read(rows.size());
    std::vector<int64_t> missing;
    ASSERT_TRUE(stored.ReadRows(keys, read.data(), &missing).ok());
    EXPECT_TRUE(missing.empty());
    if (tiered) {
      EXPECT_GT(table.value()->stats().disk_rows, 0);
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      const float* in = &rows[i * floats];
      const float* out = &read[i * floats];
      for (int e = 0; e < kDim; ++e) {
        // Nearest: within half a step, which is 2^-9 of the value's power of two.
        ASSERT_TRUE(IsBFloat16(out[e]));
        ASSERT_LE(std::abs(out[e] - in[e]), std::abs(in[e]) * 0x1p-8f) << i << " " << e;
      }
      // Optimizer state bit for bit (the metadata's key is the row's own).
      ASSERT_EQ(0, std::memcmp(in + kDim, out + kDim, sizeof(float) * kDim)) << tiered << " " << i;
    }
    // What was read writes back to the same bits (a checkpoint restores a
    // bfloat16 table exactly).
    ASSERT_TRUE(stored.WriteRows(keys, read.data()).ok());
    std::vector<float> again(rows.size());
    ASSERT_TRUE(stored.ReadRows(keys, again.data(), &missing).ok());
    EXPECT_EQ(0, std::memcmp(read.data(), again.data(), read.size() * sizeof(float))) << tiered;
  }
}

TEST_F(BFloat16TableTest, ABudgetHoldsMoreBFloat16RowsAndSpillsLess) {
  // dim 32 with row-wise Adagrad: 39 words a row (weights, one accumulator,
  // RowMeta, epoch) as floats, 23 as bfloat16.
  TableStats stats[2];
  for (int i = 0; i < 2; ++i) {
    EmbeddingTableOptions options = Options(i == 0 ? WeightStorage::kFloat32 : WeightStorage::kBFloat16);
    options.dim = 32;
    options.optimizer.type = SparseOptimizer::kRowWiseAdagrad;
    options.memory_budget_bytes = 256 << 10;
    options.disk_path = Path("disk" + std::to_string(i));
    auto table = NewEmbeddingTable(options);
    ASSERT_TRUE(table.ok()) << table.status();
    RunOptions run;
    run.steps = 40;
    run.budget_bytes = options.memory_budget_bytes;
    TrainOnBatches(*table.value(), run);
    stats[i] = table.value()->stats();
  }
  RecordProperty("f32_memory_rows", std::to_string(stats[0].memory_rows));
  RecordProperty("bf16_memory_rows", std::to_string(stats[1].memory_rows));
  EXPECT_EQ(stats[0].rows, stats[1].rows);
  EXPECT_GT(stats[1].memory_rows, stats[0].memory_rows * 13 / 10);
  EXPECT_LT(stats[1].spilled_rows, stats[0].spilled_rows);
}

TEST_F(BFloat16TableTest, ALookupOfAnUnseenKeyReadsWhatItsFirstPullWillRead) {
  auto table = NewEmbeddingTable(Options(WeightStorage::kBFloat16));
  ASSERT_TRUE(table.ok());
  const std::vector<Key> keys = test::DistinctKeys(50, 9);
  std::vector<float> looked_up(keys.size() * kDim), pulled(keys.size() * kDim);
  ASSERT_TRUE(table.value()->Lookup(keys, looked_up.data()).ok());
  ASSERT_TRUE(table.value()->Pull(keys, pulled.data()).ok());
  EXPECT_EQ(0, std::memcmp(looked_up.data(), pulled.data(), pulled.size() * sizeof(float)));
  for (float v : looked_up) ASSERT_TRUE(IsBFloat16(v)) << v;
}

TEST_F(BFloat16TableTest, AnUnknownStorageNameIsRefused) {
  EXPECT_EQ(*ParseWeightStorage("bf16"), WeightStorage::kBFloat16);
  EXPECT_EQ(*ParseWeightStorage("f32"), WeightStorage::kFloat32);
  Result<WeightStorage> bad = ParseWeightStorage("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("use f32 or bf16"), std::string::npos);
}

}  // namespace
}  // namespace ember::embedding
