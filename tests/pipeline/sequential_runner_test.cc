#include "pipeline/sequential_runner.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ember::pipeline {
namespace {

struct Item {
  int64_t index = -1;
  std::vector<std::string> log;
};

TEST(RunSequentialTest, RunsEveryStageOnEveryItemInOrder) {
  std::vector<std::string> seen;
  auto tag = [](std::string stage, int64_t index) { return stage.append(std::to_string(index)); };
  std::vector<StageWork<Item>> stages = {
      {Stage::kUnique, [&](Item& it) { seen.push_back(tag("a", it.index)); return Status::OK(); }},
      {Stage::kPull, [&](Item& it) { seen.push_back(tag("b", it.index)); return Status::OK(); }},
  };
  Item item;
  StageTimes times;
  Tracer tracer;
  int done = 0;
  Status status = RunSequential<Item>(
      stages, [](int64_t i, Item& it) { it.index = i; return i < 3; }, item, &tracer, &times,
      [&](Item&) { ++done; });
  ASSERT_TRUE(status.ok());
  EXPECT_EQ((std::vector<std::string>{"a0", "b0", "a1", "b1", "a2", "b2"}), seen);
  EXPECT_EQ(3, times.items);
  EXPECT_EQ(3, done);
  // Reading and both stages were timed, the others did not run.
  EXPECT_EQ(0.0, times.busy_seconds[Stage::kDense]);
  EXPECT_EQ(0.0, times.busy_seconds[Stage::kPush]);
  // A span per stage per item, reading included, and the read that found
  // the end of the input.
  EXPECT_EQ(3u * 3 + 1, tracer.Events().size());
}

TEST(RunSequentialTest, FirstErrorStopsTheRunAndNamesTheStage) {
  int runs_of_c = 0;
  std::vector<StageWork<Item>> stages = {
      {Stage::kPull, [](Item&) { return Status::OK(); }},
      {Stage::kPush, [](Item& it) {
         return it.index == 1 ? Status::IOError("disk gone") : Status::OK();
       }},
      {Stage::kDense, [&](Item&) { ++runs_of_c; return Status::OK(); }},
  };
  Item item;
  Status status = RunSequential<Item>(
      stages, [](int64_t i, Item& it) { it.index = i; return i < 10; }, item);
  EXPECT_EQ(StatusCode::kIOError, status.code());
  EXPECT_EQ("stage push: disk gone", status.message());
  EXPECT_EQ(1, runs_of_c);
}

TEST(StageTimesTest, BottleneckIsTheBusiestStage) {
  StageTimes times;
  times.busy_seconds[Stage::kPull] = 1.0;
  times.busy_seconds[Stage::kDense] = 3.0;
  times.busy_seconds[Stage::kPush] = 2.0;
  EXPECT_EQ(Stage::kDense, times.Bottleneck());
  EXPECT_EQ(6.0, times.TotalSeconds());
  EXPECT_EQ(std::nullopt, StageTimes().Bottleneck());
}

}  // namespace
}  // namespace ember::pipeline
