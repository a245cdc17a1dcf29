#include "ops/graph_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/random.h"
#include "ops/cross_layer.h"
#include "ops/graph.h"
#include "ops/op_registry.h"
#include "tests/ops/gradient_check.h"
#include "tests/ops/test_tensors.h"

namespace ember::ops {
namespace {

using testing::RandomTensor;
using testing::SameBits;
using testing::Values;

// What the backward of "square" saw.
struct SeenByBackward {
  size_t outputs = 0;
  size_t output_grads = 0;
  bool saved_grad_is_null = false;
  std::vector<float> saved;
};

// y = x^2, saving 2x (dy/dx) for the backward, which computes dx = dy * 2x
// from it alone.
std::unique_ptr<OpRegistry> SquareRegistry(SeenByBackward* seen) {
  auto registry = std::make_unique<OpRegistry>();
  OpDef def;
  def.name = "square";
  def.infer = [](const std::vector<InputShape>& in,
                 const OpAttrs&) -> Result<std::vector<std::vector<int64_t>>> {
    return std::vector<std::vector<int64_t>>{in[0].shape, in[0].shape};
  };
  def.saved_outputs = 1;
  CHECK(registry->RegisterOp(def).ok());
  KernelPair kernels;
  kernels.forward = [](KernelContext& c) {
    const float* x = c.inputs[0]->data<float>();
    float* y = c.outputs[0]->data<float>();
    float* slope = c.outputs[1]->data<float>();
    for (int64_t i = 0; i < c.inputs[0]->numel(); ++i) {
      y[i] = x[i] * x[i];
      slope[i] = 2.0f * x[i];
    }
    return Status::OK();
  };
  kernels.backward = [seen](KernelContext& c) {
    seen->outputs = c.outputs.size();
    seen->output_grads = c.output_grads.size();
    seen->saved_grad_is_null = c.output_grads.size() == 2 && c.output_grads[1] == nullptr;
    seen->saved = Values(*c.outputs[1]);
    const float* dy = c.output_grads[0]->data<float>();
    const float* slope = c.outputs[1]->data<float>();
    float* dx = c.input_grads[0]->data<float>();
    for (int64_t i = 0; i < c.inputs[0]->numel(); ++i) dx[i] = dy[i] * slope[i];
    return Status::OK();
  };
  CHECK(registry->RegisterKernel("square", DeviceType::kCpu, kernels).ok());
  return registry;
}

TEST(GraphExecutorTest, ASavedOutputReachesTheBackwardWithANullGradient) {
  SeenByBackward seen;
  std::unique_ptr<OpRegistry> registry = SquareRegistry(&seen);
  Graph graph(registry.get());
  const int x = *graph.AddInput("x", {3});
  const std::vector<int> y = *graph.AddNode("sq", "square", {x});
  ASSERT_TRUE(graph.MarkOutput(y[0]).ok());
  auto executor = GraphExecutor::Create(&graph, 1);
  ASSERT_TRUE(executor.ok()) << executor.status();

  const Tensor input = Tensor::FromVector({1, -2, 3, 0.5, 0, -1}, {2, 3});
  ASSERT_TRUE((*executor)->Forward({input}).ok());
  EXPECT_EQ((std::vector<float>{1, 4, 9, 0.25, 0, 1}), Values((*executor)->output(0)));
  Tensor dx = testing::NanFilled({2, 3});
  const Tensor dy = Tensor::FromVector({1, 1, 1, 2, 2, 2}, {2, 3});
  ASSERT_TRUE((*executor)->Backward({dy}, {&dx}).ok());
  EXPECT_EQ(2u, seen.outputs);
  EXPECT_EQ(2u, seen.output_grads);
  EXPECT_TRUE(seen.saved_grad_is_null);
  EXPECT_EQ((std::vector<float>{2, -4, 6, 1, 0, -2}), seen.saved);
  // d(x^2)/dx = 2x, times dy.
  EXPECT_EQ((std::vector<float>{2, -4, 6, 2, 0, -4}), Values(dx));
}

// y = add(add(add(x, x), x), x) = 4x: the backward adds x's gradient from
// the three nodes, two of them in one node, through the executor's scratch.
TEST(GraphExecutorTest, AValueReadTwiceByOneNodeAndByOthersGetsEveryContribution) {
  Graph graph(&DefaultOpRegistry());
  const int x = *graph.AddInput("x", {3});
  const int s = graph.AddNode("s", "add", {x, x})->at(0);
  const int t = graph.AddNode("t", "add", {s, x})->at(0);
  const int y = graph.AddNode("y", "add", {t, x})->at(0);
  ASSERT_TRUE(graph.MarkOutput(y).ok());
  auto executor = GraphExecutor::Create(&graph, 1);
  ASSERT_TRUE(executor.ok()) << executor.status();
  // Twice at one batch (the scratch is reused), then at another.
  for (int64_t batch : {2, 2, 5}) {
    RandomStream rng(batch);
    const Tensor input = RandomTensor({batch, 3}, rng), dy = RandomTensor({batch, 3}, rng);
    ASSERT_TRUE((*executor)->Forward({input}).ok());
    Tensor dx = testing::NanFilled({batch, 3});
    ASSERT_TRUE((*executor)->Backward({dy}, {&dx}).ok());
    std::vector<float> want = Values(dy);
    for (float& v : want) v *= 4.0f;  // Exact: sums of equal powers of two.
    EXPECT_EQ(want, Values(dx)) << "batch " << batch;
  }
}

TEST(GraphExecutorTest, ACudaDeviceIsRefusedSayingWhyWhenThereIsNone) {
  if (CudaDeviceAvailable()) GTEST_SKIP() << "checks the refusal where no CUDA device is present";
  Graph graph(&DefaultOpRegistry());
  const int x = *graph.AddInput("x", {3});
  ASSERT_TRUE(graph.MarkOutput(graph.AddNode("y", "add", {x, x})->at(0)).ok());
  auto executor = GraphExecutor::Create(&graph, 1, Device::Cuda(0));
  EXPECT_EQ(StatusCode::kFailedPrecondition, executor.status().code()) << executor.status();
  EXPECT_THAT(executor.status().message(),
              ::testing::HasSubstr(CudaCompiledIn() ? "0 CUDA device(s) are present"
                                                    : "built without CUDA"));
}

// 16-bit GEMM arithmetic exists on a CUDA device only: the CPU executor
// refuses it, saying so, and keeps f32. The names read back.
TEST(GraphExecutorTest, SixteenBitArithmeticIsRefusedOnTheCpu) {
  Graph graph(&DefaultOpRegistry());
  const int x = *graph.AddInput("x", {3});
  ASSERT_TRUE(graph.MarkOutput(graph.AddNode("y", "add", {x, x})->at(0)).ok());
  auto executor = GraphExecutor::Create(&graph, 1);
  ASSERT_TRUE(executor.ok());
  EXPECT_TRUE((*executor)->set_precision(ComputePrecision::kF32).ok());
  for (ComputePrecision p : {ComputePrecision::kBf16, ComputePrecision::kF16}) {
    const Status status = (*executor)->set_precision(p);
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
    EXPECT_THAT(status.message(), ::testing::HasSubstr("arithmetic needs a CUDA device"));
    EXPECT_EQ(ComputePrecision::kF32, (*executor)->precision());
  }
  for (ComputePrecision p :
       {ComputePrecision::kF32, ComputePrecision::kBf16, ComputePrecision::kF16}) {
    Result<ComputePrecision> back = ParseComputePrecision(ComputePrecisionName(p));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(p, *back);
  }
  EXPECT_EQ(StatusCode::kInvalidArgument, ParseComputePrecision("fp8").status().code());
}

// A graph of one cross layer (full or low rank) gives, bit for bit, the
// gradients of the operator called directly without saved intermediates
// (that path is checked against finite differences in cross_layer_test).
void ExpectGraphMatchesDirectCall(bool low_rank) {
  const int64_t batch = 7, dim = 9, rank = 3;
  Graph graph(&DefaultOpRegistry());
  const int x0 = *graph.AddInput("x0", {dim});
  const int xl = *graph.AddInput("xl", {dim});
  std::vector<int> inputs = {x0, xl};
  if (low_rank) {
    inputs.push_back(*graph.AddParameter("u", {dim, rank}, Initializer::kHeUniform, dim));
    inputs.push_back(*graph.AddParameter("v", {dim, rank}, Initializer::kHeUniform, dim));
  } else {
    inputs.push_back(*graph.AddParameter("w", {dim, dim}, Initializer::kHeUniform, dim));
  }
  inputs.push_back(*graph.AddParameter("b", {dim}, Initializer::kHeUniform, dim));
  const std::vector<int> y =
      *graph.AddNode("cross", low_rank ? "cross_layer_low_rank" : "cross_layer", inputs);
  ASSERT_EQ(low_rank ? 3u : 2u, y.size());
  ASSERT_TRUE(graph.MarkOutput(y[0]).ok());
  auto executor = GraphExecutor::Create(&graph, 5);
  ASSERT_TRUE(executor.ok()) << executor.status();

  RandomStream rng(low_rank ? 11 : 12);
  const Tensor a = RandomTensor({batch, dim}, rng), x = RandomTensor({batch, dim}, rng);
  const Tensor dout = RandomTensor({batch, dim}, rng);
  ASSERT_TRUE((*executor)->Forward({a, x}).ok());
  Tensor dx0 = testing::NanFilled({batch, dim}), dxl = testing::NanFilled({batch, dim});
  ASSERT_TRUE((*executor)->Backward({dout}, {&dx0, &dxl}).ok());

  const std::vector<Tensor>& p = (*executor)->parameters();
  Tensor out = Tensor::Empty({batch, dim});
  Tensor want_dx0 = Tensor::Empty({batch, dim}), want_dxl = Tensor::Empty({batch, dim});
  std::vector<Tensor> want_grads;
  for (const Tensor& param : p) want_grads.push_back(Tensor::Empty(param.shape()));
  if (low_rank) {
    ASSERT_TRUE(LowRankCrossLayerForward(a, x, p[0], p[1], p[2], &out).ok());
    ASSERT_TRUE(LowRankCrossLayerBackward(a, x, p[0], p[1], p[2], dout, &want_dx0, &want_dxl,
                                          &want_grads[0], &want_grads[1], &want_grads[2])
                    .ok());
  } else {
    ASSERT_TRUE(CrossLayerForward(a, x, p[0], p[1], &out).ok());
    ASSERT_TRUE(CrossLayerBackward(a, x, p[0], p[1], dout, &want_dx0, &want_dxl, &want_grads[0],
                                   &want_grads[1])
                    .ok());
  }
  EXPECT_TRUE(SameBits(out, (*executor)->output(0)));
  EXPECT_TRUE(SameBits(want_dx0, dx0));
  EXPECT_TRUE(SameBits(want_dxl, dxl));
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_TRUE(SameBits(want_grads[i], (*executor)->gradients()[i])) << "parameter " << i;
  }
}

TEST(GraphExecutorTest, CrossLayerFromItsSavedZMatchesTheOperatorBitForBit) {
  ExpectGraphMatchesDirectCall(false);
}

TEST(GraphExecutorTest, LowRankCrossLayerFromItsSavedTAndZMatchesTheOperatorBitForBit) {
  ExpectGraphMatchesDirectCall(true);
}

}  // namespace
}  // namespace ember::ops
