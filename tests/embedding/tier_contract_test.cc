// The contract of embedding/tier.h, run against every Tier implementation.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/random.h"
#include "core/status.h"
#include "embedding/faulty_tier.h"
#include "embedding/rocksdb_tier.h"
#include "embedding/tier.h"
#include "tests/embedding/tier_test_rows.h"
#include "tests/testing/temp_dir.h"

namespace ember::embedding {
namespace {

using test::AllIndices;
using test::FirstWrongRow;
using test::RowOf;
using test::RowsOf;
using test::SpreadKeys;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

constexpr int64_t kRowBytes = 64;
constexpr Key kMaxKey = std::numeric_limits<Key>::max();

// Makes a tier of `row_bytes` rows whose files, if any, go under `dir`.
using TierFactory = Result<std::unique_ptr<Tier>> (*)(const std::string& dir, int64_t row_bytes);

struct TierKind {
  const char* name;
  TierFactory make;
};

void PrintTo(const TierKind& kind, std::ostream* out) { *out << kind.name; }

Result<std::unique_ptr<Tier>> MakeInMemoryTier(const std::string& /*dir*/, int64_t row_bytes) {
  return NewInMemoryTier(row_bytes);
}

// `gather_bytes` as RocksDbTierOptions::gather_bytes (-1: the default).
Result<std::unique_ptr<Tier>> MakeRocksDbTierGathering(const std::string& dir, int64_t row_bytes,
                                                       int64_t gather_bytes) {
  RocksDbTierOptions options;
  options.path = dir + "/rocksdb";
  options.row_bytes = row_bytes;
  // Small buffers, so that large batches reach SST files and compaction.
  options.block_cache_bytes = int64_t{8} << 20;
  options.write_buffer_bytes = int64_t{2} << 20;
  options.max_background_jobs = 2;
  options.gather_bytes = gather_bytes;
  return NewRocksDbTier(options);
}

Result<std::unique_ptr<Tier>> MakeRocksDbTier(const std::string& dir, int64_t row_bytes) {
  return MakeRocksDbTierGathering(dir, row_bytes, -1);
}

// Every Put and Delete straight to the database.
Result<std::unique_ptr<Tier>> MakeWriteThroughRocksDbTier(const std::string& dir,
                                                          int64_t row_bytes) {
  return MakeRocksDbTierGathering(dir, row_bytes, 0);
}

// Writes of 8 rows gathered: most calls write what earlier calls gathered.
Result<std::unique_ptr<Tier>> MakeSmallGatherRocksDbTier(const std::string& dir,
                                                         int64_t row_bytes) {
  return MakeRocksDbTierGathering(dir, row_bytes, 8 * row_bytes);
}

// A FaultyTier that never fails must be indistinguishable from what it wraps.
Result<std::unique_ptr<Tier>> MakeFaultFreeFaultyTier(const std::string& dir, int64_t row_bytes) {
  EMBER_ASSIGN_OR_RETURN(auto base, MakeInMemoryTier(dir, row_bytes));
  FaultyTierOptions options;
  options.first_failing_call = std::numeric_limits<int64_t>::max();
  return std::unique_ptr<Tier>(std::make_unique<FaultyTier>(std::move(base), options));
}

class TierContractTest : public test::TempDirTest, public ::testing::WithParamInterface<TierKind> {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    tier_ = MakeTier(Path("tier"), kRowBytes);
    ASSERT_NE(tier_, nullptr);
  }
  void TearDown() override {
    tier_.reset();  // closes the files before the directory goes
    TempDirTest::TearDown();
  }

  std::unique_ptr<Tier> MakeTier(const std::string& dir, int64_t row_bytes) {
    Result<std::unique_ptr<Tier>> tier = GetParam().make(dir, row_bytes);
    EXPECT_TRUE(tier.ok()) << tier.status();
    return tier.ok() ? std::move(tier).value() : nullptr;
  }

  void Put(const std::vector<Key>& keys, uint64_t version) {
    std::vector<char> rows = RowsOf(keys, version, tier_->row_bytes());
    Status status = tier_->Put(keys, rows.data());
    ASSERT_TRUE(status.ok()) << status;
  }

  // Gets `keys`; the slots of missing keys keep the byte 0x5a.
  std::vector<char> Get(const std::vector<Key>& keys, std::vector<int64_t>* missing) {
    std::vector<char> out(keys.size() * tier_->row_bytes(), 0x5a);
    Status status = tier_->Get(keys, out.data(), missing);
    EXPECT_TRUE(status.ok()) << status;
    return out;
  }

  // (key, version) of every row Scan visits, sorted by key (each tier scans
  // in an order of its own).
  std::vector<std::pair<Key, uint64_t>> ScanAll(Tier& tier) {
    std::vector<std::pair<Key, uint64_t>> seen;
    Status status = tier.Scan([&](Key key, const char* row) {
      seen.emplace_back(key, test::VersionOf(row));
      return Status::OK();
    });
    EXPECT_TRUE(status.ok()) << status;
    std::sort(seen.begin(), seen.end());
    return seen;
  }

  std::unique_ptr<Tier> tier_;
};

TEST_P(TierContractTest, GetReturnsTheRowsThatPutStored) {
  const std::vector<Key> keys = {7, 3, 1000, 42};
  Put(keys, 1);
  std::vector<int64_t> missing = {99};
  std::vector<char> out = Get(keys, &missing);
  EXPECT_THAT(missing, IsEmpty());
  EXPECT_EQ(-1, FirstWrongRow(keys, AllIndices(4), out, 1, kRowBytes));
  EXPECT_EQ(kRowBytes, tier_->row_bytes());
}

TEST_P(TierContractTest, GetReportsMissingKeysByIndexInOrderAndLeavesTheirSlots) {
  Put({10, 30}, 1);
  const std::vector<Key> keys = {40, 10, 20, 30, 5};
  std::vector<int64_t> missing;
  std::vector<char> out = Get(keys, &missing);
  EXPECT_THAT(missing, ElementsAre(0, 2, 4));
  EXPECT_EQ(-1, FirstWrongRow(keys, {1, 3}, out, 1, kRowBytes));
  for (int64_t i : missing) {
    EXPECT_EQ(std::vector<char>(kRowBytes, 0x5a),
              std::vector<char>(out.begin() + i * kRowBytes, out.begin() + (i + 1) * kRowBytes))
        << "slot " << i;
  }
}

TEST_P(TierContractTest, GetOnAnEmptyTierReportsEveryKeyMissing) {
  std::vector<int64_t> missing;
  Get({1, 2, 3}, &missing);
  EXPECT_THAT(missing, ElementsAre(0, 1, 2));
}

TEST_P(TierContractTest, PutReplacesARowAlreadyHeld) {
  Put({1, 2}, 1);
  Put({2}, 2);
  std::vector<int64_t> missing;
  std::vector<char> out = Get({1, 2}, &missing);
  EXPECT_THAT(missing, IsEmpty());
  EXPECT_EQ(-1, FirstWrongRow({1, 2}, {0}, out, 1, kRowBytes));
  EXPECT_EQ(-1, FirstWrongRow({1, 2}, {1}, out, 2, kRowBytes));
}

TEST_P(TierContractTest, TheLastRowOfAKeyRepeatedInOnePutWins) {
  const std::vector<Key> keys = {5, 5};
  std::vector<char> rows = RowOf(5, 1, kRowBytes);
  std::vector<char> second = RowOf(5, 2, kRowBytes);
  rows.insert(rows.end(), second.begin(), second.end());
  ASSERT_TRUE(tier_->Put(keys, rows.data()).ok());
  std::vector<int64_t> missing;
  std::vector<char> out = Get({5}, &missing);
  EXPECT_EQ(-1, FirstWrongRow({5}, {0}, out, 2, kRowBytes));
}

TEST_P(TierContractTest, GetFillsEverySlotOfARepeatedKey) {
  Put({8}, 1);
  const std::vector<Key> keys = {8, 9, 8};
  std::vector<int64_t> missing;
  std::vector<char> out = Get(keys, &missing);
  EXPECT_THAT(missing, ElementsAre(1));
  EXPECT_EQ(-1, FirstWrongRow(keys, {0, 2}, out, 1, kRowBytes));
}

TEST_P(TierContractTest, DeleteRemovesRowsAndIgnoresKeysNotHeld) {
  Put({1, 2, 3}, 1);
  ASSERT_TRUE(tier_->Delete({2, 77}).ok());
  std::vector<int64_t> missing;
  std::vector<char> out = Get({1, 2, 3, 77}, &missing);
  EXPECT_THAT(missing, ElementsAre(1, 3));
  EXPECT_EQ(-1, FirstWrongRow({1, 2, 3}, {0, 2}, out, 1, kRowBytes));
  Put({2}, 3);
  out = Get({2}, &missing);
  EXPECT_THAT(missing, IsEmpty());
  EXPECT_EQ(-1, FirstWrongRow({2}, {0}, out, 3, kRowBytes));
}

TEST_P(TierContractTest, StoresKeysAtTheEdgesOfTheRange) {
  const Key kHighBit = Key{1} << 63;
  const std::vector<Key> keys = {kMaxKey, 0, kHighBit, kHighBit - 1, 1, kMaxKey - 1};
  Put(keys, 4);
  std::vector<int64_t> missing;
  std::vector<char> out = Get(keys, &missing);
  EXPECT_THAT(missing, IsEmpty());
  EXPECT_EQ(-1, FirstWrongRow(keys, AllIndices(keys.size()), out, 4, kRowBytes));
  std::vector<Key> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::pair<Key, uint64_t>> expected;
  for (Key key : sorted) expected.emplace_back(key, 4);
  EXPECT_THAT(ScanAll(*tier_), ElementsAreArray(expected));
}

TEST_P(TierContractTest, EmptyBatchesChangeNothing) {
  Put({1}, 1);
  ASSERT_TRUE(tier_->Put({}, nullptr).ok());
  ASSERT_TRUE(tier_->Delete({}).ok());
  std::vector<int64_t> missing = {3};
  ASSERT_TRUE(tier_->Get({}, nullptr, &missing).ok());
  EXPECT_THAT(missing, IsEmpty());
  EXPECT_EQ(1u, ScanAll(*tier_).size());
}

TEST_P(TierContractTest, HoldsRowsOfAnySize) {
  for (int64_t row_bytes : {int64_t{1}, int64_t{16}, int64_t{4096 + 3}}) {
    std::unique_ptr<Tier> tier = MakeTier(Path("rows_" + std::to_string(row_bytes)), row_bytes);
    ASSERT_NE(tier, nullptr);
    EXPECT_EQ(row_bytes, tier->row_bytes());
    const std::vector<Key> keys = {3, 1, 2};
    std::vector<char> rows = RowsOf(keys, 1, row_bytes);
    ASSERT_TRUE(tier->Put(keys, rows.data()).ok());
    std::vector<char> out(rows.size());
    std::vector<int64_t> missing;
    ASSERT_TRUE(tier->Get(keys, out.data(), &missing).ok());
    EXPECT_THAT(missing, IsEmpty());
    EXPECT_EQ(rows, out) << row_bytes << "-byte rows";
  }
}

TEST_P(TierContractTest, RefusesRowSizesOutOfRange) {
  for (int64_t row_bytes : {int64_t{0}, int64_t{-1}, kMaxTierRowBytes + 1}) {
    Result<std::unique_ptr<Tier>> tier = GetParam().make(Path("bad"), row_bytes);
    ASSERT_FALSE(tier.ok()) << row_bytes;
    EXPECT_EQ(StatusCode::kInvalidArgument, tier.status().code()) << tier.status();
  }
}

TEST_P(TierContractTest, RoundTripsABatchOfOneHundredThousandKeys) {
  constexpr int64_t kKeys = 100000;
  const std::vector<Key> keys = SpreadKeys(kKeys, 1);
  Put(keys, 1);
  // Ask for every stored key, in reverse, interleaved with as many absent ones.
  const std::vector<Key> absent = SpreadKeys(2 * kKeys, 1);  // its first half is `keys`
  std::vector<Key> asked;
  std::vector<int64_t> expected_missing;
  for (int64_t i = 0; i < kKeys; ++i) {
    asked.push_back(keys[kKeys - 1 - i]);
    expected_missing.push_back(static_cast<int64_t>(asked.size()));
    asked.push_back(absent[kKeys + i]);
  }
  std::vector<int64_t> missing;
  std::vector<char> out = Get(asked, &missing);
  EXPECT_EQ(expected_missing, missing);
  std::vector<int64_t> present;
  for (int64_t i = 0; i < 2 * kKeys; i += 2) present.push_back(i);
  EXPECT_EQ(-1, FirstWrongRow(asked, present, out, 1, kRowBytes));
  EXPECT_EQ(static_cast<size_t>(kKeys), ScanAll(*tier_).size());
}

TEST_P(TierContractTest, ApproximateCountIsNearTheNumberOfRows) {
  const std::vector<Key> keys = SpreadKeys(10000, 2);
  Put(keys, 1);
  ASSERT_TRUE(tier_->Flush().ok());
  Result<int64_t> count = tier_->ApproximateCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_NEAR(10000, *count, 1000);
}

TEST_P(TierContractTest, FlushKeepsEveryRow) {
  Put({1, 2}, 1);
  ASSERT_TRUE(tier_->Flush().ok());
  Put({2}, 2);
  ASSERT_TRUE(tier_->Delete({1}).ok());
  ASSERT_TRUE(tier_->Flush().ok());
  EXPECT_THAT(ScanAll(*tier_), ElementsAre(std::pair<Key, uint64_t>{2, 2}));
}

TEST_P(TierContractTest, ScanVisitsEveryRowOnceWithItsLastVersion) {
  std::vector<Key> keys = SpreadKeys(3000, 3);
  Put(keys, 1);
  ASSERT_TRUE(tier_->Flush().ok());
  std::vector<Key> overwritten(keys.begin(), keys.begin() + 1000);
  Put(overwritten, 2);
  std::sort(keys.begin(), keys.end());
  std::vector<std::pair<Key, uint64_t>> seen = ScanAll(*tier_);
  ASSERT_EQ(keys.size(), seen.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(keys[i], seen[i].first) << "position " << i;
    const bool was_overwritten =
        std::find(overwritten.begin(), overwritten.end(), keys[i]) != overwritten.end();
    ASSERT_EQ(was_overwritten ? 2u : 1u, seen[i].second) << "key " << keys[i];
  }
}

TEST_P(TierContractTest, ScanStopsAtTheFirstErrorOfTheVisitor) {
  Put({1, 2, 3}, 1);
  std::vector<Key> visited;
  Status status = tier_->Scan([&](Key key, const char*) {
    visited.push_back(key);
    return visited.size() == 2 ? Status::Cancelled("enough") : Status::OK();
  });
  EXPECT_EQ(Status::Cancelled("enough"), status);
  ASSERT_EQ(2u, visited.size()) << "the scan went on after the error";
  EXPECT_NE(visited[0], visited[1]);
}

TEST_P(TierContractTest, ScanSeesTheRowsOfWhenItStartedWhileTheVisitorWrites) {
  Put({1, 2, 3}, 1);
  std::vector<std::pair<Key, uint64_t>> seen;
  Status status = tier_->Scan([&](Key key, const char* row) {
    seen.emplace_back(key, test::VersionOf(row));
    if (seen.size() == 1) {
      // Writes from inside the scan: they must neither deadlock nor show up.
      std::vector<char> rows = RowsOf({2, 4}, 9, kRowBytes);
      EMBER_RETURN_IF_ERROR(tier_->Put({2, 4}, rows.data()));
      EMBER_RETURN_IF_ERROR(tier_->Delete({3}));
    }
    return Status::OK();
  });
  ASSERT_TRUE(status.ok()) << status;
  std::sort(seen.begin(), seen.end());
  EXPECT_THAT(seen, ElementsAre(std::pair<Key, uint64_t>{1, 1}, std::pair<Key, uint64_t>{2, 1},
                                std::pair<Key, uint64_t>{3, 1}));
  EXPECT_THAT(ScanAll(*tier_),
              ElementsAre(std::pair<Key, uint64_t>{1, 1}, std::pair<Key, uint64_t>{2, 9},
                          std::pair<Key, uint64_t>{4, 9}));
}

TEST_P(TierContractTest, ConcurrentPutsAndGetsOnDisjointKeysAllLand) {
  constexpr int kThreads = 4;
  constexpr int kBatches = 10;
  constexpr int64_t kBatchKeys = 500;
  std::vector<Status> results(kThreads);
  std::vector<int64_t> wrong_rows(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<Key> keys = SpreadKeys(kBatches * kBatchKeys, 100 + t);
      for (int b = 0; b < kBatches; ++b) {
        std::vector<Key> batch(keys.begin() + b * kBatchKeys, keys.begin() + (b + 1) * kBatchKeys);
        std::vector<char> rows = RowsOf(batch, t, kRowBytes);
        results[t] = tier_->Put(batch, rows.data());
        if (!results[t].ok()) return;
        std::vector<char> out(rows.size());
        std::vector<int64_t> missing;
        results[t] = tier_->Get(batch, out.data(), &missing);
        if (!results[t].ok()) return;
        wrong_rows[t] += static_cast<int64_t>(missing.size()) + (out == rows ? 0 : 1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(results[t].ok()) << "thread " << t << ": " << results[t];
    EXPECT_EQ(0, wrong_rows[t]) << "thread " << t;
  }
  // Conservation: every row of every thread is there, with its own content.
  std::vector<std::pair<Key, uint64_t>> expected;
  for (int t = 0; t < kThreads; ++t) {
    for (Key key : SpreadKeys(kBatches * kBatchKeys, 100 + t)) expected.emplace_back(key, t);
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(expected, ScanAll(*tier_));
}

TEST_P(TierContractTest, AGetSeesAConcurrentPutWhollyOrNotAtAll) {
  constexpr uint64_t kVersions = 30;
  // More keys than one MultiGet chunk of the RocksDB tier.
  const std::vector<Key> keys = SpreadKeys(5000, 4);
  Put(keys, 0);
  Status put_status;
  std::atomic<bool> writer_failed{false};
  std::thread writer([&] {
    for (uint64_t version = 1; version <= kVersions && put_status.ok(); ++version) {
      std::vector<char> rows = RowsOf(keys, version, kRowBytes);
      put_status = tier_->Put(keys, rows.data());
    }
    if (!put_status.ok()) writer_failed = true;
  });
  // Reads until the last version shows up; each read must hold one version.
  uint64_t last_seen = 0;
  int64_t torn_reads = 0;
  std::vector<char> out(keys.size() * kRowBytes);
  std::vector<int64_t> missing;
  Status get_status;
  while (last_seen < kVersions && !writer_failed) {
    get_status = tier_->Get(keys, out.data(), &missing);
    // The writer stops by itself; leave the loop on failure and join it.
    if (!get_status.ok() || !missing.empty()) break;
    const uint64_t version = test::VersionOf(out.data());
    EXPECT_GE(version, last_seen) << "versions went backwards";
    if (FirstWrongRow(keys, AllIndices(keys.size()), out, version, kRowBytes) != -1) ++torn_reads;
    last_seen = version;
  }
  writer.join();
  EXPECT_TRUE(put_status.ok()) << put_status;
  EXPECT_TRUE(get_status.ok()) << get_status;
  EXPECT_THAT(missing, IsEmpty());
  EXPECT_EQ(kVersions, last_seen);
  EXPECT_EQ(0, torn_reads);
}

TEST_P(TierContractTest, AgreesWithTheReferenceOnARandomSequenceOfOperations) {
  Result<std::unique_ptr<Tier>> reference = NewInMemoryTier(kRowBytes);
  ASSERT_TRUE(reference.ok());
  RandomStream random(5);
  const std::vector<Key> universe = SpreadKeys(300, 5);
  auto random_keys = [&](int64_t n) {
    std::vector<Key> keys;
    for (int64_t i = 0; i < n; ++i) keys.push_back(universe[random.NextBelow(universe.size())]);
    return keys;
  };
  for (int op = 0; op < 600; ++op) {
    const std::vector<Key> keys = random_keys(1 + random.NextBelow(40));
    switch (random.NextBelow(4)) {
      case 0: {
        std::vector<char> rows = RowsOf(keys, op, kRowBytes);
        ASSERT_TRUE(tier_->Put(keys, rows.data()).ok());
        ASSERT_TRUE((*reference)->Put(keys, rows.data()).ok());
        break;
      }
      case 1:
        ASSERT_TRUE(tier_->Delete(keys).ok());
        ASSERT_TRUE((*reference)->Delete(keys).ok());
        break;
      case 2: {
        std::vector<int64_t> missing, expected_missing;
        std::vector<char> out(keys.size() * kRowBytes), expected(keys.size() * kRowBytes);
        ASSERT_TRUE(tier_->Get(keys, out.data(), &missing).ok());
        ASSERT_TRUE((*reference)->Get(keys, expected.data(), &expected_missing).ok());
        ASSERT_EQ(expected_missing, missing) << "operation " << op;
        for (int64_t i : expected_missing) {
          std::fill_n(out.begin() + i * kRowBytes, kRowBytes, 0);
          std::fill_n(expected.begin() + i * kRowBytes, kRowBytes, 0);
        }
        ASSERT_EQ(expected, out) << "operation " << op;
        break;
      }
      default:
        ASSERT_TRUE(tier_->Flush().ok());
        break;
    }
  }
  EXPECT_EQ(ScanAll(**reference), ScanAll(*tier_));
}

INSTANTIATE_TEST_SUITE_P(
    AllTiers, TierContractTest,
    ::testing::Values(TierKind{"InMemory", &MakeInMemoryTier},
                      TierKind{"RocksDb", &MakeRocksDbTier},
                      TierKind{"WriteThroughRocksDb", &MakeWriteThroughRocksDbTier},
                      TierKind{"SmallGatherRocksDb", &MakeSmallGatherRocksDbTier},
                      TierKind{"FaultFreeFaultyTier", &MakeFaultFreeFaultyTier}),
    [](const ::testing::TestParamInfo<TierKind>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ember::embedding
