// `ember plan --pipeline_ranks=N`: the pipeline parallelism chosen for the
// dense graph of a deep DCN-v2 on the 8x8 cluster file (8 hosts, a 25 GB/s
// network), printed and written to the plan's JSON. Fields only, no timings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>

#include "tests/testing/command_run.h"

namespace ember {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

using test::CommandRun;

const std::string kDeepDcn =
    "plan --cluster=" + std::string(EMBER_CLUSTER_FILE) +
    " --model=dcn_v2 --cross_layers=6 --top_mlp=1024,1024,512 --batch_size=4096 --dot_out=";

// `ember ARGS`, stderr merged into stdout.
CommandRun Ember(const std::string& args) {
  return test::RunCommand(std::string(EMBER_BINARY) + " " + args);
}

// The first line of `output` that starts with `prefix`, or "".
std::string LineStarting(const std::string& output, const std::string& prefix) {
  const size_t at = output.find("\n" + prefix);
  if (at == std::string::npos) return "";
  return output.substr(at + 1, output.find('\n', at + 1) - at - 1);
}

const char kCandidate[] =
    "(gpipe|1f1b|interleaved|zb-h1) p=([0-9]+) v=[1-4] m=[0-9]+: [0-9.]+ ms per step, [0-9]+ "
    "samples/s, bubble [0-9.]+, activations per rank( [0-9.]+ MiB)+";

TEST(EmberPlanPipelineTest, FourRanksOnTheClusterPipelineADeepDcn) {
  const std::string plan_file = ::testing::TempDir() + "ember_plan_pipeline.json";
  const CommandRun run = Ember(kDeepDcn + " --pipeline_ranks=4 --plan_out=" + plan_file);
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_THAT(run.output, HasSubstr("over up to 4 ranks, batch 4096, ranks over 8 host(s)"));
  const std::string chosen = LineStarting(run.output, "pipeline: ");
  EXPECT_THAT(chosen, MatchesRegex(std::string("pipeline: ") + kCandidate)) << run.output;
  // The network is fast enough to split the dense graph over several ranks.
  std::smatch match;
  ASSERT_TRUE(std::regex_search(chosen, match, std::regex(" p=([0-9]+) ")));
  EXPECT_GT(std::stoi(match[1]), 1) << chosen;
  EXPECT_LE(std::stoi(match[1]), 4) << chosen;
  EXPECT_THAT(run.output, MatchesRegex("(.|\n)*  unpipelined \\(p=1 v=1 m=1\\): [0-9.]+ ms per "
                                       "step \\([0-9.]+x\\)\n(.|\n)*"));
  EXPECT_THAT(run.output, HasSubstr("candidates within the limit, 0 over it; next best:"));

  FILE* file = std::fopen(plan_file.c_str(), "r");
  ASSERT_NE(nullptr, file);
  std::string json(1 << 16, '\0');
  json.resize(std::fread(json.data(), 1, json.size(), file));
  std::fclose(file);
  std::remove(plan_file.c_str());
  EXPECT_THAT(json, HasSubstr("\"pipeline_parallel\""));
  EXPECT_THAT(json, HasSubstr("\"ranks\": " + std::string(match[1])));
  for (const char* field : {"\"virtual_stages\"", "\"micro_batches\"", "\"schedule\"",
                            "\"step_seconds\"", "\"samples_per_sec\"", "\"bubble_ratio\"",
                            "\"rank_activation_bytes\"", "\"unpipelined_step_seconds\""}) {
    EXPECT_THAT(json, HasSubstr(field));
  }
}

TEST(EmberPlanPipelineTest, OneRankIsNotPipelinedAndNoFlagPlansNoPipeline) {
  CommandRun run = Ember(kDeepDcn + " --pipeline_ranks=1");
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_THAT(LineStarting(run.output, "pipeline: "), HasSubstr(" p=1 v=1 m=1:")) << run.output;
  run = Ember(kDeepDcn);
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_THAT(run.output, Not(HasSubstr("pipeline parallelism")));
}

TEST(EmberPlanPipelineTest, AnActivationLimitBoundsEveryCandidatePrinted) {
  const CommandRun run = Ember(kDeepDcn + " --pipeline_ranks=4 --pipeline_activation_limit=8MB");
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_THAT(run.output, MatchesRegex("(.|\n)*candidates within the limit, [1-9][0-9]* over "
                                       "it(.|\n)*"));
  const std::string chosen = LineStarting(run.output, "pipeline: ");
  ASSERT_FALSE(chosen.empty()) << run.output;
  const std::string from_chosen = run.output.substr(run.output.find(chosen));
  const std::regex mib("([0-9.]+) MiB");
  int figures = 0;
  for (auto it = std::sregex_iterator(from_chosen.begin(), from_chosen.end(), mib);
       it != std::sregex_iterator(); ++it) {
    EXPECT_LE(std::stod((*it)[1]), 8.0) << from_chosen;
    ++figures;
  }
  EXPECT_GT(figures, 4);
}

TEST(EmberPlanPipelineTest, BadFlagsExitTwoNamingThem) {
  CommandRun run = Ember(kDeepDcn + " --pipeline_ranks=2 --pipeline_activation_limit=lots");
  EXPECT_EQ(2, run.exit_code) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--pipeline_activation_limit"));
  run = Ember(kDeepDcn + " --pipeline_ranks=-1");
  EXPECT_NE(0, run.exit_code) << run.output;
  EXPECT_THAT(run.output, HasSubstr("pipeline_ranks"));
}

TEST(EmberPlanPipelineTest, PlanHelpListsThePipelineFlags) {
  const CommandRun run = Ember("plan --help");
  EXPECT_EQ(0, run.exit_code) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--pipeline_ranks"));
  EXPECT_THAT(run.output, HasSubstr("--pipeline_activation_limit"));
}

}  // namespace
}  // namespace ember
