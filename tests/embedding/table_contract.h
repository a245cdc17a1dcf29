#pragma once

// The implementations of EmbeddingTable and StoredRows that the contract
// tests run against, and their fixture: every contract test runs once per
// implementation.
//
//   embedding_table_contract_test.cc            the hot path: values of Pull,
//   embedding_table_lifecycle_contract_test.cc  Push, Lookup, PrepareKeys;
//                                               RowMeta, admission, TTL
//   stored_rows_contract_test.cc                stored rows: Scan, ReadRows,
//                                               WriteRows, EraseRows,
//                                               TakeChanges, admission state,
//                                               eviction step

#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/status.h"
#include "embedding/embedding_table.h"
#include "embedding/stored_rows.h"
#include "embedding/tier.h"
#include "embedding/tiered_table.h"
#include "tests/testing/temp_dir.h"

namespace ember::test {

// One implementation: makes the table `options` describe (with their
// memory_budget_bytes when the implementation has a budget and they set
// one), with its files, if any, under `dir`.
struct TableImpl {
  const char* name;
  bool tiered;
  Result<std::unique_ptr<embedding::EmbeddingTable>> (*make)(
      const embedding::EmbeddingTableOptions& options, const std::string& dir);
};

inline void PrintTo(const TableImpl& impl, std::ostream* out) { *out << impl.name; }

// A budget for tables that do not set one: the bytes of the empty table, and
// room for rows beyond them of 8 KiB per shard, or a quarter of a shard's
// fixed bytes when that is more (a large admission sketch makes the arena's
// chunks large), so that a few thousand rows fill memory and spill to the
// disk tier while the rows of a small test stay in memory.
inline Result<int64_t> SmallBudget(const embedding::EmbeddingTableOptions& options) {
  embedding::EmbeddingTableOptions memory = options;
  memory.memory_budget_bytes = 0;
  EMBER_ASSIGN_OR_RETURN(auto empty, embedding::NewMemoryTable(memory));
  const int64_t fixed = empty->memory_bytes();
  const int64_t room_per_shard = std::max(int64_t{8} << 10, fixed / options.num_shards / 4);
  return fixed + options.num_shards * room_per_shard + (int64_t{4} << 10);
}


inline Result<std::unique_ptr<embedding::EmbeddingTable>> MakeMemoryTable(
    const embedding::EmbeddingTableOptions& options, const std::string& /*dir*/) {
  embedding::EmbeddingTableOptions memory = options;
  memory.memory_budget_bytes = 0;
  return embedding::NewMemoryTable(memory);
}

// A memory tier with a budget in front of the in-memory reference Tier.
inline Result<std::unique_ptr<embedding::EmbeddingTable>> MakeTieredTableOnInMemoryTier(
    const embedding::EmbeddingTableOptions& options, const std::string& /*dir*/) {
  embedding::EmbeddingTableOptions tiered = options;
  if (tiered.memory_budget_bytes == 0) {
    EMBER_ASSIGN_OR_RETURN(tiered.memory_budget_bytes, SmallBudget(options));
  }
  EMBER_ASSIGN_OR_RETURN(auto tier, embedding::NewInMemoryTier(embedding::TierRowBytes(options)));
  return embedding::NewTieredTable(tiered, std::move(tier));
}

// NewEmbeddingTable's table with a budget: a RocksDB tier in `dir`.
inline Result<std::unique_ptr<embedding::EmbeddingTable>> MakeTieredTableOnRocksDb(
    const embedding::EmbeddingTableOptions& options, const std::string& dir) {
  embedding::EmbeddingTableOptions tiered = options;
  if (tiered.memory_budget_bytes == 0) {
    EMBER_ASSIGN_OR_RETURN(tiered.memory_budget_bytes, SmallBudget(options));
  }
  tiered.disk_path = dir + "/rocksdb";
  return embedding::NewEmbeddingTable(tiered);
}

inline std::vector<TableImpl> AllTableImpls() {
  return {
      {"Memory", false, &MakeMemoryTable},
      {"TieredOnInMemoryTier", true, &MakeTieredTableOnInMemoryTier},
      {"TieredOnRocksDb", true, &MakeTieredTableOnRocksDb},
  };
}

// Gives each table made in a test a fresh directory of the test's own.
class TableContractTest : public TempDirTest, public ::testing::WithParamInterface<TableImpl> {
 public:
  // The implementation's table for `options`; null (and a failed test) if it
  // cannot be made.
  std::unique_ptr<embedding::EmbeddingTable> MakeTable(
      const embedding::EmbeddingTableOptions& options) {
    Result<std::unique_ptr<embedding::EmbeddingTable>> table =
        GetParam().make(options, Path("table" + std::to_string(tables_++)));
    EXPECT_TRUE(table.ok()) << table.status();
    return table.ok() ? std::move(table).value() : nullptr;
  }

  bool tiered() const { return GetParam().tiered; }

 private:
  int tables_ = 0;
};

// The contract of EmbeddingTable (the hot path).
class EmbeddingTableContractTest : public TableContractTest {};
// The contract of StoredRows.
class StoredRowsContractTest : public TableContractTest {};

}  // namespace ember::test
