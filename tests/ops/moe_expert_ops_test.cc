// A whole routed MoE layer (ops/moe_expert_ops.h): gate, balance loss, top-k
// routing with a capacity, dispatch, two layers of expert MLPs and combine,
// run by a GraphExecutor and checked against a double-precision reference:
// its forward, its statistics, and every gradient (the tokens', the gate's
// and each expert's parameters) against finite differences with the routing
// held fixed, as the backward defines it.

#include "ops/moe_expert_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "ops/graph.h"
#include "ops/graph_executor.h"
#include "ops/moe_routing_ops.h"
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

struct LayerCase {
  int64_t batch, width, experts, k, hidden1, hidden2;
  double capacity_factor;
  double aux_weight;
};

std::string Describe(const LayerCase& c) {
  return "batch" + std::to_string(c.batch) + "_experts" + std::to_string(c.experts) + "_k" +
         std::to_string(c.k) + "_factor" + std::to_string(static_cast<int>(c.capacity_factor * 100));
}

void PrintTo(const LayerCase& c, std::ostream* os) { *os << Describe(c); }

int64_t Slots(const LayerCase& c) {
  return static_cast<int64_t>(std::ceil(c.capacity_factor * static_cast<double>(c.k)));
}

struct Layer {
  std::unique_ptr<Graph> graph;
  // Graph outputs: 0 the layer's output [H2], 1 the routing [2, k], 2 the
  // balance loss shares [1].
  int route = -1, balance = -1;
};

// x [D] -> out [H2], as engine/models/moe.cc builds it; parameters in the
// order gate weight [E, D], gate bias [E], then weight and bias of each
// expert layer.
// `routing_input`: the expert layers also read the routing, which an
// inference forward needs (ops/moe_routing_ops.h); a training forward does
// not read it.
Layer BuildLayer(const LayerCase& c, bool routing_input = false) {
  Layer layer;
  layer.graph = std::make_unique<Graph>(&DefaultOpRegistry());
  Graph& g = *layer.graph;
  OpAttrs routing;
  routing.Set("experts", c.experts).Set("k", c.k).Set("slots", Slots(c))
      .Set("capacity_factor", c.capacity_factor);
  const int x = *g.AddInput("x", {c.width});
  const int wg = *g.AddParameter("gate.weight", {c.experts, c.width}, Initializer::kZeros);
  const int bg = *g.AddParameter("gate.bias", {c.experts}, Initializer::kZeros);
  const int logits = (*g.AddNode("gate", "fully_connected", {x, wg, bg}))[0];
  const int probs = (*g.AddNode("softmax", "softmax", {logits}))[0];
  const std::vector<int> balanced =
      *g.AddNode("balance", "moe_balance", {probs}, OpAttrs().Set("weight", c.aux_weight));
  OpAttrs route_attrs = routing;
  route_attrs.Set("normalize", c.k > 1 ? 1 : 0);
  const std::vector<int> route = *g.AddNode("route", "moe_route", {balanced[0]}, route_attrs);
  int h = (*g.AddNode("dispatch", "moe_dispatch", {x, route[1]}, routing))[0];
  int64_t in = c.width;
  int l = 0;
  for (const int64_t out : {c.hidden1, c.hidden2}) {
    const std::string name = "expert." + std::to_string(l++);
    const int w = *g.AddParameter(name + ".weight", {c.experts, out, in}, Initializer::kZeros);
    const int b = *g.AddParameter(name + ".bias", {c.experts, out}, Initializer::kZeros);
    OpAttrs fc = routing;
    fc.Set("activation", 1);
    std::vector<int> inputs = {h, w, b};
    if (routing_input) inputs.push_back(route[1]);
    h = (*g.AddNode(name, "moe_expert_fc", inputs, fc))[0];
    in = out;
  }
  const int out = (*g.AddNode("combine", "moe_combine", {h, route[0], route[1]}, routing))[0];
  EXPECT_TRUE(g.MarkOutput(out).ok());
  EXPECT_TRUE(g.MarkOutput(route[1]).ok());
  EXPECT_TRUE(g.MarkOutput(balanced[1]).ok());
  layer.route = route[1];
  layer.balance = balanced[1];
  return layer;
}

// The layer in double precision at `point` = [x, then every parameter in
// graph order], with the routing (experts, slots; -1 dropped) and the
// balance loss's dispatch fractions `f` held fixed. Returns
// sum(dy * out) + aux_weight * aux; `out` and `aux` when non-null.
double Reference(const LayerCase& c, const std::vector<double>& point,
                 const std::vector<float>& routing, const std::vector<double>& f,
                 const std::vector<double>& dy, std::vector<double>* out_values = nullptr,
                 double* aux_value = nullptr) {
  const int64_t B = c.batch, D = c.width, E = c.experts, K = c.k, H1 = c.hidden1, H2 = c.hidden2;
  const double* x = point.data();
  const double* wg = x + B * D;
  const double* bg = wg + E * D;
  const double* w1 = bg + E;
  const double* b1 = w1 + E * H1 * D;
  const double* w2 = b1 + E * H1;
  const double* b2 = w2 + E * H2 * H1;
  std::vector<double> out(B * H2, 0.0);
  double aux = 0.0;
  for (int64_t b = 0; b < B; ++b) {
    const double* xb = x + b * D;
    std::vector<double> p(E);
    double top = -1e300, sum = 0.0;
    for (int64_t e = 0; e < E; ++e) {
      p[e] = bg[e];
      for (int64_t d = 0; d < D; ++d) p[e] += wg[e * D + d] * xb[d];
      top = std::max(top, p[e]);
    }
    for (double& v : p) sum += (v = std::exp(v - top));
    for (double& v : p) v /= sum;
    for (int64_t e = 0; e < E; ++e) aux += static_cast<double>(E) * f[e] * p[e] / B;
    double denom = 1.0;
    if (K > 1) {
      denom = 0.0;
      for (int64_t j = 0; j < K; ++j) denom += p[static_cast<int64_t>(routing[b * 2 * K + j])];
    }
    for (int64_t j = 0; j < K; ++j) {
      const int64_t e = static_cast<int64_t>(routing[b * 2 * K + j]);
      if (routing[b * 2 * K + K + j] < 0) continue;  // Dropped.
      std::vector<double> h1(H1), h2(H2);
      for (int64_t o = 0; o < H1; ++o) {
        double z = b1[e * H1 + o];
        for (int64_t d = 0; d < D; ++d) z += w1[(e * H1 + o) * D + d] * xb[d];
        h1[o] = std::max(z, 0.0);
      }
      for (int64_t o = 0; o < H2; ++o) {
        double z = b2[e * H2 + o];
        for (int64_t d = 0; d < H1; ++d) z += w2[(e * H2 + o) * H1 + d] * h1[d];
        h2[o] = std::max(z, 0.0);
      }
      for (int64_t o = 0; o < H2; ++o) out[b * H2 + o] += p[e] / denom * h2[o];
    }
  }
  double objective = c.aux_weight * aux;
  for (size_t i = 0; i < out.size(); ++i) objective += dy[i] * out[i];
  if (out_values != nullptr) *out_values = out;
  if (aux_value != nullptr) *aux_value = aux;
  return objective;
}

class MoeLayerTest : public ::testing::TestWithParam<LayerCase> {};

TEST_P(MoeLayerTest, ForwardStatsAndEveryGradientMatchTheReference) {
  const LayerCase c = GetParam();
  Layer layer = BuildLayer(c);
  auto executor = GraphExecutor::Create(layer.graph.get(), 1);
  ASSERT_TRUE(executor.ok()) << executor.status();
  RandomStream rng(7, 0);
  // Random parameters (the zeros of the graph would make every expert the
  // same); a wide gate so that the top choices are far apart.
  std::vector<double> point;
  const Tensor x = RandomTensor({c.batch, c.width}, rng);
  for (double v : ToDouble(x)) point.push_back(v);
  for (size_t i = 0; i < (*executor)->parameters().size(); ++i) {
    Tensor& p = (*executor)->parameters()[i];
    const double scale = i < 2 ? 2.0 : 0.6;
    const Tensor r = RandomTensor(p.shape(), rng, -scale, scale);
    std::copy(r.data<float>(), r.data<float>() + r.numel(), p.data<float>());
    for (double v : ToDouble(p)) point.push_back(v);
  }
  ASSERT_TRUE((*executor)->Forward({x}).ok());
  const std::vector<float> routing = Values((*executor)->output(1));

  // f: the top-1 fractions, each token's first choice.
  std::vector<double> f(c.experts, 0.0);
  for (int64_t b = 0; b < c.batch; ++b) f[static_cast<int64_t>(routing[b * 2 * c.k])] += 1.0;
  for (double& v : f) v /= static_cast<double>(c.batch);
  std::vector<double> expected_out;
  double expected_aux = 0.0;
  const Tensor dy = RandomTensor({c.batch, c.hidden2}, rng);
  const std::vector<double> dy_d = ToDouble(dy);
  Reference(c, point, routing, f, dy_d, &expected_out, &expected_aux);
  ExpectAllClose(expected_out, (*executor)->output(0), 1e-5, "out");

  // Statistics: drops counted from the routing, the balance loss summed.
  const MoeStepStats stats = CollectMoeStats(*layer.graph, [&](int id) -> const Tensor* {
    if (id == layer.route) return &(*executor)->output(1);
    if (id == layer.balance) return &(*executor)->output(2);
    return nullptr;
  });
  int64_t dropped = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t j = 0; j < c.k; ++j) dropped += routing[b * 2 * c.k + c.k + j] < 0;
  }
  EXPECT_EQ(1, stats.layers);
  EXPECT_EQ(c.batch * c.k, stats.choices);
  EXPECT_EQ(dropped, stats.dropped_choices);
  EXPECT_NEAR(expected_aux, stats.aux_loss, 1e-5);
  const int64_t capacity =
      MoeNodeCapacity(c.batch, c.experts, Slots(c), c.k, OpAttrs().Set("capacity_factor",
                                                                         c.capacity_factor));
  EXPECT_GE(dropped, c.batch * c.k - c.experts * capacity) << "more choices than slots";

  Tensor dx = Tensor::Empty({c.batch, c.width});
  ASSERT_TRUE((*executor)
                  ->Backward({dy, Tensor::Zeros({c.batch, 2, c.k}), Tensor::Zeros({c.batch, 1})},
                             {&dx})
                  .ok());
  const std::vector<double> numeric = NumericGradient(
      [&](const std::vector<double>& at) { return Reference(c, at, routing, f, dy_d); }, point);
  size_t offset = 0;
  auto expect_part = [&](const Tensor& actual, const std::string& what) {
    const std::vector<double> part(numeric.begin() + offset,
                                   numeric.begin() + offset + actual.numel());
    ExpectAllClose(part, actual, 1e-3, what);
    offset += actual.numel();
  };
  expect_part(dx, "dx");
  const std::vector<GraphValue>& values = layer.graph->values();
  for (size_t i = 0; i < (*executor)->gradients().size(); ++i) {
    expect_part((*executor)->gradients()[i], "d " + values[layer.graph->parameters()[i]].name);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MoeLayerTest,
    ::testing::Values(
        // Switch: top-1, capacity 1.0 (drops), and room for every token.
        LayerCase{16, 5, 4, 1, 6, 3, 1.0, 0.1}, LayerCase{16, 5, 4, 1, 6, 3, 4.0, 0.1},
        // GShard: top-2 with normalised gates, a fractional factor (drops).
        LayerCase{12, 4, 3, 2, 5, 4, 0.75, 0.05}, LayerCase{9, 4, 3, 2, 5, 4, 1.25, 0.0}),
    [](const auto& info) { return Describe(info.param); });

// An inference forward routes without capacity: every choice is kept, each
// example's output is the reference's with its full routing, and it is the
// same in any batch (here alone and reversed); a training forward of the
// same batch drops choices. No backward follows an inference forward.
TEST(MoeLayerOpsTest, AnInferenceScoresEachExampleAloneAndDropsNothing) {
  const LayerCase c{24, 5, 4, 2, 6, 3, 1.0, 0.0};
  Layer layer = BuildLayer(c, /*routing_input=*/true);
  auto executor = GraphExecutor::Create(layer.graph.get(), 1);
  ASSERT_TRUE(executor.ok()) << executor.status();
  RandomStream rng(11, 0);
  const Tensor x = RandomTensor({c.batch, c.width}, rng);
  std::vector<double> point = ToDouble(x);
  for (Tensor& p : (*executor)->parameters()) {
    const Tensor values = RandomTensor(p.shape(), rng);
    std::memcpy(p.raw_data(), values.raw_data(), values.nbytes());
    for (double v : ToDouble(p)) point.push_back(v);
  }
  ASSERT_TRUE((*executor)->Forward({x}, /*training=*/true).ok());
  int64_t dropped_in_training = 0;
  for (float s : Values((*executor)->output(1))) dropped_in_training += s < 0;
  EXPECT_GT(dropped_in_training, 0) << "the case should drop in training";

  ASSERT_TRUE((*executor)->Forward({x}, /*training=*/false).ok());
  const std::vector<float> routing = Values((*executor)->output(1));
  const std::vector<float> out = Values((*executor)->output(0));
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t j = 0; j < c.k; ++j) {
      EXPECT_EQ(routing[b * 2 * c.k + c.k + j], static_cast<float>(j)) << "token " << b;
    }
  }
  std::vector<double> expected;
  const std::vector<double> f(c.experts, 0.0), dy(c.batch * c.hidden2, 0.0);
  Reference(c, point, routing, f, dy, &expected);
  ExpectAllClose(expected, (*executor)->output(0), 1e-5, "inference out");

  // Alone and in another order: the same scores.
  for (int64_t b = 0; b < c.batch; ++b) {
    const Tensor one = x.Slice(b, b + 1).Clone();
    ASSERT_TRUE((*executor)->Forward({one}, /*training=*/false).ok());
    const std::vector<float> alone = Values((*executor)->output(0));
    for (int64_t h = 0; h < c.hidden2; ++h) {
      EXPECT_NEAR(alone[h], out[b * c.hidden2 + h], 1e-6) << "token " << b << " alone";
    }
  }
  Tensor reversed = Tensor::Empty({c.batch, c.width});
  for (int64_t b = 0; b < c.batch; ++b) {
    std::memcpy(reversed.data<float>() + b * c.width, x.data<float>() + (c.batch - 1 - b) * c.width,
                static_cast<size_t>(c.width) * sizeof(float));
  }
  ASSERT_TRUE((*executor)->Forward({reversed}, /*training=*/false).ok());
  const std::vector<float> back = Values((*executor)->output(0));
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.hidden2; ++h) {
      EXPECT_NEAR(back[(c.batch - 1 - b) * c.hidden2 + h], out[b * c.hidden2 + h], 1e-6)
          << "token " << b << " reversed";
    }
  }
  Tensor dx = Tensor::Empty({c.batch, c.width});
  const Status backward = (*executor)->Backward(
      {Tensor::Zeros({c.batch, c.hidden2}), Tensor::Zeros({c.batch, 2, c.k}),
       Tensor::Zeros({c.batch, 1})},
      {&dx});
  EXPECT_EQ(StatusCode::kFailedPrecondition, backward.code()) << backward;
}

TEST(MoeNodeCapacityTest, AFractionalFactorGivesTheCapacityItNames) {
  const OpAttrs none;
  const OpAttrs factor = OpAttrs().Set("capacity_factor", 1.25);
  // 100 tokens, 4 experts, k = 1: the slots alone give 2 * 100 / 4 = 50.
  EXPECT_EQ(50, MoeNodeCapacity(100, 4, 2, 1, none));
  EXPECT_EQ(32, MoeNodeCapacity(100, 4, 2, 1, factor));  // ceil(1.25 * 100 / 4)
  // Top-2 with 3 slots: ceil(1.25 * 2 * 10 / 3) = 9, under floor(30 / 3) = 10.
  EXPECT_EQ(9, MoeNodeCapacity(10, 3, 3, 2, factor));
  // The slots bound it: a factor of 4 with one slot is one slot's capacity.
  EXPECT_EQ(25, MoeNodeCapacity(100, 4, 1, 1, OpAttrs().Set("capacity_factor", 4.0)));
}

TEST(MoeLayerOpsTest, RoomForEveryTokenDropsNone) {
  // capacity_factor * k = E: each expert can take the whole batch.
  const LayerCase c{32, 4, 4, 2, 3, 2, 2.0, 0.01};
  Layer layer = BuildLayer(c);
  auto executor = GraphExecutor::Create(layer.graph.get(), 1);
  ASSERT_TRUE(executor.ok()) << executor.status();
  RandomStream rng(3, 0);
  Tensor& gate = (*executor)->parameters()[0];
  const Tensor r = RandomTensor(gate.shape(), rng, -3.0, 3.0);
  std::copy(r.data<float>(), r.data<float>() + r.numel(), gate.data<float>());
  ASSERT_TRUE((*executor)->Forward({RandomTensor({c.batch, c.width}, rng)}).ok());
  const MoeStepStats stats = CollectMoeStats(*layer.graph, [&](int id) -> const Tensor* {
    return id == layer.route ? &(*executor)->output(1) : nullptr;
  });
  EXPECT_EQ(c.batch * c.k, stats.choices);
  EXPECT_EQ(0, stats.dropped_choices);
  EXPECT_EQ(0, stats.dropped_examples);
}

TEST(MoeLayerOpsTest, BadAttributesAreRefusedNamingThem) {
  Graph g(&DefaultOpRegistry());
  const int x = *g.AddInput("x", {4, 3});
  const int w = *g.AddParameter("w", {2, 5, 3}, Initializer::kZeros);
  const int b = *g.AddParameter("b", {2, 5}, Initializer::kZeros);
  auto bad_k = g.AddNode("fc", "moe_expert_fc", {x, w, b}, OpAttrs().Set("k", 3));
  ASSERT_FALSE(bad_k.ok());
  EXPECT_NE(std::string::npos, bad_k.status().message().find("k=3"));
  const int wrong = *g.AddParameter("wrong", {2, 5, 4}, Initializer::kZeros);
  EXPECT_FALSE(g.AddNode("fc2", "moe_expert_fc", {x, wrong, b}).ok());
  const int probs = *g.AddInput("probs", {3});
  auto bad_weight = g.AddNode("balance", "moe_balance", {probs}, OpAttrs().Set("weight", -1));
  ASSERT_FALSE(bad_weight.ok());
  EXPECT_NE(std::string::npos, bad_weight.status().message().find("weight"));
}

}  // namespace
}  // namespace ember::ops
