// `ember train` as a user meets it on small real jobs: the plan of a small
// file, errors found before the first step, a finished job run again, and
// evaluations during training with their history and curves.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/file.h"
#include "tests/testing/command_run.h"
#include "tests/testing/temp_dir.h"

namespace {

using ember::test::CommandRun;
using ember::test::RunCommand;

// Runs `ember args` (behind `prefix`, e.g. "env X=1") with stderr merged.
CommandRun Ember(const std::string& args, const std::string& prefix = "") {
  return RunCommand(prefix + " " + std::string(EMBER_BINARY) + " " + args);
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The text of "model hash: X" in a run's output; empty when absent.
std::string ModelHash(const std::string& output) {
  std::smatch match;
  if (!std::regex_search(output, match, std::regex("model hash: ([0-9a-f]+)"))) return "";
  return match[1];
}

// The steps of train.history in a metrics JSON, in order.
std::vector<int> HistorySteps(const std::string& json) {
  std::vector<int> steps;
  const size_t begin = json.find("\"history\"");
  if (begin == std::string::npos) return steps;
  const std::string history = json.substr(begin, json.find(']', begin) - begin);
  const std::regex step("\"step\":\\s*([0-9]+)");
  for (auto it = std::sregex_iterator(history.begin(), history.end(), step);
       it != std::sregex_iterator(); ++it) {
    steps.push_back(std::stoi((*it)[1]));
  }
  return steps;
}

class EmberCliTrainChecksTest : public ember::test::TempDirTest {
 protected:
  static constexpr char kSmallModel[] =
      "--bottom_mlp=32,16 --top_mlp=32 --threads=1 --batch_size=128";

  // Generated Criteo text of `rows` examples at `name`.
  std::string Generate(const std::string& name, int rows) {
    const std::string path = Path(name);
    CommandRun gen = Ember("gen-data --rows=" + std::to_string(rows) + " --out=" + path);
    EXPECT_EQ(0, gen.exit_code) << gen.output;
    return path;
  }
};

// A 6,400-line file trained for 10 epochs makes a table of its distinct
// keys, a few MiB: the plan keeps it in memory and says where its size came
// from (it used to cost --rows x --epochs examples' ids, 39 GiB, and plan a
// disk tier).
TEST_F(EmberCliTrainChecksTest,
       PlanOfASmallFileWithManyEpochsHasNoDiskTierAndSaysItSizedFromTheData) {
  const std::string data = Generate("d.tsv", 6400);
  CommandRun plan = Ember("plan --train_data=" + data + " --epochs=10 " + kSmallModel,
                          "env XDG_CACHE_HOME=" + Path("cache"));
  ASSERT_EQ(0, plan.exit_code) << plan.output;
  EXPECT_TRUE(Has(plan.output, "table sized from --train_data's distinct keys")) << plan.output;
  EXPECT_TRUE(Has(plan.output, "epochs add none")) << plan.output;
  EXPECT_TRUE(Has(plan.output, "embedding memory tier: the whole table")) << plan.output;
  EXPECT_FALSE(Has(plan.output, "rows beyond it on disk")) << plan.output;
}

// Streamed test data is read only to evaluate: a test file without labels,
// or not in the format, fails before the first step (no checkpoint written),
// naming --test_data.
TEST_F(EmberCliTrainChecksTest, BadTestDataFailsBeforeTheFirstStepNamingTheFlag) {
  const std::string train = Generate("d.tsv", 2000);
  // The same examples without their label column.
  std::ifstream in(train);
  std::ofstream unlabelled(Path("unlabelled.tsv"));
  for (std::string line; std::getline(in, line);) {
    unlabelled << line.substr(line.find('\t') + 1) << "\n";
  }
  unlabelled.close();
  std::ofstream(Path("garbage.tsv")) << "this is not\ta criteo file\n"
                                     << "nor is this\n";
  for (const std::string test : {"unlabelled.tsv", "garbage.tsv"}) {
    SCOPED_TRACE(test);
    const std::string checkpoints = Path("ck_" + test);
    CommandRun run = Ember("train --train_data=" + train + " --test_data=" + Path(test) + " " +
                           kSmallModel + " --plan=off --checkpoint_dir=" + checkpoints +
                           " --checkpoint_every_steps=1");
    EXPECT_EQ(2, run.exit_code) << run.output;
    EXPECT_TRUE(Has(run.output, "--test_data")) << run.output;
    EXPECT_TRUE(Has(run.output, test)) << run.output;
    EXPECT_FALSE(Has(run.output, "train steps")) << "no training should start\n" << run.output;
    EXPECT_FALSE(std::filesystem::exists(checkpoints + "/checkpoint-1")) << run.output;
    std::error_code ec;
    EXPECT_TRUE(!std::filesystem::exists(checkpoints, ec) ||
                std::filesystem::is_empty(checkpoints, ec))
        << "no checkpoint should be written";
  }
}

// An output the atomic writer cannot create (here: its temporary name is
// longer than a file name may be) fails before training, naming the flag,
// not the temporary file.
TEST_F(EmberCliTrainChecksTest, UnwritableOutputsFailBeforeTheFirstStepNamingTheFlag) {
  const std::string long_name = Path(std::string(250, 'm') + ".json");
  for (const std::string flag : {"--metrics_out", "--trace_file", "--plot_out"}) {
    SCOPED_TRACE(flag);
    const std::string path = flag == "--plot_out" ? long_name.substr(0, long_name.size() - 5) +
                                                        ".svg"
                                                  : long_name;
    CommandRun run = Ember("train --rows=2000 --plan=off " + std::string(kSmallModel) + " " +
                           flag + "=" + path);
    EXPECT_EQ(2, run.exit_code) << run.output;
    EXPECT_TRUE(Has(run.output, flag + "=")) << run.output;
    EXPECT_FALSE(Has(run.output, ".tmp.")) << run.output;
    EXPECT_FALSE(Has(run.output, "train steps")) << "no training should start\n" << run.output;
  }
  CommandRun png = Ember("train --rows=2000 --plan=off --plot_out=" + Path("curves.png"));
  EXPECT_EQ(2, png.exit_code) << png.output;
  EXPECT_TRUE(Has(png.output, "--plot_out")) << png.output;
  EXPECT_FALSE(Has(png.output, "train steps")) << png.output;
}

// The same job run again on its finished checkpoint says it is finished and
// leaves its metrics and trace as they were; more epochs resume it.
TEST_F(EmberCliTrainChecksTest, RerunningAFinishedJobKeepsItsOutputsAndSaysFinished) {
  const std::string job = "train --rows=2000 --plan=off " + std::string(kSmallModel) +
                          " --checkpoint_dir=" + Path("ck") + " --metrics_out=" +
                          Path("m.json") + " --trace_file=" + Path("t.json");
  CommandRun first = Ember(job);
  ASSERT_EQ(0, first.exit_code) << first.output;
  auto metrics = ember::ReadFile(Path("m.json"));
  auto trace = ember::ReadFile(Path("t.json"));
  ASSERT_TRUE(metrics.ok() && trace.ok());

  CommandRun again = Ember(job);
  ASSERT_EQ(0, again.exit_code) << again.output;
  EXPECT_TRUE(Has(again.output, "had finished training at step 13")) << again.output;
  EXPECT_TRUE(Has(again.output, "outputs are left as they were")) << again.output;
  EXPECT_EQ(*metrics, *ember::ReadFile(Path("m.json")));
  EXPECT_EQ(*trace, *ember::ReadFile(Path("t.json")));

  CommandRun more = Ember(job + " --epochs=2");
  ASSERT_EQ(0, more.exit_code) << more.output;
  EXPECT_TRUE(Has(more.output, "resumed from the checkpoint of step 13")) << more.output;
  auto resumed = ember::ReadFile(Path("m.json"));
  ASSERT_TRUE(resumed.ok());
  EXPECT_TRUE(Has(*resumed, "\"resumed_from_step\": 13")) << *resumed;
}

// A job stopped after its last checkpoint but before it wrote its metrics
// (a kill at the very end) is finished: running it again writes the metrics
// it never wrote, of the model in the checkpoint (the crash test reads the
// model hash from them).
TEST_F(EmberCliTrainChecksTest, RerunningAFinishedJobWritesTheMetricsItNeverWrote) {
  const std::string job = "train --rows=2000 --plan=off --model_hash " +
                          std::string(kSmallModel) + " --checkpoint_dir=" + Path("ck") +
                          " --metrics_out=" + Path("m.json");
  CommandRun first = Ember(job);
  ASSERT_EQ(0, first.exit_code) << first.output;
  const std::string hash = ModelHash(first.output);
  ASSERT_FALSE(hash.empty()) << first.output;
  std::filesystem::remove(Path("m.json"));

  CommandRun again = Ember(job);
  ASSERT_EQ(0, again.exit_code) << again.output;
  EXPECT_TRUE(Has(again.output, "does not hold the metrics")) << again.output;
  EXPECT_EQ(hash, ModelHash(again.output)) << again.output;
  auto metrics = ember::ReadFile(Path("m.json"));
  ASSERT_TRUE(metrics.ok()) << again.output;
  EXPECT_TRUE(Has(*metrics, hash)) << *metrics;

  // Metrics of a run that a signal stopped before the job's end (it wrote
  // them, then a later run finished the job and was killed before writing
  // its own) are not the job's: written again too.
  std::string stopped = *metrics;
  const size_t at = stopped.find("\"interrupted\": false");
  ASSERT_NE(std::string::npos, at) << stopped;
  stopped.replace(at, std::string("\"interrupted\": false").size(), "\"interrupted\": true");
  ASSERT_TRUE(ember::WriteFileAtomic(Path("m.json"), stopped).ok());
  CommandRun third = Ember(job);
  ASSERT_EQ(0, third.exit_code) << third.output;
  EXPECT_TRUE(Has(third.output, "does not hold the metrics")) << third.output;
  auto rewritten = ember::ReadFile(Path("m.json"));
  ASSERT_TRUE(rewritten.ok());
  EXPECT_TRUE(Has(*rewritten, "\"interrupted\": false")) << *rewritten;
  EXPECT_TRUE(Has(*rewritten, hash)) << *rewritten;
}

// --eval_every_steps and --eval_every_epoch evaluate between steps: the
// history of the metrics JSON has a point at each, and at the end; the
// model is the one trained without them, pipelined (max staleness 0) or
// not; --plot_out draws the curves.
TEST_F(EmberCliTrainChecksTest, EvaluationsDuringTrainingWriteAHistoryAndTrainTheSameModel) {
  // 4000 examples, 3200 trained, 25 steps per epoch.
  const std::string job = "train --rows=4000 --plan=off --epochs=2 --model_hash " +
                          std::string(kSmallModel);
  CommandRun plain = Ember(job + " --metrics_out=" + Path("plain.json"));
  ASSERT_EQ(0, plain.exit_code) << plain.output;
  const std::string hash = ModelHash(plain.output);
  ASSERT_FALSE(hash.empty()) << plain.output;
  auto plain_json = ember::ReadFile(Path("plain.json"));
  ASSERT_TRUE(plain_json.ok());
  EXPECT_FALSE(Has(*plain_json, "\"history\"")) << *plain_json;

  CommandRun evaluated = Ember(job + " --eval_every_steps=20 --metrics_out=" +
                               Path("eval.json") + " --plot_out=" + Path("curves.svg"));
  ASSERT_EQ(0, evaluated.exit_code) << evaluated.output;
  EXPECT_EQ(hash, ModelHash(evaluated.output)) << evaluated.output;
  EXPECT_TRUE(Has(evaluated.output, "evaluation after step 20")) << evaluated.output;
  auto eval_json = ember::ReadFile(Path("eval.json"));
  ASSERT_TRUE(eval_json.ok());
  EXPECT_EQ((std::vector<int>{20, 40, 50}), HistorySteps(*eval_json)) << *eval_json;
  for (const char* key : {"examples", "train_loss", "test_auc", "test_logloss",
                          "samples_per_sec"}) {
    EXPECT_TRUE(Has(*eval_json, std::string("\"") + key + "\"")) << key;
  }
  auto svg = ember::ReadFile(Path("curves.svg"));
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_EQ(0u, svg->find("<svg")) << *svg;
  EXPECT_TRUE(Has(*svg, "test AUC")) << *svg;
  EXPECT_TRUE(Has(*svg, "<polyline")) << *svg;

  CommandRun sequential = Ember(job + " --pipeline=off --eval_every_epoch --metrics_out=" +
                                Path("seq.json"));
  ASSERT_EQ(0, sequential.exit_code) << sequential.output;
  EXPECT_EQ(hash, ModelHash(sequential.output)) << sequential.output;
  auto seq_json = ember::ReadFile(Path("seq.json"));
  ASSERT_TRUE(seq_json.ok());
  EXPECT_EQ((std::vector<int>{25, 50}), HistorySteps(*seq_json)) << *seq_json;
}

}  // namespace

// --embedding_eviction picks which rows a budgeted table writes to disk
// first: it changes speed, never the model. An unknown policy is refused
// before any step, naming the flag.
TEST_F(EmberCliTrainChecksTest, EvictionPoliciesTrainTheSameModelAndAnUnknownOneIsRefused) {
  const std::string train = Generate("d.tsv", 3000);
  std::string hashes[2];
  const char* policies[] = {"lru", "lfu"};
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(policies[i]);
    CommandRun run = Ember("train --train_data=" + train + " " + kSmallModel +
                           " --plan=off --epochs=2 --model_hash --embedding_memory_budget=300KB"
                           " --embedding_dir=" + Path(std::string("rows_") + policies[i]) +
                           " --embedding_eviction=" + policies[i] +
                           " --metrics_out=" + Path(std::string(policies[i]) + ".json"));
    ASSERT_EQ(0, run.exit_code) << run.output;
    hashes[i] = ModelHash(run.output);
    ASSERT_FALSE(hashes[i].empty()) << run.output;
    // The budget is small enough that rows did go to disk and come back.
    ember::Result<std::string> metrics = ember::ReadFile(Path(std::string(policies[i]) + ".json"));
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    EXPECT_FALSE(Has(*metrics, "\"disk_reads\": 0,")) << *metrics;
  }
  EXPECT_EQ(hashes[0], hashes[1]);

  CommandRun bad = Ember("train --train_data=" + train + " " + kSmallModel +
                         " --plan=off --embedding_memory_budget=300KB --embedding_eviction=mru");
  EXPECT_EQ(2, bad.exit_code) << bad.output;
  EXPECT_TRUE(Has(bad.output, "--embedding_eviction=mru is not known; use lru or lfu"))
      << bad.output;
  EXPECT_FALSE(Has(bad.output, "train steps")) << bad.output;
}

// --embedding_weights=bf16 changes the model (its rounding), but not with
// the tier a row is in: a budgeted run spills and reloads bfloat16 rows and
// trains the same bits as the run in memory. An unknown storage is refused
// before any step, naming the flag.
TEST_F(EmberCliTrainChecksTest, BFloat16WeightsTrainTheSameModelInMemoryAndOnDisk) {
  const std::string train = Generate("d.tsv", 3000);
  const std::string base = "train --train_data=" + train + " " + kSmallModel +
                           " --plan=off --epochs=2 --model_hash";
  CommandRun f32 = Ember(base);
  CommandRun memory = Ember(base + " --embedding_weights=bf16");
  CommandRun budgeted = Ember(base + " --embedding_weights=bf16 --embedding_memory_budget=300KB" +
                              " --embedding_dir=" + Path("rows") +
                              " --metrics_out=" + Path("bf16.json"));
  for (const CommandRun* run : {&f32, &memory, &budgeted}) {
    ASSERT_EQ(0, run->exit_code) << run->output;
    ASSERT_FALSE(ModelHash(run->output).empty()) << run->output;
  }
  EXPECT_EQ(ModelHash(memory.output), ModelHash(budgeted.output));
  EXPECT_NE(ModelHash(f32.output), ModelHash(memory.output));
  ember::Result<std::string> metrics = ember::ReadFile(Path("bf16.json"));
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_FALSE(Has(*metrics, "\"disk_reads\": 0,")) << *metrics;

  CommandRun bad = Ember("train --train_data=" + train + " " + kSmallModel +
                         " --plan=off --embedding_weights=fp8");
  EXPECT_EQ(2, bad.exit_code) << bad.output;
  EXPECT_TRUE(Has(bad.output, "--embedding_weights")) << bad.output;
  EXPECT_TRUE(Has(bad.output, "weight storage \"fp8\" is not known; use f32 or bf16"))
      << bad.output;
  EXPECT_FALSE(Has(bad.output, "train steps")) << bad.output;
}
