// Checkpoints written by an earlier Ember (tests/engine/testdata, see the
// READMEs there) still read: a whole checkpoint of one process, its dense
// file and embedding snapshot hashed with the legacy fnv1a64-words, exports
// a bundle (now hashed with xxh64) that loads; the RANKS record of a
// checkpoint of two ranks still reads.

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "engine/bundle.h"
#include "engine/job_record.h"
#include "engine/rank_checkpoint.h"
#include "tests/testing/temp_dir.h"

namespace ember::engine {
namespace {

std::string TestData(const std::string& name) {
  return std::string(EMBER_TESTDATA_DIR) + "/" + name;
}

class CheckpointTestdataTest : public ::ember::test::TempDirTest {};

TEST_F(CheckpointTestdataTest, ACheckpointOfAnEarlierEmberExportsABundleThatLoads) {
  // A copy: the export locks the directory.
  const std::string dir = Path("checkpoint_v2");
  std::filesystem::copy(TestData("checkpoint_v2"), dir, std::filesystem::copy_options::recursive);
  Result<ExportedCheckpoint> exported = ExportCheckpoint(dir, Path("bundle"));
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ("dlrm", exported->model);
  EXPECT_EQ(5, exported->step);
  EXPECT_EQ(260, exported->rows);
  Result<VerifiedBundle> bundle = VerifyBundle(Path("bundle"));
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_EQ(5, bundle->config.step);
}

TEST(RankCheckpointTestdataTest, ARanksRecordOfAnEarlierEmberReads) {
  const std::string dir = TestData("ranks_v1");
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
