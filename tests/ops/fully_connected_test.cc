#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/random.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "ops/dense_ops.h"
#include "ops/internal/matmul.h"
#include "tests/ops/gradient_check.h"
#include "tests/ops/test_tensors.h"
#include "tests/testing/dense_reproducibility.h"

namespace ember::ops {
namespace {

using testing::ExpectAllClose;
using testing::ExpectInvalid;
using ::testing::HasSubstr;
using testing::NumericGradient;
using testing::RandomTensor;
using testing::SameBits;
using testing::ToDouble;
using testing::WeightedSum;

struct FcShape {
  int64_t batch;
  int64_t in;
  int64_t out;
};

// Odd sizes, batch 1 and a size past one SIMD register; on both sides of the
// narrow kernels' width of 16 (ops/internal/fully_connected_narrow.h), and
// past their groups of 8 registers (150 = 8 x 16 + 16 + 6).
const std::vector<FcShape> kShapes = {
    {1, 1, 1}, {1, 13, 5},   {3, 5, 13},  {3, 64, 64}, {17, 13, 5}, {17, 64, 13}, {17, 1, 64},
    {3, 5, 1}, {3, 13, 150}, {3, 150, 2}, {2, 16, 17}, {2, 17, 16}, {2, 17, 17}};

// Pre-activations x * w^T + b in double: the naive triple loop.
std::vector<double> Affine(const std::vector<double>& x, const std::vector<double>& w,
                           const std::vector<double>& b, const FcShape& s) {
  std::vector<double> y(static_cast<size_t>(s.batch * s.out));
  for (int64_t r = 0; r < s.batch; ++r) {
    for (int64_t o = 0; o < s.out; ++o) {
      double sum = b[o];
      for (int64_t i = 0; i < s.in; ++i) sum += x[r * s.in + i] * w[o * s.in + i];
      y[r * s.out + o] = sum;
    }
  }
  return y;
}

std::vector<double> ReferenceForward(const std::vector<double>& x, const std::vector<double>& w,
                                     const std::vector<double>& b, const FcShape& s,
                                     Activation activation) {
  std::vector<double> y = Affine(x, w, b, s);
  if (activation == Activation::kRelu) {
    for (double& v : y) v = std::max(v, 0.0);
  }
  return y;
}

struct FcCase {
  Tensor x, weight, bias;
};

// Random inputs whose pre-activations keep clear of the ReLU's kink, so that
// a finite-difference step never crosses it.
FcCase RandomCase(const FcShape& s, uint64_t seed) {
  for (uint64_t stream = 0;; ++stream) {
    RandomStream rng(seed, stream);
    FcCase c{RandomTensor({s.batch, s.in}, rng), RandomTensor({s.out, s.in}, rng),
             RandomTensor({s.out}, rng)};
    const std::vector<double> pre = Affine(ToDouble(c.x), ToDouble(c.weight), ToDouble(c.bias), s);
    bool clear = true;
    for (double v : pre) clear = clear && std::abs(v) > 1e-3;
    if (clear) return c;
  }
}

const char* Name(Activation activation) {
  return activation == Activation::kRelu ? "relu" : "none";
}

TEST(FullyConnectedOpsTest, ForwardEqualsNaiveTripleLoop) {
  for (const FcShape& s : kShapes) {
    for (Activation activation : {Activation::kNone, Activation::kRelu}) {
      SCOPED_TRACE(::testing::Message() << "B=" << s.batch << " in=" << s.in << " out=" << s.out
                                        << " act=" << Name(activation));
      const FcCase c = RandomCase(s, 1);
      Tensor y = Tensor::Empty({s.batch, s.out});
      ASSERT_TRUE(FullyConnectedForward(c.x, c.weight, c.bias, activation, &y).ok());
      ExpectAllClose(
          ReferenceForward(ToDouble(c.x), ToDouble(c.weight), ToDouble(c.bias), s, activation), y,
          1e-5, "y");
    }
  }
}

// The matmul cache keeps at most kMaxCachedMatmuls primitives; shapes past
// the bound are still computed, with primitives built for the call.
TEST(FullyConnectedOpsTest, MatmulsPastTheCacheBoundAreComputedAndNotKept) {
  constexpr int64_t n = 5, k = 3;  // a shape no other test uses
  RandomStream rng(7);
  std::vector<float> x(4096 * k), w(n * k), bias(n);
  for (float& v : x) v = static_cast<float>(rng.Uniform(-1, 1));
  for (float& v : w) v = static_cast<float>(rng.Uniform(-1, 1));
  for (float& v : bias) v = static_cast<float>(rng.Uniform(-1, 1));
  std::vector<float> y(4096 * n);
  // Enough new row counts to fill the cache, and 20 past it.
  const int64_t shapes = internal::kMaxCachedMatmuls - internal::CachedMatmuls() + 20;
  ASSERT_LE(shapes, 4096);
  for (int64_t m = 1; m <= shapes; ++m) {
    ASSERT_TRUE(
        internal::F32LinearForward("test", m, n, k, x.data(), w.data(), bias.data(), true, y.data())
            .ok());
    if (m % 97 != 0 && m < shapes - 20) continue;  // check some, and all past the bound
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t o = 0; o < n; ++o) {
        double sum = bias[o];
        for (int64_t i = 0; i < k; ++i) sum += double{x[r * k + i]} * w[o * k + i];
        ASSERT_NEAR(std::max(sum, 0.0), y[r * n + o], 1e-5) << "m " << m << " row " << r;
      }
    }
  }
  EXPECT_EQ(internal::kMaxCachedMatmuls, internal::CachedMatmuls());
}

TEST(FullyConnectedOpsTest, ReluZeroesNegativeOutputs) {
  // Two outputs: the first always positive, the second always negative.
  const Tensor x = Tensor::FromVector({1, 2, -1, 3}, {2, 2});
  const Tensor weight = Tensor::FromVector({0, 0, 0, 0}, {2, 2});
  const Tensor bias = Tensor::FromVector({0.5f, -0.5f}, {2});
  Tensor y = Tensor::Empty({2, 2});
  ASSERT_TRUE(FullyConnectedForward(x, weight, bias, Activation::kRelu, &y).ok());
  const float* v = y.data<float>();
  EXPECT_THAT(std::vector<float>(v, v + 4), ::testing::ElementsAre(0.5f, 0.0f, 0.5f, 0.0f));
  ASSERT_TRUE(FullyConnectedForward(x, weight, bias, Activation::kNone, &y).ok());
  EXPECT_THAT(std::vector<float>(v, v + 4), ::testing::ElementsAre(0.5f, -0.5f, 0.5f, -0.5f));
}

TEST(FullyConnectedOpsTest, BackwardMatchesFiniteDifferences) {
  for (const FcShape& s : kShapes) {
    for (Activation activation : {Activation::kNone, Activation::kRelu}) {
      SCOPED_TRACE(::testing::Message() << "B=" << s.batch << " in=" << s.in << " out=" << s.out
                                        << " act=" << Name(activation));
      const FcCase c = RandomCase(s, 2);
      RandomStream rng(3);
      const Tensor dy = RandomTensor({s.batch, s.out}, rng);
      Tensor y = Tensor::Empty({s.batch, s.out});
      ASSERT_TRUE(FullyConnectedForward(c.x, c.weight, c.bias, activation, &y).ok());
      Tensor dx = Tensor::Empty({s.batch, s.in});
      Tensor dweight = Tensor::Empty({s.out, s.in});
      Tensor dbias = Tensor::Empty({s.out});
      ASSERT_TRUE(
          FullyConnectedBackward(c.x, c.weight, y, dy, activation, &dx, &dweight, &dbias).ok());

      const std::vector<double> x = ToDouble(c.x), w = ToDouble(c.weight), b = ToDouble(c.bias);
      const std::vector<double> g = ToDouble(dy);
      ExpectAllClose(NumericGradient(
                         [&](const std::vector<double>& v) {
                           return WeightedSum(g, ReferenceForward(v, w, b, s, activation));
                         },
                         x),
                     dx, 1e-4, "dx");
      ExpectAllClose(NumericGradient(
                         [&](const std::vector<double>& v) {
                           return WeightedSum(g, ReferenceForward(x, v, b, s, activation));
                         },
                         w),
                     dweight, 1e-4, "dweight");
      ExpectAllClose(NumericGradient(
                         [&](const std::vector<double>& v) {
                           return WeightedSum(g, ReferenceForward(x, w, v, s, activation));
                         },
                         b),
                     dbias, 1e-4, "dbias");
    }
  }
}

TEST(FullyConnectedOpsTest, BackwardWithoutDxGivesTheSameWeightGradients) {
  const FcShape s{17, 13, 5};
  const FcCase c = RandomCase(s, 4);
  RandomStream rng(5);
  const Tensor dy = RandomTensor({s.batch, s.out}, rng);
  Tensor y = Tensor::Empty({s.batch, s.out});
  ASSERT_TRUE(FullyConnectedForward(c.x, c.weight, c.bias, Activation::kRelu, &y).ok());
  Tensor dx = Tensor::Empty({s.batch, s.in});
  Tensor dweight = Tensor::Empty({s.out, s.in}), dweight_no_dx = Tensor::Empty({s.out, s.in});
  Tensor dbias = Tensor::Empty({s.out}), dbias_no_dx = Tensor::Empty({s.out});
  ASSERT_TRUE(
      FullyConnectedBackward(c.x, c.weight, y, dy, Activation::kRelu, &dx, &dweight, &dbias).ok());
  ASSERT_TRUE(FullyConnectedBackward(c.x, c.weight, y, dy, Activation::kRelu, nullptr,
                                     &dweight_no_dx, &dbias_no_dx)
                  .ok());
  ExpectAllClose(ToDouble(dweight), dweight_no_dx, 0.0, "dweight");
  ExpectAllClose(ToDouble(dbias), dbias_no_dx, 0.0, "dbias");
}

TEST(FullyConnectedOpsTest, InterleavedShapesAndActivationsGiveTheirOwnResults) {
  // Alternating shapes and activations must never reuse state (a buffer, a
  // cached kernel) sized or built for another call.
  for (int round = 0; round < 3; ++round) {
    for (const FcShape& s : {FcShape{3, 5, 13}, FcShape{4, 5, 13}, FcShape{3, 13, 5}}) {
      for (Activation activation : {Activation::kRelu, Activation::kNone}) {
        const FcCase c = RandomCase(s, 10 + round);
        Tensor y = Tensor::Empty({s.batch, s.out});
        ASSERT_TRUE(FullyConnectedForward(c.x, c.weight, c.bias, activation, &y).ok());
        ExpectAllClose(
            ReferenceForward(ToDouble(c.x), ToDouble(c.weight), ToDouble(c.bias), s, activation), y,
            1e-5, "y");
      }
    }
  }
}

// Forward (ReLU) and backward of one layer: {y, dx, dweight, dbias}.
std::vector<Tensor> ReluStep(const FcCase& c, const Tensor& dy,
                             ComputePrecision precision = ComputePrecision::kF32,
                             const Bf16Copies& copies = {}) {
  const int64_t batch = c.x.dim(0), in = c.x.dim(1), out = c.weight.dim(0);
  Tensor y = Tensor::Empty({batch, out}), dx = Tensor::Empty({batch, in});
  Tensor dweight = Tensor::Empty({out, in}), dbias = Tensor::Empty({out});
  EXPECT_TRUE(
      FullyConnectedForward(c.x, c.weight, c.bias, Activation::kRelu, &y, precision, copies).ok());
  EXPECT_TRUE(FullyConnectedBackward(c.x, c.weight, y, dy, Activation::kRelu, &dx, &dweight, &dbias,
                                     precision, copies)
                  .ok());
  return {y, dx, dweight, dbias};
}

// Runs `fn` on a new thread and waits for it: OpenMP thread counts are per
// thread, so a test that sets them leaves the test runner's thread as it was.
void OnNewThread(const std::function<void()>& fn) { std::thread(fn).join(); }

// Random inputs without the kink-avoiding search of RandomCase (too slow for
// thousands of outputs).
FcCase LargeCase(const FcShape& s, RandomStream& rng) {
  return {RandomTensor({s.batch, s.in}, rng), RandomTensor({s.out, s.in}, rng),
          RandomTensor({s.out}, rng)};
}

// Narrow (out <= 16: the gradients come from the pass over dy) and wide
// layers (oneDNN products after it), each with batches of one and of several
// row blocks of the pass, and in bf16 where the CPU has it: the gradient
// through the activation written over dy gives what the scratch copy gives,
// and without the flag dy is read only.
TEST(FullyConnectedOpsTest, OverwritingDyGivesTheSameGradientsBitForBit) {
  std::vector<ComputePrecision> precisions = {ComputePrecision::kF32};
  if (internal::CpuHasBf16()) precisions.push_back(ComputePrecision::kBf16);
  for (const FcShape& s :
       {FcShape{17, 13, 5}, FcShape{200, 33, 8}, FcShape{3, 13, 150}, FcShape{1000, 33, 40}}) {
    for (Activation activation : {Activation::kRelu, Activation::kNone}) {
      for (ComputePrecision precision : precisions) {
        SCOPED_TRACE(::testing::Message()
                     << "B=" << s.batch << " in=" << s.in << " out=" << s.out
                     << " act=" << Name(activation) << " " << ComputePrecisionName(precision));
        RandomStream rng(7);
        const FcCase c = LargeCase(s, rng);
        const Tensor dy = RandomTensor({s.batch, s.out}, rng);
        const Tensor dy_before = dy.Clone();
        Tensor y = Tensor::Empty({s.batch, s.out});
        ASSERT_TRUE(FullyConnectedForward(c.x, c.weight, c.bias, activation, &y, precision).ok());
        std::vector<Tensor> results[2];
        for (bool overwrite : {false, true}) {
          std::vector<Tensor>& g = results[overwrite];
          g = {Tensor::Empty({s.batch, s.in}), Tensor::Empty({s.out, s.in}),
               Tensor::Empty({s.out})};
          ASSERT_TRUE(FullyConnectedBackward(c.x, c.weight, y, overwrite ? dy.Clone() : dy,
                                             activation, &g[0], &g[1], &g[2], precision, {},
                                             overwrite)
                          .ok());
        }
        for (int i = 0; i < 3; ++i) {
          EXPECT_TRUE(SameBits(results[0][i], results[1][i])) << "gradient " << i;
        }
        EXPECT_TRUE(SameBits(dy_before, dy));
      }
    }
  }
}

// The backward in two calls, the input gradient alone (dweight and dbias
// null) and then the parameter gradients alone (dx null) on the dy the first
// may have overwritten, gives one call's bits: the zero-bubble schedules' B
// and W. Narrow and wide layers, f32 and (where the CPU has it) bf16; one of
// dweight and dbias alone is refused.
TEST(FullyConnectedOpsTest, TheInputAndParameterGradientsApartGiveOneCallsBits) {
  std::vector<ComputePrecision> precisions = {ComputePrecision::kF32};
  if (internal::CpuHasBf16()) precisions.push_back(ComputePrecision::kBf16);
  for (const FcShape& s : {FcShape{17, 13, 5}, FcShape{3, 13, 150}, FcShape{1000, 33, 40}}) {
    for (Activation activation : {Activation::kRelu, Activation::kNone}) {
      for (ComputePrecision precision : precisions) {
        for (bool overwrite : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "B=" << s.batch << " in=" << s.in << " out=" << s.out
                       << " act=" << Name(activation) << " " << ComputePrecisionName(precision)
                       << (overwrite ? " overwriting dy" : ""));
          RandomStream rng(9);
          const FcCase c = LargeCase(s, rng);
          const Tensor dy = RandomTensor({s.batch, s.out}, rng);
          Tensor y = Tensor::Empty({s.batch, s.out});
          ASSERT_TRUE(
              FullyConnectedForward(c.x, c.weight, c.bias, activation, &y, precision).ok());
          std::vector<Tensor> one = {Tensor::Empty({s.batch, s.in}), Tensor::Empty({s.out, s.in}),
                                     Tensor::Empty({s.out})};
          ASSERT_TRUE(FullyConnectedBackward(c.x, c.weight, y, dy.Clone(), activation, &one[0],
                                             &one[1], &one[2], precision, {}, overwrite)
                          .ok());
          std::vector<Tensor> two = {testing::NanFilled({s.batch, s.in}),
                                     testing::NanFilled({s.out, s.in}),
                                     testing::NanFilled({s.out})};
          const Tensor shared_dy = dy.Clone();
          ASSERT_TRUE(FullyConnectedBackward(c.x, c.weight, y, shared_dy, activation, &two[0],
                                             nullptr, nullptr, precision, {}, overwrite)
                          .ok());
          ASSERT_TRUE(FullyConnectedBackward(c.x, c.weight, y, shared_dy, activation, nullptr,
                                             &two[1], &two[2], precision, {}, overwrite)
                          .ok());
          for (int i = 0; i < 3; ++i) EXPECT_TRUE(SameBits(one[i], two[i])) << "gradient " << i;
        }
      }
    }
  }
  const FcCase c = RandomCase(FcShape{4, 3, 2}, 1);
  Tensor y = Tensor::Empty({4, 2}), dw = Tensor::Empty({2, 3});
  ASSERT_TRUE(FullyConnectedForward(c.x, c.weight, c.bias, Activation::kNone, &y).ok());
  testing::ExpectInvalid(
      FullyConnectedBackward(c.x, c.weight, y, y, Activation::kNone, nullptr, &dw, nullptr),
      "both given or both null");
}

// ReluStep on a new thread with `threads` OpenMP threads and arena threads.
std::vector<Tensor> ReluStepOn(const FcCase& c, const Tensor& dy, int threads) {
  std::vector<Tensor> result;
  OnNewThread([&] {
    SetOpenMpThreads(threads);
    ThreadArena(threads).Execute([&] { result = ReluStep(c, dy); });
  });
  return result;
}

TEST(FullyConnectedOpsTest, BiasGradientIsIdenticalForAnyThreadCount) {
  // Large enough for oneDNN to split every product across threads, and for
  // the elementwise passes to split into many blocks of rows. The bias
  // gradient is ours, summed in blocks of a fixed number of rows and then
  // block by block: bit-identical whatever the arena's and OpenMP's thread
  // counts. The products are oneDNN's, whose split of the batch dimension may
  // change with the count; so may y's last bits where its AVX2 GEMM runs
  // (tests/testing/dense_reproducibility.h).
  const FcShape s{2048, 64, 32};
  RandomStream rng(21);
  const FcCase c = LargeCase(s, rng);
  const Tensor dy = RandomTensor({s.batch, s.out}, rng);
  const std::vector<Tensor> one = ReluStepOn(c, dy, 1);
  for (int threads : {2, 3, 8}) {
    SCOPED_TRACE(::testing::Message() << "threads=" << threads);
    const std::vector<Tensor> many = ReluStepOn(c, dy, threads);
    if (test::DenseRowsAreReproducible()) {
      EXPECT_TRUE(SameBits(one[0], many[0]));  // y: one product per element, then ours
    } else {
      ExpectAllClose(ToDouble(one[0]), many[0], 1e-6, "y");  // see dense_reproducibility.h
    }
    EXPECT_TRUE(SameBits(one[3], many[3]));
    ExpectAllClose(ToDouble(one[1]), many[1], 1e-5, "dx");
    ExpectAllClose(ToDouble(one[2]), many[2], 1e-4, "dweight");
  }
}

// `v` rounded to bf16 (round to nearest even), in double.
double RoundedToBf16(double v) { return BFloat16ToFloat(FloatToBFloat16(static_cast<float>(v))); }

// The values of `t` rounded to bf16, in double.
std::vector<double> RoundedToBf16(const Tensor& t) {
  std::vector<double> values = ToDouble(t);
  for (double& v : values) v = RoundedToBf16(v);
  return values;
}

// {dx, dweight, dbias} of a ReLU layer in double, from its output y and dy.
// With `bf16`, the products take x, the weights and the gradient through the
// ReLU rounded to bf16, as ComputePrecision::kBf16 does; dbias sums the
// unrounded gradient either way.
std::vector<std::vector<double>> ReferenceReluGradients(const FcCase& c, const Tensor& y,
                                                        const Tensor& dy, bool bf16 = false) {
  const int64_t batch = c.x.dim(0), in = c.x.dim(1), out = c.weight.dim(0);
  const std::vector<double> x = bf16 ? RoundedToBf16(c.x) : ToDouble(c.x);
  const std::vector<double> w = bf16 ? RoundedToBf16(c.weight) : ToDouble(c.weight);
  const std::vector<double> yv = ToDouble(y);
  std::vector<double> g = ToDouble(dy);
  for (size_t i = 0; i < g.size(); ++i) g[i] = yv[i] > 0 ? g[i] : 0.0;
  std::vector<double> dx(batch * in, 0.0), dweight(out * in, 0.0), dbias(out, 0.0);
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      dbias[o] += g[r * out + o];
      const double product_g = bf16 ? RoundedToBf16(g[r * out + o]) : g[r * out + o];
      for (int64_t k = 0; k < in; ++k) {
        dx[r * in + k] += product_g * w[o * in + k];
        dweight[o * in + k] += product_g * x[r * in + k];
      }
    }
  }
  return {dx, dweight, dbias};
}

TEST(FullyConnectedOpsTest, NarrowLayersMatchTheReferenceAndAreIdenticalForAnyThreadCount) {
  // The narrow kernels at sizes that split the batch into many blocks: the
  // forward of a layer with 13 inputs, the backward of layers with 1 and 16
  // outputs. What they compute (y of the first; dx, dweight and dbias of the
  // others) is bit-identical for any thread count, and all of it matches the
  // double-precision reference.
  for (const FcShape& s : {FcShape{2048, 13, 512}, FcShape{2048, 256, 1}, FcShape{1000, 64, 16}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.batch << " in=" << s.in << " out=" << s.out);
    RandomStream rng(31);
    const FcCase c = LargeCase(s, rng);
    const Tensor dy = RandomTensor({s.batch, s.out}, rng);
    const std::vector<Tensor> one = ReluStepOn(c, dy, 1);
    ExpectAllClose(
        ReferenceForward(ToDouble(c.x), ToDouble(c.weight), ToDouble(c.bias), s, Activation::kRelu),
        one[0], 1e-4, "y");
    const std::vector<std::vector<double>> reference = ReferenceReluGradients(c, one[0], dy);
    ExpectAllClose(reference[0], one[1], 1e-4, "dx");
    ExpectAllClose(reference[1], one[2], 1e-4, "dweight");
    for (int threads : {2, 3, 8}) {
      SCOPED_TRACE(::testing::Message() << "threads=" << threads);
      const std::vector<Tensor> many = ReluStepOn(c, dy, threads);
      if (s.in <= 16) {
        EXPECT_TRUE(SameBits(one[0], many[0])) << "y";
      }
      if (s.out <= 16) {
        EXPECT_TRUE(SameBits(one[1], many[1])) << "dx";
        EXPECT_TRUE(SameBits(one[2], many[2])) << "dweight";
      }
      EXPECT_TRUE(SameBits(one[3], many[3])) << "dbias";
    }
  }
}

// Largest |a[i] - b[i]|.
double MaxDifference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// bf16 arithmetic: the products see x, the weights and the gradient through
// the ReLU rounded to bf16, summed in f32; the bias and its gradient stay
// f32. Against a double reference of exactly that (to f32 summation error),
// and far from the unrounded reference (so rounding does happen). Layers wide
// on both sides (odd sizes, and the DLRM top MLP's first layer), and one with
// a single output, whose backward is narrow (f32; tested below).
TEST(FullyConnectedOpsTest, Bf16ProductsRoundTheirOperandsToBf16AndSumInF32) {
  if (!internal::CpuHasBf16()) GTEST_SKIP() << "this CPU has no bf16 products (AVX512-BF16, AMX)";
  for (const FcShape& s :
       {FcShape{37, 33, 19}, FcShape{64, 96, 80}, FcShape{512, 367, 512}, FcShape{50, 32, 1}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.batch << " in=" << s.in << " out=" << s.out);
    RandomStream rng(41);
    const FcCase c = LargeCase(s, rng);
    const Tensor dy = RandomTensor({s.batch, s.out}, rng);
    const std::vector<Tensor> step = ReluStep(c, dy, ComputePrecision::kBf16);
    const Tensor &y = step[0], &dx = step[1], &dweight = step[2], &dbias = step[3];
    const std::vector<double> x = RoundedToBf16(c.x), w = RoundedToBf16(c.weight);
    const std::vector<double> expected_y =
        ReferenceForward(x, w, ToDouble(c.bias), s, Activation::kRelu);
    ExpectAllClose(expected_y, y, 2e-5, "y");
    EXPECT_GT(MaxDifference(ReferenceForward(ToDouble(c.x), ToDouble(c.weight), ToDouble(c.bias), s,
                                             Activation::kRelu),
                            ToDouble(y)),
              1e-3)
        << "y looks unrounded";
    if (s.out <= 16) continue;

    const std::vector<std::vector<double>> expected =
        ReferenceReluGradients(c, y, dy, /*bf16=*/true);
    ExpectAllClose(expected[0], dx, 2e-5, "dx");
    ExpectAllClose(expected[1], dweight, 1e-4, "dweight");
    ExpectAllClose(expected[2], dbias, 1e-5, "dbias");
    const std::vector<std::vector<double>> unrounded = ReferenceReluGradients(c, y, dy);
    EXPECT_GT(MaxDifference(unrounded[0], ToDouble(dx)), 1e-3) << "dx looks unrounded";
    EXPECT_GT(MaxDifference(unrounded[1], ToDouble(dweight)), 1e-3) << "dweight looks unrounded";
  }
}

// Layers narrow on one side compute in f32 whatever the precision (their one
// pass is bound by memory): what the narrow kernels compute has the bits of
// f32 arithmetic.
TEST(FullyConnectedOpsTest, Bf16NarrowLayersComputeInF32) {
  if (!internal::CpuHasBf16()) GTEST_SKIP() << "this CPU has no bf16 products (AVX512-BF16, AMX)";
  for (const FcShape& s : {FcShape{300, 13, 512}, FcShape{300, 256, 1}, FcShape{300, 64, 16}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.batch << " in=" << s.in << " out=" << s.out);
    RandomStream rng(43);
    const FcCase c = LargeCase(s, rng);
    const Tensor dy = RandomTensor({s.batch, s.out}, rng);
    // Both backwards take the f32 forward's y (the ReLU mask), so that a
    // wide forward's bf16 rounding does not reach them.
    Tensor f32_y = Tensor::Empty({s.batch, s.out});
    ASSERT_TRUE(FullyConnectedForward(c.x, c.weight, c.bias, Activation::kRelu, &f32_y).ok());
    std::vector<Tensor> results[2];
    for (ComputePrecision p : {ComputePrecision::kF32, ComputePrecision::kBf16}) {
      Tensor y = Tensor::Empty({s.batch, s.out}), dx = Tensor::Empty({s.batch, s.in});
      Tensor dweight = Tensor::Empty({s.out, s.in}), dbias = Tensor::Empty({s.out});
      ASSERT_TRUE(FullyConnectedForward(c.x, c.weight, c.bias, Activation::kRelu, &y, p).ok());
      ASSERT_TRUE(FullyConnectedBackward(c.x, c.weight, f32_y, dy, Activation::kRelu, &dx, &dweight,
                                         &dbias, p)
                      .ok());
      results[p == ComputePrecision::kBf16] = {y, dx, dweight, dbias};
    }
    if (s.in <= 16) {
      EXPECT_TRUE(SameBits(results[0][0], results[1][0])) << "y";
    }
    if (s.out <= 16) {
      EXPECT_TRUE(SameBits(results[0][1], results[1][1])) << "dx";
      EXPECT_TRUE(SameBits(results[0][2], results[1][2])) << "dweight";
    }
  }
}

// The bf16 rounding of t, as a bf16 tensor of its shape.
Tensor RoundedTensor(const Tensor& t) {
  Tensor out = Tensor::Empty(t.shape(), DType::kBF16);
  FloatsToBFloat16(t.data<float>(), t.numel(), out.data<BFloat16>());
  return out;
}

// Bf16Copies: empty ones are filled with the roundings (y's after the bias and
// the ReLU, also by the narrow forward); held ones are used instead of
// rounding again (a held copy of 2x gives exactly twice dweight); results
// have the bits of calls without copies; a held copy of another shape is
// InvalidArgument. All of it is ignored in f32.
TEST(FullyConnectedOpsTest, Bf16CopiesAreFilledWhenEmptyAndUsedWhenHeld) {
  if (!internal::CpuHasBf16()) GTEST_SKIP() << "this CPU has no bf16 products (AVX512-BF16, AMX)";
  const ComputePrecision kBf16 = ComputePrecision::kBf16;
  for (const FcShape& s : {FcShape{64, 96, 80}, FcShape{50, 13, 40}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.batch << " in=" << s.in << " out=" << s.out);
    RandomStream rng(47);
    const FcCase c = LargeCase(s, rng);
    const Tensor dy = RandomTensor({s.batch, s.out}, rng);
    const std::vector<Tensor> plain = ReluStep(c, dy, kBf16);
    const Tensor& y = plain[0];
    const Tensor& dweight = plain[2];

    // The forward fills the empty copies, the backward reads them.
    Tensor xc, wc, yc;
    const std::vector<Tensor> copied = ReluStep(c, dy, kBf16, Bf16Copies{&xc, &wc, &yc});
    const char* names[] = {"y", "dx", "dweight", "dbias"};
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(SameBits(plain[i], copied[i])) << names[i];
    // Both shapes' backwards are bf16 (out > 16): x and the weight are rounded.
    ASSERT_TRUE(yc.defined() && xc.defined() && wc.defined());
    EXPECT_TRUE(SameBits(RoundedTensor(y), yc)) << "copy of y";
    EXPECT_TRUE(SameBits(RoundedTensor(c.x), xc)) << "copy of x";
    EXPECT_TRUE(SameBits(RoundedTensor(c.weight), wc)) << "copy of the weight";
    if (s.in <= 16) {  // The narrow forward rounds nothing but y.
      Tensor xf, wf, yf, y1 = Tensor::Empty({s.batch, s.out});
      ASSERT_TRUE(FullyConnectedForward(c.x, c.weight, c.bias, Activation::kRelu, &y1, kBf16,
                                        Bf16Copies{&xf, &wf, &yf})
                      .ok());
      EXPECT_FALSE(xf.defined());
      EXPECT_FALSE(wf.defined());
      EXPECT_TRUE(SameBits(RoundedTensor(y), yf)) << "copy of y, forward alone";
      continue;
    }
    Tensor dx2 = Tensor::Empty({s.batch, s.in}), dweight2 = Tensor::Empty({s.out, s.in});
    Tensor dbias2 = Tensor::Empty({s.out}), y2 = Tensor::Empty({s.batch, s.out});

    // A held copy is what the product reads: twice x gives twice dweight.
    Tensor twice_x = c.x.Clone();
    for (int64_t i = 0; i < twice_x.numel(); ++i) twice_x.data<float>()[i] *= 2.0f;
    Tensor held = RoundedTensor(twice_x);
    ASSERT_TRUE(FullyConnectedBackward(c.x, c.weight, y, dy, Activation::kRelu, &dx2, &dweight2,
                                       &dbias2, kBf16, Bf16Copies{&held, nullptr, nullptr})
                    .ok());
    for (int64_t i = 0; i < dweight.numel(); ++i) {
      ASSERT_EQ(2.0f * dweight.data<float>()[i], dweight2.data<float>()[i]) << "dweight " << i;
    }

    Tensor wrong = Tensor::Empty({s.batch, s.in + 1}, DType::kBF16);
    ExpectInvalid(FullyConnectedForward(c.x, c.weight, c.bias, Activation::kRelu, &y2, kBf16,
                                        Bf16Copies{&wrong, nullptr, nullptr}),
                  "the bf16 copy of x is");
    // f32 neither fills nor reads copies.
    Tensor unused;
    ASSERT_TRUE(FullyConnectedForward(c.x, c.weight, c.bias, Activation::kRelu, &y2,
                                      ComputePrecision::kF32, Bf16Copies{&wrong, &unused, &unused})
                    .ok());
    EXPECT_FALSE(unused.defined());
  }
}

// f16 arithmetic exists on a CUDA device only.
TEST(FullyConnectedOpsTest, F16OnTheCpuIsInvalidArgument) {
  const FcShape s{4, 32, 32};
  RandomStream rng(45);
  const FcCase c = LargeCase(s, rng);
  Tensor y = Tensor::Empty({s.batch, s.out});
  ExpectInvalid(
      FullyConnectedForward(c.x, c.weight, c.bias, Activation::kRelu, &y, ComputePrecision::kF16),
      "compute in f32 or bf16, not f16");
  Tensor dx = Tensor::Empty({s.batch, s.in}), dweight = Tensor::Empty({s.out, s.in});
  Tensor dbias = Tensor::Empty({s.out});
  ExpectInvalid(FullyConnectedBackward(c.x, c.weight, y, y, Activation::kRelu, &dx, &dweight,
                                       &dbias, ComputePrecision::kF16),
                "compute in f32 or bf16, not f16");
}

TEST(FullyConnectedOpsTest, ConcurrentCallsFromSeveralThreadsGiveTheSerialResults) {
  // Four threads, two per shape, each running many steps at once: every
  // result must be the one the same step gives alone (same thread count, so
  // bit-identical).
  const std::vector<FcShape> shapes = {{257, 64, 33}, {64, 129, 17}};
  std::vector<FcCase> cases;
  std::vector<Tensor> dys;
  std::vector<std::vector<Tensor>> expected;
  for (size_t i = 0; i < shapes.size(); ++i) {
    RandomStream rng(30 + i);
    cases.push_back(LargeCase(shapes[i], rng));
    dys.push_back(RandomTensor({shapes[i].batch, shapes[i].out}, rng));
    OnNewThread([&] {
      SetOpenMpThreads(1);
      expected.push_back(ReluStep(cases[i], dys[i]));
    });
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      SetOpenMpThreads(1);
      const size_t i = t % shapes.size();
      for (int step = 0; step < 200; ++step) {
        const std::vector<Tensor> got = ReluStep(cases[i], dys[i]);
        for (size_t k = 0; k < got.size(); ++k) mismatches[t] += !SameBits(got[k], expected[i][k]);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ::testing::Each(0));
}

TEST(FullyConnectedOpsTest, EmptyBatchGivesZeroWeightGradients) {
  const Tensor x = Tensor::Empty({0, 3}), weight = Tensor::Zeros({2, 3}), bias = Tensor::Zeros({2});
  Tensor y = Tensor::Empty({0, 2});
  ASSERT_TRUE(FullyConnectedForward(x, weight, bias, Activation::kRelu, &y).ok());
  Tensor dweight = Tensor::FromVector({1, 1, 1, 1, 1, 1}, {2, 3});
  Tensor dbias = Tensor::FromVector({1, 1}, {2});
  ASSERT_TRUE(
      FullyConnectedBackward(x, weight, y, y, Activation::kRelu, nullptr, &dweight, &dbias).ok());
  ExpectAllClose(std::vector<double>(6, 0.0), dweight, 0.0, "dweight");
  ExpectAllClose(std::vector<double>(2, 0.0), dbias, 0.0, "dbias");
}

TEST(FullyConnectedOpsTest, ZeroInputFeaturesGiveTheActivatedBias) {
  const Tensor x = Tensor::Empty({2, 0}), weight = Tensor::Empty({2, 0});
  const Tensor bias = Tensor::FromVector({1.5f, -2.0f}, {2});
  Tensor y = Tensor::Empty({2, 2});
  ASSERT_TRUE(FullyConnectedForward(x, weight, bias, Activation::kRelu, &y).ok());
  ExpectAllClose({1.5, 0.0, 1.5, 0.0}, y, 0.0, "y");
  const Tensor dy = Tensor::FromVector({1, 2, 3, 4}, {2, 2});
  Tensor dx = Tensor::Empty({2, 0}), dweight = Tensor::Empty({2, 0}), dbias = Tensor::Empty({2});
  ASSERT_TRUE(
      FullyConnectedBackward(x, weight, y, dy, Activation::kRelu, &dx, &dweight, &dbias).ok());
  ExpectAllClose({4.0, 0.0}, dbias, 0.0, "dbias");  // the ReLU masks the second output
}

TEST(FullyConnectedOpsTest, MismatchedShapesAreInvalidArguments) {
  const Tensor x = Tensor::Zeros({4, 3});
  const Tensor weight = Tensor::Zeros({2, 3});
  const Tensor bias = Tensor::Zeros({2});
  Tensor y = Tensor::Empty({4, 2});

  Status status = FullyConnectedForward(x, Tensor::Zeros({3, 2}), bias, Activation::kNone, &y);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("weight"));
  EXPECT_THAT(status.message(), HasSubstr("got f32[3, 2]"));

  status = FullyConnectedForward(x, weight, Tensor::Zeros({3}), Activation::kNone, &y);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("bias"));

  Tensor wrong_y = Tensor::Empty({4, 3});
  status = FullyConnectedForward(x, weight, bias, Activation::kNone, &wrong_y);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("y must be f32[4, 2]"));

  status = FullyConnectedForward(x, weight, bias, Activation::kNone, nullptr);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());

  status = FullyConnectedForward(Tensor::Zeros({4, 3}, DType::kI64), weight, bias,
                                 Activation::kNone, &y);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("x"));

  Tensor dx = Tensor::Empty({4, 3}), dweight = Tensor::Empty({2, 3}), dbias = Tensor::Empty({2});
  status = FullyConnectedBackward(x, weight, y, Tensor::Zeros({4, 3}), Activation::kNone, &dx,
                                  &dweight, &dbias);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("dy"));

  Tensor wrong_dx = Tensor::Empty({3, 4});
  status = FullyConnectedBackward(x, weight, y, y, Activation::kNone, &wrong_dx, &dweight, &dbias);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("dx"));

  status = FullyConnectedBackward(x, weight, y, y, Activation::kNone, &dx, nullptr, &dbias);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("dweight"));
}

}  // namespace
}  // namespace ember::ops
