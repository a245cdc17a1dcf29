#include "ops/moe_routing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "tests/ops/gradient_check.h"
#include "tests/ops/test_tensors.h"

namespace ember::ops {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::ExpectAllClose;
using testing::ExpectInvalid;
using ::testing::FloatEq;
using ::testing::HasSubstr;
using testing::NumericGradient;
using testing::RandomTensor;
using testing::ToDouble;
using testing::Values;
using testing::WeightedSum;

Tensor I32(const std::vector<int32_t>& values, std::vector<int64_t> shape) {
  Tensor tensor = Tensor::Empty(std::move(shape), DType::kI32);
  for (size_t i = 0; i < values.size(); ++i) tensor.data<int32_t>()[i] = values[i];
  return tensor;
}

std::vector<double> ReferenceSoftmax(const std::vector<double>& z, int64_t batch, int64_t experts) {
  std::vector<double> p(z.size());
  for (int64_t b = 0; b < batch; ++b) {
    double max = -INFINITY, sum = 0.0;
    for (int64_t e = 0; e < experts; ++e) max = std::max(max, z[b * experts + e]);
    for (int64_t e = 0; e < experts; ++e) sum += std::exp(z[b * experts + e] - max);
    for (int64_t e = 0; e < experts; ++e)
      p[b * experts + e] = std::exp(z[b * experts + e] - max) / sum;
  }
  return p;
}

// The discrete part of a routing, held fixed while the references below are
// differentiated.
struct FixedRouting {
  int64_t batch, k, experts, capacity;
  std::vector<int32_t> expert, slot;
  bool normalize;
  bool kept(int64_t i) const { return slot[i] >= 0; }
  int64_t row(int64_t i) const { return expert[i] * capacity + slot[i]; }
};

FixedRouting Fix(const MoeRouting& routing) {
  return {routing.expert.dim(0),  routing.expert.dim(1),           routing.num_experts,
          routing.capacity,       Values<int32_t>(routing.expert), Values<int32_t>(routing.slot),
          routing.normalize_gates};
}

std::vector<double> ReferenceGate(const std::vector<double>& p, const FixedRouting& r) {
  std::vector<double> gate(r.expert.size(), 0.0);
  for (int64_t b = 0; b < r.batch; ++b) {
    double sum = 0.0;
    for (int64_t j = 0; j < r.k; ++j) sum += p[b * r.experts + r.expert[b * r.k + j]];
    for (int64_t j = 0; j < r.k; ++j) {
      const int64_t i = b * r.k + j;
      if (r.kept(i)) gate[i] = p[b * r.experts + r.expert[i]] / (r.normalize ? sum : 1.0);
    }
  }
  return gate;
}

std::vector<double> ReferenceDispatch(const std::vector<double>& x, const FixedRouting& r,
                                      int64_t hidden) {
  std::vector<double> buffers(r.experts * r.capacity * hidden, 0.0);
  for (int64_t i = 0; i < r.batch * r.k; ++i) {
    if (!r.kept(i)) continue;
    for (int64_t h = 0; h < hidden; ++h) buffers[r.row(i) * hidden + h] = x[(i / r.k) * hidden + h];
  }
  return buffers;
}

std::vector<double> ReferenceCombine(const std::vector<double>& y, const std::vector<double>& gate,
                                     const FixedRouting& r, int64_t hidden) {
  std::vector<double> out(r.batch * hidden, 0.0);
  for (int64_t i = 0; i < r.batch * r.k; ++i) {
    if (!r.kept(i)) continue;
    for (int64_t h = 0; h < hidden; ++h) {
      out[(i / r.k) * hidden + h] += gate[i] * y[r.row(i) * hidden + h];
    }
  }
  return out;
}

TEST(SoftmaxOpsTest, ForwardMatchesDoubleReferenceAndBackwardMatchesFiniteDifferences) {
  for (int64_t batch : {1, 3, 8}) {
    for (int64_t experts : {1, 2, 5, 9}) {
      SCOPED_TRACE(::testing::Message() << "B=" << batch << " E=" << experts);
      RandomStream rng(batch * 100 + experts);
      const Tensor logits = RandomTensor({batch, experts}, rng, -3.0, 3.0);
      Tensor probs = Tensor::Empty({batch, experts});
      ASSERT_TRUE(SoftmaxForward(logits, &probs).ok());
      const std::vector<double> z = ToDouble(logits);
      ExpectAllClose(ReferenceSoftmax(z, batch, experts), probs, 1e-6, "probs");

      const Tensor dprobs = RandomTensor({batch, experts}, rng);
      Tensor dlogits = Tensor::Empty({batch, experts});
      ASSERT_TRUE(SoftmaxBackward(probs, dprobs, &dlogits).ok());
      const std::vector<double> g = ToDouble(dprobs);
      ExpectAllClose(NumericGradient(
                         [&](const std::vector<double>& v) {
                           return WeightedSum(g, ReferenceSoftmax(v, batch, experts));
                         },
                         z),
                     dlogits, 1e-4, "dlogits");
    }
  }
}

TEST(SoftmaxOpsTest, HugeLogitsDoNotOverflow) {
  const Tensor logits = Tensor::FromVector({1000, 1001, 999, -1000}, {1, 4});
  Tensor probs = Tensor::Empty({1, 4});
  ASSERT_TRUE(SoftmaxForward(logits, &probs).ok());
  ExpectAllClose(ReferenceSoftmax({0, 1, -1, -2000}, 1, 4), probs, 1e-6, "probs");
}

TEST(MoeRoutingTest, CapacityIsCeilingOfFactorTimesKTimesTokensOverExperts) {
  struct Case {
    int64_t tokens, experts;
    int k;
    double factor;
    int64_t capacity;
  };
  for (const Case& c : {Case{8, 4, 1, 1.0, 2}, Case{8, 4, 2, 1.25, 5}, Case{7, 3, 1, 1.0, 3},
                        Case{0, 4, 1, 1.0, 0}, Case{1, 8, 1, 1.0, 1}, Case{3, 3, 2, 0.5, 1}}) {
    Result<int64_t> capacity = MoeCapacity(c.tokens, c.experts, c.k, c.factor);
    ASSERT_TRUE(capacity.ok()) << capacity.status();
    EXPECT_EQ(c.capacity, *capacity) << c.tokens << " " << c.experts << " " << c.k;
  }
}

TEST(MoeRoutingTest, TiesGoToTheLowerExpertIndex) {
  const Tensor probs = Tensor::FromVector({0.25f, 0.25f, 0.25f, 0.25f,  //
                                           0.1f, 0.4f, 0.1f, 0.4f},
                                          {2, 4});
  MoeRoutingOptions options;
  options.k = 3;
  options.capacity_factor = 4.0;
  Result<MoeRouting> routing = RouteTopK(probs, options);
  ASSERT_TRUE(routing.ok()) << routing.status();
  EXPECT_THAT(Values<int32_t>(routing->expert), ElementsAre(0, 1, 2, 1, 3, 0));
  EXPECT_THAT(Values<int32_t>(routing->slot), ElementsAre(0, 0, 0, 1, 0, 1));
  EXPECT_EQ(0, routing->num_dropped);
}

TEST(MoeRoutingTest, ChoicesBeyondCapacityAreDroppedInTokenOrder) {
  // capacity = ceil(0.5 * 2 * 3 / 3) = 1. Token 0 fills experts 0 and 1;
  // token 1's first choice (expert 1) is then full; token 2 finds both its
  // choices full.
  const Tensor probs = Tensor::FromVector({0.6f, 0.3f, 0.1f,  //
                                           0.1f, 0.6f, 0.3f,  //
                                           0.5f, 0.2f, 0.3f},
                                          {3, 3});
  for (bool normalize : {false, true}) {
    SCOPED_TRACE(normalize ? "normalised" : "raw");
    MoeRoutingOptions options;
    options.k = 2;
    options.capacity_factor = 0.5;
    options.normalize_gates = normalize;
    Result<MoeRouting> routing = RouteTopK(probs, options);
    ASSERT_TRUE(routing.ok()) << routing.status();
    EXPECT_EQ(1, routing->capacity);
    EXPECT_EQ(3, routing->num_experts);
    EXPECT_THAT(Values<int32_t>(routing->expert), ElementsAre(0, 1, 1, 2, 0, 2));
    EXPECT_THAT(Values<int32_t>(routing->slot), ElementsAre(0, 0, -1, 0, -1, -1));
    EXPECT_EQ(3, routing->num_dropped);
    const float s = normalize ? 0.9f : 1.0f;
    EXPECT_THAT(Values(routing->gate), ElementsAre(FloatEq(0.6f / s), FloatEq(0.3f / s), 0.0f,
                                                   FloatEq(0.3f / s), 0.0f, 0.0f));

    // Dropped choices contribute nothing: token 2's output is zero.
    Tensor buffers = Tensor::Empty({3, 1, 2});
    const Tensor x = Tensor::FromVector({1, 2, 3, 4, 5, 6}, {3, 2});
    ASSERT_TRUE(MoeDispatch(x, *routing, &buffers).ok());
    EXPECT_THAT(Values(buffers), ElementsAre(1, 2, 1, 2, 3, 4));
    Tensor out = Tensor::Empty({3, 2});
    ASSERT_TRUE(MoeCombine(buffers, routing->gate, *routing, &out).ok());
    EXPECT_THAT(Values(out), ElementsAre(FloatEq(0.9f / s), FloatEq(1.8f / s), FloatEq(0.9f / s),
                                         FloatEq(1.2f / s), 0.0f, 0.0f));
  }
}

TEST(MoeRoutingTest, UnclaimedSlotsArePaddedWithZeros) {
  // capacity = ceil(2 * 1 * 2 / 2) = 2 per expert; both tokens go to expert 1.
  const Tensor probs = Tensor::FromVector({0.2f, 0.8f, 0.3f, 0.7f}, {2, 2});
  MoeRoutingOptions options;
  options.capacity_factor = 2.0;
  Result<MoeRouting> routing = RouteTopK(probs, options);
  ASSERT_TRUE(routing.ok()) << routing.status();
  Tensor buffers = Tensor::FromVector(std::vector<float>(8, 9.0f), {2, 2, 2});
  ASSERT_TRUE(MoeDispatch(Tensor::FromVector({1, 2, 3, 4}, {2, 2}), *routing, &buffers).ok());
  EXPECT_THAT(Values(buffers), ElementsAre(0, 0, 0, 0, 1, 2, 3, 4));
}

// Random logits through softmax and routing; small capacity factors so that
// some shapes drop choices.
TEST(MoeRoutingTest, DispatchCombineAndGateMatchReferencesAndFiniteDifferences) {
  int64_t shapes_with_drops = 0;
  for (int64_t batch : {1, 5, 16}) {
    for (int64_t experts : {1, 3, 4}) {
      for (int k : {1, 2}) {
        if (k > experts) continue;
        for (int64_t hidden : {1, 7}) {
          for (double factor : {0.5, 1.25}) {
            for (bool normalize : {false, true}) {
              SCOPED_TRACE(::testing::Message()
                           << "B=" << batch << " E=" << experts << " k=" << k << " H=" << hidden
                           << " factor=" << factor << " normalize=" << normalize);
              RandomStream rng(batch * 1000 + experts * 100 + k * 10 + hidden);
              Tensor probs = Tensor::Empty({batch, experts});
              ASSERT_TRUE(SoftmaxForward(RandomTensor({batch, experts}, rng, -2, 2), &probs).ok());
              MoeRoutingOptions options;
              options.k = k;
              options.capacity_factor = factor;
              options.normalize_gates = normalize;
              Result<MoeRouting> routing = RouteTopK(probs, options);
              ASSERT_TRUE(routing.ok()) << routing.status();
              if (routing->num_dropped > 0) ++shapes_with_drops;
              const FixedRouting fixed = Fix(*routing);
              const int64_t capacity = routing->capacity;
              const std::vector<double> p = ToDouble(probs);
              ExpectAllClose(ReferenceGate(p, fixed), routing->gate, 1e-6, "gate");

              // Gate backward: d gate / d probs with the routing fixed.
              const Tensor dgate = RandomTensor({batch, k}, rng);
              Tensor dprobs = Tensor::Empty({batch, experts});
              ASSERT_TRUE(MoeGateBackward(probs, *routing, dgate, &dprobs).ok());
              const std::vector<double> dg = ToDouble(dgate);
              ExpectAllClose(NumericGradient(
                                 [&](const std::vector<double>& v) {
                                   return WeightedSum(dg, ReferenceGate(v, fixed));
                                 },
                                 p),
                             dprobs, 1e-4, "dprobs");

              // Dispatch and its backward.
              const Tensor x = RandomTensor({batch, hidden}, rng);
              Tensor buffers = Tensor::Empty({experts, capacity, hidden});
              ASSERT_TRUE(MoeDispatch(x, *routing, &buffers).ok());
              const std::vector<double> xd = ToDouble(x);
              ExpectAllClose(ReferenceDispatch(xd, fixed, hidden), buffers, 1e-7, "buffers");
              const Tensor dbuffers = RandomTensor({experts, capacity, hidden}, rng);
              Tensor dx = Tensor::Empty({batch, hidden});
              ASSERT_TRUE(MoeDispatchBackward(dbuffers, *routing, &dx).ok());
              const std::vector<double> db = ToDouble(dbuffers);
              ExpectAllClose(NumericGradient(
                                 [&](const std::vector<double>& v) {
                                   return WeightedSum(db, ReferenceDispatch(v, fixed, hidden));
                                 },
                                 xd),
                             dx, 1e-4, "dx");

              // Combine and its backward w.r.t. expert outputs and gates.
              const Tensor expert_out = RandomTensor({experts, capacity, hidden}, rng);
              const Tensor gate = RandomTensor({batch, k}, rng);  // any weights
              Tensor out = Tensor::Empty({batch, hidden});
              ASSERT_TRUE(MoeCombine(expert_out, gate, *routing, &out).ok());
              const std::vector<double> y = ToDouble(expert_out), g = ToDouble(gate);
              ExpectAllClose(ReferenceCombine(y, g, fixed, hidden), out, 1e-6, "out");
              const Tensor dout = RandomTensor({batch, hidden}, rng);
              Tensor dexpert_out = Tensor::Empty({experts, capacity, hidden});
              Tensor dgate_combine = Tensor::Empty({batch, k});
              ASSERT_TRUE(
                  MoeCombineBackward(expert_out, gate, *routing, dout, &dexpert_out, &dgate_combine)
                      .ok());
              const std::vector<double> dd = ToDouble(dout);
              ExpectAllClose(NumericGradient(
                                 [&](const std::vector<double>& v) {
                                   return WeightedSum(dd, ReferenceCombine(v, g, fixed, hidden));
                                 },
                                 y),
                             dexpert_out, 1e-4, "dexpert_out");
              ExpectAllClose(NumericGradient(
                                 [&](const std::vector<double>& v) {
                                   return WeightedSum(dd, ReferenceCombine(y, v, fixed, hidden));
                                 },
                                 g),
                             dgate_combine, 1e-4, "dgate");
            }
          }
        }
      }
    }
  }
  EXPECT_GT(shapes_with_drops, 0) << "no shape exercised dropping";
}

TEST(MoeRoutingTest, BadOptionsAndProbabilitiesAreInvalidArguments) {
  const Tensor probs = Tensor::FromVector({0.5f, 0.5f, 0.2f, 0.8f}, {2, 2});
  MoeRoutingOptions options;
  options.k = 0;
  ExpectInvalid(RouteTopK(probs, options).status(), "k = 0");
  options.k = 3;
  ExpectInvalid(RouteTopK(probs, options).status(), "k = 3 is outside [1, 2]");
  options.k = 1;
  for (double factor : {0.0, -1.0, static_cast<double>(NAN), static_cast<double>(INFINITY)}) {
    options.capacity_factor = factor;
    ExpectInvalid(RouteTopK(probs, options).status(), "capacity_factor");
  }
  options.capacity_factor = 1.0;
  ExpectInvalid(RouteTopK(Tensor::FromVector({0.5f, -0.1f, 0.2f, NAN}, {2, 2}), options).status(),
                "probs[0, 1]");
  ExpectInvalid(RouteTopK(Tensor::FromVector({0.5f, 0.5f, 0.2f, NAN}, {2, 2}), options).status(),
                "probs[1, 1]");
  ExpectInvalid(RouteTopK(Tensor::Zeros({2, 0}), options).status(), "probs");
  ExpectInvalid(RouteTopK(Tensor::Zeros({4}), options).status(), "probs");
  options.normalize_gates = true;
  ExpectInvalid(RouteTopK(Tensor::FromVector({0.5f, 0.5f, 0, 0}, {2, 2}), options).status(),
                "token 1");

  Tensor wrong = Tensor::Empty({2, 3});
  ExpectInvalid(SoftmaxForward(probs, &wrong), "probs must be f32[2, 2]");
  ExpectInvalid(SoftmaxForward(Tensor::Zeros({4}), &wrong), "logits");
  ExpectInvalid(SoftmaxBackward(probs, Tensor::Zeros({2, 3}), &wrong), "dprobs");
  ExpectInvalid(SoftmaxBackward(probs, probs, &wrong), "dlogits");
}

TEST(MoeRoutingTest, MismatchedOrMalformedRoutingIsInvalidArgument) {
  const Tensor probs = Tensor::FromVector({0.6f, 0.4f, 0.3f, 0.7f}, {2, 2});
  MoeRoutingOptions options;
  options.capacity_factor = 2.0;  // capacity 2
  Result<MoeRouting> routing_or = RouteTopK(probs, options);
  ASSERT_TRUE(routing_or.ok());
  const MoeRouting routing = *routing_or;
  const Tensor x = Tensor::Zeros({2, 3});
  Tensor buffers = Tensor::Empty({2, 2, 3});
  ExpectInvalid(MoeDispatch(Tensor::Zeros({3, 3}), routing, &buffers), "x must be f32[2, 3]");
  Tensor wrong_buffers = Tensor::Empty({2, 1, 3});
  ExpectInvalid(MoeDispatch(x, routing, &wrong_buffers), "buffers must be f32[2, 2, 3]");
  ExpectInvalid(MoeDispatch(x, routing, nullptr), "buffers is null");
  Tensor dx = Tensor::Empty({2, 4});
  ExpectInvalid(MoeDispatchBackward(buffers, routing, &dx), "dx must be f32[2, 3]");
  ExpectInvalid(MoeDispatchBackward(wrong_buffers, routing, &dx), "dbuffers");

  Tensor out = Tensor::Empty({2, 3});
  ExpectInvalid(MoeCombine(buffers, Tensor::Zeros({2, 2}), routing, &out),
                "gate must be f32[2, 1]");
  ExpectInvalid(MoeCombine(wrong_buffers, routing.gate, routing, &out), "expert_out");
  Tensor dgate = Tensor::Empty({1, 2});
  ExpectInvalid(MoeCombineBackward(buffers, routing.gate, routing, out, nullptr, &dgate),
                "dgate must be f32[2, 1]");
  ExpectInvalid(
      MoeCombineBackward(buffers, routing.gate, routing, Tensor::Zeros({2, 2}), nullptr, nullptr),
      "dout");
  Tensor dprobs = Tensor::Empty({2, 3});
  ExpectInvalid(MoeGateBackward(probs, routing, routing.gate, &dprobs), "dprobs must be f32[2, 2]");

  MoeRouting bad = routing;
  bad.expert = I32({0, 2}, {2, 1});
  ExpectInvalid(MoeDispatch(x, bad, &buffers), "routing.expert[1, 0] = 2 is outside [0, 2)");
  bad = routing;
  bad.slot = I32({-2, 0}, {2, 1});
  ExpectInvalid(MoeCombine(buffers, routing.gate, bad, &out), "routing.slot[0, 0] = -2");
  bad.slot = I32({0, 2}, {2, 1});
  ExpectInvalid(MoeDispatchBackward(buffers, bad, &dx), "routing.slot[1, 0] = 2");
  bad = routing;
  bad.expert = I32({1, 1}, {2, 1});
  bad.slot = I32({0, 0}, {2, 1});
  ExpectInvalid(MoeDispatch(x, bad, &buffers), "slot 0 of expert 1");
  Tensor dexpert_out = Tensor::Empty({2, 2, 3});
  ExpectInvalid(MoeCombineBackward(buffers, routing.gate, bad, out, &dexpert_out, nullptr),
                "slot 0 of expert 1");
  bad = routing;
  bad.slot = Tensor::Zeros({2, 1});
  ExpectInvalid(MoeDispatch(x, bad, &buffers), "routing.slot must be i32[2, 1]");
}

TEST(MoeRoutingTest, CostsFollowTheDocumentedFormulas) {
  // B = 10, E = 4, k = 2, C = 6, H = 8.
  EXPECT_EQ(160.0, SoftmaxForwardCost(10, 4).flops);
  EXPECT_EQ(320.0, SoftmaxForwardCost(10, 4).bytes);
  EXPECT_EQ(480.0, SoftmaxBackwardCost(10, 4).bytes);
  EXPECT_EQ(40.0, RouteTopKCost(10, 4, 2, true).flops);
  EXPECT_EQ(0.0, RouteTopKCost(10, 4, 2, false).flops);
  EXPECT_EQ(160.0 + 240.0, RouteTopKCost(10, 4, 2, false).bytes);
  EXPECT_EQ(80.0, MoeGateBackwardCost(10, 4, 2, true).flops);
  EXPECT_EQ(160.0 + 320.0, MoeGateBackwardCost(10, 4, 2, true).bytes);
  EXPECT_EQ(0.0, MoeDispatchCost(10, 4, 6, 2, 8).flops);
  EXPECT_EQ(320.0 + 768.0 + 160.0, MoeDispatchCost(10, 4, 6, 2, 8).bytes);
  EXPECT_EQ(160.0, MoeDispatchBackwardCost(10, 2, 8).flops);
  EXPECT_EQ(640.0 + 320.0 + 160.0, MoeDispatchBackwardCost(10, 2, 8).bytes);
  EXPECT_EQ(320.0, MoeCombineCost(10, 2, 8).flops);
  EXPECT_EQ(640.0 + 320.0 + 240.0, MoeCombineCost(10, 2, 8).bytes);
  EXPECT_EQ(480.0, MoeCombineBackwardCost(10, 4, 6, 2, 8).flops);
  EXPECT_EQ(320.0 + 640.0 + 768.0 + 320.0, MoeCombineBackwardCost(10, 4, 6, 2, 8).bytes);
}

// out[b, :] = sum_e gate[b, e] * experts[b, e, :], in double.
std::vector<double> ReferenceMixture(const std::vector<double>& gate,
                                     const std::vector<double>& experts, int64_t batch,
                                     int64_t num_experts, int64_t hidden) {
  std::vector<double> out(batch * hidden, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t e = 0; e < num_experts; ++e) {
      for (int64_t h = 0; h < hidden; ++h) {
        out[b * hidden + h] +=
            gate[b * num_experts + e] * experts[(b * num_experts + e) * hidden + h];
      }
    }
  }
  return out;
}

TEST(MixtureTest, ForwardMatchesDoubleReferenceAndBackwardMatchesFiniteDifferences) {
  for (int64_t batch : {1, 4, 7}) {
    for (int64_t experts : {1, 3}) {
      for (int64_t hidden : {1, 5, 16}) {
        SCOPED_TRACE(::testing::Message() << "B=" << batch << " E=" << experts << " H=" << hidden);
        RandomStream rng(batch * 1000 + experts * 100 + hidden);
        const Tensor gate = RandomTensor({batch, experts}, rng, 0.0, 1.0);
        const Tensor x = RandomTensor({batch, experts * hidden}, rng);
        Tensor out = Tensor::Empty({batch, hidden});
        ASSERT_TRUE(MixtureForward(gate, x, &out).ok());
        const std::vector<double> g = ToDouble(gate);
        const std::vector<double> xs = ToDouble(x);
        ExpectAllClose(ReferenceMixture(g, xs, batch, experts, hidden), out, 1e-6, "out");

        const Tensor dout = RandomTensor({batch, hidden}, rng);
        const std::vector<double> w = ToDouble(dout);
        Tensor dgate = Tensor::Empty({batch, experts});
        Tensor dx = Tensor::Empty({batch, experts * hidden});
        ASSERT_TRUE(MixtureBackward(gate, x, dout, &dgate, &dx).ok());
        ExpectAllClose(NumericGradient(
                           [&](const std::vector<double>& v) {
                             return WeightedSum(
                                 w, ReferenceMixture(v, xs, batch, experts, hidden));
                           },
                           g),
                       dgate, 1e-4, "dgate");
        ExpectAllClose(NumericGradient(
                           [&](const std::vector<double>& v) {
                             return WeightedSum(w, ReferenceMixture(g, v, batch, experts, hidden));
                           },
                           xs),
                       dx, 1e-4, "dexperts");
        // Either gradient alone gives the same values.
        Tensor dgate_only = Tensor::Empty({batch, experts});
        ASSERT_TRUE(MixtureBackward(gate, x, dout, &dgate_only, nullptr).ok());
        ExpectAllClose(ToDouble(dgate), dgate_only, 0.0, "dgate alone");
      }
    }
  }
}

TEST(MixtureTest, MismatchedShapesAreInvalidArgumentsNamingTheOperand) {
  const Tensor gate = Tensor::Zeros({4, 3});
  Tensor out = Tensor::Empty({4, 2});
  Status status = MixtureForward(gate, Tensor::Zeros({4, 7}), &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), ::testing::HasSubstr("experts must be"));
  status = MixtureForward(gate, Tensor::Zeros({4, 6}), &out);
  EXPECT_TRUE(status.ok()) << status;
  Tensor wrong = Tensor::Empty({4, 3});
  status = MixtureForward(gate, Tensor::Zeros({4, 6}), &wrong);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("out"));
  status = MixtureBackward(gate, Tensor::Zeros({4, 6}), Tensor::Zeros({3, 2}), nullptr, nullptr);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("dout"));
  EXPECT_EQ(2 * 10 * 4 * 8.0, MixtureCost(10, 4, 8, false).flops);
  EXPECT_EQ(4 * (320.0 + 40 + 80), MixtureCost(10, 4, 8, false).bytes);
  EXPECT_EQ(3 * 10 * 4 * 8.0, MixtureCost(10, 4, 8, true).flops);
}

}  // namespace
}  // namespace ember::ops
