// `ember plan --ranks=N`: the plan of a job of N ranks (mpirun -np N ember
// train) on this host or a cluster file, with the predicted samples/s and
// the exchange's share of the step. Fields only, no timings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/testing/command_run.h"

namespace ember {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

using test::CommandRun;

// `ember ARGS`, stderr merged into stdout.
CommandRun Ember(const std::string& args) {
  return test::RunCommand(std::string(EMBER_BINARY) + " " + args);
}

// The line `ember plan` prints for a job of ranks.
std::string RanksLine(const std::string& output) {
  const size_t at = output.find("ranks: ");
  if (at == std::string::npos) return "";
  return output.substr(at, output.find('\n', at) - at);
}

TEST(EmberPlanRanksTest, PlansEightAndSixtyFourRanksOnTheClusterFile) {
  const std::string plan_file = ::testing::TempDir() + "ember_plan_ranks.json";
  for (const auto& [ranks, per_host] : {std::pair{8, 1}, std::pair{64, 8}}) {
    const CommandRun run =
        Ember("plan --cluster=" + std::string(EMBER_CLUSTER_FILE) + " --ranks=" +
              std::to_string(ranks) + " --batch_size=1024 --dot_out= --plan_out=" + plan_file);
    ASSERT_EQ(0, run.exit_code) << run.output;
    const std::string line = RanksLine(run.output);
    EXPECT_THAT(line, MatchesRegex("ranks: " + std::to_string(ranks) + " \\(" +
                                   std::to_string(per_host) +
                                   " per host\\), [0-9]+ samples/s per rank; exchange per rank "
                                   "and step: .* sent, [0-9.]+ ms, [0-9.]+% of the step"))
        << run.output;
    EXPECT_THAT(run.output, HasSubstr("samples/s"));
    EXPECT_THAT(run.output, HasSubstr("ranks' exchange per rank (network)"));
    // Dense on CPU: the MPI all-reduce the ranks run.
    EXPECT_THAT(run.output, Not(HasSubstr("dense on 64 GPU")));
    FILE* file = std::fopen(plan_file.c_str(), "r");
    ASSERT_NE(nullptr, file);
    std::string json(1 << 16, '\0');
    json.resize(std::fread(json.data(), 1, json.size(), file));
    std::fclose(file);
    EXPECT_THAT(json, HasSubstr("\"ranks\": " + std::to_string(ranks)));
    EXPECT_THAT(json, HasSubstr("\"exchange_share\""));
    EXPECT_THAT(json, HasSubstr("\"dense_device\": \"cpu\""));
  }
  std::remove(plan_file.c_str());
}

TEST(EmberPlanRanksTest, OneRankPrintsNoExchange) {
  const CommandRun run = Ember("plan --cluster=" + std::string(EMBER_CLUSTER_FILE) +
                               " --ranks=1 --dot_out=");
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_THAT(run.output, HasSubstr("samples/s"));
  EXPECT_EQ("", RanksLine(run.output));
}

TEST(EmberPlanRanksTest, PlanHelpListsRanks) {
  const CommandRun run = Ember("plan --help");
  EXPECT_EQ(0, run.exit_code) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--ranks"));
}

}  // namespace
}  // namespace ember
