// The RANKS record of a checkpoint of two ranks written by an earlier Ember
// (tests/engine/testdata/ranks_v1, see its README) still reads.

#include <string>

#include <gtest/gtest.h>

#include "engine/rank_checkpoint.h"

namespace ember::engine {
namespace {

TEST(RankCheckpointTestdataTest, ARanksRecordOfAnEarlierEmberReads) {
  const std::string dir = std::string(EMBER_TESTDATA_DIR) + "/ranks_v1";
  ASSERT_TRUE(HasRanksRecord(dir));
  Result<RanksRecord> record = FindRanksCheckpoint(dir);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(2, record->ranks);
  EXPECT_EQ(5, record->step);
  EXPECT_FALSE(record->unranked);
  EXPECT_EQ(dir + "/rank-1", RecordedRankDir(dir, *record, 1));
}

}  // namespace
}  // namespace ember::engine
