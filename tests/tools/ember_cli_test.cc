// Runs the `ember` binary as a user would and checks exit codes, messages
// and outputs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "core/device.h"
#include "core/file.h"
#include "core/random.h"
#include "core/threads.h"
#include "io/columnar.h"
#include "io/format_spec.h"
#include "io/text_reader.h"
#include "tests/io/text_fixture.h"
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

// Starts `ember args` with its output in `log`; returns its pid.
pid_t StartEmber(const std::string& args, const std::string& log) {
  const std::string command = "exec " + std::string(EMBER_BINARY) + " " + args + " >" + log + " 2>&1";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Waits for `pid` and returns its exit code (128 + the signal that killed it).
int WaitForExit(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
  for (const std::string flag :
       {"--model=resnet", "--sparse_optimizer=adamw2", "--dense_optimizer=lion",
        "--bottom_mlp=64,x", "--bad_lines=maybe", "--top_mlp=0", "--admission=sometimes",
        "--stage_threads=1,x", "--dense_device=gpu", "--dense_precision=fp8",
        "--embedding_memory_budget=lots"}) {
    CommandRun run = Ember("train --rows=500 " + flag);
    EXPECT_EQ(2, run.exit_code) << flag << ": " << run.output;
    const std::string name = flag.substr(2, flag.find('=') - 2);
    EXPECT_NE(std::string::npos, run.output.find(name)) << flag << ": " << run.output;
  }
}

TEST_F(EmberCliTest, RoomForMoreEmbeddingRowsThanTheMachineHasExitsThreeNamingTheFlag) {
  CommandRun run = Ember("train --rows=500 --embedding_reserve_rows=1000000000000000");
  EXPECT_EQ(3, run.exit_code) << run.output;
  EXPECT_NE(std::string::npos, run.output.find("--embedding_reserve_rows")) << run.output;
  EXPECT_NE(std::string::npos, run.output.find("MiB are available")) << run.output;
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
  EXPECT_NE(std::string::npos, run.output.find("convert"));
}

// Expects the columnar file at `columnar` to hold exactly the batch that
// ReadTextFiles makes of `text_paths` in the format of `spec`.
void ExpectSameData(const ember::io::FormatSpec& spec, const std::vector<std::string>& text_paths,
                    const std::string& columnar) {
  auto format = ember::io::MakeTextFormat(spec);
  ASSERT_TRUE(format.ok()) << format.status();
  ember::io::TextReadOptions lenient;
  lenient.max_bad_ratio = 1.0;
  auto text = ember::io::ReadTextFiles(text_paths, **format, lenient);
  ASSERT_TRUE(text.ok()) << text.status();
  auto binary = ember::io::ReadColumnarDataset(columnar);
  ASSERT_TRUE(binary.ok()) << binary.status();
  ember::io::ExpectSameBatch(text->all(), binary->all());
}

TEST_F(EmberCliTest, ConvertWritesEveryTextFormatAsTheTextReaderReadsIt) {
  struct Case {
    const char* flags;
    ember::io::FormatSpec spec;
    const char* text;
  };
  std::vector<Case> cases;
  {
    Case c{"--format=csv --header --delimiter=semicolon "
           "--schema=y=label,z=label,n=dense,u=cat,tags=multi:sep=pipe --dense_transform=raw",
           {}, "u;y;tags;n;z\nu1;1;a|b;3;0\nu2;0;;x;1\n;1;c;2.5;1\n"};
    c.spec.name = "csv";
    c.spec.schema = "y=label,z=label,n=dense,u=cat,tags=multi:sep=pipe";
    c.spec.header = true;
    c.spec.delimiter = "semicolon";
    c.spec.dense_defaults.transform = ember::io::DenseTransform::kRaw;
    cases.push_back(c);
  }
  {
    Case c{"--format=libsvm --field_starts=0,10 --slot_bits=12", {},
           "1 3:1 12:1\n-1 5:1\nbad 1:1\n0 11:1 11:1\n"};
    c.spec.name = "libsvm";
    c.spec.field_starts = "0,10";
    c.spec.slot_bits = 12;
    cases.push_back(c);
  }
  {
    Case c{"--format=libffm --num_fields=2 --require_binary_values", {},
           "1 0:4:1 1:9:1\n0 1:3:1\n1 0:1:2\n"};
    c.spec.name = "libffm";
    c.spec.num_fields = 2;
    c.spec.require_binary_values = true;
    cases.push_back(c);
  }
  {
    Case c{"--format=slot --slots=1-3 --dense_slots=d:2 --label_slots=0 --feasign_first "
           "--ignore_unknown_slots",
           {}, "1:0 7:1 8:2 9:2 0.5:d\n0:0 5:3 4:9\n"};
    c.spec.name = "slot";
    c.spec.slots = "1-3";
    c.spec.dense_slots = "d:2";
    c.spec.label_slots = "0";
    c.spec.feasign_first = true;
    c.spec.ignore_unknown_slots = true;
    cases.push_back(c);
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.flags);
    const std::string input = Path("in" + std::to_string(i) + ".txt");
    const std::string output = Path("out" + std::to_string(i) + ".col");
    std::ofstream(input) << c.text;
    CommandRun run = Ember("convert --input=" + input + " --output=" + output + " " + c.flags +
                           " --max_bad_ratio=1");
    ASSERT_EQ(0, run.exit_code) << run.output;
    EXPECT_NE(std::string::npos, run.output.find("converted 1 " + c.spec.name)) << run.output;
    EXPECT_NE(std::string::npos, run.output.find("bad lines: ")) << run.output;
    ExpectSameData(c.spec, {input}, output);
  }
}

TEST_F(EmberCliTest, ConvertedColumnarDataTrainsTheSameModelAsItsText) {
  ASSERT_EQ(0, Ember("gen-data --rows=3000 --out=" + Path("a.tsv")).exit_code);
  ASSERT_EQ(0, Ember("gen-data --rows=1000 --seed=2 --out=" + Path("b.tsv")).exit_code);
  CommandRun convert = Ember("convert --input=" + Path("*.tsv") + " --output=" +
                             Path("ab.ember") + " --rows_per_group=700");
  ASSERT_EQ(0, convert.exit_code) << convert.output;
  EXPECT_NE(std::string::npos, convert.output.find("4000 rows in 6 row groups")) << convert.output;
  EXPECT_NE(std::string::npos, convert.output.find("bad lines: 0 of 4000 lines bad"))
      << convert.output;
  EXPECT_NE(std::string::npos, convert.output.find("convert input bytes")) << "progress";
  ExpectSameData(ember::io::FormatSpec(), {Path("a.tsv"), Path("b.tsv")}, Path("ab.ember"));

  const std::string common = std::string(kSmallModel) + " --max_steps=10";
  CommandRun text = Ember("train --train_data=" + Path("a.tsv") + "," + Path("b.tsv") + " " +
                          common + " --metrics_out=" + Path("text.json"));
  ASSERT_EQ(0, text.exit_code) << text.output;
  EXPECT_NE(std::string::npos, text.output.find("input: train data criteo, 0 of 4000 lines bad"))
      << text.output;
  CommandRun binary = Ember("train --train_data=" + Path("ab.ember") + " " + common +
                            " --metrics_out=" + Path("binary.json"));
  ASSERT_EQ(0, binary.exit_code) << binary.output;
  EXPECT_NE(std::string::npos, binary.output.find("input: train data columnar")) << binary.output;
  auto a = ember::ReadFile(Path("text.json")), b = ember::ReadFile(Path("binary.json"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(JsonNumber(*a, "test", "auc"), JsonNumber(*b, "test", "auc"));
  EXPECT_EQ(JsonNumber(*a, "test", "logloss"), JsonNumber(*b, "test", "logloss"));
}

TEST_F(EmberCliTest, CriteoSampleConvertsAndTrainsFromColumnar) {
  const std::string sample = std::string(EMBER_SHARED_DATA_DIR) + "/criteo/criteo_kaggle_8k.tsv";
  if (!ember::FileExists(sample)) GTEST_SKIP() << "no shared data at " << sample;
  CommandRun convert = Ember("convert --format=criteo --input=" + sample + " --output=" +
                             Path("k.col"));
  ASSERT_EQ(0, convert.exit_code) << convert.output;
  EXPECT_NE(std::string::npos, convert.output.find("converted 1 criteo file(s)")) << convert.output;
  ExpectSameData(ember::io::FormatSpec(), {sample}, Path("k.col"));
  CommandRun train = Ember("train --train_data=" + Path("k.col") + " " + kSmallModel +
                           " --max_steps=5 --metrics_out=" + Path("m.json"));
  ASSERT_EQ(0, train.exit_code) << train.output;
  auto metrics = ember::ReadFile(Path("m.json"));
  ASSERT_TRUE(metrics.ok());
  EXPECT_GT(JsonNumber(*metrics, "test", "examples"), 1000);
}

TEST_F(EmberCliTest, TrainReadsTextFormatsAndReportsBadLinesByReason) {
  std::ofstream(Path("d.slot")) << "1 u:1 i:4 d:0.5\n0 u:2 i:5 d:1\n1 u:3 i:4 d:2\nx u:4\n"
                                << "0 u:1 i:6 d:0\n1 u:2 shop:4\n0 u:3 i:7 i:8\n1 u:4 d:3\n"
                                << "0 u:1 i:4\n1 u:2 i:5 d:1.5\n";
  CommandRun run = Ember("train --train_data=" + Path("d.slot") +
                         " --format=slot --slots=u,i --dense_slots=d --max_bad_ratio=0.5 " +
                         kSmallModel + " --metrics_out=" + Path("m.json"));
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_NE(std::string::npos,
            run.output.find("input: train data slot, 2 of 10 lines bad (bad label: 1, "
                            "unknown slot: 1)"))
      << run.output;
  auto metrics = ember::ReadFile(Path("m.json"));
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(2, JsonNumber(*metrics, "train", "bad_lines"));
}

// libSVM input has no dense features: DLRM then runs without a bottom MLP.
TEST_F(EmberCliTest, LibsvmDataWithoutDenseFeaturesTrainsDlrm) {
  {
    std::ofstream out(Path("d.svm"));
    ember::RandomStream random(4);
    for (int i = 0; i < 3000; ++i) {
      const int user = static_cast<int>(random.NextBelow(20)) + 1;
      const int item = static_cast<int>(random.NextBelow(20)) + 101;
      // A click when user and item parities agree (with noise): an interaction.
      const bool click = random.Bernoulli((user + item) % 2 == 0 ? 0.9 : 0.1);
      out << (click ? "1" : "-1") << " " << user << ":1 " << item << ":1\n";
    }
  }
  CommandRun run = Ember("train --train_data=" + Path("d.svm") +
                         " --format=libsvm --field_starts=1,101 --epochs=3 --batch_size=64 "
                         "--bottom_mlp=16 --top_mlp=32 --threads=1 --metrics_out=" +
                         Path("m.json"));
  ASSERT_EQ(0, run.exit_code) << run.output;
  auto metrics = ember::ReadFile(Path("m.json"));
  ASSERT_TRUE(metrics.ok());
  EXPECT_GT(JsonNumber(*metrics, "test", "auc"), 0.8) << run.output;
}

// --reader=stream yields the batches --reader=memory makes when nothing is
// shuffled, so both train the same model; shuffled and sharded streams run
// and report what they read.
TEST_F(EmberCliTest, StreamedTrainingMatchesInMemoryAndReportsTheStream) {
  ASSERT_EQ(0, Ember("gen-data --rows=3000 --out=" + Path("a.tsv")).exit_code);
  ASSERT_EQ(0, Ember("gen-data --rows=1000 --seed=2 --out=" + Path("b.tsv")).exit_code);
  const std::string common = "train --train_data=" + Path("a.tsv") + " --test_data=" +
                             Path("b.tsv") + " " + kSmallModel;
  CommandRun memory = Ember(common + " --reader=memory --shuffle=false --metrics_out=" +
                            Path("memory.json"));
  ASSERT_EQ(0, memory.exit_code) << memory.output;
  CommandRun stream = Ember(common + " --reader=stream --shuffle=false --metrics_out=" +
                            Path("stream.json"));
  ASSERT_EQ(0, stream.exit_code) << stream.output;
  EXPECT_NE(std::string::npos, stream.output.find("streamed 3000 examples in 24 batches"))
      << stream.output;
  auto a = ember::ReadFile(Path("memory.json")), b = ember::ReadFile(Path("stream.json"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(JsonNumber(*a, "test", "auc"), JsonNumber(*b, "test", "auc"));
  EXPECT_EQ(JsonNumber(*a, "test", "logloss"), JsonNumber(*b, "test", "logloss"));
  EXPECT_EQ(1000, JsonNumber(*b, "test", "examples"));

  // auto streams when --test_data is given; shuffled by default.
  CommandRun shuffled = Ember(common + " --epochs=2 --shuffle_buffer=500");
  ASSERT_EQ(0, shuffled.exit_code) << shuffled.output;
  EXPECT_NE(std::string::npos, shuffled.output.find("streamed 6000 examples")) << shuffled.output;

  // Shard 1 of 2 reads part of the data, as many batches as shard 0.
  std::vector<double> steps;
  for (int shard = 0; shard < 2; ++shard) {
    const std::string json = Path("shard" + std::to_string(shard) + ".json");
    CommandRun run = Ember(common + " --num_shards=2 --shard_index=" + std::to_string(shard) +
                           " --metrics_out=" + json);
    ASSERT_EQ(0, run.exit_code) << run.output;
    auto metrics = ember::ReadFile(json);
    ASSERT_TRUE(metrics.ok());
    const double examples = JsonNumber(*metrics, "train", "examples");
    EXPECT_GT(examples, 1000) << run.output;
    EXPECT_LE(examples, 1500) << run.output;
    steps.push_back(JsonNumber(*metrics, "train", "steps"));
  }
  EXPECT_EQ(steps[0], steps[1]);

  const std::pair<std::string, std::string> errors[] = {
      {"--train_data=" + Path("a.tsv") + " --reader=stream", "--reader=stream needs --test_data"},
      {"--train_data=" + Path("a.tsv") + " --reader=disk", "--reader=disk"},
      {"--train_data=" + Path("a.tsv") + " --test_data=" + Path("b.tsv") +
           " --num_shards=2 --shard_index=2", "--shard_index"},
      {"--train_data=" + Path("a.tsv") + " --num_shards=2", "--num_shards"},
  };
  for (const auto& [flags, name] : errors) {
    CommandRun run = Ember("train " + flags + " " + kSmallModel);
    EXPECT_EQ(2, run.exit_code) << flags << ": " << run.output;
    EXPECT_NE(std::string::npos, run.output.find(name)) << flags << ": " << run.output;
  }
}

TEST_F(EmberCliTest, MultiLabelDataTrainsMmoeAndOtherModelsExitTwoNamingIt) {
  std::ofstream(Path("d.csv")) << "1,0,a\n0,1,b\n1,1,c\n0,0,d\n1,0,e\n";
  const std::string flags =
      "train --train_data=" + Path("d.csv") + " --format=csv --schema=label,label,cat ";
  CommandRun run = Ember(flags + kSmallModel);
  EXPECT_EQ(2, run.exit_code) << run.output;
  EXPECT_NE(std::string::npos, run.output.find("2 labels per example")) << run.output;
  EXPECT_NE(std::string::npos, run.output.find("use --model=mmoe")) << run.output;
  run = Ember(flags + "--model=mmoe --num_experts=2 --expert_mlp=4 --top_mlp=4 " +
              "--metrics_out=" + Path("m.json"));
  EXPECT_EQ(0, run.exit_code) << run.output;
  EXPECT_NE(std::string::npos, run.output.find("task 1: AUC")) << run.output;
  EXPECT_NE(std::string::npos, ember::ReadFile(Path("m.json"))->find("\"task_auc\": [")) << run.output;
}

TEST_F(EmberCliTest, MmoeWithoutDataTrainsOnGeneratedTwoTaskData) {
  CommandRun run = Ember("train --model=mmoe --rows=3000 --num_experts=2 --expert_mlp=8 " +
                         std::string("--top_mlp=8 --threads=2"));
  EXPECT_EQ(0, run.exit_code) << run.output;
  EXPECT_NE(std::string::npos, run.output.find("planted-model ceiling AUC, task 1:"))
      << run.output;
  run = Ember("gen-data --rows=100 --tasks=2 --out=" + Path("t.tsv"));
  EXPECT_EQ(2, run.exit_code) << run.output;
  EXPECT_NE(std::string::npos, run.output.find("criteo format holds one label")) << run.output;
}

TEST_F(EmberCliTest, BadFormatFlagsExitTwoNamingTheFlag) {
  std::ofstream(Path("d.tsv")) << "1\tx\n";
  ASSERT_EQ(0, Ember("gen-data --rows=100 --out_format=columnar --out=" + Path("d.col"))
                   .exit_code);
  const std::pair<std::string, std::string> cases[] = {
      {"--train_data=" + Path("d.tsv") + " --format=parquet", "--format"},
      {"--train_data=" + Path("d.tsv") + " --format=libsvm --schema=label", "schema"},
      {"--train_data=" + Path("d.tsv") + " --format=csv", "schema"},
      {"--train_data=" + Path("d.tsv") + " --format=csv --schema=label --delimiter=ab",
       "delimiter"},
      {"--train_data=" + Path("d.tsv") + " --format=csv --schema=label --dense_min=x",
       "--dense_min"},
      {"--train_data=" + Path("d.tsv") + " --dense_transform=sqrt", "--dense_transform"},
      {"--train_data=" + Path("d.tsv") + " --format=columnar", "d.tsv"},
      {"--train_data=" + Path("d.col") + " --header", "--header"},
      {"--train_data=" + Path("d.col") + " --slot_bits=12", "--slot_bits"},
      {"--train_data=" + Path("d.col") + "," + Path("d.tsv"), "--format=auto"},
      {"--train_data=" + Path("nothing*.tsv"), "nothing*.tsv"},
  };
  for (const auto& [flags, name] : cases) {
    CommandRun run = Ember("train " + flags + " " + kSmallModel);
    EXPECT_EQ(2, run.exit_code) << flags << ": " << run.output;
    EXPECT_NE(std::string::npos, run.output.find(name)) << flags << ": " << run.output;
  }
}

TEST_F(EmberCliTest, ConvertErrorsExitTwoAndLeaveNoOutput) {
  std::ofstream(Path("bad.tsv")) << "1\t2\n";
  const std::pair<std::string, std::string> cases[] = {
      {"--output=" + Path("o.col"), "--input"},
      {"--input=" + Path("bad.tsv"), "--output"},
      {"--input=" + Path("missing.tsv") + " --output=" + Path("o.col"), "missing.tsv"},
      {"--input=" + Path("bad.tsv") + " --output=" + Path("o.col") + " --bad_lines=fail",
       "bad.tsv:1: column count"},
      {"--input=" + Path("bad.tsv") + " --output=" + Path("no/dir/o.col"), "--output"},
  };
  for (const auto& [flags, name] : cases) {
    CommandRun run = Ember("convert " + flags);
    EXPECT_EQ(2, run.exit_code) << flags << ": " << run.output;
    EXPECT_NE(std::string::npos, run.output.find(name)) << flags << ": " << run.output;
  }
  EXPECT_FALSE(ember::FileExists(Path("o.col")));
}

TEST_F(EmberCliTest, GenDataWritesEveryFormatWithItsBayesAucAndTrainReadsThem) {
  const std::string shape =
      " --rows=3000 --num_dense=4 --num_slots=6 --multi_hot_slots=2 --max_bag_size=3 "
      "--vocabulary=10,20,30,40,50,60 --zipf_exponent=1.2";
  CommandRun csv = Ember("gen-data --out_format=csv --out=" + Path("g.csv") + shape);
  ASSERT_EQ(0, csv.exit_code) << csv.output;
  EXPECT_NE(std::string::npos,
            csv.output.find("--format=csv --header --schema=label,1-4=dense,5-8=cat,9-10=multi"))
      << csv.output;
  CommandRun col = Ember("gen-data --out_format=columnar --out=" + Path("g.col") + shape);
  ASSERT_EQ(0, col.exit_code) << col.output;
  for (const std::string& path : {Path("g.csv"), Path("g.col")}) {
    auto meta = ember::ReadFile(path + ".meta.json");
    ASSERT_TRUE(meta.ok()) << path;
    EXPECT_GT(JsonNumber(*meta, "info", "bayes_auc"), 0.5) << path;
    EXPECT_LT(JsonNumber(*meta, "info", "bayes_auc"), 1.0) << path;
  }
  ember::io::FormatSpec spec;
  spec.name = "csv";
  spec.header = true;
  spec.schema = "label,1-4=dense,5-8=cat,9-10=multi";
  ExpectSameData(spec, {Path("g.csv")}, Path("g.col"));
  CommandRun train = Ember("train --train_data=" + Path("g.col") + " " + kSmallModel);
  ASSERT_EQ(0, train.exit_code) << train.output;
  EXPECT_NE(std::string::npos, train.output.find("ceiling AUC")) << train.output;
}

TEST_F(EmberCliTest, TrainGeneratesDataOfTheShapeAsked) {
  CommandRun run = Ember("train --rows=2000 --num_dense=2 --num_slots=5 --multi_hot_slots=2 " +
                         std::string(kSmallModel) + " --metrics_out=" + Path("m.json"));
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_NE(std::string::npos, run.output.find("2 dense features, 5 slots")) << run.output;
  EXPECT_NE(std::string::npos, run.output.find("ceiling AUC")) << run.output;
}

TEST_F(EmberCliTest, BadGenDataValuesExitTwoNamingTheFlag) {
  const std::pair<std::string, std::string> cases[] = {
      {"--num_slots=8", "criteo"},
      {"--out_format=parquet", "--out_format"},
      {"--vocabulary=10,x", "--vocabulary"},
      {"--vocabulary=10,20", "--vocabulary"},
      {"--out_format=csv --multi_hot_slots=30", "multi_hot_slots"},
  };
  for (const auto& [flags, name] : cases) {
    CommandRun run = Ember("gen-data --rows=10 --out=" + Path("g") + " " + flags);
    EXPECT_EQ(2, run.exit_code) << flags << ": " << run.output;
    EXPECT_NE(std::string::npos, run.output.find(name)) << flags << ": " << run.output;
  }
}

}  // namespace

namespace {

// `ember plan` prints the placement, predicted stage times, the bottleneck,
// samples/s and the needs, writes the plan as JSON and the placed graph as
// DOT; `ember train --plan=FILE` runs the saved plan's knobs.
TEST_F(EmberCliTest, PlanWritesJsonAndDotThatTrainRuns) {
  const std::string cache = "env XDG_CACHE_HOME=" + Path("cache");
  CommandRun plan = Ember("plan --rows=4000 " + std::string(kSmallModel) +
                              " --plan_out=" + Path("p.json") + " --dot_out=" + Path("g.dot"),
                          cache);
  ASSERT_EQ(0, plan.exit_code) << plan.output;
  for (const char* part : {"placement:", "<- bottleneck", "samples/s", "needs:"}) {
    EXPECT_NE(std::string::npos, plan.output.find(part)) << part << "\n" << plan.output;
  }
  auto json = ember::ReadFile(Path("p.json"));
  ASSERT_TRUE(json.ok());
  EXPECT_NE(std::string::npos, json->find("\"predicted_samples_per_sec\""));
  auto dot = ember::ReadFile(Path("g.dot"));
  ASSERT_TRUE(dot.ok());
  EXPECT_EQ(0u, dot->find("digraph"));
  // Whichever way the planner chose on this machine, training follows it.
  const bool pipelined = json->find("\"pipeline\": true") != std::string::npos;
  ASSERT_TRUE(pipelined || json->find("\"pipeline\": false") != std::string::npos) << *json;
  CommandRun train = Ember("train --rows=4000 " + std::string(kSmallModel) +
                               " --plan=" + Path("p.json") + " --metrics_out=" + Path("m.json"),
                           cache);
  ASSERT_EQ(0, train.exit_code) << train.output;
  EXPECT_NE(std::string::npos, train.output.find("test:  AUC"));
  EXPECT_EQ(pipelined, train.output.find("pipeline: staleness") != std::string::npos)
      << train.output;
}

// --stage_threads fixes the split of a pipelined run's threads: `ember plan`
// keeps it in the plan it writes, and `ember train --plan=FILE` runs its
// stages with those threads. A split beyond --threads exits 2 naming it.
TEST_F(EmberCliTest, AStageThreadSplitGoesThroughThePlanToTraining) {
  if (ember::HardwareThreads() < 2) GTEST_SKIP() << "needs 2 hardware threads";
  const std::string cache = "env XDG_CACHE_HOME=" + Path("cache");
  const std::string knobs = " --threads=2 --pipeline=on --stage_threads=1,1,1,2 ";
  CommandRun plan = Ember("plan --rows=4000 " + std::string(kSmallModel) + knobs +
                              " --plan_out=" + Path("p.json") + " --dot_out=" + Path("g.dot"),
                          cache);
  ASSERT_EQ(0, plan.exit_code) << plan.output;
  auto json = ember::ReadFile(Path("p.json"));
  ASSERT_TRUE(json.ok());
  EXPECT_TRUE(std::regex_search(*json, std::regex("\"stage_threads\":\\s*\\[\\s*1,\\s*1,\\s*1,"
                                                  "\\s*1,\\s*2\\s*\\]")))
      << *json;
  CommandRun train =
      Ember("train --rows=4000 " + std::string(kSmallModel) + " --plan=" + Path("p.json"), cache);
  ASSERT_EQ(0, train.exit_code) << train.output;
  EXPECT_NE(std::string::npos,
            train.output.find("stage threads: unique 1, pull 1, dense 1, push 2"))
      << train.output;
  // Sequential: every stage has every thread.
  CommandRun sequential = Ember("train --rows=4000 --plan=off --pipeline=off " +
                                std::string(kSmallModel) + " --threads=2");
  ASSERT_EQ(0, sequential.exit_code) << sequential.output;
  EXPECT_NE(std::string::npos,
            sequential.output.find("stage threads: unique 2, pull 2, dense 2, push 2"))
      << sequential.output;
  CommandRun wrong = Ember(
      "train --rows=4000 --plan=off --threads=2 --pipeline=on "
      "--stage_threads=1,3,1,1");
  EXPECT_EQ(2, wrong.exit_code) << wrong.output;
  EXPECT_NE(std::string::npos, wrong.output.find("--stage_threads: the pull stage's 3 threads"))
      << wrong.output;
}

// --dense_device names where the dense step runs; a CUDA device this build
// or host does not have exits 2 naming it.
TEST_F(EmberCliTest, ADenseDeviceThatIsNotThereExitsTwoNamingIt) {
  const std::string device = "cuda:" + std::to_string(ember::CudaDeviceCount());
  for (const char* plan : {"off", "auto"}) {
    CommandRun run =
        Ember("train --rows=2000 --plan=" + std::string(plan) + " --dense_device=" + device,
              "env XDG_CACHE_HOME=" + Path("cache"));
    EXPECT_EQ(2, run.exit_code) << plan << ": " << run.output;
    EXPECT_NE(std::string::npos, run.output.find(device)) << plan << ": " << run.output;
  }
}

TEST_F(EmberCliTest, MalformedClusterAndMissingPlanFilesExitTwoNamingThem) {
  std::ofstream(Path("bad.json")) << "{\"hosts\": [ {\"name\": \"a\",, } ]}\n";
  CommandRun bad = Ember("plan --cluster=" + Path("bad.json"), "env XDG_CACHE_HOME=" + Path("c"));
  EXPECT_EQ(2, bad.exit_code) << bad.output;
  EXPECT_NE(std::string::npos, bad.output.find(Path("bad.json") + ":1:")) << bad.output;
  CommandRun missing = Ember("train --rows=4000 --plan=" + Path("missing.json"));
  EXPECT_EQ(2, missing.exit_code) << missing.output;
  EXPECT_NE(std::string::npos, missing.output.find(Path("missing.json"))) << missing.output;
}

// A run that stops (here at --max_steps) leaves a checkpoint; the same
// command without the limit resumes from it; --resume=false refuses.
TEST_F(EmberCliTest, CheckpointedTrainingResumesAndRefusesToStartOverWithoutResume) {
  const std::string common = "train --rows=4000 --plan=off " + std::string(kSmallModel) +
                             " --checkpoint_dir=" + Path("ck") + " --checkpoint_every_steps=10";
  CommandRun first = Ember(common + " --max_steps=12");
  ASSERT_EQ(0, first.exit_code) << first.output;
  EXPECT_NE(std::string::npos, first.output.find("checkpoints: 2 written, the last of step 12"))
      << first.output;
  CommandRun second = Ember(common + " --metrics_out=" + Path("m.json"));
  ASSERT_EQ(0, second.exit_code) << second.output;
  EXPECT_NE(std::string::npos, second.output.find("resumed from the checkpoint of step 12"))
      << second.output;
  auto metrics = ember::ReadFile(Path("m.json"));
  ASSERT_TRUE(metrics.ok());
  std::smatch resumed;
  ASSERT_TRUE(std::regex_search(*metrics, resumed,
                                std::regex("\"resumed_from_step\":\\s*([0-9]+)")))
      << *metrics;
  EXPECT_EQ("12", resumed[1].str());
  EXPECT_EQ(25 - 12, JsonNumber(*metrics, "train", "steps"));
  CommandRun refused = Ember(common + " --resume=false");
  EXPECT_EQ(2, refused.exit_code) << refused.output;
  EXPECT_NE(std::string::npos, refused.output.find("holds a checkpoint of step 25"))
      << refused.output;
}

// The first run records the job's flags; a resume that changes one that
// decides the model (--seed, --sparse_lr) is refused naming each with both
// values, and one that changes only how long to train, the threads or the
// outputs goes on. The record is a flagfile that runs the job again.
TEST_F(EmberCliTest, AResumeWithFlagsThatChangeTheModelIsRefusedNamingThem) {
  const std::string common = "train --rows=4000 --plan=off " + std::string(kSmallModel) +
                             " --checkpoint_dir=" + Path("ck") + " --checkpoint_every_steps=10";
  CommandRun first = Ember(common + " --max_steps=12");
  ASSERT_EQ(0, first.exit_code) << first.output;
  auto recorded = ember::ReadFile(Path("ck/job.flags"));
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_NE(std::string::npos, recorded->find("--seed=1\n")) << *recorded;
  EXPECT_EQ(std::string::npos, recorded->find("--max_steps")) << *recorded;

  CommandRun changed = Ember(common + " --seed=2 --sparse_lr=0.5");
  EXPECT_EQ(2, changed.exit_code) << changed.output;
  EXPECT_NE(std::string::npos, changed.output.find("--seed=2, the checkpointed job had '1'"))
      << changed.output;
  EXPECT_NE(std::string::npos, changed.output.find("--sparse_lr=0.5")) << changed.output;
  EXPECT_NE(std::string::npos, changed.output.find("--flagfile=" + Path("ck/job.flags")))
      << changed.output;

  CommandRun resumed =
      Ember(common + " --max_steps=20 --threads=2 --metrics_out=" + Path("m.json"));
  ASSERT_EQ(0, resumed.exit_code) << resumed.output;
  EXPECT_NE(std::string::npos, resumed.output.find("resumed from the checkpoint of step 12"))
      << resumed.output;
  CommandRun again = Ember("train --flagfile=" + Path("ck/job.flags") + " --checkpoint_dir=" +
                           Path("ck") + " --max_steps=25");
  ASSERT_EQ(0, again.exit_code) << again.output;
  EXPECT_NE(std::string::npos, again.output.find("resumed from the checkpoint of step 20"))
      << again.output;
}

// SIGTERM, as a preemptible scheduler sends it, at many moments of
// sequential and pipelined training: the job stops after the step in
// progress, writes its checkpoint, exits 143, and the resumed job ends with
// the model of an uninterrupted run. (A signal handler interrupting oneDNN's
// kernels corrupted the heap in about one sequential run in four.)
TEST_F(EmberCliTest, SigtermStopsTrainingCleanlyAndItResumesToTheUninterruptedModel) {
  CommandRun gen = Ember("gen-data --out=" + Path("d.tsv") + " --rows=30000 --seed=3");
  ASSERT_EQ(0, gen.exit_code) << gen.output;
  for (const char* pipeline : {"off", "on"}) {
    SCOPED_TRACE(std::string("--pipeline=") + pipeline);
    const std::string common = "train --train_data=" + Path("d.tsv") +
                               " --plan=off --threads=2 --batch_size=256 --pipeline=" + pipeline;
    CommandRun reference = Ember(common + " --metrics_out=" + Path("ref.json"));
    ASSERT_EQ(0, reference.exit_code) << reference.output;
    const double reference_logloss =
        JsonNumber(*ember::ReadFile(Path("ref.json")), "test", "logloss");
    int stopped = 0;
    for (int trial = 0; trial < 6; ++trial) {
      SCOPED_TRACE("trial " + std::to_string(trial));
      const std::string dir = Path(std::string("ck-") + pipeline + std::to_string(trial));
      const std::string job = common + " --checkpoint_dir=" + dir + " --checkpoint_every_steps=7";
      const std::string log_path = dir + ".log";
      const pid_t pid = StartEmber(job, log_path);
      // Once the first checkpoint is written, at a different moment each trial.
      const auto log_text = [&] {
        const auto text = ember::ReadFile(log_path);
        return text.ok() ? *text : text.status().ToString();
      };
      for (int i = 0; i < 3000 && log_text().find("Checkpoint: full") == std::string::npos; ++i) {
        ::usleep(2000);
      }
      ::usleep(static_cast<useconds_t>(trial * 70000));
      ::kill(pid, SIGTERM);
      const int exit_code = WaitForExit(pid);
      const std::string log = log_text();
      if (exit_code == 0) continue;  // Finished before the signal came.
      ASSERT_EQ(143, exit_code) << log;
      ++stopped;
      EXPECT_NE(std::string::npos, log.find("training stopped by a signal")) << log;
      CommandRun resumed = Ember(job + " --metrics_out=" + Path("m.json"));
      ASSERT_EQ(0, resumed.exit_code) << resumed.output;
      EXPECT_NE(std::string::npos, resumed.output.find("resumed from the checkpoint"))
          << resumed.output;
      EXPECT_EQ(reference_logloss, JsonNumber(*ember::ReadFile(Path("m.json")), "test", "logloss"));
    }
    EXPECT_GE(stopped, 3) << "too few trials were still training when the signal came";
  }
}

}  // namespace
