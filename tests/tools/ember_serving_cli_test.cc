// `ember train --export_dir`, `ember export`, `ember eval`, `ember predict`
// and the C example, run as a user would.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <string>

#include "core/file.h"
#include "tests/testing/command_run.h"
#include "tests/testing/temp_dir.h"

namespace {

using ember::test::CommandRun;
using ember::test::RunCommand;

CommandRun Ember(const std::string& args) {
  return RunCommand(std::string(EMBER_BINARY) + " " + args);
}

// The literal of `key` in the "test" object of a metrics JSON.
std::string TestField(const std::string& json, const std::string& key) {
  const std::regex pattern("\"test\":\\s*\\{[^}]*\"" + key + "\":\\s*([-0-9.eE+]+)");
  std::smatch match;
  return std::regex_search(json, match, pattern) ? match[1].str() : "missing";
}

std::string Contents(const std::string& path) {
  ember::Result<std::string> text = ember::ReadFile(path);
  return text.ok() ? *text : "unreadable: " + path;
}

class EmberServingCliTest : public ember::test::TempDirTest {
 protected:
  static constexpr char kSmallModel[] =
      "--bottom_mlp=32,16 --top_mlp=32 --embedding_dim=8 --batch_size=128";

  // Trains on train.tsv, evaluates on test.tsv, exports to `bundle` and
  // checkpoints to ckpt.
  void TrainAndExport() {
    ASSERT_EQ(0, Ember("gen-data --rows=3000 --seed=5 --vocabulary=300 --out=" +
                       Path("train.tsv")).exit_code);
    ASSERT_EQ(0, Ember("gen-data --rows=700 --seed=6 --vocabulary=300 --out=" +
                       Path("test.tsv")).exit_code);
    const CommandRun train =
        Ember("train --train_data=" + Path("train.tsv") + " --test_data=" + Path("test.tsv") +
              " " + kSmallModel + " --threads=2 --export_dir=" + Path("bundle") +
              " --checkpoint_dir=" + Path("ckpt") + " --metrics_out=" + Path("train.json"));
    ASSERT_EQ(0, train.exit_code) << train.output;
  }
};

TEST_F(EmberServingCliTest, EvalOfTheExportedBundleGivesTrainingsTestMetrics) {
  TrainAndExport();
  const CommandRun eval = Ember("eval --bundle=" + Path("bundle") + " --data=" +
                                Path("test.tsv") + " --threads=2 --metrics_out=" +
                                Path("eval.json"));
  ASSERT_EQ(0, eval.exit_code) << eval.output;
  EXPECT_NE(std::string::npos, eval.output.find("test:  AUC"));
  const std::string trained = Contents(Path("train.json")), evaluated = Contents(Path("eval.json"));
  for (const char* key : {"auc", "logloss", "calibration", "examples"}) {
    EXPECT_EQ(TestField(trained, key), TestField(evaluated, key)) << key;
  }
  EXPECT_EQ("700", TestField(evaluated, "examples"));
}

TEST_F(EmberServingCliTest, PredictWritesAScorePerLineWithOrWithoutLabels) {
  TrainAndExport();
  const CommandRun predict = Ember("predict --bundle=" + Path("bundle") + " --data=" +
                                   Path("test.tsv") + " --predictions_out=" + Path("p.txt"));
  ASSERT_EQ(0, predict.exit_code) << predict.output;
  const std::string scores = Contents(Path("p.txt"));
  EXPECT_EQ(700, std::count(scores.begin(), scores.end(), '\n'));
  // The same lines without their label column.
  {
    std::ifstream in(Path("test.tsv"));
    std::ofstream out(Path("unlabelled.tsv"));
    for (std::string line; std::getline(in, line);) out << line.substr(line.find('\t') + 1) << "\n";
  }
  const CommandRun unlabelled =
      Ember("predict --bundle=" + Path("bundle") + " --data=" + Path("unlabelled.tsv") +
            " --labelled=false --predictions_out=" + Path("u.txt"));
  ASSERT_EQ(0, unlabelled.exit_code) << unlabelled.output;
  EXPECT_EQ(scores, Contents(Path("u.txt")));
  // The bundle `ember export` writes from the job's checkpoint scores alike.
  const CommandRun exported = Ember("export --checkpoint_dir=" + Path("ckpt") + " --bundle=" +
                                    Path("exported"));
  ASSERT_EQ(0, exported.exit_code) << exported.output;
  ASSERT_EQ(0, Ember("predict --bundle=" + Path("exported") + " --data=" + Path("test.tsv") +
                     " --predictions_out=" + Path("e.txt")).exit_code);
  EXPECT_EQ(scores, Contents(Path("e.txt")));
}

// `ember export --delta_base` writes what changed since a bundle; scoring
// the base with the delta applied gives the full bundle's scores, and a
// delta of another base is refused naming it.
TEST_F(EmberServingCliTest, ADeltaExportAppliedToItsBaseScoresAsTheFullExport) {
  TrainAndExport();
  ASSERT_EQ(0, Ember("export --checkpoint_dir=" + Path("ckpt") + " --bundle=" + Path("base"))
                   .exit_code);
  // The same model trained further on other examples (a job of its own).
  ASSERT_EQ(0, Ember("gen-data --rows=1500 --seed=7 --vocabulary=300 --out=" +
                     Path("more.tsv")).exit_code);
  const CommandRun train = Ember("train --train_data=" + Path("more.tsv") + " " + kSmallModel +
                                 " --threads=2 --checkpoint_dir=" + Path("ckpt2"));
  ASSERT_EQ(0, train.exit_code) << train.output;
  const CommandRun delta = Ember("export --checkpoint_dir=" + Path("ckpt2") + " --bundle=" +
                                 Path("delta") + " --delta_base=" + Path("base"));
  ASSERT_EQ(0, delta.exit_code) << delta.output;
  EXPECT_NE(std::string::npos, delta.output.find("rows changed")) << delta.output;
  ASSERT_EQ(0, Ember("export --checkpoint_dir=" + Path("ckpt2") + " --bundle=" + Path("full"))
                   .exit_code);
  const std::string predict = "predict --data=" + Path("test.tsv") + " --predictions_out=";
  ASSERT_EQ(0, Ember(predict + Path("full.txt") + " --bundle=" + Path("full")).exit_code);
  const CommandRun applied = Ember(predict + Path("applied.txt") + " --bundle=" + Path("base") +
                                   " --apply_deltas=" + Path("delta"));
  ASSERT_EQ(0, applied.exit_code) << applied.output;
  EXPECT_EQ(Contents(Path("full.txt")), Contents(Path("applied.txt")));
  ASSERT_EQ(0, Ember(predict + Path("base.txt") + " --bundle=" + Path("base")).exit_code);
  EXPECT_NE(Contents(Path("base.txt")), Contents(Path("applied.txt")));
  // A delta applied to a bundle it was not made against.
  const CommandRun wrong = Ember(predict + Path("w.txt") + " --bundle=" + Path("full") +
                                 " --apply_deltas=" + Path("delta"));
  EXPECT_NE(0, wrong.exit_code);
  EXPECT_NE(std::string::npos, wrong.output.find("a delta of the bundle")) << wrong.output;
  EXPECT_NE(std::string::npos, wrong.output.find(Path("base"))) << wrong.output;
}

TEST_F(EmberServingCliTest, ExportNeedsOnlyTheCheckpointDirectory) {
  TrainAndExport();
  ASSERT_EQ(0, Ember("predict --bundle=" + Path("bundle") + " --data=" + Path("test.tsv") +
                     " --predictions_out=" + Path("p.txt")).exit_code);
  // The job records its examples' shape and input format beside its flags.
  EXPECT_TRUE(ember::FileExists(Path("ckpt/job.input")));
  ASSERT_EQ(0, std::remove(Path("train.tsv").c_str()));
  const CommandRun exported = Ember("export --checkpoint_dir=" + Path("ckpt") + " --bundle=" +
                                    Path("exported"));
  ASSERT_EQ(0, exported.exit_code) << exported.output;
  ASSERT_EQ(0, Ember("predict --bundle=" + Path("exported") + " --data=" + Path("test.tsv") +
                     " --predictions_out=" + Path("e.txt")).exit_code);
  EXPECT_EQ(Contents(Path("p.txt")), Contents(Path("e.txt")));
}

TEST_F(EmberServingCliTest, ExportReadsTheJobRecordAndNoFlags) {
  TrainAndExport();
  ASSERT_EQ(0, Ember("predict --bundle=" + Path("bundle") + " --data=" + Path("test.tsv") +
                     " --predictions_out=" + Path("p.txt")).exit_code);
  // The job's record is its options: with its flags and input records gone
  // (and its data), export still rebuilds the model.
  for (const char* gone : {"ckpt/job.flags", "ckpt/job.input", "train.tsv"}) {
    ASSERT_EQ(0, std::remove(Path(gone).c_str())) << gone;
  }
  const CommandRun exported = Ember("export --checkpoint_dir=" + Path("ckpt") + " --bundle=" +
                                    Path("exported"));
  ASSERT_EQ(0, exported.exit_code) << exported.output;
  ASSERT_EQ(0, Ember("predict --bundle=" + Path("exported") + " --data=" + Path("test.tsv") +
                     " --predictions_out=" + Path("e.txt")).exit_code);
  EXPECT_EQ(Contents(Path("p.txt")), Contents(Path("e.txt")));
  // A damaged record is refused naming the file and the field; nothing is
  // written.
  std::string record = Contents(Path("ckpt/job.json"));
  const size_t at = record.find("\"batch_size\"");
  ASSERT_NE(std::string::npos, at) << record;
  record.replace(at, std::string("\"batch_size\"").size(), "\"batch_sise\"");
  std::ofstream(Path("ckpt/job.json"), std::ios::trunc) << record;
  const CommandRun damaged = Ember("export --checkpoint_dir=" + Path("ckpt") + " --bundle=" +
                                   Path("exported2"));
  EXPECT_EQ(2, damaged.exit_code) << damaged.output;
  EXPECT_NE(std::string::npos, damaged.output.find("job.json")) << damaged.output;
  EXPECT_NE(std::string::npos, damaged.output.find("\"batch_size\" is missing")) << damaged.output;
  EXPECT_FALSE(ember::FileExists(Path("exported2")));
}

TEST_F(EmberServingCliTest, ExportOfAnOlderCheckpointWithoutItsDataSaysWhatIsMissing) {
  TrainAndExport();
  // A checkpoint of an Ember that recorded neither the job (job.json) nor
  // its input: export reads the training data for it, and says so when it is
  // gone.
  ASSERT_EQ(0, std::remove(Path("ckpt/job.json").c_str()));
  std::remove(Path("ckpt/job.input").c_str());
  const CommandRun with_data = Ember("export --checkpoint_dir=" + Path("ckpt") + " --bundle=" +
                                     Path("exported"));
  ASSERT_EQ(0, with_data.exit_code) << with_data.output;
  ASSERT_EQ(0, std::remove(Path("train.tsv").c_str()));
  const CommandRun without = Ember("export --checkpoint_dir=" + Path("ckpt") + " --bundle=" +
                                   Path("exported2"));
  EXPECT_EQ(2, without.exit_code) << without.output;
  EXPECT_NE(std::string::npos, without.output.find("job.input")) << without.output;
  EXPECT_NE(std::string::npos, without.output.find("--train_data")) << without.output;
  EXPECT_FALSE(ember::FileExists(Path("exported2")));
}

TEST_F(EmberServingCliTest, TheCExampleScoresAsPredictDoes) {
  TrainAndExport();
  ASSERT_EQ(0, Ember("predict --bundle=" + Path("bundle") + " --data=" + Path("test.tsv") +
                     " --threads=1 --predictions_out=" + Path("p.txt")).exit_code);
  const CommandRun example = RunCommand(std::string(EMBER_SERVING_EXAMPLE) + " " +
                                        Path("bundle") + " " + Path("test.tsv") + " >" +
                                        Path("c.txt"));
  ASSERT_EQ(0, example.exit_code) << example.output;
  EXPECT_EQ(Contents(Path("p.txt")), Contents(Path("c.txt")));
}

TEST_F(EmberServingCliTest, ADamagedBundleIsRefusedNamingTheFile) {
  TrainAndExport();
  {
    std::fstream dense(Path("bundle/dense.bin"), std::ios::in | std::ios::out | std::ios::binary);
    dense.seekp(4);
    dense.write("\x55\xaa", 2);
  }
  const CommandRun predict = Ember("predict --bundle=" + Path("bundle") + " --data=" +
                                   Path("test.tsv") + " --predictions_out=" + Path("p.txt"));
  EXPECT_EQ(2, predict.exit_code) << predict.output;
  EXPECT_NE(std::string::npos, predict.output.find(Path("bundle/dense.bin"))) << predict.output;
  EXPECT_FALSE(ember::FileExists(Path("p.txt")));
  const CommandRun missing = Ember("export --checkpoint_dir=" + Path("nothing") + " --bundle=" +
                                   Path("b2"));
  EXPECT_EQ(2, missing.exit_code) << missing.output;
  EXPECT_NE(std::string::npos, missing.output.find("job.flags")) << missing.output;
}

}  // namespace
