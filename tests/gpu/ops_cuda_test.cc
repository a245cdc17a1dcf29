// Every CUDA operator of ops/dense_ops_cuda.h, forward and backward, against
// the CPU operator on the same random inputs (odd shapes, batch 1, empty
// batches), bit for bit where the CUDA operator promises the CPU's order of
// operations and within a tolerance for the arithmetic where it does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "ops/cross_layer.h"
#include "ops/dense_ops.h"
#include "ops/dense_ops_cuda.h"
#include "ops/dense_optimizer.h"
#include "ops/dropout.h"
#include "ops/fm_interaction.h"
#include "ops/gradient_clipping.h"
#include "ops/moe_routing.h"
#include "ops/op_registry.h"
#include "tests/gpu/device_tensors.h"

namespace ember::ops {
namespace {

using ember::testing::RandomHost;

// Host copies of the tensors of one test, on one stream of cuda:0.
class OpsCudaTest : public ember::testing::CudaStreamTest {
 protected:
  Tensor Empty(std::vector<int64_t> shape, DType dtype = DType::kF32) {
    Result<Tensor> t = Tensor::Allocate(std::move(shape), dtype, Device::Cuda(0));
    CHECK(t.ok()) << t.status();
    return *t;
  }

  // A device f32 output filled with NaN, so that an element the operator
  // fails to write cannot pass for the zero that fresh cudaMalloc memory
  // usually holds.
  Tensor Poisoned(std::vector<int64_t> shape) {
    Tensor host = Tensor::Empty(std::move(shape));
    std::fill_n(host.data<float>(), host.numel(), std::nanf(""));
    Tensor device = Up(host);
    CHECK(stream_->Synchronize().ok());  // before `host` goes away
    return device;
  }

  Tensor Up(const Tensor& host) {
    Tensor device = Empty(host.shape(), host.dtype());
    if (host.nbytes() > 0) {
      CHECK(stream_->CopyToDevice(host.raw_data(), device.raw_data(), host.nbytes()).ok());
    }
    return device;
  }

  Tensor Down(const Tensor& device) {
    Tensor host = Tensor::Empty(device.shape(), device.dtype());
    if (device.nbytes() > 0) {
      CHECK(stream_->CopyToHost(device.raw_data(), host.raw_data(), host.nbytes()).ok());
    }
    CHECK(stream_->Synchronize().ok());
    return host;
  }

  // |expected - actual| <= atol + rtol * |expected| for every element.
  void ExpectNear(const Tensor& expected, const Tensor& device_actual, double atol, double rtol,
                  const std::string& what) {
    const Tensor actual = Down(device_actual);
    ASSERT_EQ(expected.shape(), actual.shape()) << what;
    for (int64_t i = 0; i < expected.numel(); ++i) {
      const double e = expected.data<float>()[i], a = actual.data<float>()[i];
      ASSERT_NEAR(e, a, atol + rtol * std::fabs(e)) << what << " at " << i;
    }
  }

  void ExpectSameBits(const Tensor& expected, const Tensor& device_actual,
                      const std::string& what) {
    const Tensor actual = Down(device_actual);
    ASSERT_EQ(expected.shape(), actual.shape()) << what;
    ASSERT_EQ(expected.dtype(), actual.dtype()) << what;
    for (size_t i = 0; i < expected.nbytes(); ++i) {
      ASSERT_EQ(static_cast<const uint8_t*>(expected.raw_data())[i],
                static_cast<const uint8_t*>(actual.raw_data())[i])
          << what << " differs at byte " << i;
    }
  }
};

// --- Fully connected ------------------------------------------------------------

// Rounding of one input of the precision (x and w are in [-1, 1]).
double Epsilon(ComputePrecision precision) {
  switch (precision) {
    case ComputePrecision::kBf16:
      return 0x1.0p-7;
    case ComputePrecision::kF16:
      return 0x1.0p-10;
    case ComputePrecision::kF32:
      break;
  }
  return 1e-5;
}

using FcParam = std::tuple<int, int, int, bool, ComputePrecision>;

class FullyConnectedCudaOpTest : public OpsCudaTest,
                                 public ::testing::WithParamInterface<FcParam> {};

TEST_P(FullyConnectedCudaOpTest, ForwardAndBackwardMatchTheCpuKernel) {
  const auto [batch, in, out, relu, precision] = GetParam();
  const Activation act = relu ? Activation::kRelu : Activation::kNone;
  RandomStream random(static_cast<uint64_t>(batch * 7919 + in * 31 + out));
  const Tensor x = RandomHost({batch, in}, random), w = RandomHost({out, in}, random);
  const Tensor b = RandomHost({out}, random), dy = RandomHost({batch, out}, random);
  Tensor y = Tensor::Empty({batch, out});
  ASSERT_TRUE(FullyConnectedForward(x, w, b, act, &y).ok());
  Tensor dx = Tensor::Empty({batch, in}), dw = Tensor::Empty({out, in}), db = Tensor::Empty({out});
  ASSERT_TRUE(FullyConnectedBackward(x, w, y, dy, act, &dx, &dw, &db).ok());

  const double eps = Epsilon(precision);
  Tensor gx = Up(x), gw = Up(w), gb = Up(b), gdy = Up(dy), gy = Empty({batch, out});
  ASSERT_TRUE(FullyConnectedForwardCuda(gx, gw, gb, act, &gy, stream(), precision).ok());
  ExpectNear(y, gy, eps * std::sqrt(in + 1.0), 1e-5, "y");
  // The backward reads the CPU's y, so both mask the same elements.
  Tensor gdx = Empty({batch, in}), gdw = Empty({out, in}), gdb = Empty({out});
  const Tensor gy_cpu = Up(y);
  ASSERT_TRUE(FullyConnectedBackwardCuda(gx, gw, gy_cpu, gdy, act, &gdx, &gdw, &gdb, stream(),
                                         precision)
                  .ok());
  ExpectNear(dx, gdx, eps * std::sqrt(out + 1.0), 1e-5, "dx");
  ExpectNear(dw, gdw, eps * std::sqrt(batch + 1.0), 1e-5, "dweight");
  ExpectNear(db, gdb, 1e-5 * std::sqrt(batch + 1.0), 1e-5, "dbias");
  // Without dx (a first layer), into fresh NaN-filled outputs: reusing gdw
  // and gdb would pass even if this path wrote nothing.
  Tensor gdw2 = Poisoned({out, in}), gdb2 = Poisoned({out});
  ASSERT_TRUE(FullyConnectedBackwardCuda(gx, gw, gy_cpu, gdy, act, nullptr, &gdw2, &gdb2,
                                         stream(), precision)
                  .ok());
  ExpectNear(dw, gdw2, eps * std::sqrt(batch + 1.0), 1e-5, "dweight without dx");
  ExpectNear(db, gdb2, 1e-5 * std::sqrt(batch + 1.0), 1e-5, "dbias without dx");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FullyConnectedCudaOpTest,
    ::testing::Combine(::testing::Values(1, 17, 2048), ::testing::Values(13, 256),
                       ::testing::Values(1, 64, 255), ::testing::Bool(),
                       ::testing::Values(ComputePrecision::kF32, ComputePrecision::kBf16,
                                         ComputePrecision::kF16)));

TEST_F(OpsCudaTest, FullyConnectedHandlesEmptyDimensions) {
  RandomStream random(3);
  for (const auto& [batch, in, out] :
       std::vector<std::tuple<int, int, int>>{{0, 5, 3}, {4, 0, 3}, {4, 5, 0}}) {
    const Tensor x = RandomHost({batch, in}, random), w = RandomHost({out, in}, random);
    const Tensor b = RandomHost({out}, random), dy = RandomHost({batch, out}, random);
    Tensor y = Tensor::Empty({batch, out});
    ASSERT_TRUE(FullyConnectedForward(x, w, b, Activation::kRelu, &y).ok());
    Tensor dx = Tensor::Empty({batch, in}), dw = Tensor::Empty({out, in});
    Tensor db = Tensor::Empty({out});
    ASSERT_TRUE(FullyConnectedBackward(x, w, y, dy, Activation::kRelu, &dx, &dw, &db).ok());
    Tensor gy = Poisoned({batch, out}), gdx = Poisoned({batch, in});
    Tensor gdw = Poisoned({out, in}), gdb = Poisoned({out});
    ASSERT_TRUE(
        FullyConnectedForwardCuda(Up(x), Up(w), Up(b), Activation::kRelu, &gy, stream()).ok());
    ExpectNear(y, gy, 0, 0, "y");
    ASSERT_TRUE(FullyConnectedBackwardCuda(Up(x), Up(w), Up(y), Up(dy), Activation::kRelu, &gdx,
                                           &gdw, &gdb, stream())
                    .ok());
    ExpectNear(dx, gdx, 0, 0, "dx");
    ExpectNear(dw, gdw, 0, 0, "dweight");
    ExpectNear(db, gdb, 1e-5, 1e-5, "dbias");
  }
}

TEST_F(OpsCudaTest, MismatchedOperandsAreInvalidArgumentNamingThem) {
  Tensor x = Empty({2, 3}), w = Empty({4, 5}), b = Empty({4}), y = Empty({2, 4});
  const Status status = FullyConnectedForwardCuda(x, w, b, Activation::kNone, &y, stream());
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_NE(std::string::npos, status.message().find("weight")) << status;
  Tensor host_y = Tensor::Zeros({2, 4});
  Tensor good_w = Empty({4, 3});
  const Status on_host =
      FullyConnectedForwardCuda(x, good_w, b, Activation::kNone, &host_y, stream());
  EXPECT_EQ(StatusCode::kInvalidArgument, on_host.code());
  EXPECT_NE(std::string::npos, on_host.message().find("y must be")) << on_host;
}

// --- Elementwise ----------------------------------------------------------------

TEST_F(OpsCudaTest, ReluSigmoidAndAddMatchTheirDefinitions) {
  RandomStream random(5);
  for (const int64_t n : {1, 1000, 100003}) {
    const Tensor x = RandomHost({n}, random, -30, 30), dy = RandomHost({n}, random);
    Tensor relu = x.Clone(), drelu = dy.Clone(), sig = Tensor::Empty({n}), dsig = dy.Clone();
    Tensor sum = Tensor::Empty({n});
    ASSERT_TRUE(Sigmoid(x, &sig).ok());
    for (int64_t i = 0; i < n; ++i) {
      const float v = x.data<float>()[i], s = sig.data<float>()[i];
      relu.data<float>()[i] = v > 0 ? v : 0;
      drelu.data<float>()[i] = v > 0 ? dy.data<float>()[i] : 0;
      dsig.data<float>()[i] = dy.data<float>()[i] * s * (1 - s);
      sum.data<float>()[i] = v + dy.data<float>()[i];
    }
    Tensor gx = Up(x), gdy = Up(dy), out = Empty({n}), grad = Empty({n});
    ASSERT_TRUE(ReluForwardCuda(gx, &out, stream()).ok());
    ExpectSameBits(relu, out, "relu");
    ASSERT_TRUE(ReluBackwardCuda(out, gdy, &grad, stream()).ok());
    ExpectSameBits(drelu, grad, "relu backward");
    ASSERT_TRUE(SigmoidCuda(gx, &out, stream()).ok());
    ExpectNear(sig, out, 1e-7, 1e-6, "sigmoid");
    ASSERT_TRUE(SigmoidBackwardCuda(Up(sig), gdy, &grad, stream()).ok());
    ExpectNear(dsig, grad, 1e-7, 1e-6, "sigmoid backward");
    ASSERT_TRUE(AddCuda(gx, gdy, &out, stream()).ok());
    ExpectSameBits(sum, out, "add");
  }
}

// --- Embedding bags -----------------------------------------------------------------

class EmbeddingBagCudaTest : public OpsCudaTest,
                             public ::testing::WithParamInterface<std::tuple<int, int, int>> {};

TEST_P(EmbeddingBagCudaTest, ForwardAndBackwardAreBitIdenticalToTheCpu) {
  const auto [num_rows, num_bags, dim] = GetParam();
  RandomStream random(static_cast<uint64_t>(num_rows * 13 + num_bags));
  const Tensor rows = RandomHost({num_rows, dim}, random);
  Tensor offsets = Tensor::Empty({num_bags + 1}, DType::kI64);
  std::vector<int64_t> index;
  offsets.data<int64_t>()[0] = 0;
  for (int b = 0; b < num_bags; ++b) {
    // Some bags empty, some long, with repeated rows.
    const int64_t size = static_cast<int64_t>(random.NextBelow(b % 5 == 0 ? 1 : 9));
    for (int64_t p = 0; p < size; ++p) {
      index.push_back(static_cast<int64_t>(random.NextBelow(static_cast<uint64_t>(num_rows))));
    }
    offsets.data<int64_t>()[b + 1] = static_cast<int64_t>(index.size());
  }
  Tensor row_index = Tensor::Empty({static_cast<int64_t>(index.size())}, DType::kI64);
  std::copy(index.begin(), index.end(), row_index.data<int64_t>());
  const Tensor dout = RandomHost({num_bags, dim}, random);
  for (const Pooling pooling : {Pooling::kSum, Pooling::kMean}) {
    Tensor out = Tensor::Empty({num_bags, dim}), drows = Tensor::Empty({num_rows, dim});
    ASSERT_TRUE(EmbeddingBagForward(rows, row_index, offsets, pooling, &out).ok());
    ASSERT_TRUE(EmbeddingBagBackward(dout, row_index, offsets, pooling, &drows).ok());
    Tensor gidx = Up(row_index), goff = Up(offsets);
    Tensor gout = Poisoned({num_bags, dim}), gdrows = Poisoned({num_rows, dim});
    ASSERT_TRUE(EmbeddingBagForwardCuda(Up(rows), gidx, goff, pooling, &gout, stream()).ok());
    ExpectSameBits(out, gout, "pooled");
    ASSERT_TRUE(EmbeddingBagBackwardCuda(Up(dout), gidx, goff, pooling, &gdrows, stream()).ok());
    ExpectSameBits(drows, gdrows, "drows");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingBagCudaTest,
                         ::testing::Values(std::make_tuple(1, 1, 1), std::make_tuple(7, 0, 3),
                                           std::make_tuple(13, 1, 5),
                                           std::make_tuple(100, 37, 16),
                                           std::make_tuple(5000, 4096, 64)));

// --- Concat, interactions, loss ------------------------------------------------------

TEST_F(OpsCudaTest, ConcatAndSplitMoveTheSameColumns) {
  RandomStream random(11);
  for (const int64_t batch : {0, 1, 33}) {
    std::vector<Tensor> parts, device_parts;
    for (const int64_t width : {3, 0, 16, 1}) {
      parts.push_back(RandomHost({batch, width}, random));
      device_parts.push_back(Up(parts.back()));
    }
    Tensor out = Tensor::Empty({batch, 20});
    ASSERT_TRUE(ConcatColumns(parts, &out).ok());
    Tensor gout = Empty({batch, 20});
    ASSERT_TRUE(ConcatColumnsCuda(device_parts, &gout, stream()).ok());
    ExpectSameBits(out, gout, "concat");
    std::vector<Tensor> back;
    for (const Tensor& p : parts) back.push_back(Empty(p.shape()));
    ASSERT_TRUE(SplitColumnsCuda(gout, &back, stream()).ok());
    for (size_t k = 0; k < parts.size(); ++k) ExpectSameBits(parts[k], back[k], "split");
  }
}

class InteractionCudaTest : public OpsCudaTest,
                            public ::testing::WithParamInterface<std::tuple<int, int, int>> {};

TEST_P(InteractionCudaTest, DotAndFmMatchTheCpu) {
  const auto [batch, f, d] = GetParam();
  RandomStream random(static_cast<uint64_t>(batch * 100 + f * 10 + d));
  const int64_t pairs = int64_t{f} * (f - 1) / 2;
  const Tensor x = RandomHost({batch, f, d}, random), dpairs = RandomHost({batch, pairs}, random);
  const Tensor dfm = RandomHost({batch, 1}, random);
  Tensor out = Tensor::Empty({batch, pairs}), dx = Tensor::Empty({batch, f, d});
  ASSERT_TRUE(DotInteractionForward(x, &out).ok());
  ASSERT_TRUE(DotInteractionBackward(x, dpairs, &dx).ok());
  Tensor gx = Up(x), gout = Poisoned({batch, pairs}), gdx = Poisoned({batch, f, d});
  ASSERT_TRUE(DotInteractionForwardCuda(gx, &gout, stream()).ok());
  ExpectNear(out, gout, 1e-5 * std::sqrt(d + 1.0), 1e-5, "dot");
  ASSERT_TRUE(DotInteractionBackwardCuda(gx, Up(dpairs), &gdx, stream()).ok());
  ExpectNear(dx, gdx, 1e-5 * std::sqrt(f + 1.0), 1e-5, "dot backward");

  Tensor fm = Tensor::Empty({batch, 1}), dfx = Tensor::Empty({batch, f, d});
  ASSERT_TRUE(FmInteractionForward(x, &fm).ok());
  ASSERT_TRUE(FmInteractionBackward(x, dfm, &dfx).ok());
  Tensor gfm = Poisoned({batch, 1}), gdfx = Poisoned({batch, f, d});
  ASSERT_TRUE(FmInteractionForwardCuda(gx, &gfm, stream()).ok());
  ExpectNear(fm, gfm, 1e-5 * f * std::sqrt(d + 1.0), 1e-5, "fm");
  ASSERT_TRUE(FmInteractionBackwardCuda(gx, Up(dfm), &gdfx, stream()).ok());
  ExpectNear(dfx, gdfx, 1e-5 * f, 1e-5, "fm backward");
}

INSTANTIATE_TEST_SUITE_P(Shapes, InteractionCudaTest,
                         ::testing::Values(std::make_tuple(1, 2, 1), std::make_tuple(7, 5, 3),
                                           std::make_tuple(0, 4, 8), std::make_tuple(3, 1, 4),
                                           std::make_tuple(2048, 27, 16),
                                           std::make_tuple(65, 9, 128)));

TEST_F(OpsCudaTest, SigmoidCrossEntropyMatchesTheCpu) {
  RandomStream random(17);
  for (const int64_t batch : {1, 999, 20000}) {
    const Tensor logits = RandomHost({batch, 1}, random, -40, 40);
    Tensor labels = RandomHost({batch, 1}, random, 0, 1);
    Tensor dlogits = Tensor::Empty({batch, 1});
    Result<double> loss = SigmoidCrossEntropyWithLogits(logits, labels, &dlogits);
    ASSERT_TRUE(loss.ok());
    Tensor gd = Empty({batch, 1});
    Result<double> gloss = SigmoidCrossEntropyWithLogitsCuda(Up(logits), Up(labels), &gd, stream());
    ASSERT_TRUE(gloss.ok()) << gloss.status();
    EXPECT_NEAR(*loss, *gloss, 1e-12 * std::fabs(*loss));
    ExpectNear(dlogits, gd, 1e-9, 1e-6, "dlogits");
    // The same bits on a second run.
    Result<double> again = SigmoidCrossEntropyWithLogitsCuda(Up(logits), Up(labels), &gd, stream());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*gloss, *again);
    labels.data<float>()[batch / 2] = 1.5f;
    Result<double> bad = SigmoidCrossEntropyWithLogitsCuda(Up(logits), Up(labels), &gd, stream());
    EXPECT_EQ(StatusCode::kInvalidArgument, bad.status().code());
    EXPECT_NE(std::string::npos,
              bad.status().message().find("labels[" + std::to_string(batch / 2) + "]"))
        << bad.status();
  }
  Tensor empty = Empty({0});
  EXPECT_EQ(StatusCode::kInvalidArgument,
            SigmoidCrossEntropyWithLogitsCuda(empty, empty, nullptr, stream()).status().code());
}

// --- Cross layers ---------------------------------------------------------------------

class CrossLayerCudaTest : public OpsCudaTest,
                           public ::testing::WithParamInterface<std::tuple<int, int, int>> {};

TEST_P(CrossLayerCudaTest, FullAndLowRankMatchTheCpu) {
  const auto [batch, d, r] = GetParam();
  RandomStream random(static_cast<uint64_t>(batch * 1000 + d * 10 + r));
  const Tensor x0 = RandomHost({batch, d}, random), xl = RandomHost({batch, d}, random);
  const Tensor w = RandomHost({d, d}, random), bias = RandomHost({d}, random);
  const Tensor u = RandomHost({d, r}, random), v = RandomHost({d, r}, random);
  const Tensor dout = RandomHost({batch, d}, random);
  const double tol = 1e-5 * std::sqrt(d + batch + 1.0);
  Tensor gx0 = Up(x0), gxl = Up(xl), gbias = Up(bias), gdout = Up(dout);
  {
    Tensor out = Tensor::Empty({batch, d}), dx0 = Tensor::Empty({batch, d});
    Tensor dxl = Tensor::Empty({batch, d}), dw = Tensor::Empty({d, d}), db = Tensor::Empty({d});
    ASSERT_TRUE(CrossLayerForward(x0, xl, w, bias, &out).ok());
    ASSERT_TRUE(CrossLayerBackward(x0, xl, w, bias, dout, &dx0, &dxl, &dw, &db).ok());
    Tensor gw = Up(w), gout = Poisoned({batch, d}), gdx0 = Poisoned({batch, d});
    Tensor gdxl = Poisoned({batch, d}), gdw = Poisoned({d, d}), gdb = Poisoned({d});
    ASSERT_TRUE(CrossLayerForwardCuda(gx0, gxl, gw, gbias, &gout, stream()).ok());
    ExpectNear(out, gout, tol, 1e-5, "cross out");
    ASSERT_TRUE(CrossLayerBackwardCuda(gx0, gxl, gw, gbias, gdout, &gdx0, &gdxl, &gdw, &gdb,
                                       stream())
                    .ok());
    ExpectNear(dx0, gdx0, tol, 1e-5, "cross dx0");
    ExpectNear(dxl, gdxl, tol, 1e-5, "cross dxl");
    ExpectNear(dw, gdw, tol, 1e-5, "cross dweight");
    ExpectNear(db, gdb, tol, 1e-5, "cross dbias");
  }
  Tensor out = Tensor::Empty({batch, d}), dx0 = Tensor::Empty({batch, d});
  Tensor dxl = Tensor::Empty({batch, d}), du = Tensor::Empty({d, r}), dv = Tensor::Empty({d, r});
  Tensor db = Tensor::Empty({d});
  ASSERT_TRUE(LowRankCrossLayerForward(x0, xl, u, v, bias, &out).ok());
  ASSERT_TRUE(LowRankCrossLayerBackward(x0, xl, u, v, bias, dout, &dx0, &dxl, &du, &dv, &db).ok());
  Tensor gu = Up(u), gv = Up(v), gout = Poisoned({batch, d}), gdx0 = Poisoned({batch, d});
  Tensor gdxl = Poisoned({batch, d}), gdu = Poisoned({d, r}), gdv = Poisoned({d, r});
  Tensor gdb = Poisoned({d});
  ASSERT_TRUE(LowRankCrossLayerForwardCuda(gx0, gxl, gu, gv, gbias, &gout, stream()).ok());
  ExpectNear(out, gout, tol, 1e-5, "low-rank out");
  ASSERT_TRUE(LowRankCrossLayerBackwardCuda(gx0, gxl, gu, gv, gbias, gdout, &gdx0, &gdxl, &gdu,
                                            &gdv, &gdb, stream())
                  .ok());
  ExpectNear(dx0, gdx0, tol, 1e-5, "low-rank dx0");
  ExpectNear(dxl, gdxl, tol, 1e-5, "low-rank dxl");
  ExpectNear(du, gdu, tol, 1e-5, "low-rank du");
  ExpectNear(dv, gdv, tol, 1e-5, "low-rank dv");
  ExpectNear(db, gdb, tol, 1e-5, "low-rank dbias");
}

// The saved z (and t) are those of the CPU operator, and the backward from
// them gives the same bits as the backward that recomputes them on the device.
TEST_P(CrossLayerCudaTest, BackwardFromSavedIntermediatesMatchesTheRecomputedOneBitForBit) {
  const auto [batch, d, r] = GetParam();
  RandomStream random(static_cast<uint64_t>(batch * 1000 + d * 10 + r + 1));
  const Tensor x0 = RandomHost({batch, d}, random), xl = RandomHost({batch, d}, random);
  const Tensor w = RandomHost({d, d}, random), bias = RandomHost({d}, random);
  const Tensor u = RandomHost({d, r}, random), v = RandomHost({d, r}, random);
  const Tensor dout = RandomHost({batch, d}, random);
  const double tol = 1e-5 * std::sqrt(d + batch + 1.0);
  Tensor gx0 = Up(x0), gxl = Up(xl), gw = Up(w), gbias = Up(bias), gdout = Up(dout);
  Tensor gu = Up(u), gv = Up(v);
  {
    Tensor out = Tensor::Empty({batch, d}), z = Tensor::Empty({batch, d});
    ASSERT_TRUE(CrossLayerForward(x0, xl, w, bias, &out, &z).ok());
    Tensor gout = Poisoned({batch, d}), gz = Poisoned({batch, d});
    ASSERT_TRUE(CrossLayerForwardCuda(gx0, gxl, gw, gbias, &gout, stream(), &gz).ok());
    ExpectNear(out, gout, tol, 1e-5, "cross out");
    ExpectNear(z, gz, tol, 1e-5, "cross saved z");
    std::vector<Tensor> recomputed, from_saved;
    for (std::vector<Tensor>* grads : {&recomputed, &from_saved}) {
      *grads = {Poisoned({batch, d}), Poisoned({batch, d}), Poisoned({d, d}), Poisoned({d})};
      std::vector<Tensor>& g = *grads;
      ASSERT_TRUE(CrossLayerBackwardCuda(gx0, gxl, gw, gbias, gdout, &g[0], &g[1], &g[2], &g[3],
                                         stream(), grads == &from_saved ? &gz : nullptr)
                      .ok());
    }
    for (size_t i = 0; i < recomputed.size(); ++i) {
      ExpectSameBits(Down(recomputed[i]), from_saved[i], "cross gradient " + std::to_string(i));
    }
  }
  Tensor out = Tensor::Empty({batch, d}), t = Tensor::Empty({batch, r});
  Tensor z = Tensor::Empty({batch, d});
  ASSERT_TRUE(LowRankCrossLayerForward(x0, xl, u, v, bias, &out, &t, &z).ok());
  Tensor gout = Poisoned({batch, d}), gt = Poisoned({batch, r}), gz = Poisoned({batch, d});
  ASSERT_TRUE(
      LowRankCrossLayerForwardCuda(gx0, gxl, gu, gv, gbias, &gout, stream(), &gt, &gz).ok());
  ExpectNear(out, gout, tol, 1e-5, "low-rank out");
  ExpectNear(t, gt, tol, 1e-5, "low-rank saved t");
  ExpectNear(z, gz, tol, 1e-5, "low-rank saved z");
  std::vector<Tensor> recomputed, from_saved;
  for (std::vector<Tensor>* grads : {&recomputed, &from_saved}) {
    *grads = {Poisoned({batch, d}), Poisoned({batch, d}), Poisoned({d, r}), Poisoned({d, r}),
              Poisoned({d})};
    std::vector<Tensor>& g = *grads;
    const bool saved = grads == &from_saved;
    ASSERT_TRUE(LowRankCrossLayerBackwardCuda(gx0, gxl, gu, gv, gbias, gdout, &g[0], &g[1], &g[2],
                                              &g[3], &g[4], stream(), saved ? &gt : nullptr,
                                              saved ? &gz : nullptr)
                    .ok());
  }
  for (size_t i = 0; i < recomputed.size(); ++i) {
    ExpectSameBits(Down(recomputed[i]), from_saved[i], "low-rank gradient " + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CrossLayerCudaTest,
                         ::testing::Values(std::make_tuple(1, 1, 1), std::make_tuple(7, 13, 3),
                                           std::make_tuple(0, 8, 2), std::make_tuple(5, 6, 0),
                                           std::make_tuple(1024, 479, 64)));

// --- MoE routing ----------------------------------------------------------------------

// Probabilities with many exact ties: softmax of logits on a coarse grid.
Tensor TiedProbs(int64_t batch, int64_t experts, RandomStream& random) {
  Tensor logits = Tensor::Empty({batch, experts});
  for (int64_t i = 0; i < logits.numel(); ++i) {
    logits.data<float>()[i] = static_cast<float>(random.NextBelow(4));
  }
  Tensor probs = Tensor::Empty({batch, experts});
  CHECK(SoftmaxForward(logits, &probs).ok());
  return probs;
}

TEST_F(OpsCudaTest, SoftmaxMatchesTheCpu) {
  RandomStream random(19);
  for (const auto& [batch, experts] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 7}, {1000, 64}, {17, 100}}) {
    const Tensor logits = RandomHost({batch, experts}, random, -20, 20);
    const Tensor dprobs = RandomHost({batch, experts}, random);
    Tensor probs = Tensor::Empty({batch, experts}), dlogits = Tensor::Empty({batch, experts});
    ASSERT_TRUE(SoftmaxForward(logits, &probs).ok());
    ASSERT_TRUE(SoftmaxBackward(probs, dprobs, &dlogits).ok());
    Tensor gprobs = Empty({batch, experts}), gdlogits = Empty({batch, experts});
    ASSERT_TRUE(SoftmaxForwardCuda(Up(logits), &gprobs, stream()).ok());
    ExpectNear(probs, gprobs, 1e-7, 1e-5, "probs");
    ASSERT_TRUE(SoftmaxBackwardCuda(Up(probs), Up(dprobs), &gdlogits, stream()).ok());
    ExpectNear(dlogits, gdlogits, 1e-7, 1e-5, "dlogits");
  }
}

using RoutingParam = std::tuple<int, int, int, double, bool>;

class RoutingCudaTest : public OpsCudaTest,
                        public ::testing::WithParamInterface<RoutingParam> {};

TEST_P(RoutingCudaTest, RoutingDispatchAndCombineMatchTheCpu) {
  const auto [batch, experts, k, capacity_factor, normalize] = GetParam();
  RandomStream random(static_cast<uint64_t>(batch * 100 + experts * 10 + k));
  const Tensor probs = TiedProbs(batch, experts, random);
  MoeRoutingOptions options;
  options.k = k;
  options.capacity_factor = capacity_factor;
  options.normalize_gates = normalize;
  Result<MoeRouting> cpu = RouteTopK(probs, options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  Tensor gprobs = Up(probs);
  Result<MoeRouting> gpu = RouteTopKCuda(gprobs, options, stream());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(cpu->capacity, gpu->capacity);
  EXPECT_EQ(cpu->num_dropped, gpu->num_dropped);
  ExpectSameBits(cpu->expert, gpu->expert, "expert");
  ExpectSameBits(cpu->slot, gpu->slot, "slot");
  ExpectSameBits(cpu->gate, gpu->gate, "gate");

  const int64_t hidden = 5, capacity = cpu->capacity;
  const Tensor x = RandomHost({batch, hidden}, random);
  const Tensor expert_out = RandomHost({experts, capacity, hidden}, random);
  const Tensor dout = RandomHost({batch, hidden}, random), dgate = RandomHost({batch, k}, random);
  Tensor buffers = Tensor::Empty({experts, capacity, hidden}), dx = Tensor::Empty({batch, hidden});
  Tensor out = Tensor::Empty({batch, hidden}), dexp = Tensor::Empty({experts, capacity, hidden});
  Tensor dg = Tensor::Empty({batch, k}), dprobs = Tensor::Empty({batch, experts});
  ASSERT_TRUE(MoeDispatch(x, *cpu, &buffers).ok());
  ASSERT_TRUE(MoeDispatchBackward(expert_out, *cpu, &dx).ok());
  ASSERT_TRUE(MoeCombine(expert_out, cpu->gate, *cpu, &out).ok());
  ASSERT_TRUE(MoeCombineBackward(expert_out, cpu->gate, *cpu, dout, &dexp, &dg).ok());
  ASSERT_TRUE(MoeGateBackward(probs, *cpu, dgate, &dprobs).ok());

  Tensor gexp = Up(expert_out), gdout = Up(dout);
  Tensor gbuf = Poisoned({experts, capacity, hidden}), gdx = Poisoned({batch, hidden});
  Tensor gout = Poisoned({batch, hidden}), gdexp = Poisoned({experts, capacity, hidden});
  Tensor gdg = Poisoned({batch, k}), gdprobs = Poisoned({batch, experts});
  ASSERT_TRUE(MoeDispatchCuda(Up(x), *gpu, &gbuf, stream()).ok());
  ExpectSameBits(buffers, gbuf, "buffers");
  ASSERT_TRUE(MoeDispatchBackwardCuda(gexp, *gpu, &gdx, stream()).ok());
  ExpectNear(dx, gdx, 1e-6, 1e-6, "dispatch dx");
  ASSERT_TRUE(MoeCombineCuda(gexp, gpu->gate, *gpu, &gout, stream()).ok());
  ExpectNear(out, gout, 1e-6, 1e-6, "combined");
  ASSERT_TRUE(MoeCombineBackwardCuda(gexp, gpu->gate, *gpu, gdout, &gdexp, &gdg, stream()).ok());
  ExpectNear(dexp, gdexp, 1e-6, 1e-6, "dexpert_out");
  ExpectNear(dg, gdg, 1e-6, 1e-6, "dgate");
  ASSERT_TRUE(MoeGateBackwardCuda(gprobs, *gpu, Up(dgate), &gdprobs, stream()).ok());
  ExpectNear(dprobs, gdprobs, 1e-6, 1e-6, "dprobs");
}

INSTANTIATE_TEST_SUITE_P(Shapes, RoutingCudaTest,
                         ::testing::Values(RoutingParam{1, 1, 1, 1.0, false},
                                           RoutingParam{1, 4, 2, 1.25, true},
                                           RoutingParam{37, 5, 1, 1.0, false},
                                           RoutingParam{37, 5, 2, 0.5, true},
                                           RoutingParam{4096, 16, 2, 1.25, false},
                                           RoutingParam{3000, 64, 4, 0.8, true},
                                           RoutingParam{0, 3, 1, 1.0, false}));

TEST_F(OpsCudaTest, RoutingRejectsBadProbabilitiesNamingTheElement) {
  Tensor probs = Tensor::Zeros({3, 4});
  probs.data<float>()[6] = -1.0f;
  MoeRoutingOptions options;
  Result<MoeRouting> routing = RouteTopKCuda(Up(probs), options, stream());
  EXPECT_EQ(StatusCode::kInvalidArgument, routing.status().code());
  EXPECT_NE(std::string::npos, routing.status().message().find("probs[1, 2]")) << routing.status();
}

TEST_F(OpsCudaTest, MixtureMatchesItsDefinition) {
  RandomStream random(41);
  const int64_t batch = 33, experts = 3, hidden = 7;
  const Tensor gate = RandomHost({batch, experts}, random);
  const Tensor x = RandomHost({batch, experts * hidden}, random);
  const Tensor dout = RandomHost({batch, hidden}, random);
  Tensor out = Tensor::Zeros({batch, hidden}), dgate = Tensor::Zeros({batch, experts});
  Tensor dx = Tensor::Zeros({batch, experts * hidden});
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t e = 0; e < experts; ++e) {
      const float w = gate.data<float>()[b * experts + e];
      for (int64_t h = 0; h < hidden; ++h) {
        const float v = x.data<float>()[(b * experts + e) * hidden + h];
        const float g = dout.data<float>()[b * hidden + h];
        out.data<float>()[b * hidden + h] += w * v;
        dgate.data<float>()[b * experts + e] += g * v;
        dx.data<float>()[(b * experts + e) * hidden + h] = w * g;
      }
    }
  }
  Tensor ggate = Up(gate), gx = Up(x), gout = Empty({batch, hidden});
  Tensor gdgate = Empty({batch, experts}), gdx = Empty({batch, experts * hidden});
  ASSERT_TRUE(MixtureForwardCuda(ggate, gx, &gout, stream()).ok());
  ExpectNear(out, gout, 1e-6, 1e-6, "mixture");
  ASSERT_TRUE(MixtureBackwardCuda(ggate, gx, Up(dout), &gdgate, &gdx, stream()).ok());
  ExpectNear(dgate, gdgate, 1e-6, 1e-6, "dgate");
  ExpectNear(dx, gdx, 1e-6, 1e-6, "dexperts");
}

// --- Dropout, optimizers, clipping ---------------------------------------------------

TEST_F(OpsCudaTest, DropoutMasksAreTheCpuMasks) {
  RandomStream random(23);
  for (const int64_t n : {1, 999, 123457}) {
    const Tensor x = RandomHost({n}, random);
    for (const double rate : {0.0, 0.1, 0.5, 0.9}) {
      for (const uint64_t step : {0, 1, 77}) {
        DropoutOptions options;
        options.rate = rate;
        options.seed = 42 + n;
        Tensor y = Tensor::Empty({n}), dx = Tensor::Empty({n});
        ASSERT_TRUE(DropoutForward(x, options, step, &y).ok());
        ASSERT_TRUE(DropoutBackward(x, options, step, &dx).ok());
        Tensor gx = Up(x), gy = Empty({n}), gdx = Empty({n});
        ASSERT_TRUE(DropoutForwardCuda(gx, options, step, &gy, stream()).ok());
        ExpectSameBits(y, gy, "dropout forward");
        ASSERT_TRUE(DropoutBackwardCuda(gx, options, step, &gdx, stream()).ok());
        ExpectSameBits(dx, gdx, "dropout backward");
      }
    }
  }
  Tensor x = Empty({4}), y = Empty({4});
  DropoutOptions bad;
  bad.rate = 1.0;
  EXPECT_EQ(StatusCode::kInvalidArgument, DropoutForwardCuda(x, bad, 0, &y, stream()).code());
}

TEST_F(OpsCudaTest, DenseOptimizersMatchTheCpu) {
  RandomStream random(29);
  for (const DenseOptimizer type :
       {DenseOptimizer::kSgd, DenseOptimizer::kAdagrad, DenseOptimizer::kAdam}) {
    for (const float decay : {0.0f, 0.01f}) {
      DenseOptimizerOptions options;
      options.type = type;
      options.learning_rate = 0.05f;
      options.weight_decay = decay;
      const int64_t n = 10007;
      Tensor param = RandomHost({n}, random);
      Tensor gparam = Up(param);
      DenseOptimizerSlot slot = NewDenseOptimizerSlot(options, param);
      Result<DenseOptimizerSlot> gslot = NewDenseOptimizerSlotCuda(options, gparam, stream());
      ASSERT_TRUE(gslot.ok()) << gslot.status();
      for (int64_t step = 1; step <= 5; ++step) {
        const Tensor grad = RandomHost({n}, random);
        ASSERT_TRUE(DenseOptimizerStep(options, step, grad, &param, &slot).ok());
        ASSERT_TRUE(DenseOptimizerStepCuda(options, step, Up(grad), &gparam, &*gslot, stream()).ok());
      }
      ExpectNear(param, gparam, 1e-6, 1e-6, std::string(DenseOptimizerName(type)) + " param");
      if (type != DenseOptimizer::kSgd) {
        ExpectNear(slot.second_moment, gslot->second_moment, 1e-6, 1e-6, "second moment");
      }
      if (type == DenseOptimizer::kAdam) {
        ExpectNear(slot.first_moment, gslot->first_moment, 1e-6, 1e-6, "first moment");
      }
    }
  }
}

TEST_F(OpsCudaTest, ClippingByGlobalNormMatchesTheCpuAndRepeatsItsBits) {
  RandomStream random(31);
  std::vector<Tensor> grads, device_grads;
  for (const int64_t n : {1, 0, 70000, 333}) {
    grads.push_back(RandomHost({n}, random));
    device_grads.push_back(Up(grads.back()));
  }
  Result<double> norm = GlobalNorm(grads);
  Result<double> gnorm = GlobalNormCuda(device_grads, stream());
  ASSERT_TRUE(gnorm.ok()) << gnorm.status();
  EXPECT_NEAR(*norm, *gnorm, 1e-12 * *norm);
  Result<double> again = GlobalNormCuda(device_grads, stream());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*gnorm, *again);
  const double max_norm = *norm / 3;
  ASSERT_TRUE(ClipByGlobalNorm(max_norm, &grads).ok());
  Result<double> clipped = ClipByGlobalNormCuda(max_norm, &device_grads, stream());
  ASSERT_TRUE(clipped.ok());
  for (size_t i = 0; i < grads.size(); ++i) ExpectNear(grads[i], device_grads[i], 1e-7, 1e-6, "g");
  Result<double> empty = GlobalNormCuda({}, stream());
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(0.0, *empty);
}

// --- Registry ---------------------------------------------------------------------------

TEST(CudaOpRegistryTest, EveryOperatorWithACpuKernelHasACudaKernel) {
  if (!CudaCompiledIn()) GTEST_SKIP() << "Ember was built without CUDA";
  const OpRegistry& registry = DefaultOpRegistry();
  // None so far; an operator whose CUDA kernel is still to come goes here.
  const std::vector<std::string> cpu_only = {};
  for (const std::string& op : registry.OpNames()) {
    if (!registry.HasKernel(op, DeviceType::kCpu)) continue;
    const bool exempt = std::find(cpu_only.begin(), cpu_only.end(), op) != cpu_only.end();
    EXPECT_NE(exempt, registry.HasKernel(op, DeviceType::kCuda))
        << op << (exempt ? " has a CUDA kernel now: drop it from cpu_only"
                         : " has no CUDA kernel");
  }
}

TEST_F(OpsCudaTest, RegistryKernelsRunOnTheContextStream) {
  const OpRegistry& registry = DefaultOpRegistry();
  Result<const KernelPair*> fc = registry.FindKernel("fully_connected", DeviceType::kCuda);
  ASSERT_TRUE(fc.ok()) << fc.status();
  RandomStream random(37);
  const Tensor x = RandomHost({9, 6}, random), w = RandomHost({4, 6}, random);
  const Tensor b = RandomHost({4}, random);
  Tensor y = Tensor::Empty({9, 4});
  ASSERT_TRUE(FullyConnectedForward(x, w, b, Activation::kRelu, &y).ok());
  Tensor gx = Up(x), gw = Up(w), gb = Up(b), gy = Empty({9, 4});
  OpAttrs attrs;
  attrs.Set("activation", 1);
  KernelContext c;
  c.attrs = &attrs;
  c.inputs = {&gx, &gw, &gb};
  c.outputs = {&gy};
  EXPECT_EQ(StatusCode::kFailedPrecondition, (*fc)->forward(c).code());
  c.stream = &stream();
  ASSERT_TRUE((*fc)->forward(c).ok());
  ExpectNear(y, gy, 1e-5, 1e-5, "registry y");
}

}  // namespace
}  // namespace ember::ops
