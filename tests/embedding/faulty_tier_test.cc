#include "embedding/faulty_tier.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "embedding/rocksdb_tier.h"
#include "embedding/tier.h"
#include "tests/embedding/tier_test_rows.h"
#include "tests/testing/temp_dir.h"

namespace ember::embedding {
namespace {

using test::AllIndices;
using test::FirstWrongRow;
using test::RowsOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kRowBytes = 64;

// Copies every row of `from` into `to` in batches, as a checkpoint writer
// would; stops at the first error of either tier.
Status CopyRows(Tier& from, Tier& to) {
  std::vector<Key> keys;
  std::vector<char> rows;
  auto write_batch = [&]() -> Status {
    EMBER_RETURN_IF_ERROR(to.Put(keys, rows.data()));
    keys.clear();
    rows.clear();
    return Status::OK();
  };
  EMBER_RETURN_IF_ERROR(from.Scan([&](Key key, const char* row) -> Status {
    keys.push_back(key);
    rows.insert(rows.end(), row, row + from.row_bytes());
    return keys.size() == 100 ? write_batch() : Status::OK();
  }));
  return write_batch();
}

class FaultyTierTest : public test::TempDirTest {
 protected:
  // A RocksDB tier under the test's directory at `name`.
  std::unique_ptr<Tier> OpenRocksDbTier(const std::string& name) {
    RocksDbTierOptions options;
    options.path = Path(name);
    options.row_bytes = kRowBytes;
    options.block_cache_bytes = int64_t{8} << 20;
    options.write_buffer_bytes = int64_t{2} << 20;
    Result<std::unique_ptr<Tier>> tier = NewRocksDbTier(options);
    EXPECT_TRUE(tier.ok()) << tier.status();
    return tier.ok() ? std::move(tier).value() : nullptr;
  }

  std::unique_ptr<FaultyTier> WrapRocksDbTier(const std::string& name,
                                              const FaultyTierOptions& options) {
    std::unique_ptr<Tier> base = OpenRocksDbTier(name);
    return base == nullptr ? nullptr : std::make_unique<FaultyTier>(std::move(base), options);
  }
};

TEST_F(FaultyTierTest, FailsTheNthCallWithIOErrorAndEveryCallAfterIt) {
  FaultyTierOptions options;
  options.first_failing_call = 3;
  std::unique_ptr<FaultyTier> tier = WrapRocksDbTier("db", options);
  ASSERT_NE(tier, nullptr);
  const std::vector<Key> keys = {1, 2};
  std::vector<char> rows = RowsOf(keys, 1, kRowBytes);
  std::vector<char> out(rows.size());
  std::vector<int64_t> missing;
  EXPECT_TRUE(tier->Put(keys, rows.data()).ok());
  EXPECT_TRUE(tier->Get(keys, out.data(), &missing).ok());
  Status third = tier->Get(keys, out.data(), &missing);
  EXPECT_EQ(StatusCode::kIOError, third.code()) << third;
  EXPECT_THAT(third.message(), HasSubstr("call 3"));
  EXPECT_EQ(StatusCode::kIOError, tier->Flush().code());
  EXPECT_EQ(StatusCode::kIOError, tier->ApproximateCount().status().code());
  EXPECT_EQ(5, tier->calls());
  EXPECT_EQ(3, tier->injected_failures());
}

TEST_F(FaultyTierTest, AFailedPutStoresNothingAndLaterCallsWorkAgain) {
  FaultyTierOptions options;
  options.first_failing_call = 2;
  options.failing_calls = 1;
  std::unique_ptr<FaultyTier> tier = WrapRocksDbTier("db", options);
  ASSERT_NE(tier, nullptr);
  std::vector<char> first = RowsOf({1}, 1, kRowBytes);
  std::vector<char> second = RowsOf({2}, 1, kRowBytes);
  ASSERT_TRUE(tier->Put({1}, first.data()).ok());
  EXPECT_EQ(StatusCode::kIOError, tier->Put({2}, second.data()).code());
  std::vector<char> out(2 * kRowBytes);
  std::vector<int64_t> missing;
  Status status = tier->Get({1, 2}, out.data(), &missing);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(std::vector<int64_t>{1}, missing);
  EXPECT_EQ(-1, FirstWrongRow({1, 2}, {0}, out, 1, kRowBytes));
}

TEST_F(FaultyTierTest, ACheckpointCopyStopsWithTheErrorAndLeavesTheSourceIntact) {
  std::unique_ptr<Tier> source = OpenRocksDbTier("source");
  ASSERT_NE(source, nullptr);
  const std::vector<Key> keys = test::SpreadKeys(1000, 7);
  std::vector<char> rows = RowsOf(keys, 1, kRowBytes);
  ASSERT_TRUE(source->Put(keys, rows.data()).ok());
  FaultyTierOptions options;
  options.first_failing_call = 4;  // the fourth batch of 100 rows
  std::unique_ptr<FaultyTier> target = WrapRocksDbTier("target", options);
  ASSERT_NE(target, nullptr);

  Status status = CopyRows(*source, *target);

  EXPECT_EQ(StatusCode::kIOError, status.code()) << status;
  EXPECT_THAT(status.message(), HasSubstr("injected failure of Put"));
  Result<int64_t> copied = target->ApproximateCount();  // call 5 fails too
  EXPECT_EQ(StatusCode::kIOError, copied.status().code());
  std::vector<char> out(rows.size());
  std::vector<int64_t> missing;
  ASSERT_TRUE(source->Get(keys, out.data(), &missing).ok());
  EXPECT_THAT(missing, IsEmpty());
  EXPECT_EQ(-1, FirstWrongRow(keys, AllIndices(keys.size()), out, 1, kRowBytes));
}

}  // namespace
}  // namespace ember::embedding
