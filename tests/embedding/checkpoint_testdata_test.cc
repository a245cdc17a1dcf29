// A checkpoint written by an earlier Ember (tests/embedding/testdata, see its
// README) still restores, its files verified by the checksum they were
// written with.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "embedding/checkpoint.h"
#include "embedding/embedding_table.h"
#include "tests/testing/temp_dir.h"

namespace ember::embedding {
namespace {

constexpr char kSnapshot[] = "full-00000000000000000005";

class CheckpointTestdataTest : public ::ember::test::TempDirTest {
 protected:
  // A copy of testdata/checkpoint_v2 (a restore may tidy its directory).
  std::string CopyOfCheckpoint() {
    const std::string dir = Path("checkpoint_v2");
    std::filesystem::copy(std::string(EMBER_TESTDATA_DIR) + "/checkpoint_v2", dir,
                          std::filesystem::copy_options::recursive);
    return dir;
  }

  // Restores `dir` into a table of the job that wrote it (dim 4, SGD).
  Result<int64_t> Restore(const std::string& dir, std::unique_ptr<EmbeddingTable>* table) {
    EmbeddingTableOptions options;
    options.dim = 4;
    options.optimizer.type = SparseOptimizer::kSgd;
    EMBER_ASSIGN_OR_RETURN(*table, NewMemoryTable(options));
    CheckpointOptions checkpoint;
    checkpoint.dir = dir;
    checkpoint.optimizer = "sgd";
    Checkpointer checkpointer(**table, checkpoint);
    return checkpointer.RestoreLatest();
  }
};

TEST_F(CheckpointTestdataTest, ACheckpointOfAnEarlierEmberRestores) {
  std::unique_ptr<EmbeddingTable> table;
  Result<int64_t> step = Restore(CopyOfCheckpoint(), &table);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(5, *step);
  EXPECT_EQ(260, table->num_rows());
  EXPECT_EQ(4, table->step());
}

TEST_F(CheckpointTestdataTest, ADamagedRowOfAnEarlierEmbersCheckpointIsDataLoss) {
  const std::string dir = CopyOfCheckpoint();
  {
    std::fstream rows(dir + "/" + kSnapshot + "/rows-00000.bin",
                      std::ios::in | std::ios::out | std::ios::binary);
    rows.seekp(100);
    rows.put('\x5a');
  }
  std::unique_ptr<EmbeddingTable> table;
  Result<int64_t> step = Restore(dir, &table);
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(StatusCode::kDataLoss, step.status().code()) << step.status();
}

}  // namespace
}  // namespace ember::embedding
