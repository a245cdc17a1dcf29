// The routing functions of ops/moe_routing.h as graph operators
// (ops/moe_routing_ops.h): a small graph with softmax, moe_route,
// moe_dispatch and moe_combine, run by a GraphExecutor, against the functions
// called directly and against finite differences.

#include "ops/moe_routing_ops.h"

#include <glog/logging.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <ostream>
#include <string>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "ops/graph.h"
#include "ops/graph_executor.h"
#include "ops/moe_routing.h"
#include "ops/op_registry.h"
#include "tests/ops/gradient_check.h"
#include "tests/ops/test_tensors.h"

namespace ember::ops {
namespace {

using testing::ExpectAllClose;
using testing::NumericGradient;
using testing::RandomTensor;
using testing::ToDouble;
using testing::Values;
using testing::WeightedSum;

struct MoeCase {
  int64_t batch, experts, k, slots, hidden;
  bool normalize;
};

std::string Describe(const MoeCase& c) {
  return "batch" + std::to_string(c.batch) + "_experts" + std::to_string(c.experts) + "_k" +
         std::to_string(c.k) + "_slots" + std::to_string(c.slots) + "_hidden" +
         std::to_string(c.hidden) + (c.normalize ? "_normalized" : "");
}

void PrintTo(const MoeCase& c, std::ostream* os) { *os << Describe(c); }

std::string CaseName(const ::testing::TestParamInfo<MoeCase>& info) { return Describe(info.param); }

// Inputs logits [E], x [H] and expert_out [S, H]; outputs gate [k], routing
// [2, k], buffers [S, H] and out [H]:
//   probs = softmax(logits); gate, routing = moe_route(probs)
//   buffers = moe_dispatch(x, routing); out = moe_combine(expert_out, gate, routing)
std::unique_ptr<Graph> MoeGraph(const MoeCase& c) {
  auto g = std::make_unique<Graph>(&DefaultOpRegistry());
  const int logits = *g->AddInput("logits", {c.experts});
  const int x = *g->AddInput("x", {c.hidden});
  const int expert_out = *g->AddInput("expert_out", {c.slots, c.hidden});
  const int probs = (*g->AddNode("softmax", "softmax", {logits}))[0];
  const std::vector<int> route = *g->AddNode(
      "route", "moe_route", {probs},
      OpAttrs().Set("k", c.k).Set("slots", c.slots).Set("normalize", c.normalize ? 1 : 0));
  const int buffers = (*g->AddNode("dispatch", "moe_dispatch", {x, route[1]},
                                   OpAttrs().Set("experts", c.experts).Set("slots", c.slots)))[0];
  const int out = (*g->AddNode("combine", "moe_combine", {expert_out, route[0], route[1]},
                               OpAttrs().Set("experts", c.experts)))[0];
  for (int value : {route[0], route[1], buffers, out}) EXPECT_TRUE(g->MarkOutput(value).ok());
  return g;
}

// Logits whose top choices are far apart (so that a small step changes no
// routing), with expert 0 among every token's first two choices (so that it
// overflows and choices are dropped).
Tensor SeparatedLogits(const MoeCase& c, RandomStream& random) {
  Tensor logits = Tensor::Empty({c.batch, c.experts});
  for (int64_t b = 0; b < c.batch; ++b) {
    std::vector<int64_t> order(c.experts);
    std::iota(order.begin(), order.end(), 0);
    for (int64_t i = c.experts - 1; i > 0; --i) {
      std::swap(order[i], order[random.NextBelow(static_cast<uint64_t>(i) + 1)]);
    }
    std::swap(order[b % 2], *std::find(order.begin(), order.end(), 0));
    for (int64_t r = 0; r < c.experts; ++r) {
      logits.data<float>()[b * c.experts + order[r]] =
          static_cast<float>(2.0 - 0.6 * r + random.Uniform(-0.05, 0.05));
    }
  }
  return logits;
}

class MoeRoutingOpsTest : public ::testing::TestWithParam<MoeCase> {
 protected:
  void SetUp() override {
    const MoeCase& c = GetParam();
    RandomStream random(17);
    logits_ = SeparatedLogits(c, random);
    x_ = RandomTensor({c.batch, c.hidden}, random);
    expert_out_ = RandomTensor({c.batch, c.slots, c.hidden}, random);
    graph_ = MoeGraph(c);
    auto executor = GraphExecutor::Create(graph_.get(), /*seed=*/1);
    ASSERT_TRUE(executor.ok()) << executor.status();
    executor_ = std::move(*executor);
  }

  std::vector<Tensor> Inputs() const { return {logits_, x_, expert_out_}; }

  Tensor logits_, x_, expert_out_;
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<GraphExecutor> executor_;
};

TEST_P(MoeRoutingOpsTest, ForwardIsTheRoutingFunctions) {
  const MoeCase& c = GetParam();
  ASSERT_TRUE(executor_->Forward(Inputs()).ok());

  Tensor probs = Tensor::Empty({c.batch, c.experts});
  ASSERT_TRUE(SoftmaxForward(logits_, &probs).ok());
  MoeRoutingOptions options;
  options.k = static_cast<int>(c.k);
  options.normalize_gates = c.normalize;
  options.capacity = MoeSlotCapacity(c.batch, c.experts, c.slots);
  EXPECT_EQ(c.batch * c.slots / c.experts, options.capacity);
  auto routing = RouteTopK(probs, options);
  ASSERT_TRUE(routing.ok()) << routing.status();
  ASSERT_GT(routing->num_dropped, 0) << "the case should drop choices";

  EXPECT_EQ(Values(routing->gate), Values(executor_->output(0)));
  const std::vector<float> encoded = Values(executor_->output(1));
  const std::vector<int32_t> expert = Values<int32_t>(routing->expert);
  const std::vector<int32_t> slot = Values<int32_t>(routing->slot);
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t j = 0; j < c.k; ++j) {
      EXPECT_EQ(static_cast<float>(expert[b * c.k + j]), encoded[b * 2 * c.k + j])
          << b << ", " << j;
      EXPECT_EQ(static_cast<float>(slot[b * c.k + j]), encoded[(b * 2 + 1) * c.k + j])
          << b << ", " << j;
    }
  }

  const int64_t rows = c.experts * options.capacity;
  Tensor buffers = Tensor::Empty({c.experts, options.capacity, c.hidden});
  ASSERT_TRUE(MoeDispatch(x_, *routing, &buffers).ok());
  std::vector<float> expected = Values(buffers);
  expected.resize(c.batch * c.slots * c.hidden, 0.0f);  // The padding rows.
  EXPECT_EQ(expected, Values(executor_->output(2)));

  Tensor out = Tensor::Empty({c.batch, c.hidden});
  const Tensor expert_rows = expert_out_.Reshape({c.batch * c.slots, c.hidden})
                                 .Slice(0, rows)
                                 .Reshape({c.experts, options.capacity, c.hidden});
  ASSERT_TRUE(MoeCombine(expert_rows, routing->gate, *routing, &out).ok());
  EXPECT_EQ(Values(out), Values(executor_->output(3)));
}

TEST_P(MoeRoutingOpsTest, BackwardMatchesFiniteDifferences) {
  const MoeCase& c = GetParam();
  RandomStream random(23);
  // The objective: sum over the outputs of w * output, the routing's
  // included (it is piecewise constant: its weight must not matter).
  std::vector<Tensor> weights;
  for (const Tensor& shape_of :
       {Tensor::Empty({c.batch, c.k}), Tensor::Empty({c.batch, 2, c.k}),
        Tensor::Empty({c.batch, c.slots, c.hidden}), Tensor::Empty({c.batch, c.hidden})}) {
    weights.push_back(RandomTensor(shape_of.shape(), random));
  }
  std::vector<Tensor> inputs = Inputs();
  ASSERT_TRUE(executor_->Forward(inputs).ok());
  std::vector<Tensor> grads;
  for (const Tensor& input : inputs) grads.push_back(Tensor::Empty(input.shape()));
  ASSERT_TRUE(executor_->Backward(weights, {&grads[0], &grads[1], &grads[2]}).ok());

  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE(graph_->values()[graph_->inputs()[i]].name);
    const auto objective = [&](const std::vector<double>& point) {
      std::vector<Tensor> moved = Inputs();
      moved[i] = Tensor::Empty(inputs[i].shape());
      for (size_t e = 0; e < point.size(); ++e) {
        moved[i].data<float>()[e] = static_cast<float>(point[e]);
      }
      CHECK(executor_->Forward(moved).ok());
      double sum = 0.0;
      for (size_t o = 0; o < weights.size(); ++o) {
        sum += WeightedSum(ToDouble(weights[o]), ToDouble(executor_->output(static_cast<int>(o))));
      }
      return sum;
    };
    ExpectAllClose(NumericGradient(objective, ToDouble(inputs[i]), 1e-2), grads[i], 2e-3,
                   "gradient");
  }
}

INSTANTIATE_TEST_SUITE_P(MoeCases, MoeRoutingOpsTest,
                         ::testing::Values(
                             // Capacity 6 = 24 rows for 24 choices; expert 0 overflows.
                             MoeCase{12, 4, 2, 2, 3, true}, MoeCase{12, 4, 2, 2, 3, false},
                             // Capacity 2: 6 of the 7 rows, one padding row.
                             MoeCase{7, 3, 1, 1, 2, false},
                             // Capacity 6 = 24 of the 27 rows.
                             MoeCase{9, 4, 2, 3, 4, true}),
                         CaseName);

TEST(MoeRoutingOpsRegistryTest, EveryRoutingOpHasACpuKernelAndStatesItsCost) {
  const OpRegistry& registry = DefaultOpRegistry();
  for (const char* op : {"moe_route", "moe_dispatch", "moe_combine"}) {
    EXPECT_TRUE(registry.HasKernel(op, DeviceType::kCpu)) << op;
  }
  const MoeCase c{12, 4, 2, 2, 3, false};
  std::unique_ptr<Graph> graph = MoeGraph(c);
  // Nodes: softmax, route, dispatch, combine.
  const OpCost route = graph->NodeCost(1, 64, false);
  EXPECT_EQ(RouteTopKCost(64, 4, 2, false).flops, route.flops);
  EXPECT_EQ(RouteTopKCost(64, 4, 2, false).bytes, route.bytes);
  EXPECT_EQ(MoeGateBackwardCost(64, 4, 2, false).bytes, graph->NodeCost(1, 64, true).bytes);
  // Capacity 32 of 64 * 2 rows: the buffers, then no padding.
  EXPECT_EQ(MoeDispatchCost(64, 4, 32, 2, 3).bytes, graph->NodeCost(2, 64, false).bytes);
  EXPECT_EQ(MoeCombineCost(64, 2, 3).flops, graph->NodeCost(3, 64, false).flops);
  // Capacity 1 = 4 of 6 rows at 3 tokens: two padding rows written.
  EXPECT_EQ(MoeDispatchCost(3, 4, 1, 2, 3).bytes + 4.0 * 2 * 3, graph->NodeCost(2, 3, false).bytes);
}

TEST(MoeRoutingOpsRegistryTest, ShapesThatDoNotFitAreInvalidArgument) {
  Graph g(&DefaultOpRegistry());
  const int probs = *g.AddInput("probs", {3});
  const int x = *g.AddInput("x", {4});
  EXPECT_EQ(StatusCode::kInvalidArgument,
            g.AddNode("route", "moe_route", {probs}, OpAttrs().Set("k", 4)).status().code());
  const std::vector<int> route = *g.AddNode("route", "moe_route", {probs}, OpAttrs().Set("k", 2));
  // moe_dispatch needs its experts and slots.
  EXPECT_EQ(StatusCode::kInvalidArgument,
            g.AddNode("dispatch", "moe_dispatch", {x, route[1]}).status().code());
  // The routing must be moe_route's [2, k].
  EXPECT_EQ(StatusCode::kInvalidArgument, g.AddNode("dispatch", "moe_dispatch", {x, route[0]},
                                                    OpAttrs().Set("experts", 3).Set("slots", 2))
                                              .status()
                                              .code());
  const int buffers = (*g.AddNode("dispatch", "moe_dispatch", {x, route[1]},
                                  OpAttrs().Set("experts", 3).Set("slots", 2)))[0];
  // The gate must have the routing's k weights.
  EXPECT_EQ(
      StatusCode::kInvalidArgument,
      g.AddNode("combine", "moe_combine", {buffers, probs, route[1]}, OpAttrs().Set("experts", 3))
          .status()
          .code());
  EXPECT_TRUE(g.AddNode("combine", "moe_combine", {buffers, route[0], route[1]},
                        OpAttrs().Set("experts", 3))
                  .ok());
}

}  // namespace
}  // namespace ember::ops
