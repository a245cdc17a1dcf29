// The contract of StoredRows (embedding/stored_rows.h), run against every
// table implementation (tests/embedding/table_contract.h).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "embedding/embedding_table.h"
#include "embedding/stored_rows.h"
#include "tests/embedding/table_contract.h"
#include "tests/embedding/table_test_data.h"

namespace ember::test {
namespace {

using embedding::AdmissionOptions;
using embedding::StoredRows;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

constexpr int kDim = 8;

EmbeddingTableOptions BaseOptions() {
  EmbeddingTableOptions options;
  options.dim = kDim;
  options.num_shards = 8;
  options.seed = 7;
  options.admission.sketch_width = 1024;
  options.track_changes = true;
  return options;
}

TEST_P(StoredRowsContractTest, ScansAndRoundTripsRows) {
  auto table = MakeTable(BaseOptions());
  RunOptions run;
  run.steps = 10;
  TrainOnBatches(*table, run);
  const std::vector<StoredRow> rows = SortedRows(*table);
  EXPECT_EQ(static_cast<size_t>(table->num_rows()), rows.size());
  auto copy = MakeTable(BaseOptions());
  std::vector<float> flat;
  for (const StoredRow& row : rows) flat.insert(flat.end(), row.row.begin(), row.row.end());
  ASSERT_TRUE(copy->stored_rows().WriteRows(KeysOf(rows), flat.data()).ok());
  EXPECT_TRUE(rows == SortedRows(*copy));
}

TEST_P(StoredRowsContractTest, ReadWriteAndEraseRowsRoundTripAcrossTiers) {
  EmbeddingTableOptions options = BaseOptions();
  options.memory_budget_bytes = 64 << 10;  // with a disk tier
  auto table_or = MakeTable(options);
  ASSERT_NE(nullptr, table_or);
  EmbeddingTable& table = *table_or;
  StoredRows& stored = table.stored_rows();
  RunOptions run;
  run.steps = 30;
  TrainOnBatches(table, run);
  const std::vector<StoredRow> rows = SortedRows(table);
  if (tiered()) {
    ASSERT_GT(table.stats().disk_rows, 0);
  }
  const int64_t floats = stored.row_floats();

  // ReadRows finds every row, in either tier, plus a missing key.
  std::vector<Key> keys = KeysOf(rows);
  keys.push_back(12345);
  std::vector<float> read(keys.size() * floats, -7.0f);
  std::vector<int64_t> missing;
  ASSERT_TRUE(stored.ReadRows(keys, read.data(), &missing).ok());
  EXPECT_THAT(missing, ElementsAreArray({static_cast<int64_t>(rows.size())}));
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(rows[i].row.data(), &read[i * floats], floats * sizeof(float)));
  }

  // WriteRows overwrites every row (both tiers) and adds new keys.
  std::vector<Key> write_keys = KeysOf(rows);
  std::vector<float> written = read;
  written.resize(rows.size() * floats);
  for (int64_t i = 0; i < static_cast<int64_t>(rows.size()); ++i) {
    written[i * floats] += 1.0f;
  }
  for (Key extra : {Key{1}, Key{2}, Key{3}}) {
    write_keys.push_back(extra);
    written.insert(written.end(), rows[0].row.begin(), rows[0].row.end());
  }
  ASSERT_TRUE(stored.WriteRows(write_keys, written.data()).ok());
  std::vector<Key> changed;
  std::vector<Key> removed;
  stored.TakeChanges(&changed, &removed);
  EXPECT_EQ(write_keys.size(), changed.size());
  if (tiered()) {
    EXPECT_LE(table.memory_bytes(), options.memory_budget_bytes);
  }
  std::vector<float> reread(write_keys.size() * floats);
  ASSERT_TRUE(stored.ReadRows(write_keys, reread.data(), &missing).ok());
  EXPECT_THAT(missing, IsEmpty());
  for (size_t i = 0; i < write_keys.size(); ++i) {
    // Equal except the key inside the row's metadata, which WriteRows sets.
    ASSERT_EQ(0, std::memcmp(&written[i * floats], &reread[i * floats], kDim * sizeof(float)));
  }
  EXPECT_EQ(static_cast<int64_t>(write_keys.size()), table.num_rows());

  // EraseRows removes rows of both tiers; absent keys are ignored.
  std::vector<Key> erase(write_keys.begin(), write_keys.begin() + write_keys.size() / 2);
  erase.push_back(999999);
  ASSERT_TRUE(stored.EraseRows(erase).ok());
  ASSERT_TRUE(stored.ReadRows(write_keys, reread.data(), &missing).ok());
  EXPECT_EQ(static_cast<int64_t>(write_keys.size() / 2), static_cast<int64_t>(missing.size()));
  EXPECT_EQ(static_cast<int64_t>(write_keys.size() - write_keys.size() / 2), table.num_rows());
  EXPECT_EQ(write_keys.size() - write_keys.size() / 2, SortedRows(table).size());
}

TEST_P(StoredRowsContractTest, TakeChangesReportsChangesButNotSpillsOrReloads) {
  EmbeddingTableOptions options = BaseOptions();
  options.ttl_steps = 5;
  options.memory_budget_bytes = 48 << 10;  // with a disk tier
  auto table_or = MakeTable(options);
  ASSERT_NE(nullptr, table_or);
  EmbeddingTable& table = *table_or;
  StoredRows& stored = table.stored_rows();
  std::vector<Key> changed;
  std::vector<Key> removed;

  std::vector<Key> first(300);
  for (size_t i = 0; i < first.size(); ++i) first[i] = 1000 + i;
  std::vector<float> out(4000 * kDim);
  ASSERT_TRUE(table.Pull(first, out.data()).ok());
  stored.TakeChanges(&changed, &removed);
  std::vector<Key> sorted_first = first;
  std::sort(sorted_first.begin(), sorted_first.end());
  EXPECT_EQ(sorted_first, changed);
  EXPECT_THAT(removed, IsEmpty());

  // Creating many more rows spills `first` (with a disk tier); pulling it
  // again reloads it.
  std::vector<Key> second(3000);
  for (size_t i = 0; i < second.size(); ++i) second[i] = 100000 + i;
  ASSERT_TRUE(table.Pull(second, out.data()).ok());
  stored.TakeChanges(&changed, &removed);
  EXPECT_EQ(second.size(), changed.size());
  ASSERT_TRUE(table.Pull(first, out.data()).ok());
  if (tiered()) {
    ASSERT_GT(table.stats().disk_hits, 0);
  }
  stored.TakeChanges(&changed, &removed);
  EXPECT_THAT(changed, IsEmpty());
  EXPECT_THAT(removed, IsEmpty());

  // Push changes rows wherever they are; EraseRows removes them.
  const std::vector<Key> pushed = {first[0], first[1], second[5]};
  const std::vector<float> grads = Gradients(pushed, 0, kDim);
  ASSERT_TRUE(table.Push(pushed, grads.data()).ok());
  const std::vector<Key> erased = {second[7], first[2]};
  ASSERT_TRUE(stored.EraseRows(erased).ok());
  stored.TakeChanges(&changed, &removed);
  std::vector<Key> expected_changed = pushed;
  std::sort(expected_changed.begin(), expected_changed.end());
  std::vector<Key> expected_removed = erased;
  std::sort(expected_removed.begin(), expected_removed.end());
  EXPECT_EQ(expected_changed, changed);
  EXPECT_EQ(expected_removed, removed);

  // TTL: keys of `first` pulled at step 0, kept alive by nothing, expire.
  table.set_step(100);
  const std::vector<Key> alive = {second[0]};
  ASSERT_TRUE(table.Pull(alive, out.data()).ok());
  table.EvictExpired();
  const std::vector<Key> disk_or_memory = {first[3], second[1]};
  ASSERT_TRUE(table.Pull(disk_or_memory, out.data()).ok());  // recreates them
  stored.TakeChanges(&changed, &removed);
  for (Key key : disk_or_memory) {
    EXPECT_TRUE(std::binary_search(changed.begin(), changed.end(), key)) << key;
  }
  EXPECT_FALSE(std::binary_search(changed.begin(), changed.end(), alive[0]));
  EXPECT_TRUE(std::binary_search(removed.begin(), removed.end(), first[4]) ||
              stored.row_meta(first[4]) == std::nullopt);
  EXPECT_EQ(std::nullopt, stored.row_meta(first[4]));
}

TEST_P(StoredRowsContractTest, AnUntrackedTableReportsNoChanges) {
  EmbeddingTableOptions options = BaseOptions();
  options.track_changes = false;
  auto table = MakeTable(options);
  EXPECT_FALSE(table->stored_rows().tracks_changes());
  EXPECT_TRUE(MakeTable(BaseOptions())->stored_rows().tracks_changes());
  RunOptions run;
  run.steps = 5;
  TrainOnBatches(*table, run);
  ASSERT_TRUE(table->stored_rows().EraseRows({KeysOf(SortedRows(*table)).front()}).ok());
  std::vector<Key> changed = {1};
  std::vector<Key> removed = {2};
  table->stored_rows().TakeChanges(&changed, &removed);
  EXPECT_THAT(changed, IsEmpty());
  EXPECT_THAT(removed, IsEmpty());
}

TEST_P(StoredRowsContractTest, ReadRowsListsMissingKeysInOrderAndNullBuffersAreRejected) {
  auto table = MakeTable(BaseOptions());
  StoredRows& stored = table->stored_rows();
  std::vector<float> out(2 * kDim);
  ASSERT_TRUE(table->Pull({5, 7}, out.data()).ok());
  std::vector<int64_t> missing = {42};
  EXPECT_TRUE(stored.ReadRows({}, nullptr, &missing).ok());
  EXPECT_THAT(missing, IsEmpty());
  EXPECT_EQ(StatusCode::kInvalidArgument, stored.ReadRows({5}, nullptr, &missing).code());
  EXPECT_EQ(StatusCode::kInvalidArgument, stored.WriteRows({5}, nullptr).code());
  EXPECT_TRUE(stored.WriteRows({}, nullptr).ok());
  EXPECT_TRUE(stored.EraseRows({}).ok());
  std::vector<float> rows(4 * stored.row_floats());
  ASSERT_TRUE(stored.ReadRows({9, 5, 8, 7}, rows.data(), &missing).ok());
  EXPECT_THAT(missing, ElementsAre(0, 2));
}

TEST_P(StoredRowsContractTest, AdmissionStateRoundTripsIntoATableWithTheSameOptions) {
  EmbeddingTableOptions options = BaseOptions();
  options.admission.kind = AdmissionOptions::Kind::kFrequency;
  options.admission.min_count = 3;
  options.admission.sketch_width = 1 << 16;  // wide: no key reaches 3 by collisions
  const std::vector<Key> keys = BatchKeys(2, 0, 400);
  auto table = MakeTable(options);
  PullAll(*table, keys);
  PullAll(*table, keys);
  ASSERT_EQ(0, table->num_rows());
  std::string state;
  ASSERT_TRUE(table->stored_rows().SaveAdmissionState(&state).ok());
  EXPECT_FALSE(state.empty());

  // The third Pull admits every key, in the table and in one restored from
  // its admission state alone.
  auto restored = MakeTable(options);
  ASSERT_TRUE(restored->stored_rows().RestoreAdmissionState(state).ok());
  EXPECT_EQ(PullAll(*table, keys), PullAll(*restored, keys));
  EXPECT_EQ(static_cast<int64_t>(keys.size()), restored->num_rows());
  EXPECT_EQ(table->num_rows(), restored->num_rows());

  // A table without admission state has none to save, and takes none.
  auto plain = MakeTable(BaseOptions());
  std::string none = "x";
  ASSERT_TRUE(plain->stored_rows().SaveAdmissionState(&none).ok());
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(plain->stored_rows().RestoreAdmissionState("").ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, plain->stored_rows().RestoreAdmissionState(state).code());
}

// A checkpoint saves rows before TTL removes some of them, with the step of
// the last EvictExpired; restoring that step expires them again, so that the
// restored table holds what the saved one holds.
TEST_P(StoredRowsContractTest, RestoringTheEvictionStepExpiresWhatTheSavedTableExpired) {
  EmbeddingTableOptions options = BaseOptions();
  options.ttl_steps = 3;
  auto table = MakeTable(options);
  EXPECT_EQ(-1, table->stored_rows().eviction_step());
  RunOptions run;
  run.steps = 9;  // no EvictExpired yet
  TrainOnBatches(*table, run);
  EXPECT_EQ(-1, table->stored_rows().eviction_step());
  const std::vector<StoredRow> before = SortedRows(*table);
  table->set_step(10);
  table->EvictExpired();  // a disk tier's rows expire when next read
  EXPECT_EQ(10, table->stored_rows().eviction_step());

  auto restored = MakeTable(options);
  std::vector<float> flat;
  for (const StoredRow& row : before) flat.insert(flat.end(), row.row.begin(), row.row.end());
  ASSERT_TRUE(restored->stored_rows().WriteRows(KeysOf(before), flat.data()).ok());
  restored->set_step(10);
  restored->stored_rows().RestoreEvictionStep(10);
  EXPECT_EQ(10, restored->stored_rows().eviction_step());
  const std::vector<StoredRow> after = SortedRows(*table);
  EXPECT_LT(after.size(), before.size());
  EXPECT_TRUE(after == SortedRows(*restored));

  // -1: nothing to expire.
  auto untouched = MakeTable(options);
  ASSERT_TRUE(untouched->stored_rows().WriteRows(KeysOf(before), flat.data()).ok());
  untouched->stored_rows().RestoreEvictionStep(-1);
  EXPECT_EQ(-1, untouched->stored_rows().eviction_step());
  EXPECT_TRUE(before == SortedRows(*untouched));
}

TEST_P(StoredRowsContractTest, WithoutTtlThereIsNoEvictionStep) {
  auto table = MakeTable(BaseOptions());
  RunOptions run;
  run.steps = 12;
  TrainOnBatches(*table, run);
  EXPECT_EQ(-1, table->stored_rows().eviction_step());
  const std::vector<StoredRow> rows = SortedRows(*table);
  table->stored_rows().RestoreEvictionStep(100);
  EXPECT_EQ(-1, table->stored_rows().eviction_step());
  EXPECT_TRUE(rows == SortedRows(*table));
}

INSTANTIATE_TEST_SUITE_P(AllTables, StoredRowsContractTest, ::testing::ValuesIn(AllTableImpls()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ember::test
