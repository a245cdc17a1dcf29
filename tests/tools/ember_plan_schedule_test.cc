// `ember plan --draw_schedule`: a pipeline schedule drawn as a user runs it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct CommandRun {
  int exit_code = -1;
  std::string output; // stdout and stderr together.
};

CommandRun Ember(const std::string &args) {
  const std::string command = std::string(EMBER_BINARY) + " " + args + " 2>&1";
  CommandRun run;
  FILE *pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr)
    return run;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    run.output.append(buffer.data(), n);
  }
  const int status = ::pclose(pipe);
  run.exit_code =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

TEST(EmberPlanScheduleTest, DrawsAnInterleavedScheduleWithItsPredictedBubble) {
  const CommandRun run = Ember("plan --draw_schedule=interleaved "
                               "--schedule_ranks=2 --schedule_virtual_stages=2 "
                               "--schedule_micro_batches=4");
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_THAT(run.output, HasSubstr("interleaved"));
  EXPECT_THAT(run.output, HasSubstr("p=2 v=2 m=4"));
  // Every forward and backward of micro-batch 3 on the last chunk is drawn.
  EXPECT_THAT(run.output, HasSubstr("F3.3"));
  EXPECT_THAT(run.output, HasSubstr("B3.3"));
  // (p - 1) / (v m) = 1 / 8.
  EXPECT_THAT(run.output, HasSubstr("0.125"));
  // No planning: no placement, no plan file.
  EXPECT_THAT(run.output, Not(HasSubstr("samples/s")));
}

TEST(EmberPlanScheduleTest, DrawsGPipeAndOneFOneB) {
  for (const char *kind : {"gpipe", "1f1b"}) {
    const CommandRun run =
        Ember(std::string("plan --draw_schedule=") + kind +
              " --schedule_ranks=3 --schedule_micro_batches=5");
    ASSERT_EQ(0, run.exit_code) << kind << "\n" << run.output;
    EXPECT_THAT(run.output, HasSubstr("p=3 v=1 m=5")) << kind;
    EXPECT_THAT(run.output, HasSubstr("B4.2")) << kind;
  }
}

// ZB-H1 draws its weight gradients and its own predicted bubble.
TEST(EmberPlanScheduleTest, DrawsZeroBubbleH1WithItsWeightGradients) {
  const CommandRun run =
      Ember("plan --draw_schedule=zb-h1 --schedule_ranks=3 --schedule_micro_batches=6");
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_THAT(run.output, HasSubstr("p=3 v=1 m=6"));
  EXPECT_THAT(run.output, HasSubstr("W5.2"));
  EXPECT_THAT(run.output,
              HasSubstr("bubble (idle / busy) 0.1111, predicted (p-1)/(3m) = 0.1111"));
  const CommandRun interleaved =
      Ember("plan --draw_schedule=zb-h1 --schedule_ranks=2 --schedule_virtual_stages=2");
  EXPECT_EQ(2, interleaved.exit_code) << interleaved.output;
  EXPECT_THAT(interleaved.output, HasSubstr("zb-h1 needs 1 virtual stage per rank"));
}

TEST(EmberPlanScheduleTest, AnUnknownKindOrUnsupportedShapeExitsTwoNamingIt) {
  CommandRun run = Ember("plan --draw_schedule=zigzag");
  EXPECT_EQ(2, run.exit_code) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--draw_schedule"));
  EXPECT_THAT(run.output, HasSubstr("zigzag"));
  run = Ember("plan --draw_schedule=interleaved --schedule_ranks=2 "
              "--schedule_virtual_stages=2 "
              "--schedule_micro_batches=3");
  EXPECT_EQ(2, run.exit_code) << run.output;
  EXPECT_THAT(run.output, HasSubstr("m mod G = 1"));
  run = Ember("plan --draw_schedule=interleaved --schedule_ranks=2 --schedule_virtual_stages=2 "
              "--schedule_micro_batches=4 --schedule_group=5");
  EXPECT_EQ(2, run.exit_code) << run.output;
  EXPECT_THAT(run.output, HasSubstr("must lie in [p, m] = [2, 4]"));
}

// A micro-batch group G of Megatron's: groups of 3 through each chunk.
TEST(EmberPlanScheduleTest, DrawsInterleavedWithAGroup) {
  const CommandRun run = Ember(
      "plan --draw_schedule=interleaved --schedule_ranks=2 --schedule_virtual_stages=2 "
      "--schedule_micro_batches=6 --schedule_group=3");
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_THAT(run.output, HasSubstr("p=2 v=2 m=6 G=3"));
  EXPECT_THAT(run.output, HasSubstr("B5.3"));
}

TEST(EmberPlanScheduleTest, PlanHelpListsTheScheduleFlags) {
  const CommandRun run = Ember("plan --help");
  EXPECT_EQ(0, run.exit_code) << run.output;
  for (const char *flag :
       {"--draw_schedule", "--schedule_ranks", "--schedule_virtual_stages",
        "--schedule_micro_batches", "--schedule_group"}) {
    EXPECT_THAT(run.output, HasSubstr(flag));
  }
}

} // namespace
