#include "pipeline/pipeline_choice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "ops/graph.h"
#include "ops/op_registry.h"
#include "scheduler/cost_model.h"
#include "scheduler/resource_graph.h"

namespace ember::pipeline {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kBatch = 4096;
constexpr int kWidth = 1024;

// `layers` fully connected layers of kWidth (ReLU), then one to a logit.
std::unique_ptr<ops::Graph> DeepChain(int layers) {
  auto g = std::make_unique<ops::Graph>(&ops::DefaultOpRegistry());
  int x = *g->AddInput("x", {kWidth});
  for (int l = 0; l <= layers; ++l) {
    const int64_t out = l == layers ? 1 : kWidth;
    const std::string name = "fc" + std::to_string(l);
    const int w =
        *g->AddParameter(name + ".w", {out, kWidth}, ops::Initializer::kHeUniform, kWidth);
    const int b = *g->AddParameter(name + ".b", {out}, ops::Initializer::kZeros);
    x = (*g->AddNode(name, "fully_connected", {x, w, b},
                     ops::OpAttrs().Set("activation", l == layers ? 0 : 1)))[0];
  }
  CHECK(g->MarkOutput(x).ok());
  return g;
}

// One host of `cores` CPU threads at the default rates.
scheduler::ResourceGraph OneHost(int cores) {
  scheduler::ResourceGraph graph;
  graph.hosts.push_back({"host", {}});
  scheduler::DeviceNode cpu;
  cpu.id = "host/cpu0";
  cpu.cores = cores;
  cpu.memory_bytes = int64_t{64} << 30;
  graph.AddDevice(0, scheduler::DeviceKind::kCpu, cpu);
  return graph;
}

class PipelineChoiceTest : public ::testing::Test {
 protected:
  PipelineChoiceTest() : resources_(OneHost(4)), cost_(&resources_), graph_(DeepChain(16)) {
    options_.batch_size = kBatch;
    options_.max_ranks = 4;
    // A rank per host, on 4 threads each, joined by a fast network.
    options_.placement.hosts = 4;
    options_.placement.device = 0;
    options_.placement.threads = 4;
    options_.placement.loopback = {4e9, 5e-6};
    options_.placement.network = {100e9, 5e-6};
  }

  void ExpectSortedAndValid(const PipelineChoice& choice) {
    ASSERT_FALSE(choice.candidates.empty());
    EXPECT_EQ(ToString(choice.chosen), ToString(choice.candidates.front()));
    for (const PipelineCandidate& c : choice.candidates) {
      EXPECT_LE(choice.chosen.step_seconds, c.step_seconds) << ToString(c);
      if (c.kind == "interleaved") {
        EXPECT_EQ(0, c.shape.micro_batches % c.shape.ranks) << ToString(c);
      }
      if (c.kind == "1f1b" || c.kind == "zb-h1") {
        EXPECT_EQ(1, c.shape.virtual_stages) << ToString(c);
      }
      EXPECT_EQ(kBatch, c.micro_batch_size * c.shape.micro_batches) << ToString(c);
      EXPECT_LE(c.shape.ranks, options_.max_ranks);
      EXPECT_EQ(static_cast<size_t>(c.shape.ranks), c.rank_activation_bytes.size());
      EXPECT_EQ(static_cast<size_t>(c.shape.chunks()), c.partition.chunks.size());
    }
    for (size_t i = 1; i < choice.candidates.size(); ++i) {
      EXPECT_LE(choice.candidates[i - 1].step_seconds, choice.candidates[i].step_seconds);
    }
  }

  scheduler::ResourceGraph resources_;
  scheduler::CostModel cost_;
  std::unique_ptr<ops::Graph> graph_;
  PipelineChoiceOptions options_;
};

TEST_F(PipelineChoiceTest, DeepGraphOnAFastLinkIsPipelinedAndFaster) {
  Result<PipelineChoice> choice = ChoosePipeline(*graph_, cost_, options_);
  ASSERT_TRUE(choice.ok()) << choice.status();
  ExpectSortedAndValid(*choice);
  EXPECT_GT(choice->chosen.shape.ranks, 1) << ToText(*choice);
  EXPECT_GT(choice->chosen.shape.micro_batches, 1) << ToText(*choice);
  // Four ranks of equal layers: well under half the unpipelined step.
  EXPECT_LT(choice->chosen.step_seconds, 0.5 * choice->unpipelined.step_seconds) << ToText(*choice);
  EXPECT_EQ("1f1b p=1 v=1 m=1",
            choice->unpipelined.kind + " " + ToString(choice->unpipelined.shape));
  EXPECT_EQ(0, choice->unpipelined.send_seconds);
  // Each message is one micro-batch's 1024 floats per example.
  const PipelineCandidate& chosen = choice->chosen;
  EXPECT_NEAR(4.0 * kWidth * chosen.micro_batch_size / 100e9 + 5e-6, chosen.send_seconds, 1e-12);
  // Every kind was considered with more than one rank.
  for (const char* kind : {"gpipe", "1f1b", "interleaved", "zb-h1"}) {
    EXPECT_TRUE(std::any_of(
        choice->candidates.begin(), choice->candidates.end(),
        [&](const PipelineCandidate& c) { return c.kind == kind && c.shape.ranks > 1; }))
        << kind;
  }
  const std::string text = ToText(*choice);
  EXPECT_THAT(text, HasSubstr("pipeline: " + ToString(chosen)));
  EXPECT_THAT(text, HasSubstr("unpipelined (p=1 v=1 m=1)"));
}

TEST_F(PipelineChoiceTest, ASlowLinkOrOneRankIsNotPipelined) {
  options_.placement.network = {1e3, 0.1};  // 1 kB/s
  Result<PipelineChoice> choice = ChoosePipeline(*graph_, cost_, options_);
  ASSERT_TRUE(choice.ok()) << choice.status();
  ExpectSortedAndValid(*choice);
  EXPECT_EQ(1, choice->chosen.shape.ranks) << ToText(*choice);
  // More micro-batches only add per-call overheads on one rank.
  EXPECT_EQ(1, choice->chosen.shape.micro_batches) << ToText(*choice);
  EXPECT_DOUBLE_EQ(choice->unpipelined.step_seconds, choice->chosen.step_seconds);

  options_.placement.network = {100e9, 5e-6};
  options_.max_ranks = 1;
  choice = ChoosePipeline(*graph_, cost_, options_);
  ASSERT_TRUE(choice.ok()) << choice.status();
  for (const PipelineCandidate& c : choice->candidates) EXPECT_EQ(1, c.shape.ranks);
  EXPECT_EQ(1, choice->chosen.shape.micro_batches);
}

TEST_F(PipelineChoiceTest, RanksSharingAHostShareItsThreadsAndLoopback) {
  // Ranks on one host share its 4 threads: pipelining only adds the bubble
  // and the sends.
  options_.placement.hosts = 1;
  Result<PipelineChoice> choice = ChoosePipeline(*graph_, cost_, options_);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(1, choice->chosen.shape.ranks) << ToText(*choice);
  for (const PipelineCandidate& c : choice->candidates) {
    if (c.shape.ranks > 1) {
      EXPECT_GE(c.step_seconds, choice->unpipelined.step_seconds) << ToString(c);
      EXPECT_NEAR(4.0 * kWidth * c.micro_batch_size / 4e9 + 5e-6, c.send_seconds, 1e-12);
    }
  }
}

TEST_F(PipelineChoiceTest, AMemoryLimitExcludesWhatExceedsIt) {
  Result<PipelineChoice> free = ChoosePipeline(*graph_, cost_, options_);
  ASSERT_TRUE(free.ok()) << free.status();
  const int64_t limit = free->chosen.peak_activation_bytes() / 3;
  ASSERT_GT(limit, 0);
  options_.rank_activation_limit_bytes = limit;
  Result<PipelineChoice> choice = ChoosePipeline(*graph_, cost_, options_);
  ASSERT_TRUE(choice.ok()) << choice.status();
  ExpectSortedAndValid(*choice);
  EXPECT_GT(choice->over_limit, 0);
  EXPECT_LT(choice->candidates.size(), free->candidates.size());
  for (const PipelineCandidate& c : choice->candidates) {
    for (int64_t bytes : c.rank_activation_bytes) EXPECT_LE(bytes, limit) << ToString(c);
  }
  EXPECT_LE(choice->chosen.peak_activation_bytes(), limit);
  // The limit changed the choice, and it costs time.
  EXPECT_GE(choice->chosen.step_seconds, free->chosen.step_seconds);
  // The unpipelined step is reported even though it is over the limit.
  EXPECT_GT(choice->unpipelined.peak_activation_bytes(), limit);

  options_.rank_activation_limit_bytes = 1;
  choice = ChoosePipeline(*graph_, cost_, options_);
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(StatusCode::kResourceExhausted, choice.status().code());
  EXPECT_THAT(choice.status().ToString(), HasSubstr("rank_activation_limit_bytes"));
}

TEST_F(PipelineChoiceTest, RankBytesFollowTheSchedule) {
  Result<PipelineChoice> choice = ChoosePipeline(*graph_, cost_, options_);
  ASSERT_TRUE(choice.ok()) << choice.status();
  int checked = 0;
  for (const PipelineCandidate& c : choice->candidates) {
    if (c.shape.ranks < 2 || c.shape.virtual_stages != 1) continue;
    const int m = c.shape.micro_batches;
    const int64_t first = c.partition.chunks[0].activation_bytes;
    // Rank 0 holds every micro-batch under GPipe, at most p under 1F1B.
    if (c.kind == "gpipe") {
      EXPECT_EQ(m * first, c.rank_activation_bytes[0]) << ToString(c);
    }
    if (c.kind == "1f1b") {
      EXPECT_EQ(std::min(m, c.shape.ranks) * first, c.rank_activation_bytes[0]) << ToString(c);
    }
    // ZB-H1 holds a micro-batch until its weight gradients: at most p on
    // every rank, so the last rank holds more than under 1F1B (one).
    if (c.kind == "zb-h1") {
      const int last = c.shape.ranks - 1;
      EXPECT_EQ(std::min(m, c.shape.ranks) * first, c.rank_activation_bytes[0]) << ToString(c);
      EXPECT_EQ(std::min(m, c.shape.ranks) * c.partition.chunks[last].activation_bytes,
                c.rank_activation_bytes[last])
          << ToString(c);
      // Its weight gradients fill the bubble: never slower than 1F1B's
      // step of the same shape.
      for (const PipelineCandidate& other : choice->candidates) {
        if (other.kind != "1f1b" || other.shape.ranks != c.shape.ranks ||
            other.shape.micro_batches != m) {
          continue;
        }
        EXPECT_LE(c.step_seconds, other.step_seconds * (1 + 1e-9)) << ToString(c);
        EXPECT_LE(c.bubble_ratio, other.bubble_ratio + 1e-9) << ToString(c);
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

TEST_F(PipelineChoiceTest, BadInputsAreInvalidArguments) {
  const auto expect_invalid = [&](const PipelineChoiceOptions& o, const ops::Graph& g,
                                  const std::string& field) {
    Result<PipelineChoice> choice = ChoosePipeline(g, cost_, o);
    ASSERT_FALSE(choice.ok()) << field;
    EXPECT_EQ(StatusCode::kInvalidArgument, choice.status().code()) << field;
    EXPECT_THAT(choice.status().ToString(), HasSubstr(field));
  };
  PipelineChoiceOptions o = options_;
  o.batch_size = 0;
  expect_invalid(o, *graph_, "batch_size");
  o = options_;
  o.max_ranks = 0;
  expect_invalid(o, *graph_, "max_ranks");
  o = options_;
  o.rank_activation_limit_bytes = -1;
  expect_invalid(o, *graph_, "rank_activation_limit_bytes");
  o = options_;
  o.max_virtual_stages = 0;
  expect_invalid(o, *graph_, "max_virtual_stages");
  o = options_;
  o.max_micro_batches = 0;
  expect_invalid(o, *graph_, "max_micro_batches");
  o = options_;
  o.placement.hosts = 0;
  expect_invalid(o, *graph_, "placement.hosts");
  o = options_;
  o.placement.threads = 0;
  expect_invalid(o, *graph_, "placement.threads");
  o = options_;
  o.placement.device = 3;
  expect_invalid(o, *graph_, "placement.device");
  o = options_;
  o.placement.loopback.bytes_per_second = 0;
  expect_invalid(o, *graph_, "placement.loopback.bytes_per_second");
  o = options_;
  o.placement.network.latency_seconds = -1;
  expect_invalid(o, *graph_, "placement.network.latency_seconds");
  const ops::Graph empty(&ops::DefaultOpRegistry());
  expect_invalid(options_, empty, "no nodes");
}

TEST(RankPlacementOfTest, TakesTheLoopbackAndTheNetworkFromTheCostModel) {
  scheduler::ResourceGraph one = OneHost(8);
  const scheduler::CostModel cost(&one);
  RankPlacement place = RankPlacementOf(cost);
  EXPECT_EQ(1, place.hosts);
  EXPECT_EQ(8, place.threads);
  EXPECT_EQ(0, place.device);
  EXPECT_DOUBLE_EQ(cost.options().loopback_gbps * 1e9, place.loopback.bytes_per_second);
  EXPECT_DOUBLE_EQ(cost.options().loopback_latency_us * 1e-6, place.loopback.latency_seconds);
  EXPECT_DOUBLE_EQ(place.loopback.bytes_per_second, place.network.bytes_per_second);

  scheduler::ResourceGraph two = OneHost(8);
  two.hosts.push_back({"other", {}});
  scheduler::DeviceNode cpu;
  cpu.id = "other/cpu0";
  cpu.cores = 8;
  const int b = two.AddDevice(1, scheduler::DeviceKind::kCpu, cpu);
  two.AddLink(0, b, scheduler::LinkKind::kNetwork, 25.0, 7.0);
  const scheduler::CostModel cost2(&two);
  place = RankPlacementOf(cost2);
  EXPECT_EQ(2, place.hosts);
  EXPECT_DOUBLE_EQ(25e9, place.network.bytes_per_second);
  EXPECT_DOUBLE_EQ(7e-6, place.network.latency_seconds);
}

}  // namespace
}  // namespace ember::pipeline
