// Runs the `ember` binary as a user would and checks exit codes, messages
// and outputs.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "core/file.h"
#include "tests/testing/temp_dir.h"

namespace {

struct CommandRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together.
};

// Runs `ember args` (behind `prefix`, e.g. "env -u X") with stderr merged.
CommandRun Ember(const std::string& args, const std::string& prefix = "") {
  const std::string command = prefix + " " + std::string(EMBER_BINARY) + " " + args + " 2>&1";
  CommandRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

double JsonNumber(const std::string& json, const std::string& object, const std::string& key) {
  const std::regex pattern("\"" + object + "\":\\s*\\{[^}]*\"" + key + "\":\\s*([-0-9.eE+]+)");
  std::smatch match;
  if (!std::regex_search(json, match, pattern)) return -1;
  return std::stod(match[1]);
}

class EmberCliTest : public ember::test::TempDirTest {
 protected:

  static constexpr char kSmallModel[] =
      "--bottom_mlp=32,16 --top_mlp=32 --threads=1 --batch_size=128";
};

TEST_F(EmberCliTest, GenDataThenTrainWritesMetricsJson) {
  CommandRun gen = Ember("gen-data --out=" + Path("d.tsv") + " --rows=4000 --seed=5");
  ASSERT_EQ(0, gen.exit_code) << gen.output;
  EXPECT_NE(std::string::npos, gen.output.find("planted Bayes AUC"));
  auto meta = ember::ReadFile(Path("d.tsv.meta.json"));
  ASSERT_TRUE(meta.ok());
  EXPECT_NE(std::string::npos, meta->find("\"bayes_auc\""));

  CommandRun train = Ember("train --train_data=" + Path("d.tsv") + " " + kSmallModel +
                    " --metrics_out=" + Path("m.json") + " --trace_file=" + Path("t.json"));
  ASSERT_EQ(0, train.exit_code) << train.output;
  EXPECT_NE(std::string::npos, train.output.find("test:  AUC"));
  EXPECT_NE(std::string::npos, train.output.find("ceiling AUC"));
  EXPECT_NE(std::string::npos, train.output.find("effective configuration"));
  auto metrics = ember::ReadFile(Path("m.json"));
  ASSERT_TRUE(metrics.ok());
  EXPECT_GT(JsonNumber(*metrics, "test", "auc"), 0.5);
  EXPECT_GT(JsonNumber(*metrics, "test", "logloss"), 0.0);
  EXPECT_EQ(800, JsonNumber(*metrics, "test", "examples"));
  EXPECT_EQ(3200, JsonNumber(*metrics, "train", "examples"));
  EXPECT_EQ(25, JsonNumber(*metrics, "train", "steps"));
  EXPECT_GT(JsonNumber(*metrics, "train", "samples_per_sec"), 0.0);
  auto trace = ember::ReadFile(Path("t.json"));
  ASSERT_TRUE(trace.ok());
  EXPECT_NE(std::string::npos, trace->find("\"name\":\"pull\""));
}

TEST_F(EmberCliTest, IdleOpenMpThreadsArePassiveUnlessTheUserSaysOtherwise) {
  const std::string gen = "gen-data --rows=10 --out=" + Path("d.tsv");
  CommandRun unset = Ember(gen, "env -u OMP_WAIT_POLICY");
  ASSERT_EQ(0, unset.exit_code) << unset.output;
  EXPECT_NE(std::string::npos, unset.output.find("OMP_WAIT_POLICY=passive")) << unset.output;
  CommandRun user = Ember(gen, "env OMP_WAIT_POLICY=active");
  ASSERT_EQ(0, user.exit_code) << user.output;
  EXPECT_NE(std::string::npos, user.output.find("OMP_WAIT_POLICY=active")) << user.output;
}

// The disk tier changes where rows live, never what training computes.
TEST_F(EmberCliTest, TrainingWithADiskTierGivesTheSameModelAsInMemory) {
  ASSERT_EQ(0, Ember("gen-data --rows=6000 --out=" + Path("d.tsv")).exit_code);
  const std::string common = "train --train_data=" + Path("d.tsv") + " " + kSmallModel;
  CommandRun memory = Ember(common + " --metrics_out=" + Path("memory.json"));
  ASSERT_EQ(0, memory.exit_code) << memory.output;
  CommandRun tiered = Ember(common + " --metrics_out=" + Path("tiered.json") +
                            " --embedding_memory_budget=256KB --embedding_dir=" + Path("tier"));
  ASSERT_EQ(0, tiered.exit_code) << tiered.output;
  auto a = ember::ReadFile(Path("memory.json")), b = ember::ReadFile(Path("tiered.json"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(JsonNumber(*a, "test", "auc"), JsonNumber(*b, "test", "auc"));
  EXPECT_EQ(JsonNumber(*a, "test", "logloss"), JsonNumber(*b, "test", "logloss"));
  EXPECT_EQ(0, JsonNumber(*a, "embedding", "disk_writes"));
  EXPECT_GT(JsonNumber(*b, "embedding", "disk_writes"), 0);
  EXPECT_LE(JsonNumber(*b, "embedding", "memory_bytes"), 256 * 1024);
}

TEST_F(EmberCliTest, FlagfileCarriesTheConfiguration) {
  ASSERT_EQ(0, Ember("gen-data --out=" + Path("d.tsv") + " --rows=2000").exit_code);
  std::ofstream(Path("job.flags")) << "--train_data=" << Path("d.tsv") << "\n--max_steps=2\n"
                                   << "--bottom_mlp=16\n--top_mlp=8\n--batch_size=64\n"
                                   << "--metrics_out=" << Path("m.json") << "\n";
  CommandRun train = Ember("train --flagfile=" + Path("job.flags"));
  ASSERT_EQ(0, train.exit_code) << train.output;
  auto metrics = ember::ReadFile(Path("m.json"));
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(2, JsonNumber(*metrics, "train", "steps"));
}

TEST_F(EmberCliTest, MissingTrainingFileExitsTwoNamingIt) {
  CommandRun run = Ember("train --train_data=" + Path("nope.tsv"));
  EXPECT_EQ(2, run.exit_code) << run.output;
  EXPECT_NE(std::string::npos, run.output.find("nope.tsv")) << run.output;
}

TEST_F(EmberCliTest, MalformedLineWithBadLinesFailExitsTwoNamingFileAndLine) {
  std::ofstream(Path("bad.tsv")) << "1\t2\n";
  CommandRun run = Ember("train --train_data=" + Path("bad.tsv") + " --bad_lines=fail");
  EXPECT_EQ(2, run.exit_code) << run.output;
  EXPECT_NE(std::string::npos, run.output.find("bad.tsv:1")) << run.output;
}

TEST_F(EmberCliTest, UnknownFlagValuesExitTwoNamingTheFlag) {
  for (const std::string& flag :
       {"--model=resnet", "--sparse_optimizer=adamw2", "--dense_optimizer=lion",
        "--bottom_mlp=64,x", "--bad_lines=maybe", "--top_mlp=0",
        "--admission=sometimes",
        "--embedding_memory_budget=lots"}) {
    CommandRun run = Ember("train --rows=500 " + flag);
    EXPECT_EQ(2, run.exit_code) << flag << ": " << run.output;
    const std::string name = flag.substr(2, flag.find('=') - 2);
    EXPECT_NE(std::string::npos, run.output.find(name)) << flag << ": " << run.output;
  }
}

TEST_F(EmberCliTest, UnwritableMetricsPathFailsBeforeTraining) {
  CommandRun run = Ember("train --rows=500 --metrics_out=" + Path("missing_dir/m.json"));
  EXPECT_EQ(2, run.exit_code) << run.output;
  EXPECT_NE(std::string::npos, run.output.find("--metrics_out")) << run.output;
  EXPECT_EQ(std::string::npos, run.output.find("train steps")) << "no training should start";
}

TEST_F(EmberCliTest, BadCommandLineExitsOne) {
  EXPECT_EQ(1, Ember("frobnicate").exit_code);
  EXPECT_EQ(1, Ember("train --no_such_flag=3").exit_code);
  EXPECT_EQ(1, Ember("train --batch_size=0").exit_code);
  EXPECT_EQ(1, Ember("train --ftrl_l1=-1").exit_code);
  EXPECT_EQ(1, Ember("").exit_code);
}

TEST_F(EmberCliTest, TrainHelpListsEmberFlagsWithDefaultsAndExitsZero) {
  CommandRun run = Ember("train --help");
  EXPECT_EQ(0, run.exit_code);
  EXPECT_NE(std::string::npos, run.output.find("-batch_size")) << run.output;
  EXPECT_NE(std::string::npos, run.output.find("default: 256")) << run.output;
  EXPECT_EQ(std::string::npos, run.output.find("-logtostderr")) << "glog's flags are noise here";
}

TEST_F(EmberCliTest, HelpListsCommandsAndExitsZero) {
  CommandRun run = Ember("--help");
  EXPECT_EQ(0, run.exit_code);
  EXPECT_NE(std::string::npos, run.output.find("gen-data"));
}

}  // namespace
