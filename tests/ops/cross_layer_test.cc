#include "ops/cross_layer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "tests/ops/gradient_check.h"
#include "tests/ops/test_tensors.h"

namespace ember::ops {
namespace {

using ::testing::ElementsAre;
using testing::ExpectAllClose;
using testing::ExpectInvalid;
using testing::Filled;
using testing::NanFilled;
using testing::NumericGradient;
using testing::RandomTensor;
using testing::SameBits;
using testing::ToDouble;
using testing::Values;
using testing::WeightedSum;

using Args = std::vector<std::vector<double>>;
using Reference = std::function<std::vector<double>(const Args&)>;

struct CrossShape {
  int64_t batch;
  int64_t dim;
  int64_t rank;  // Low rank only.
};

// Fixed shapes with batch 1, d = 1, r = 1, r >= d and odd sizes (past one
// sample tile of the op), then random ones.
std::vector<CrossShape> TestShapes() {
  std::vector<CrossShape> shapes = {{1, 1, 1},  {1, 7, 3},  {3, 5, 5},   {2, 3, 5},
                                    {9, 13, 2}, {17, 4, 1}, {11, 16, 8}, {1, 32, 4}};
  RandomStream rng(31337);
  for (int i = 0; i < 6; ++i) {
    shapes.push_back({1 + static_cast<int64_t>(rng.NextBelow(20)),
                      1 + static_cast<int64_t>(rng.NextBelow(20)),
                      1 + static_cast<int64_t>(rng.NextBelow(8))});
  }
  return shapes;
}

// z[b, i] = bias[i] + sum_j w[i, j] xl[b, j], the intermediate the full-rank
// forward saves. Args: x0, xl, w, bias.
std::vector<double> ReferenceZ(const Args& a, const CrossShape& s) {
  const std::vector<double>&xl = a[1], &w = a[2], &bias = a[3];
  std::vector<double> z(static_cast<size_t>(s.batch * s.dim));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t i = 0; i < s.dim; ++i) {
      z[b * s.dim + i] = bias[i];
      for (int64_t j = 0; j < s.dim; ++j) z[b * s.dim + i] += w[i * s.dim + j] * xl[b * s.dim + j];
    }
  }
  return z;
}

// out[b, i] = x0[b, i] * z[b, i] + xl[b, i], z as above. Args: x0, xl, w, bias.
std::vector<double> ReferenceCross(const Args& a, const CrossShape& s) {
  const std::vector<double>&x0 = a[0], &xl = a[1];
  std::vector<double> out = ReferenceZ(a, s);
  for (size_t k = 0; k < out.size(); ++k) out[k] = x0[k] * out[k] + xl[k];
  return out;
}

// The same with w[i, j] = sum_k u[i, k] v[j, k]. Args: x0, xl, u, v, bias.
std::vector<double> ReferenceLowRankCross(const Args& a, const CrossShape& s) {
  const std::vector<double>&u = a[2], &v = a[3];
  std::vector<double> w(static_cast<size_t>(s.dim * s.dim), 0.0);
  for (int64_t i = 0; i < s.dim; ++i) {
    for (int64_t j = 0; j < s.dim; ++j) {
      for (int64_t k = 0; k < s.rank; ++k)
        w[i * s.dim + j] += u[i * s.rank + k] * v[j * s.rank + k];
    }
  }
  return ReferenceCross({a[0], a[1], w, a[4]}, s);
}

// d sum(weights * f(args)) / d args[which], by central differences.
std::vector<double> GradientOf(const Reference& f, const Args& args, size_t which,
                               const std::vector<double>& weights) {
  return NumericGradient(
      [&](const std::vector<double>& point) {
        Args moved = args;
        moved[which] = point;
        return WeightedSum(weights, f(moved));
      },
      args[which]);
}

// W = [[1, 2], [3, 4]], b = (0.5, -1), x0 = (1, 2), x_l = (3, -1):
// W x_l + b = (1.5, 4), so x_{l+1} = (1.5, 8) + (3, -1) = (4.5, 7). W^T x_l
// would give (4, 6) instead.
TEST(CrossLayerTest, ForwardAndBackwardOfAHandExample) {
  const Tensor x0 = Tensor::FromVector({1, 2}, {1, 2});
  const Tensor xl = Tensor::FromVector({3, -1}, {1, 2});
  const Tensor weight = Tensor::FromVector({1, 2, 3, 4}, {2, 2});
  const Tensor bias = Tensor::FromVector({0.5, -1}, {2});
  Tensor out = Tensor::Empty({1, 2});
  ASSERT_TRUE(CrossLayerForward(x0, xl, weight, bias, &out).ok());
  EXPECT_THAT(Values(out), ElementsAre(4.5, 7));

  // dout = (1, 1): dx0 = W x_l + b; g = dout ⊙ x0 = (1, 2); dxl = W^T g + 1;
  // dW = g x_l^T; db = g.
  Tensor dx0 = Tensor::Empty({1, 2}), dxl = Tensor::Empty({1, 2});
  Tensor dweight = Tensor::Empty({2, 2}), dbias = Tensor::Empty({2});
  ASSERT_TRUE(CrossLayerBackward(x0, xl, weight, bias, Tensor::FromVector({1, 1}, {1, 2}), &dx0,
                                 &dxl, &dweight, &dbias)
                  .ok());
  EXPECT_THAT(Values(dx0), ElementsAre(1.5, 4));
  EXPECT_THAT(Values(dxl), ElementsAre(8, 11));
  EXPECT_THAT(Values(dweight), ElementsAre(3, -1, 6, -2));
  EXPECT_THAT(Values(dbias), ElementsAre(1, 2));
}

// U = (1, 2)^T, V = (3, -1)^T: V^T x_l = 10, U (V^T x_l) + b = (10.5, 19),
// x_{l+1} = (10.5, 38) + (3, -1).
TEST(CrossLayerTest, LowRankForwardOfAHandExample) {
  const Tensor x0 = Tensor::FromVector({1, 2}, {1, 2});
  const Tensor xl = Tensor::FromVector({3, -1}, {1, 2});
  const Tensor u = Tensor::FromVector({1, 2}, {2, 1});
  const Tensor v = Tensor::FromVector({3, -1}, {2, 1});
  const Tensor bias = Tensor::FromVector({0.5, -1}, {2});
  Tensor out = Tensor::Empty({1, 2});
  ASSERT_TRUE(LowRankCrossLayerForward(x0, xl, u, v, bias, &out).ok());
  EXPECT_THAT(Values(out), ElementsAre(13.5, 37));
}

TEST(CrossLayerTest, FullRankMatchesDoubleReferenceAndFiniteDifferences) {
  for (const CrossShape& s : TestShapes()) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.batch << " d=" << s.dim);
    RandomStream rng(s.batch * 1000 + s.dim);
    const Tensor x0 = RandomTensor({s.batch, s.dim}, rng);
    const Tensor xl = RandomTensor({s.batch, s.dim}, rng);
    const Tensor weight = RandomTensor({s.dim, s.dim}, rng);
    const Tensor bias = RandomTensor({s.dim}, rng);
    const Tensor dout = RandomTensor({s.batch, s.dim}, rng);
    const Args args = {ToDouble(x0), ToDouble(xl), ToDouble(weight), ToDouble(bias)};
    const Reference f = [&](const Args& a) { return ReferenceCross(a, s); };

    Tensor out = NanFilled({s.batch, s.dim});
    ASSERT_TRUE(CrossLayerForward(x0, xl, weight, bias, &out).ok());
    ExpectAllClose(f(args), out, 1e-5, "out");

    Tensor dx0 = NanFilled({s.batch, s.dim}), dxl = NanFilled({s.batch, s.dim});
    Tensor dweight = NanFilled({s.dim, s.dim}), dbias = NanFilled({s.dim});
    ASSERT_TRUE(CrossLayerBackward(x0, xl, weight, bias, dout, &dx0, &dxl, &dweight, &dbias).ok());
    const std::vector<double> g = ToDouble(dout);
    ExpectAllClose(GradientOf(f, args, 0, g), dx0, 1e-4, "dx0");
    ExpectAllClose(GradientOf(f, args, 1, g), dxl, 1e-4, "dxl");
    ExpectAllClose(GradientOf(f, args, 2, g), dweight, 1e-4, "dweight");
    ExpectAllClose(GradientOf(f, args, 3, g), dbias, 1e-4, "dbias");
  }
}

TEST(CrossLayerTest, LowRankMatchesDoubleReferenceAndFiniteDifferences) {
  for (const CrossShape& s : TestShapes()) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.batch << " d=" << s.dim << " r=" << s.rank);
    RandomStream rng(s.batch * 100000 + s.dim * 100 + s.rank);
    const Tensor x0 = RandomTensor({s.batch, s.dim}, rng);
    const Tensor xl = RandomTensor({s.batch, s.dim}, rng);
    const Tensor u = RandomTensor({s.dim, s.rank}, rng);
    const Tensor v = RandomTensor({s.dim, s.rank}, rng);
    const Tensor bias = RandomTensor({s.dim}, rng);
    const Tensor dout = RandomTensor({s.batch, s.dim}, rng);
    const Args args = {ToDouble(x0), ToDouble(xl), ToDouble(u), ToDouble(v), ToDouble(bias)};
    const Reference f = [&](const Args& a) { return ReferenceLowRankCross(a, s); };

    Tensor out = NanFilled({s.batch, s.dim});
    ASSERT_TRUE(LowRankCrossLayerForward(x0, xl, u, v, bias, &out).ok());
    ExpectAllClose(f(args), out, 1e-5, "out");

    Tensor dx0 = NanFilled({s.batch, s.dim}), dxl = NanFilled({s.batch, s.dim});
    Tensor du = NanFilled({s.dim, s.rank}), dv = NanFilled({s.dim, s.rank});
    Tensor dbias = NanFilled({s.dim});
    ASSERT_TRUE(
        LowRankCrossLayerBackward(x0, xl, u, v, bias, dout, &dx0, &dxl, &du, &dv, &dbias).ok());
    const std::vector<double> g = ToDouble(dout);
    ExpectAllClose(GradientOf(f, args, 0, g), dx0, 1e-4, "dx0");
    ExpectAllClose(GradientOf(f, args, 1, g), dxl, 1e-4, "dxl");
    ExpectAllClose(GradientOf(f, args, 2, g), du, 1e-4, "du");
    ExpectAllClose(GradientOf(f, args, 3, g), dv, 1e-4, "dv");
    ExpectAllClose(GradientOf(f, args, 4, g), dbias, 1e-4, "dbias");
  }
}

// t[b, k] = sum_j xl[b, j] v[j, k], the low-rank forward's first
// intermediate. Args: x0, xl, u, v, bias.
std::vector<double> ReferenceT(const Args& a, const CrossShape& s) {
  const std::vector<double>&xl = a[1], &v = a[3];
  std::vector<double> t(static_cast<size_t>(s.batch * s.rank), 0.0);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t k = 0; k < s.rank; ++k) {
      for (int64_t j = 0; j < s.dim; ++j)
        t[b * s.rank + k] += xl[b * s.dim + j] * v[j * s.rank + k];
    }
  }
  return t;
}

// The forward's saved z is W x_l + b, its out the same bits as without
// saving, and the backward from the saved z gives the same bits as the one
// that recomputes z, which the test above checks against finite differences.
TEST(CrossLayerTest, BackwardFromTheSavedZGivesTheRecomputedGradientsBitForBit) {
  for (const CrossShape& s : TestShapes()) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.batch << " d=" << s.dim);
    RandomStream rng(s.batch * 1000 + s.dim + 7);
    const Tensor x0 = RandomTensor({s.batch, s.dim}, rng);
    const Tensor xl = RandomTensor({s.batch, s.dim}, rng);
    const Tensor weight = RandomTensor({s.dim, s.dim}, rng);
    const Tensor bias = RandomTensor({s.dim}, rng);
    const Tensor dout = RandomTensor({s.batch, s.dim}, rng);

    Tensor out = NanFilled({s.batch, s.dim}), saving_out = NanFilled({s.batch, s.dim});
    Tensor z = NanFilled({s.batch, s.dim});
    ASSERT_TRUE(CrossLayerForward(x0, xl, weight, bias, &out).ok());
    ASSERT_TRUE(CrossLayerForward(x0, xl, weight, bias, &saving_out, &z).ok());
    EXPECT_TRUE(SameBits(out, saving_out));
    ExpectAllClose(ReferenceZ({ToDouble(x0), ToDouble(xl), ToDouble(weight), ToDouble(bias)}, s), z,
                   1e-5, "saved z");

    std::vector<Tensor> recomputed, from_saved;
    for (std::vector<Tensor>* grads : {&recomputed, &from_saved}) {
      *grads = {NanFilled({s.batch, s.dim}), NanFilled({s.batch, s.dim}), NanFilled({s.dim, s.dim}),
                NanFilled({s.dim})};
      std::vector<Tensor>& g = *grads;
      ASSERT_TRUE(CrossLayerBackward(x0, xl, weight, bias, dout, &g[0], &g[1], &g[2], &g[3],
                                     grads == &from_saved ? &z : nullptr)
                      .ok());
    }
    for (size_t i = 0; i < recomputed.size(); ++i) {
      EXPECT_TRUE(SameBits(recomputed[i], from_saved[i])) << "gradient " << i;
    }
  }
}

TEST(CrossLayerTest, LowRankBackwardFromTheSavedTAndZGivesTheRecomputedGradientsBitForBit) {
  for (const CrossShape& s : TestShapes()) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.batch << " d=" << s.dim << " r=" << s.rank);
    RandomStream rng(s.batch * 100000 + s.dim * 100 + s.rank + 7);
    const Tensor x0 = RandomTensor({s.batch, s.dim}, rng);
    const Tensor xl = RandomTensor({s.batch, s.dim}, rng);
    const Tensor u = RandomTensor({s.dim, s.rank}, rng);
    const Tensor v = RandomTensor({s.dim, s.rank}, rng);
    const Tensor bias = RandomTensor({s.dim}, rng);
    const Tensor dout = RandomTensor({s.batch, s.dim}, rng);
    const Args args = {ToDouble(x0), ToDouble(xl), ToDouble(u), ToDouble(v), ToDouble(bias)};

    Tensor out = NanFilled({s.batch, s.dim}), saving_out = NanFilled({s.batch, s.dim});
    Tensor t = NanFilled({s.batch, s.rank}), z = NanFilled({s.batch, s.dim});
    ASSERT_TRUE(LowRankCrossLayerForward(x0, xl, u, v, bias, &out).ok());
    ASSERT_TRUE(LowRankCrossLayerForward(x0, xl, u, v, bias, &saving_out, &t, &z).ok());
    EXPECT_TRUE(SameBits(out, saving_out));
    ExpectAllClose(ReferenceT(args, s), t, 1e-5, "saved t");
    // z = U t + b, i.e. the full-rank z with W = U V^T.
    std::vector<double> w(static_cast<size_t>(s.dim * s.dim), 0.0);
    for (int64_t i = 0; i < s.dim; ++i) {
      for (int64_t j = 0; j < s.dim; ++j) {
        for (int64_t k = 0; k < s.rank; ++k) {
          w[i * s.dim + j] += args[2][i * s.rank + k] * args[3][j * s.rank + k];
        }
      }
    }
    ExpectAllClose(ReferenceZ({args[0], args[1], w, args[4]}, s), z, 1e-5, "saved z");

    std::vector<Tensor> recomputed, from_saved;
    for (std::vector<Tensor>* grads : {&recomputed, &from_saved}) {
      *grads = {NanFilled({s.batch, s.dim}), NanFilled({s.batch, s.dim}),
                NanFilled({s.dim, s.rank}), NanFilled({s.dim, s.rank}), NanFilled({s.dim})};
      std::vector<Tensor>& g = *grads;
      const bool saved = grads == &from_saved;
      ASSERT_TRUE(LowRankCrossLayerBackward(x0, xl, u, v, bias, dout, &g[0], &g[1], &g[2], &g[3],
                                            &g[4], saved ? &t : nullptr, saved ? &z : nullptr)
                      .ok());
    }
    for (size_t i = 0; i < recomputed.size(); ++i) {
      EXPECT_TRUE(SameBits(recomputed[i], from_saved[i])) << "gradient " << i;
    }
  }
}

// The backward reads what it is given rather than recomputing it: with a
// made-up z of 2 everywhere, dx0 = dout * z = 2 dout exactly; with t = 0,
// du = sum_b g t^T = 0.
TEST(CrossLayerTest, BackwardReadsTheSavedIntermediatesItIsGiven) {
  const int64_t batch = 5, dim = 6, rank = 3;
  RandomStream rng(4242);
  const Tensor x0 = RandomTensor({batch, dim}, rng), xl = RandomTensor({batch, dim}, rng);
  const Tensor weight = RandomTensor({dim, dim}, rng), bias = RandomTensor({dim}, rng);
  const Tensor u = RandomTensor({dim, rank}, rng), v = RandomTensor({dim, rank}, rng);
  const Tensor dout = RandomTensor({batch, dim}, rng);
  const Tensor twos = Filled({batch, dim}, 2.0f), zeros = Filled({batch, rank}, 0.0f);
  std::vector<float> twice_dout = Values(dout);
  for (float& g : twice_dout) g *= 2.0f;

  Tensor dx0 = NanFilled({batch, dim}), dxl = NanFilled({batch, dim});
  Tensor dweight = NanFilled({dim, dim}), dbias = NanFilled({dim});
  ASSERT_TRUE(
      CrossLayerBackward(x0, xl, weight, bias, dout, &dx0, &dxl, &dweight, &dbias, &twos).ok());
  EXPECT_EQ(twice_dout, Values(dx0));

  Tensor du = NanFilled({dim, rank}), dv = NanFilled({dim, rank});
  ASSERT_TRUE(LowRankCrossLayerBackward(x0, xl, u, v, bias, dout, &dx0, &dxl, &du, &dv, &dbias,
                                        &zeros, &twos)
                  .ok());
  EXPECT_EQ(twice_dout, Values(dx0));
  EXPECT_EQ(std::vector<float>(dim * rank, 0.0f), Values(du));
}

TEST(CrossLayerTest, EmptyBatchGivesZeroWeightGradients) {
  const int64_t dim = 5, rank = 2;
  const Tensor x = Tensor::Empty({0, dim});
  RandomStream rng(7);
  const Tensor weight = RandomTensor({dim, dim}, rng), bias = RandomTensor({dim}, rng);
  const Tensor u = RandomTensor({dim, rank}, rng), v = RandomTensor({dim, rank}, rng);
  Tensor dx0 = Tensor::Empty({0, dim}), dxl = Tensor::Empty({0, dim});
  Tensor dweight = NanFilled({dim, dim}), dbias = NanFilled({dim});
  ASSERT_TRUE(CrossLayerBackward(x, x, weight, bias, x, &dx0, &dxl, &dweight, &dbias).ok());
  EXPECT_EQ(std::vector<float>(dim * dim, 0.0f), Values(dweight));
  EXPECT_EQ(std::vector<float>(dim, 0.0f), Values(dbias));

  Tensor du = NanFilled({dim, rank}), dv = NanFilled({dim, rank});
  dbias = NanFilled({dim});
  ASSERT_TRUE(LowRankCrossLayerBackward(x, x, u, v, bias, x, &dx0, &dxl, &du, &dv, &dbias).ok());
  EXPECT_EQ(std::vector<float>(dim * rank, 0.0f), Values(du));
  EXPECT_EQ(std::vector<float>(dim * rank, 0.0f), Values(dv));
  EXPECT_EQ(std::vector<float>(dim, 0.0f), Values(dbias));

  // The same from (empty) saved intermediates.
  Tensor out = Tensor::Empty({0, dim}), t = Tensor::Empty({0, rank}), z = Tensor::Empty({0, dim});
  ASSERT_TRUE(CrossLayerForward(x, x, weight, bias, &out, &z).ok());
  dweight = NanFilled({dim, dim}), dbias = NanFilled({dim});
  ASSERT_TRUE(CrossLayerBackward(x, x, weight, bias, x, &dx0, &dxl, &dweight, &dbias, &z).ok());
  EXPECT_EQ(std::vector<float>(dim * dim, 0.0f), Values(dweight));
  EXPECT_EQ(std::vector<float>(dim, 0.0f), Values(dbias));
  ASSERT_TRUE(LowRankCrossLayerForward(x, x, u, v, bias, &out, &t, &z).ok());
  du = NanFilled({dim, rank}), dv = NanFilled({dim, rank}), dbias = NanFilled({dim});
  ASSERT_TRUE(
      LowRankCrossLayerBackward(x, x, u, v, bias, x, &dx0, &dxl, &du, &dv, &dbias, &t, &z).ok());
  EXPECT_EQ(std::vector<float>(dim * rank, 0.0f), Values(du));
  EXPECT_EQ(std::vector<float>(dim * rank, 0.0f), Values(dv));
  EXPECT_EQ(std::vector<float>(dim, 0.0f), Values(dbias));
}

TEST(CrossLayerTest, ResultsDoNotDependOnTheThreadCount) {
  const int64_t batch = 301, dim = 40, rank = 7;
  RandomStream rng(99);
  const Tensor x0 = RandomTensor({batch, dim}, rng), xl = RandomTensor({batch, dim}, rng);
  const Tensor weight = RandomTensor({dim, dim}, rng), bias = RandomTensor({dim}, rng);
  const Tensor u = RandomTensor({dim, rank}, rng), v = RandomTensor({dim, rank}, rng);
  const Tensor dout = RandomTensor({batch, dim}, rng);
  auto run = [&](int threads) {
    std::vector<std::vector<float>> results;
    ThreadArena arena(threads);
    arena.Execute([&] {
      Tensor dx0 = Tensor::Empty({batch, dim}), dxl = Tensor::Empty({batch, dim});
      Tensor dweight = Tensor::Empty({dim, dim}), dbias = Tensor::Empty({dim});
      Tensor du = Tensor::Empty({dim, rank}), dv = Tensor::Empty({dim, rank});
      EXPECT_TRUE(
          CrossLayerBackward(x0, xl, weight, bias, dout, &dx0, &dxl, &dweight, &dbias).ok());
      results = {Values(dx0), Values(dxl), Values(dweight), Values(dbias)};
      EXPECT_TRUE(
          LowRankCrossLayerBackward(x0, xl, u, v, bias, dout, &dx0, &dxl, &du, &dv, &dbias).ok());
      for (const Tensor* t : {&dx0, &dxl, &du, &dv, &dbias}) results.push_back(Values(*t));
    });
    return results;
  };
  EXPECT_EQ(run(1), run(4));
}

TEST(CrossLayerTest, MismatchedShapesAndDtypesAreInvalidArguments) {
  const int64_t batch = 3, dim = 4, rank = 2;
  const Tensor x = Tensor::Zeros({batch, dim});
  const Tensor weight = Tensor::Zeros({dim, dim}), bias = Tensor::Zeros({dim});
  const Tensor u = Tensor::Zeros({dim, rank}), v = Tensor::Zeros({dim, rank});
  Tensor out = Tensor::Empty({batch, dim});

  ExpectInvalid(CrossLayerForward(Tensor::Zeros({dim}), x, weight, bias, &out),
                "CrossLayerForward: x0 must be a 2-d f32");
  ExpectInvalid(CrossLayerForward(Tensor::Zeros({batch, dim}, DType::kI64), x, weight, bias, &out),
                "x0");
  ExpectInvalid(CrossLayerForward(x, Tensor::Zeros({batch + 1, dim}), weight, bias, &out),
                "xl must be f32[3, 4]");
  ExpectInvalid(CrossLayerForward(x, x, Tensor::Zeros({dim, dim + 1}), bias, &out),
                "weight must be f32[4, 4]");
  ExpectInvalid(CrossLayerForward(x, x, weight, Tensor::Zeros({dim + 1}), &out),
                "bias must be f32[4]");
  ExpectInvalid(CrossLayerForward(x, x, weight, bias, nullptr), "out is null");
  Tensor wrong_out = Tensor::Empty({batch, dim + 1});
  ExpectInvalid(CrossLayerForward(x, x, weight, bias, &wrong_out), "out must be f32[3, 4]");
  Tensor in_place = x;  // Shares x's storage.
  ExpectInvalid(CrossLayerForward(x, x, weight, bias, &in_place),
                "output out shares memory with input x0");

  Tensor dx0 = Tensor::Empty({batch, dim}), dxl = Tensor::Empty({batch, dim});
  Tensor dweight = Tensor::Empty({dim, dim}), dbias = Tensor::Empty({dim});
  ExpectInvalid(CrossLayerBackward(x, x, weight, bias, Tensor::Zeros({batch, dim - 1}), &dx0, &dxl,
                                   &dweight, &dbias),
                "dout must be f32[3, 4]");
  ExpectInvalid(CrossLayerBackward(x, x, weight, bias, x, &wrong_out, &dxl, &dweight, &dbias),
                "dx0 must be f32[3, 4]");
  ExpectInvalid(CrossLayerBackward(x, x, weight, bias, x, &dx0, nullptr, &dweight, &dbias),
                "dxl is null");
  ExpectInvalid(CrossLayerBackward(x, x, weight, bias, x, &dx0, &dxl, &dbias, &dbias),
                "dweight must be f32[4, 4]");
  ExpectInvalid(CrossLayerBackward(x, x, weight, bias, x, &dx0, &dxl, &dweight, &dweight),
                "dbias must be f32[4]");
  ExpectInvalid(CrossLayerBackward(x, x, weight, bias, x, &dx0, &dx0, &dweight, &dbias),
                "outputs dx0 and dxl share memory");

  ExpectInvalid(LowRankCrossLayerForward(x, x, Tensor::Zeros({dim}), v, bias, &out),
                "LowRankCrossLayerForward: u must be a 2-d f32");
  ExpectInvalid(LowRankCrossLayerForward(x, x, Tensor::Zeros({dim + 1, rank}), v, bias, &out),
                "u must be f32[4, 2]");
  ExpectInvalid(LowRankCrossLayerForward(x, x, u, Tensor::Zeros({dim, rank + 1}), bias, &out),
                "v must be f32[4, 2]");
  ExpectInvalid(LowRankCrossLayerForward(x, x, u, v, Tensor::Zeros({1}), &out),
                "bias must be f32[4]");
  ExpectInvalid(LowRankCrossLayerForward(x, x, u, v, bias, &wrong_out), "out must be f32[3, 4]");

  Tensor du = Tensor::Empty({dim, rank}), dv = Tensor::Empty({dim, rank});
  ExpectInvalid(LowRankCrossLayerBackward(x, x, u, v, bias, Tensor::Zeros({batch}), &dx0, &dxl, &du,
                                          &dv, &dbias),
                "dout must be f32[3, 4]");
  ExpectInvalid(LowRankCrossLayerBackward(x, x, u, v, bias, x, &dx0, &dxl, &dweight, &dv, &dbias),
                "du must be f32[4, 2]");
  ExpectInvalid(LowRankCrossLayerBackward(x, x, u, v, bias, x, &dx0, &dxl, &du, nullptr, &dbias),
                "dv is null");
  ExpectInvalid(LowRankCrossLayerBackward(x, x, u, v, bias, x, &dx0, &dxl, &du, &du, &dbias),
                "outputs du and dv share memory");
  Tensor dv_into_v = v;
  ExpectInvalid(LowRankCrossLayerBackward(x, x, u, v, bias, x, &dx0, &dxl, &du, &dv_into_v, &dbias),
                "output dv shares memory with input v");

  // Saved intermediates.
  Tensor z = Tensor::Empty({batch, dim}), t = Tensor::Empty({batch, rank});
  Tensor wrong_z = Tensor::Empty({batch, dim + 1});
  ExpectInvalid(CrossLayerForward(x, x, weight, bias, &out, &wrong_z),
                "CrossLayerForward: saved_z must be f32[3, 4]");
  ExpectInvalid(CrossLayerForward(x, x, weight, bias, &out, &out),
                "outputs out and saved_z share memory");
  Tensor z_in_place = x;
  ExpectInvalid(CrossLayerForward(x, x, weight, bias, &out, &z_in_place),
                "output saved_z shares memory with input x0");
  ExpectInvalid(CrossLayerBackward(x, x, weight, bias, x, &dx0, &dxl, &dweight, &dbias, &wrong_z),
                "CrossLayerBackward: saved_z must be f32[3, 4]");
  ExpectInvalid(CrossLayerBackward(x, x, weight, bias, x, &dx0, &dxl, &dweight, &dbias, &dx0),
                "output dx0 shares memory with input saved_z");
  ExpectInvalid(LowRankCrossLayerForward(x, x, u, v, bias, &out, &t, nullptr),
                "LowRankCrossLayerForward: saved_t and saved_z go together");
  ExpectInvalid(LowRankCrossLayerForward(x, x, u, v, bias, &out, nullptr, &z),
                "saved_t and saved_z go together");
  ExpectInvalid(LowRankCrossLayerForward(x, x, u, v, bias, &out, &z, &z),
                "saved_t must be f32[3, 2]");
  ExpectInvalid(LowRankCrossLayerForward(x, x, u, v, bias, &out, &t, &wrong_z),
                "saved_z must be f32[3, 4]");
  ExpectInvalid(LowRankCrossLayerForward(x, x, u, v, bias, &z, &t, &z),
                "outputs out and saved_z share memory");
  ExpectInvalid(
      LowRankCrossLayerBackward(x, x, u, v, bias, x, &dx0, &dxl, &du, &dv, &dbias, &t, nullptr),
      "LowRankCrossLayerBackward: saved_t and saved_z go together");
  ExpectInvalid(
      LowRankCrossLayerBackward(x, x, u, v, bias, x, &dx0, &dxl, &du, &dv, &dbias, &z, &z),
      "saved_t must be f32[3, 2]");
  ExpectInvalid(
      LowRankCrossLayerBackward(x, x, u, v, bias, x, &dx0, &dxl, &du, &dv, &dbias, &t, &dxl),
      "output dxl shares memory with input saved_z");
}

TEST(CrossLayerTest, CostsOfASmallShapeMatchAHandCount) {
  // B=2, d=3. Forward per sample: W x_l is 9 multiply-adds (18), then + b,
  // ⊙ x0 and + x_l (9): 54 for two samples. Reads x0, x_l (12 floats), W (9)
  // and b (3), writes out and z (12): 36 floats.
  OpCost cost = CrossLayerForwardCost(2, 3);
  EXPECT_DOUBLE_EQ(54.0, cost.flops);
  EXPECT_DOUBLE_EQ(144.0, cost.bytes);
  // Backward from the saved z, per sample: dx0 (3), g (3), W^T g + dout
  // (18 + 3), dW (18), db (3): 48, so 96. Reads x0, x_l, z, dout (24), W (9);
  // writes dx0, dxl (12), dW (9), db (3): 57 floats.
  cost = CrossLayerBackwardCost(2, 3);
  EXPECT_DOUBLE_EQ(96.0, cost.flops);
  EXPECT_DOUBLE_EQ(228.0, cost.bytes);
  // Low rank, r=2. Forward per sample: V^T x_l (12), U t (12), 9 more: 33, so
  // 66. Reads x0, x_l (12), U, V (12), b (3); writes out, z (12) and t (4):
  // 43 floats.
  cost = LowRankCrossLayerForwardCost(2, 3, 2);
  EXPECT_DOUBLE_EQ(66.0, cost.flops);
  EXPECT_DOUBLE_EQ(172.0, cost.bytes);
  // Backward from the saved t and z, per sample: dx0, g (6), U^T g (12),
  // V dt + dout (15), dU, dV (24), db (3): 60, so 120. Reads x0, x_l, z,
  // dout (24), t (4), U, V (12), writes dx0, dxl (12), dU, dV (12), db (3):
  // 67 floats.
  cost = LowRankCrossLayerBackwardCost(2, 3, 2);
  EXPECT_DOUBLE_EQ(120.0, cost.flops);
  EXPECT_DOUBLE_EQ(268.0, cost.bytes);
}

}  // namespace
}  // namespace ember::ops
