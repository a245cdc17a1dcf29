// Runs the `ember` binary as a user meets its command line: flag names
// checked on the command line and in flagfiles, help per command, the
// version, the default output and an interrupted run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "core/file.h"
#include "tests/testing/command_run.h"
#include "tests/testing/temp_dir.h"

namespace {

using ember::test::CommandRun;
using ember::test::RunCommand;

// Runs `ember args` with stderr merged into stdout.
CommandRun Ember(const std::string& args) {
  return RunCommand(std::string(EMBER_BINARY) + " " + args);
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Whether help text lists the flag `name` (on a line of its own, not only in
// another flag's help).
bool ListsFlag(const std::string& help, const std::string& name) {
  return Contains(help, "\n  --" + name + " ");
}

class EmberCliFlagsTest : public ember::test::TempDirTest {
 protected:
  // Writes `text` to the file `name` of the test's directory; returns its path.
  std::string WriteFile(const std::string& name, const std::string& text) {
    std::ofstream(Path(name)) << text;
    return Path(name);
  }
};

TEST_F(EmberCliFlagsTest, ATypoInAFlagfileExitsOneNamingFileLineAndTheClosestFlag) {
  const std::string flags = WriteFile("job.flags", "# a job\n--rows=100\n--modle=deepfm\n");
  CommandRun run = Ember("train --flagfile=" + flags);
  EXPECT_EQ(1, run.exit_code) << run.output;
  EXPECT_TRUE(Contains(run.output, flags + ":3: unknown flag --modle; did you mean --model?"))
      << run.output;
  EXPECT_FALSE(Contains(run.output, "train steps")) << "no training should start";

  // The same in a flagfile that another includes.
  const std::string outer = WriteFile("outer.flags", "--flagfile=" + flags + "\n");
  run = Ember("train --flagfile=" + outer);
  EXPECT_EQ(1, run.exit_code) << run.output;
  EXPECT_TRUE(Contains(run.output, flags + ":3: unknown flag --modle")) << run.output;
}

TEST_F(EmberCliFlagsTest, AFlagfileValueAfterASpaceExitsOneWithTheLineRewritten) {
  const std::string flags = WriteFile("job.flags", "--train_data /path/file.tsv\n");
  CommandRun run = Ember("train --flagfile=" + flags);
  EXPECT_EQ(1, run.exit_code) << run.output;
  EXPECT_TRUE(Contains(run.output, flags + ":1:")) << run.output;
  EXPECT_TRUE(Contains(run.output, "write --train_data=/path/file.tsv")) << run.output;

  for (const std::string line : {"--model = deepfm", "--model", "model=deepfm"}) {
    SCOPED_TRACE(line);
    run = Ember("train --flagfile=" + WriteFile("bad.flags", line + "\n"));
    EXPECT_EQ(1, run.exit_code) << run.output;
    EXPECT_TRUE(Contains(run.output, Path("bad.flags") + ":1:")) << run.output;
    EXPECT_TRUE(Contains(run.output, "--model")) << run.output;
  }
  run = Ember("train --flagfile=" + Path("missing.flags"));
  EXPECT_EQ(1, run.exit_code) << run.output;
  EXPECT_TRUE(Contains(run.output, Path("missing.flags"))) << run.output;
}

TEST_F(EmberCliFlagsTest, ATypoOnTheCommandLineExitsOneWithTheClosestFlag) {
  const std::pair<std::string, std::string> cases[] = {
      {"--modle=deepfm", "did you mean --model?"},
      {"--batchsize 64", "did you mean --batch_size?"},
      {"--noshufle", "did you mean --noshuffle?"},
      {"--frobnicate=3", "unknown flag --frobnicate"},
  };
  for (const auto& [flag, message] : cases) {
    CommandRun run = Ember("train --rows=100 " + flag);
    EXPECT_EQ(1, run.exit_code) << flag << ": " << run.output;
    EXPECT_TRUE(Contains(run.output, message)) << flag << ": " << run.output;
    EXPECT_TRUE(Contains(run.output, "ember help train")) << flag << ": " << run.output;
  }
}

// Comments, blanks, booleans with and without "no", nested flagfiles and
// "--name value" on the command line all pass the check.
TEST_F(EmberCliFlagsTest, WellFormedFlagfilesAndCommandLinesRun) {
  const std::string inner = WriteFile("inner.flags", "  # indented comment\n\n--rows=50\n");
  const std::string outer =
      WriteFile("outer.flags",
                "--flagfile=" + inner + "\n--noheader\n--seed=3\n--out=" + Path("g.tsv") + "\n");
  CommandRun run = Ember("gen-data --flagfile=" + outer + " --out_format criteo");
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_TRUE(Contains(run.output, "wrote 50 rows")) << run.output;
}

TEST_F(EmberCliFlagsTest, TrainHelpListsOnlyTrainFlagsByTopicWithReadableDefaults) {
  CommandRun help = Ember("train --help");
  ASSERT_EQ(0, help.exit_code) << help.output;
  for (const char* part :
       {"usage: ember train", "\nData:\n", "\nModel:\n", "\nOptimizers:\n", "\nEmbedding tables:\n",
        "\nThreads and pipeline:\n", "\nCheckpoints:\n", "\nOutput:\n", "\nPlanning:\n",
        "\nLogging and flagfiles:\n", "(default: 256)", "(default: 0.2)", "(default: \"\")",
        "(default: true)"}) {
    EXPECT_TRUE(Contains(help.output, part)) << part << "\n" << help.output;
  }
  for (const char* flag : {"train_data", "batch_size", "model", "flagfile", "v"}) {
    EXPECT_TRUE(ListsFlag(help.output, flag)) << flag << "\n" << help.output;
  }
  // Other commands' flags and glog's.
  for (const char* flag : {"out_format", "rows_per_group", "plan_out", "input", "logtostderr"}) {
    EXPECT_FALSE(ListsFlag(help.output, flag)) << flag << "\n" << help.output;
  }
  // gflags' grouping by file, doubles to 17 digits, flags without a topic.
  for (const char* part : {"tools/", "0.2000000", "0.29999", "\nOther:\n"}) {
    EXPECT_FALSE(Contains(help.output, part)) << part << "\n" << help.output;
  }
  std::istringstream lines(help.output);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 100u) << line;
  }
  CommandRun help_train = Ember("help train");
  EXPECT_EQ(0, help_train.exit_code);
  EXPECT_EQ(help.output, help_train.output);
}

TEST_F(EmberCliFlagsTest, EachCommandsHelpHasItsOwnFlags) {
  const struct {
    const char* command;
    std::vector<std::string> has, lacks;
  } cases[] = {
      {"gen-data", {"out_format", "rows", "seed", "flagfile"}, {"model", "train_data", "input"}},
      {"convert", {"input", "output", "format", "threads"}, {"model", "out_format", "rows"}},
      {"plan",
       {"plan_out", "cluster", "model", "batch_size"},
       {"metrics_out", "checkpoint_dir", "out_format"}},
  };
  for (const auto& c : cases) {
    CommandRun run = Ember(std::string("help ") + c.command);
    ASSERT_EQ(0, run.exit_code) << c.command << run.output;
    for (const std::string& flag : c.has) {
      EXPECT_TRUE(ListsFlag(run.output, flag)) << c.command << ": " << flag << "\n" << run.output;
    }
    for (const std::string& flag : c.lacks) {
      EXPECT_FALSE(ListsFlag(run.output, flag)) << c.command << ": " << flag << "\n" << run.output;
    }
    EXPECT_FALSE(Contains(run.output, "\nOther:\n")) << c.command << ": a flag without a topic\n"
                                                     << run.output;
    EXPECT_EQ(run.output, Ember(std::string(c.command) + " --help").output);
  }
  EXPECT_TRUE(Contains(Ember("help gen-data").output, "(default: 0.3)"));  // --id_weight_scale
  CommandRun unknown = Ember("help frobnicate");
  EXPECT_EQ(1, unknown.exit_code);
  EXPECT_TRUE(Contains(unknown.output, "'frobnicate' is not a command")) << unknown.output;
}

TEST_F(EmberCliFlagsTest, VersionAndHelpExitZero) {
  for (const char* args : {"--version", "train --version"}) {
    CommandRun run = Ember(args);
    EXPECT_EQ(0, run.exit_code) << args << ": " << run.output;
    EXPECT_TRUE(std::regex_search(run.output, std::regex("^ember [0-9]+\\.[0-9]+\\.[0-9]+")))
        << args << ": " << run.output;
  }
  CommandRun help = Ember("help");
  EXPECT_EQ(0, help.exit_code);
  for (const char* command : {"train", "convert", "gen-data", "plan", "ember help <command>"}) {
    EXPECT_TRUE(Contains(help.output, command)) << command << "\n" << help.output;
  }
}

TEST_F(EmberCliFlagsTest, DefaultOutputShowsTheConfigurationInOneBlockNotEveryFlag) {
  const std::string job =
      "train --rows=2000 --max_steps=2 --bottom_mlp=16 --top_mlp=8 "
      "--batch_size=64 --threads=1 --plan=off";
  CommandRun run = Ember(job);
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_TRUE(Contains(run.output, "effective configuration")) << run.output;
  EXPECT_TRUE(Contains(run.output, "--batch_size=64")) << run.output;  // Set.
  EXPECT_TRUE(Contains(run.output, "--model=dlrm")) << run.output;     // Key.
  // The full dump: every flag, ones at their defaults included.
  EXPECT_FALSE(Contains(run.output, "--ftrl_beta=")) << run.output;
  EXPECT_FALSE(Contains(run.output, "(set)")) << run.output;

  CommandRun verbose = Ember(job + " --v=1");
  ASSERT_EQ(0, verbose.exit_code) << verbose.output;
  EXPECT_TRUE(Contains(verbose.output, "--ftrl_beta=")) << verbose.output;
}

// Ctrl-C during training: the job stops after the step in progress, writes
// its checkpoint and summary, says it was interrupted and exits 130.
TEST_F(EmberCliFlagsTest, SigintStopsAfterTheCheckpointExits130AndTheSummarySaysSo) {
  const std::string log = Path("train.log");
  const std::string command = std::string("exec ") + EMBER_BINARY +
                              " train --rows=200000 --epochs=50 --threads=1 --plan=off "
                              "--bottom_mlp=16 --top_mlp=8 --checkpoint_every_steps=20 "
                              "--checkpoint_dir=" +
                              Path("ck") + " >" + log + " 2>&1";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  const auto log_text = [&] {
    const auto text = ember::ReadFile(log);
    return text.ok() ? *text : std::string();
  };
  // Once a checkpoint is written, training is under way.
  for (int i = 0; i < 6000 && !Contains(log_text(), "Checkpoint: full"); ++i) ::usleep(10000);
  ASSERT_EQ(0, ::kill(pid, SIGINT));
  int status = 0;
  ASSERT_EQ(pid, ::waitpid(pid, &status, 0));
  const std::string output = log_text();
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(130, WEXITSTATUS(status)) << output;
  EXPECT_TRUE(std::regex_search(output, std::regex("\ntrain: interrupted \\(signal 2\\) after "
                                                   "[0-9]+ steps")))
      << output;
  EXPECT_TRUE(Contains(output, "checkpoints: ")) << output;
  EXPECT_TRUE(Contains(output, "test:  AUC")) << output;
}

}  // namespace
