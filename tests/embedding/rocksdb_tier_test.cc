// What the RocksDB tier adds to the Tier contract (tier_contract_test.cc):
// persistence, options, and the errors of opening and of damaged databases.

#include "embedding/rocksdb_tier.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rocksdb/comparator.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/crash_point.h"
#include "core/random.h"
#include "core/status.h"
#include "embedding/internal/rocksdb_tier_options.h"
#include "embedding/internal/tier_key_order.h"
#include "embedding/tier.h"
#include "tests/embedding/tier_test_rows.h"
#include "tests/testing/temp_dir.h"

namespace ember::embedding {
namespace {

using test::AllIndices;
using test::FirstWrongRow;
using test::RowsOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kRowBytes = 64;

class RocksDbTierTest : public test::TempDirTest {
 protected:
  RocksDbTierOptions Options(const std::string& name = "db") const {
    RocksDbTierOptions options;
    options.path = Path(name);
    options.row_bytes = kRowBytes;
    options.block_cache_bytes = int64_t{8} << 20;
    options.write_buffer_bytes = int64_t{2} << 20;
    return options;
  }

  std::unique_ptr<Tier> Open(const RocksDbTierOptions& options) {
    Result<std::unique_ptr<Tier>> tier = NewRocksDbTier(options);
    EXPECT_TRUE(tier.ok()) << tier.status();
    return tier.ok() ? std::move(tier).value() : nullptr;
  }

  // Makes a tier with `options` and puts `keys` in it (rows of version 1).
  void MakeWithRows(const RocksDbTierOptions& options, const std::vector<Key>& keys) {
    std::unique_ptr<Tier> tier = Open(options);
    ASSERT_NE(tier, nullptr);
    const std::vector<char> rows = RowsOf(keys, 1, kRowBytes);
    ASSERT_TRUE(tier->Put(keys, rows.data()).ok());
  }

  // Expects `tier` to return the version-1 rows of every one of `keys`.
  void ExpectRows(Tier& tier, const std::vector<Key>& keys) {
    std::vector<char> out(keys.size() * kRowBytes);
    std::vector<int64_t> missing;
    ASSERT_TRUE(tier.Get(keys, out.data(), &missing).ok());
    EXPECT_THAT(missing, IsEmpty());
    EXPECT_EQ(-1, FirstWrongRow(keys, AllIndices(keys.size()), out, 1, kRowBytes));
  }

  // Writes `value` under `key` straight into the rows of the tier at `path`,
  // bypassing the tier's checks, as a damaged disk might.
  void ForgeRow(const std::string& path, Key key, const std::string& value) {
    rocksdb::DBOptions db_options;
    rocksdb::ColumnFamilyOptions rows;
    rows.comparator = internal::FixedKeyComparator();
    const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, rows}, {"ember_meta", rocksdb::ColumnFamilyOptions()}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(db_options, path, families, &handles, &db).ok());
    // Where a tier made with the default key_shards (1) keeps the key.
    uint64_t rank = internal::TierKeyOrder::ByShard(1).Rank(key);
    std::string encoded(8, '\0');
    for (int i = 7; i >= 0; --i, rank >>= 8) encoded[i] = static_cast<char>(rank & 0xff);
    EXPECT_TRUE(db->Put(rocksdb::WriteOptions(), handles[0], encoded, value).ok());
    for (rocksdb::ColumnFamilyHandle* handle : handles) {
      EXPECT_TRUE(db->DestroyColumnFamilyHandle(handle).ok());
    }
    EXPECT_TRUE(db->Close().ok());
    delete db;
  }
};

TEST_F(RocksDbTierTest, AReopenedTierHoldsTheRowsFlushedBeforeClosing) {
  const std::vector<Key> keys = test::SpreadKeys(20000, 1);
  {
    std::unique_ptr<Tier> tier = Open(Options());
    ASSERT_NE(tier, nullptr);
    std::vector<char> rows = RowsOf(keys, 1, kRowBytes);
    ASSERT_TRUE(tier->Put(keys, rows.data()).ok());
    ASSERT_TRUE(tier->Delete({keys[0]}).ok());
    std::vector<char> newer = RowsOf({keys[1]}, 2, kRowBytes);
    ASSERT_TRUE(tier->Put({keys[1]}, newer.data()).ok());
    Status status = tier->Flush();
    ASSERT_TRUE(status.ok()) << status;
  }
  std::unique_ptr<Tier> tier = Open(Options());
  ASSERT_NE(tier, nullptr);
  std::vector<char> out(keys.size() * kRowBytes);
  std::vector<int64_t> missing;
  ASSERT_TRUE(tier->Get(keys, out.data(), &missing).ok());
  EXPECT_EQ(std::vector<int64_t>{0}, missing);
  std::vector<int64_t> rest = AllIndices(keys.size());
  rest.erase(rest.begin(), rest.begin() + 2);
  EXPECT_EQ(-1, FirstWrongRow(keys, rest, out, 1, kRowBytes));
  EXPECT_EQ(-1, FirstWrongRow(keys, {1}, out, 2, kRowBytes));
}

TEST_F(RocksDbTierTest, ReopeningWithAnotherRowSizeIsInvalidArgument) {
  ASSERT_NE(Open(Options()), nullptr);
  RocksDbTierOptions options = Options();
  options.row_bytes = 32;
  Result<std::unique_ptr<Tier>> tier = NewRocksDbTier(options);
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, tier.status().code()) << tier.status();
  EXPECT_THAT(tier.status().message(), HasSubstr("rows of 64 bytes"));
  EXPECT_THAT(tier.status().message(), HasSubstr(options.path));
}

TEST_F(RocksDbTierTest, OpeningUnderARegularFileIsIOErrorNamingThePath) {
  std::ofstream(Path("file")) << "not a directory";
  RocksDbTierOptions options = Options("file/db");
  Result<std::unique_ptr<Tier>> tier = NewRocksDbTier(options);
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(StatusCode::kIOError, tier.status().code()) << tier.status();
  EXPECT_THAT(tier.status().message(), HasSubstr(options.path));
}

TEST_F(RocksDbTierTest, OpeningAMissingDatabaseWithoutCreateIfMissingIsIOError) {
  RocksDbTierOptions options = Options();
  options.create_if_missing = false;
  Result<std::unique_ptr<Tier>> tier = NewRocksDbTier(options);
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(StatusCode::kIOError, tier.status().code()) << tier.status();
  EXPECT_FALSE(std::filesystem::exists(options.path));
}

TEST_F(RocksDbTierTest, OpeningATierThatIsOpenIsIOError) {
  std::unique_ptr<Tier> first = Open(Options());
  ASSERT_NE(first, nullptr);
  Result<std::unique_ptr<Tier>> second = NewRocksDbTier(Options());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(StatusCode::kIOError, second.status().code()) << second.status();
}

TEST_F(RocksDbTierTest, ErrorIfExistsRefusesAnExistingTier) {
  ASSERT_NE(Open(Options()), nullptr);
  RocksDbTierOptions options = Options();
  options.error_if_exists = true;
  Result<std::unique_ptr<Tier>> tier = NewRocksDbTier(options);
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(StatusCode::kIOError, tier.status().code()) << tier.status();
}

TEST_F(RocksDbTierTest, ADatabaseThatIsNotATierIsInvalidArgument) {
  rocksdb::Options plain;
  plain.create_if_missing = true;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(plain, Path("plain"), &db).ok());
  delete db;
  Result<std::unique_ptr<Tier>> tier = NewRocksDbTier(Options("plain"));
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, tier.status().code()) << tier.status();
  EXPECT_THAT(tier.status().message(), HasSubstr("not an Ember tier"));
}

// A process killed after RocksDB made the database and before the tier's
// column family existed left a directory that could never be opened again
// ("not an Ember tier (column families: default)"). Now the next open
// finishes the job: it creates the tier afresh.
TEST_F(RocksDbTierTest, ATierWhoseCreationWasKilledIsCreatedAgainOnOpen) {
  // "fast": the child is a fork at this point, with this test's directory.
  GTEST_FLAG_SET(death_test_style, "fast");
  const RocksDbTierOptions options = Options("killed");
  EXPECT_EXIT(
      {
        SetCrashPointForTest("tier.created_database");
        (void)NewRocksDbTier(options);
        std::_Exit(0);  // Not reached when the crash point fires.
      },
      ::testing::KilledBySignal(SIGKILL), "killed at crash point tier.created_database");
  // The killed creation's state: a database with the default family only.
  std::vector<std::string> families;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), options.path, &families).ok());
  EXPECT_EQ(families, std::vector<std::string>{rocksdb::kDefaultColumnFamilyName});

  std::unique_ptr<Tier> tier = Open(options);
  ASSERT_NE(tier, nullptr);
  const std::vector<char> rows = RowsOf({7, 9}, 1, kRowBytes);
  ASSERT_TRUE(tier->Put({7, 9}, rows.data()).ok());
  ASSERT_TRUE(tier->Flush().ok());
  tier.reset();
  // Reopened as a finished tier (no marker left): the rows are there.
  EXPECT_FALSE(std::filesystem::exists(options.path + "/EMBER_TIER_CREATING"));
  tier = Open(options);
  ASSERT_NE(tier, nullptr);
  std::vector<char> out(2 * kRowBytes);
  std::vector<int64_t> missing;
  ASSERT_TRUE(tier->Get({7, 9}, out.data(), &missing).ok());
  EXPECT_THAT(missing, IsEmpty());
  EXPECT_EQ(out, rows);
}

TEST_F(RocksDbTierTest, AKilledCreationIsAnErrorWithoutCreateIfMissing) {
  // "fast": the child is a fork at this point, with this test's directory.
  GTEST_FLAG_SET(death_test_style, "fast");
  RocksDbTierOptions options = Options("killed");
  EXPECT_EXIT(
      {
        SetCrashPointForTest("tier.created_database");
        (void)NewRocksDbTier(options);
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGKILL), "crash point");
  options.create_if_missing = false;
  Result<std::unique_ptr<Tier>> tier = NewRocksDbTier(options);
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(StatusCode::kIOError, tier.status().code()) << tier.status();
  EXPECT_THAT(tier.status().message(), HasSubstr("creation of this tier was interrupted"));
}

TEST_F(RocksDbTierTest, AStoredRowOfTheWrongSizeIsDataLoss) {
  {
    std::unique_ptr<Tier> tier = Open(Options());
    ASSERT_NE(tier, nullptr);
    std::vector<char> rows = RowsOf({1, 3}, 1, kRowBytes);
    ASSERT_TRUE(tier->Put({1, 3}, rows.data()).ok());
  }
  ForgeRow(Path("db"), 2, "short");
  std::unique_ptr<Tier> tier = Open(Options());
  ASSERT_NE(tier, nullptr);
  std::vector<char> out(3 * kRowBytes);
  std::vector<int64_t> missing;
  Status get = tier->Get({1, 2, 3}, out.data(), &missing);
  EXPECT_EQ(StatusCode::kDataLoss, get.code()) << get;
  EXPECT_THAT(get.message(), HasSubstr("row of key 2 has 5 bytes, expected 64"));
  Status scan = tier->Scan([](Key, const char*) { return Status::OK(); });
  EXPECT_EQ(StatusCode::kDataLoss, scan.code()) << scan;
  EXPECT_TRUE(tier->Get({1, 3}, out.data(), &missing).ok()) << "other rows stay readable";
}

TEST_F(RocksDbTierTest, RefusesInvalidOptionsNamingTheField) {
  struct Case {
    const char* field;
    void (*change)(RocksDbTierOptions*);
  };
  const Case cases[] = {
      {"path", [](RocksDbTierOptions* o) { o->path.clear(); }},
      {"row_bytes", [](RocksDbTierOptions* o) { o->row_bytes = 0; }},
      {"block_cache_bytes", [](RocksDbTierOptions* o) { o->block_cache_bytes = 1000; }},
      {"write_buffer_bytes", [](RocksDbTierOptions* o) { o->write_buffer_bytes = 0; }},
      {"max_background_jobs", [](RocksDbTierOptions* o) { o->max_background_jobs = 0; }},
      {"key_shards", [](RocksDbTierOptions* o) { o->key_shards = -1; }},
  };
  for (const Case& c : cases) {
    RocksDbTierOptions options = Options();
    c.change(&options);
    Result<std::unique_ptr<Tier>> tier = NewRocksDbTier(options);
    ASSERT_FALSE(tier.ok()) << c.field;
    EXPECT_EQ(StatusCode::kInvalidArgument, tier.status().code()) << tier.status();
    EXPECT_THAT(tier.status().message(), HasSubstr(c.field));
  }
}

TEST_F(RocksDbTierTest, DestroyRemovesAClosedTierAndAcceptsAMissingOne) {
  ASSERT_NE(Open(Options()), nullptr);
  ASSERT_TRUE(std::filesystem::exists(Path("db")));
  Status status = DestroyRocksDbTier(Path("db"));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_FALSE(std::filesystem::exists(Path("db"))) << "the directory, marker and all, is gone";
  status = DestroyRocksDbTier(Path("never_made"));
  EXPECT_TRUE(status.ok()) << status;
}

// DestroyDB removes file after file. Killed after CURRENT and before the
// write-ahead logs, it leaves a directory where RocksDB creates no database
// ("wal_dir contains existing log file"); the marker Destroy writes first
// makes the next open clean up and create the tier afresh.
TEST_F(RocksDbTierTest, ARemovalKilledHalfwayIsCleanedUpByTheNextOpen) {
  const RocksDbTierOptions options = Options();
  {
    std::unique_ptr<Tier> tier = Open(options);
    ASSERT_NE(tier, nullptr);
    const std::vector<char> rows = RowsOf({7, 9}, 1, kRowBytes);
    ASSERT_TRUE(tier->Put({7, 9}, rows.data()).ok());
  }
  // The state of a DestroyRocksDbTier killed after removing CURRENT.
  std::ofstream(options.path + "/EMBER_TIER_CREATING") << "an Ember tier is being removed here\n";
  std::filesystem::remove(options.path + "/CURRENT");
  bool has_log = false;
  for (const auto& entry : std::filesystem::directory_iterator(options.path)) {
    has_log |= entry.path().extension() == ".log" && entry.path().filename() != "LOG";
  }
  ASSERT_TRUE(has_log) << "the database left no write-ahead log to trip over";

  std::unique_ptr<Tier> tier = Open(options);
  ASSERT_NE(tier, nullptr);
  std::vector<char> out(2 * kRowBytes);
  std::vector<int64_t> missing;
  ASSERT_TRUE(tier->Get({7, 9}, out.data(), &missing).ok());
  EXPECT_THAT(missing, ElementsAre(0, 1)) << "a fresh tier";
  EXPECT_FALSE(std::filesystem::exists(options.path + "/EMBER_TIER_CREATING"));
}

TEST_F(RocksDbTierTest, ATierWithTheWriteAheadLogReopensWithItsRows) {
  RocksDbTierOptions options = Options();
  options.use_write_ahead_log = true;
  {
    std::unique_ptr<Tier> tier = Open(options);
    ASSERT_NE(tier, nullptr);
    std::vector<char> rows = RowsOf({9}, 1, kRowBytes);
    ASSERT_TRUE(tier->Put({9}, rows.data()).ok());
  }
  std::unique_ptr<Tier> tier = Open(options);
  ASSERT_NE(tier, nullptr);
  std::vector<char> out(kRowBytes);
  std::vector<int64_t> missing;
  ASSERT_TRUE(tier->Get({9}, out.data(), &missing).ok());
  EXPECT_THAT(missing, IsEmpty());
  EXPECT_EQ(-1, FirstWrongRow({9}, {0}, out, 1, kRowBytes));
}

int Sign(int x) { return (x > 0) - (x < 0); }

// The tier's comparator must order exactly as RocksDB's bytewise one, the
// order of tiers made before it (they are opened with that one) and the
// numeric order of the big-endian keys that Scan promises.
TEST(FixedKeyComparatorTest, OrdersEveryPairAsTheBytewiseComparator) {
  const rocksdb::Comparator* fixed = internal::FixedKeyComparator();
  const rocksdb::Comparator* bytewise = rocksdb::BytewiseComparator();
  EXPECT_FALSE(fixed->CanKeysWithDifferentByteContentsBeEqual());
  RandomStream random(5, 0);
  std::vector<std::string> keys = {"",        std::string(8, '\0'), std::string(8, '\xff'),
                                   "short",   "nine bytes",         std::string(7, '\xff'),
                                   "\x01\x02"};
  for (int i = 0; i < 300; ++i) {
    std::string key(8, '\0');
    const uint64_t bits = random.NextU64();
    // Some keys share long prefixes, so that every byte position decides.
    for (int b = 0; b < 8; ++b)
      key[b] = static_cast<char>(i % 3 == 0 && b < 6 ? 0x80 : bits >> (8 * b));
    keys.push_back(key);
  }
  for (const std::string& a : keys) {
    for (const std::string& b : keys) {
      ASSERT_EQ(Sign(bytewise->Compare(a, b)), Sign(fixed->Compare(a, b)))
          << "keys of " << a.size() << " and " << b.size() << " bytes";
      ASSERT_EQ(a == b, fixed->Equal(a, b));
    }
  }
}

// The keys a Scan visits, in its order.
std::vector<Key> ScannedKeys(Tier& tier) {
  std::vector<Key> keys;
  Status status = tier.Scan([&](Key key, const char*) {
    keys.push_back(key);
    return Status::OK();
  });
  EXPECT_TRUE(status.ok()) << status;
  return keys;
}

// A tier made before the tier had its own comparator (its database records
// RocksDB's bytewise comparator, which RocksDB will not open under another
// name) opens, reads its rows, takes new ones and scans in key order.
TEST_F(RocksDbTierTest, ATierMadeWithTheBytewiseComparatorOpensWithItsRows) {
  const std::string path = Path("bytewise");
  const std::vector<Key> old_keys = test::SpreadKeys(3000, 2);
  {
    rocksdb::Options create;
    create.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(create, path, &db).ok());
    rocksdb::ColumnFamilyHandle* meta = nullptr;
    ASSERT_TRUE(db->CreateColumnFamily(rocksdb::ColumnFamilyOptions(), "ember_meta", &meta).ok());
    ASSERT_TRUE(
        db->Put(rocksdb::WriteOptions(), meta, "row_bytes", std::to_string(kRowBytes)).ok());
    const std::vector<char> rows = RowsOf(old_keys, 1, kRowBytes);
    for (size_t i = 0; i < old_keys.size(); ++i) {
      std::string encoded(8, '\0');
      Key key = old_keys[i];
      for (int b = 7; b >= 0; --b, key >>= 8) encoded[b] = static_cast<char>(key & 0xff);
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), encoded,
                          rocksdb::Slice(rows.data() + i * kRowBytes, kRowBytes))
                      .ok());
    }
    ASSERT_TRUE(db->DestroyColumnFamilyHandle(meta).ok());
    ASSERT_TRUE(db->Close().ok());
    delete db;
  }
  const std::vector<Key> new_keys = test::SpreadKeys(3000, 3);
  for (int open = 0; open < 2; ++open) {
    std::unique_ptr<Tier> tier = Open(Options("bytewise"));
    ASSERT_NE(tier, nullptr);
    std::vector<char> out(old_keys.size() * kRowBytes);
    std::vector<int64_t> missing;
    ASSERT_TRUE(tier->Get(old_keys, out.data(), &missing).ok());
    EXPECT_THAT(missing, IsEmpty());
    EXPECT_EQ(-1, FirstWrongRow(old_keys, AllIndices(old_keys.size()), out, 1, kRowBytes));
    if (open == 0) {
      const std::vector<char> rows = RowsOf(new_keys, 2, kRowBytes);
      ASSERT_TRUE(tier->Put(new_keys, rows.data()).ok());
      ASSERT_TRUE(tier->Flush().ok());
    }
    ASSERT_TRUE(tier->Get(new_keys, out.data(), &missing).ok());
    EXPECT_THAT(missing, IsEmpty());
    EXPECT_EQ(-1, FirstWrongRow(new_keys, AllIndices(new_keys.size()), out, 2, kRowBytes));
    const std::vector<Key> scanned = ScannedKeys(*tier);
    std::vector<Key> expected = old_keys;
    expected.insert(expected.end(), new_keys.begin(), new_keys.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(expected, scanned);
  }
}

// `keys` sorted by their rank in `order`.
std::vector<Key> InOrder(std::vector<Key> keys, const internal::TierKeyOrder& order) {
  std::sort(keys.begin(), keys.end(), [&](Key a, Key b) { return order.Rank(a) < order.Rank(b); });
  return keys;
}

// A tier lays its rows out by the shards it was made for, and keeps that
// order when reopened for other shards: its rows stay readable.
TEST_F(RocksDbTierTest, KeepsTheKeyOrderItWasMadeWith) {
  const std::vector<Key> keys = test::SpreadKeys(2000, 5);
  RocksDbTierOptions options = Options("sharded");
  options.key_shards = 64;
  MakeWithRows(options, keys);
  options.key_shards = 3;
  std::unique_ptr<Tier> tier = Open(options);
  ASSERT_NE(tier, nullptr);
  ExpectRows(*tier, keys);
  const std::vector<Key> scanned = ScannedKeys(*tier);
  EXPECT_EQ(InOrder(keys, internal::TierKeyOrder::ByShard(64)), scanned);
  // By shard: the keys of each shard are one run.
  for (size_t i = 1; i < scanned.size(); ++i) {
    ASSERT_LE(Mix64(scanned[i - 1]) % 64, Mix64(scanned[i]) % 64) << "position " << i;
  }
}

// key_shards = 0 makes the layout of tiers made before key orders were
// recorded (numeric order, nothing recorded); such a tier, reopened by a
// table of 64 shards, keeps its order and its rows.
TEST_F(RocksDbTierTest, ATierInNumericKeyOrderKeepsItWhenReopened) {
  const std::vector<Key> keys = test::SpreadKeys(2000, 6);
  RocksDbTierOptions options = Options("numeric");
  options.key_shards = 0;
  MakeWithRows(options, keys);
  options.key_shards = 64;
  for (int open = 0; open < 2; ++open) {
    std::unique_ptr<Tier> tier = Open(options);
    ASSERT_NE(tier, nullptr);
    ExpectRows(*tier, keys);
    std::vector<Key> sorted = keys;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, ScannedKeys(*tier)) << "open " << open;
  }
}

}  // namespace
}  // namespace ember::embedding
