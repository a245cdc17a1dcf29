#include "ops/graph_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/random.h"
#include "core/threads.h"
#include "ops/cross_layer.h"
#include "ops/dense_ops.h"
#include "ops/graph.h"
#include "ops/internal/matmul.h"
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

// A He-uniform parameter's initial value is a pure function of (seed, name):
// tools/bench/ember_random.py reproduces it, so that the PyTorch baseline can
// start from Ember's weights, and tests/tools/bench_data_test.py pins the
// same numbers.
TEST(GraphExecutorTest, HeUniformInitialValuesArePinnedByTheSeedAndTheName) {
  Graph graph(&DefaultOpRegistry());
  const int x = *graph.AddInput("x", {3});
  const int w = *graph.AddParameter("top.0.weight", {2, 3}, Initializer::kHeUniform, 3);
  const int b = *graph.AddParameter("top.0.bias", {2}, Initializer::kZeros);
  const int y = graph.AddNode("top.0", "fully_connected", {x, w, b}, OpAttrs())->at(0);
  ASSERT_TRUE(graph.MarkOutput(y).ok());
  auto executor = GraphExecutor::Create(&graph, 1);
  ASSERT_TRUE(executor.ok()) << executor.status();
  ASSERT_EQ(2u, (*executor)->parameters().size());
  EXPECT_EQ((std::vector<float>{0.531345963f, -1.04143274f, 1.13220489f, -0.571366429f,
                                -0.878497005f, 1.31195569f}),
            Values((*executor)->parameters()[0]));
  EXPECT_EQ((std::vector<float>{0.0f, 0.0f}), Values((*executor)->parameters()[1]));
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

// f16 GEMM arithmetic exists on a CUDA device only, bf16 also on a CPU that
// multiplies bf16 in hardware: the CPU executor refuses the others, saying
// so, and keeps what it had. The names read back.
TEST(GraphExecutorTest, SixteenBitArithmeticOnTheCpuIsBf16WhereTheCpuHasIt) {
  Graph graph(&DefaultOpRegistry());
  const int x = *graph.AddInput("x", {3});
  ASSERT_TRUE(graph.MarkOutput(graph.AddNode("y", "add", {x, x})->at(0)).ok());
  auto executor = GraphExecutor::Create(&graph, 1);
  ASSERT_TRUE(executor.ok());
  EXPECT_TRUE((*executor)->set_precision(ComputePrecision::kF32).ok());
  Status status = (*executor)->set_precision(ComputePrecision::kF16);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), ::testing::HasSubstr("f16 arithmetic needs a CUDA device"));
  EXPECT_EQ(ComputePrecision::kF32, (*executor)->precision());
  status = (*executor)->set_precision(ComputePrecision::kBf16);
  if (internal::CpuHasBf16()) {
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(ComputePrecision::kBf16, (*executor)->precision());
  } else {
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
    EXPECT_THAT(status.message(), ::testing::HasSubstr("needs AVX512-BF16 or AMX"));
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

// to[i] += from[i].
void AddInto(const Tensor& from, Tensor* to) {
  const float* f = from.data<float>();
  float* t = to->data<float>();
  for (int64_t i = 0; i < from.numel(); ++i) t[i] += f[i];
}

// bf16 on the CPU: the executor keeps each product operand's bf16 rounding
// from a layer's forward to its backward, and hands a layer's rounded output
// to the next layer (KernelContext::input_bf16). The results have the bits of
// the kernels called one by one without copies, on the whole batch and on
// two ranges of rows, over two steps with the parameters changed between
// them (the last step's copies of the weights are stale by then).
TEST(GraphExecutorTest, Bf16CopiesGiveTheBitsOfTheKernelsCalledOneByOne) {
  if (!internal::CpuHasBf16()) GTEST_SKIP() << "this CPU has no bf16 products (AVX512-BF16, AMX)";
  const int64_t batch = 160;  // Ranges have at least 64 rows.
  const std::vector<int64_t> widths = {40, 48, 32, 1};
  const size_t layers = widths.size() - 1;
  auto activation = [&](size_t l) {
    return l + 1 < layers ? Activation::kRelu : Activation::kNone;
  };
  Graph graph(&DefaultOpRegistry());
  int v = *graph.AddInput("x", {widths[0]});
  for (size_t l = 0; l < layers; ++l) {
    const std::string name = "fc" + std::to_string(l);
    const int w = *graph.AddParameter(name + ".w", {widths[l + 1], widths[l]},
                                      Initializer::kHeUniform, widths[l]);
    const int b =
        *graph.AddParameter(name + ".b", {widths[l + 1]}, Initializer::kHeUniform, widths[l]);
    const double relu = activation(l) == Activation::kRelu ? 1 : 0;
    v = graph.AddNode(name, "fully_connected", {v, w, b}, OpAttrs().Set("activation", relu))->at(0);
  }
  ASSERT_TRUE(graph.MarkOutput(v).ok());
  for (int shards : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << shards << " range(s) of rows");
    auto executor = GraphExecutor::Create(&graph, 3);
    ASSERT_TRUE(executor.ok()) << executor.status();
    ASSERT_TRUE((*executor)->set_precision(ComputePrecision::kBf16).ok());
    ASSERT_TRUE((*executor)->set_row_shards(shards).ok());
    RandomStream rng(shards);
    ThreadArena arena(1);  // The ranges' kernels run on one thread; so do these.
    arena.Execute([&] {
      SetOpenMpThreads(1);
      for (int step = 0; step < 2; ++step) {
        SCOPED_TRACE(::testing::Message() << "step " << step);
        const Tensor x = RandomTensor({batch, widths[0]}, rng);
        const Tensor dout = RandomTensor({batch, 1}, rng);
        Tensor dx = testing::NanFilled({batch, widths[0]});
        ASSERT_TRUE((*executor)->Forward({x}).ok());
        ASSERT_TRUE((*executor)->Backward({dout}, {&dx}).ok());

        std::vector<Tensor>& p = (*executor)->parameters();
        std::vector<Tensor> grads(p.size());
        Tensor want_out = Tensor::Empty({batch, 1}), want_dx = Tensor::Empty({batch, widths[0]});
        const int64_t rows = batch / shards;
        for (int64_t begin = 0; begin < batch; begin += rows) {
          std::vector<Tensor> acts = {x.Slice(begin, begin + rows)};
          for (size_t l = 0; l < layers; ++l) {
            acts.push_back(Tensor::Empty({rows, widths[l + 1]}));
            ASSERT_TRUE(FullyConnectedForward(acts[l], p[2 * l], p[2 * l + 1], activation(l),
                                              &acts[l + 1], ComputePrecision::kBf16)
                            .ok());
          }
          Tensor g = dout.Slice(begin, begin + rows).Clone();
          for (size_t l = layers; l-- > 0;) {
            Tensor dw = Tensor::Empty(p[2 * l].shape()), db = Tensor::Empty(p[2 * l + 1].shape());
            Tensor dxl = Tensor::Empty({rows, widths[l]});
            ASSERT_TRUE(FullyConnectedBackward(acts[l], p[2 * l], acts[l + 1], g, activation(l),
                                               &dxl, &dw, &db, ComputePrecision::kBf16)
                            .ok());
            // The executor's sum over ranges: the first range's, then the others added in order.
            for (auto [from, to] : {std::pair{&dw, &grads[2 * l]}, {&db, &grads[2 * l + 1]}}) {
              if (to->defined()) {
                AddInto(*from, to);
              } else {
                *to = *from;
              }
            }
            g = dxl;
          }
          std::copy_n(acts.back().data<float>(), rows, want_out.data<float>() + begin);
          std::copy_n(g.data<float>(), rows * widths[0], want_dx.data<float>() + begin * widths[0]);
        }
        EXPECT_TRUE(SameBits(want_out, (*executor)->output(0))) << "output";
        EXPECT_TRUE(SameBits(want_dx, dx)) << "input gradient";
        for (size_t i = 0; i < p.size(); ++i) {
          EXPECT_TRUE(SameBits(grads[i], (*executor)->gradients()[i])) << "parameter " << i;
        }
        // New parameters, as after an optimizer step.
        for (Tensor& t : p) {
          float* d = t.data<float>();
          for (int64_t i = 0; i < t.numel(); ++i) d[i] = 0.75f * d[i] + 0.01f;
        }
      }
    });
  }
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

// --- Row shards ---------------------------------------------------------------

// A small DLRM-like graph with a DCN-v2 layer: a bottom MLP over the dense
// input, the DLRM interaction with the pooled embeddings, a cross layer that
// reads the interaction twice (as x0 and xl: two gradient contributions, one
// through scratch) and a top MLP to one logit; with `dropout`, a dropout
// before the top MLP.
std::unique_ptr<Graph> ShardableGraph(bool dropout) {
  auto graph = std::make_unique<Graph>(&DefaultOpRegistry());
  Graph& g = *graph;
  const int dense = *g.AddInput("dense", {13});
  const int pooled = *g.AddInput("pooled", {4 * 8});
  auto fc = [&](const std::string& name, int x, int64_t in, int64_t out, bool relu) {
    const int w = *g.AddParameter(name + ".w", {out, in}, Initializer::kHeUniform, in);
    const int b = *g.AddParameter(name + ".b", {out}, Initializer::kHeUniform, in);
    return g.AddNode(name, "fully_connected", {x, w, b}, OpAttrs().Set("activation", relu ? 1 : 0))
        ->at(0);
  };
  const int bottom = fc("bottom.1", fc("bottom.0", dense, 13, 24, true), 24, 8, true);
  const int t = g.AddNode("interaction", "dlrm_interaction", {bottom, pooled})->at(0);
  const int64_t width = 8 + 5 * 4 / 2;
  const int w = *g.AddParameter("cross.w", {width, width}, Initializer::kHeUniform, width);
  const int b = *g.AddParameter("cross.b", {width}, Initializer::kHeUniform, width);
  int c = g.AddNode("cross", "cross_layer", {t, t, w, b})->at(0);
  if (dropout) {
    c = g.AddNode("dropout", "dropout", {c}, OpAttrs().Set("rate", 0.3).Set("seed", 5))->at(0);
  }
  CHECK(g.MarkOutput(fc("top.1", fc("top.0", c, width, 16, true), 16, 1, false)).ok());
  return graph;
}

// What one forward and backward gave.
struct ShardRun {
  Tensor out, ddense, dpooled;
  std::vector<Tensor> grads;
};

// One forward and backward of `graph` at `batch` (inputs and output gradient
// seeded by the batch) with `shards`, in an arena of `threads` threads; with
// `split`, the backward in its two halves (BackwardInputs, then
// BackwardWeights), and with `precision` its arithmetic.
ShardRun RunShards(const Graph& graph, int64_t batch, int shards, int threads, bool split = false,
                   ComputePrecision precision = ComputePrecision::kF32) {
  ShardRun run;
  auto executor = GraphExecutor::Create(&graph, 7);
  EXPECT_TRUE(executor.ok()) << executor.status();
  if (!executor.ok()) return run;
  EXPECT_TRUE((*executor)->set_row_shards(shards).ok());
  EXPECT_TRUE((*executor)->set_precision(precision).ok());
  RandomStream rng(batch);
  const Tensor dense = RandomTensor({batch, 13}, rng), pooled = RandomTensor({batch, 32}, rng);
  const Tensor dy = RandomTensor({batch, 1}, rng);
  run.ddense = testing::NanFilled({batch, 13});
  run.dpooled = testing::NanFilled({batch, 32});
  ThreadArena arena(threads);
  arena.Execute([&] {
    SetOpenMpThreads(threads);
    ASSERT_TRUE((*executor)->Forward({dense, pooled}).ok());
    if (!split) {
      ASSERT_TRUE((*executor)->Backward({dy}, {&run.ddense, &run.dpooled}).ok());
      return;
    }
    ASSERT_TRUE((*executor)->BackwardInputs({dy}, {&run.ddense, &run.dpooled}).ok());
    // The deferred gradients are not written by the first half.
    for (size_t i = 0; i < (*executor)->gradients().size(); ++i) {
      if ((*executor)->parameter_deferred(static_cast<int>(i))) {
        (*executor)->gradients()[i] = testing::NanFilled((*executor)->gradients()[i].shape());
      }
    }
    ASSERT_TRUE((*executor)->BackwardWeights().ok());
  });
  run.out = (*executor)->output(0).Clone();
  for (const Tensor& g : (*executor)->gradients()) run.grads.push_back(g.Clone());
  return run;
}

// Every element of `got` within tol * (1 + the largest |want|) of `want`'s.
void ExpectClose(const Tensor& want, const Tensor& got, double tol, const std::string& what) {
  ASSERT_EQ(want.shape(), got.shape()) << what;
  const std::vector<float> a = Values(want), b = Values(got);
  double scale = 0.0;
  for (float v : a) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * (1.0 + scale)) << what << " element " << i;
  }
}

void ExpectSameBits(const ShardRun& want, const ShardRun& got, const std::string& what) {
  EXPECT_TRUE(SameBits(want.out, got.out)) << what << ": output";
  EXPECT_TRUE(SameBits(want.ddense, got.ddense)) << what << ": dense gradient";
  EXPECT_TRUE(SameBits(want.dpooled, got.dpooled)) << what << ": pooled gradient";
  ASSERT_EQ(want.grads.size(), got.grads.size());
  for (size_t i = 0; i < want.grads.size(); ++i) {
    EXPECT_TRUE(SameBits(want.grads[i], got.grads[i])) << what << ": parameter " << i;
  }
}

// Ranges of 1000 rows in 2 and 3 (uneven) shards give the whole batch's
// outputs and input gradients, and its parameter gradients as sums of the
// ranges' (within float rounding: the sums are in another order).
TEST(GraphExecutorRowShardsTest, ShardedRunsGiveTheWholeBatchsResults) {
  const std::unique_ptr<Graph> graph = ShardableGraph(false);
  const ShardRun whole = RunShards(*graph, 1000, 1, 2);
  for (int shards : {2, 3}) {
    const ShardRun sharded = RunShards(*graph, 1000, shards, 2);
    const std::string what = std::to_string(shards) + " shards";
    ExpectClose(whole.out, sharded.out, 1e-5, what + ": output");
    ExpectClose(whole.ddense, sharded.ddense, 1e-5, what + ": dense gradient");
    ExpectClose(whole.dpooled, sharded.dpooled, 1e-5, what + ": pooled gradient");
    ASSERT_EQ(whole.grads.size(), sharded.grads.size());
    for (size_t i = 0; i < whole.grads.size(); ++i) {
      ExpectClose(whole.grads[i], sharded.grads[i], 1e-4,
                  what + ": parameter " + std::to_string(i));
    }
  }
}

// The backward in two halves (the zero-bubble schedules' B and W) gives the
// bits of the whole backward, on the whole batch and in row ranges, in f32
// and (where the CPU has it) bf16: the fully connected layers defer their
// parameter gradients to the second half, the cross layer (whose kernel
// does not split) computes its own in the first.
TEST(GraphExecutorTest, TheBackwardInTwoHalvesGivesTheWholeBackwardsBits) {
  const std::unique_ptr<Graph> graph = ShardableGraph(false);
  std::vector<ComputePrecision> precisions = {ComputePrecision::kF32};
  if (internal::CpuHasBf16()) precisions.push_back(ComputePrecision::kBf16);
  for (ComputePrecision precision : precisions) {
    for (int shards : {1, 3}) {
      const std::string what =
          std::string(ComputePrecisionName(precision)) + ", " + std::to_string(shards) + " shard(s)";
      ExpectSameBits(RunShards(*graph, 1000, shards, 2, false, precision),
                     RunShards(*graph, 1000, shards, 2, true, precision), what);
    }
  }
  auto executor = GraphExecutor::Create(graph.get(), 7);
  ASSERT_TRUE(executor.ok()) << executor.status();
  const std::vector<int>& parameters = graph->parameters();
  for (size_t i = 0; i < parameters.size(); ++i) {
    const std::string& name = graph->values()[parameters[i]].name;
    EXPECT_EQ((*executor)->parameter_deferred(static_cast<int>(i)), name.rfind("cross", 0) != 0)
        << name;
  }
}

// Each parameter is reported once per Backward, with its final gradient:
// in one range as soon as its first reader's backward ran (the top layers'
// before the bottom ones': the order the backward finishes them in), with
// row shards once the ranges are added.
TEST(GraphExecutorTest, EveryParameterIsReportedOnceWithItsFinalGradient) {
  const std::unique_ptr<Graph> graph = ShardableGraph(false);
  for (int shards : {1, 3}) {
    auto executor = GraphExecutor::Create(graph.get(), 7);
    ASSERT_TRUE(executor.ok()) << executor.status();
    GraphExecutor& e = **executor;
    ASSERT_TRUE(e.set_row_shards(shards).ok());
    std::mutex mu;
    std::vector<int> order;
    std::vector<Tensor> at_report(e.gradients().size());
    e.set_on_gradient_ready([&](int parameter) {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(parameter);
      at_report[parameter] = e.gradients()[parameter].Clone();
    });
    RandomStream rng(3);
    const Tensor dense = RandomTensor({1000, 13}, rng), pooled = RandomTensor({1000, 32}, rng);
    const Tensor dy = RandomTensor({1000, 1}, rng);
    for (int step = 0; step < 2; ++step) {
      order.clear();
      ASSERT_TRUE(e.Forward({dense, pooled}).ok());
      ASSERT_TRUE(e.Backward({dy}, {nullptr, nullptr}).ok());
      const std::string what = std::to_string(shards) + " shard(s), step " + std::to_string(step);
      std::vector<int> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      std::vector<int> every(e.gradients().size());
      std::iota(every.begin(), every.end(), 0);
      EXPECT_EQ(every, sorted) << what << ": each parameter once";
      for (size_t i = 0; i < every.size(); ++i) {
        EXPECT_TRUE(SameBits(e.gradients()[i], at_report[i])) << what << ": parameter " << i;
      }
      if (shards == 1) {
        // top.1 (the last parameters) first, bottom.0 (the first) last.
        ASSERT_FALSE(order.empty());
        const std::string first = graph->values()[graph->parameters()[order.front()]].name;
        const std::string last = graph->values()[graph->parameters()[order.back()]].name;
        EXPECT_EQ(0u, first.rfind("top.1", 0)) << what << ": first " << first;
        EXPECT_EQ(0u, last.rfind("bottom.0", 0)) << what << ": last " << last;
      }
    }
  }
}

// The halves run in order, between one Forward and the next.
TEST(GraphExecutorTest, TheHalvesOfABackwardRunInOrder) {
  const std::unique_ptr<Graph> graph = ShardableGraph(false);
  auto executor = GraphExecutor::Create(graph.get(), 7);
  ASSERT_TRUE(executor.ok()) << executor.status();
  RandomStream rng(1);
  const Tensor dense = RandomTensor({8, 13}, rng), pooled = RandomTensor({8, 32}, rng);
  const Tensor dy = RandomTensor({8, 1}, rng);
  GraphExecutor& e = **executor;
  ASSERT_TRUE(e.Forward({dense, pooled}).ok());
  testing::ExpectStatus(e.BackwardWeights(), StatusCode::kFailedPrecondition,
                        "without a BackwardInputs");
  ASSERT_TRUE(e.BackwardInputs({dy}, {nullptr, nullptr}).ok());
  testing::ExpectStatus(e.Forward({dense, pooled}), StatusCode::kFailedPrecondition,
                        "before the BackwardWeights");
  testing::ExpectStatus(e.Backward({dy}, {nullptr, nullptr}), StatusCode::kFailedPrecondition,
                        "before the BackwardWeights");
  ASSERT_TRUE(e.BackwardWeights().ok());
  EXPECT_TRUE(e.Forward({dense, pooled}).ok());
}

// The results depend on the number of shards, not on the threads that run
// them; 0 shards means one per thread of the arena.
TEST(GraphExecutorRowShardsTest, ResultsDependOnTheShardsNotOnTheThreads) {
  const std::unique_ptr<Graph> graph = ShardableGraph(false);
  const ShardRun three = RunShards(*graph, 1000, 3, 1);
  ExpectSameBits(three, RunShards(*graph, 1000, 3, 2), "3 shards on 2 threads");
  ExpectSameBits(RunShards(*graph, 1000, 2, 1), RunShards(*graph, 1000, 0, 2),
                 "0 shards on 2 threads");
  ExpectSameBits(RunShards(*graph, 1000, 1, 1), RunShards(*graph, 1000, 0, 1),
                 "0 shards on 1 thread");
}

// A batch of fewer than 64 rows a shard runs in fewer shards (here one, on
// one thread whatever the arena: the bits of no split on one thread), and a
// graph with dropout (whose mask is indexed by position in the batch) runs
// whole: the same bits as without shards.
TEST(GraphExecutorRowShardsTest, SmallBatchesRunInFewerShardsAndGraphsWithDropoutWhole) {
  const std::unique_ptr<Graph> graph = ShardableGraph(false);
  ExpectSameBits(RunShards(*graph, 100, 1, 1), RunShards(*graph, 100, 2, 2), "100 rows");
  const std::unique_ptr<Graph> with_dropout = ShardableGraph(true);
  ExpectSameBits(RunShards(*with_dropout, 1000, 1, 2), RunShards(*with_dropout, 1000, 2, 2),
                 "dropout");
}

TEST(GraphExecutorRowShardsTest, NegativeShardsAreInvalid) {
  const std::unique_ptr<Graph> graph = ShardableGraph(false);
  auto executor = GraphExecutor::Create(graph.get(), 7);
  ASSERT_TRUE(executor.ok());
  testing::ExpectInvalid((*executor)->set_row_shards(-1), "row shards must be >= 0");
  EXPECT_EQ(1, (*executor)->row_shards());
}

}  // namespace
}  // namespace ember::ops
