#pragma once

// Helpers of the GPU tests that compare a CUDA executor or model with the
// CPU one: moving tensors between the host and a device, and the tolerance
// of float results computed in another order.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "core/tensor_copy.h"

namespace ember::testing {

// A test on one stream of cuda:0 that skips, saying so, without a device.
class CudaStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "needs a CUDA device (none present)";
    auto stream = CudaStream::Create(0);
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::move(*stream);
  }

  CudaStream& stream() { return *stream_; }

  std::unique_ptr<CudaStream> stream_;
};

// A host tensor of `shape` with values uniform in [lo, hi).
inline Tensor RandomHost(std::vector<int64_t> shape, RandomStream& random, double lo = -1.0,
                  double hi = 1.0) {
  Tensor t = Tensor::Empty(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data<float>()[i] = static_cast<float>(random.Uniform(lo, hi));
  }
  return t;
}

// A copy of host tensor `host` on the device of `stream`.
inline Tensor Up(const Tensor& host, CudaStream& stream) {
  Result<Tensor> device =
      Tensor::Allocate(host.shape(), host.dtype(), Device::Cuda(stream.device()));
  CHECK(device.ok()) << device.status();
  CHECK(CopyTensor(host, &*device, &stream).ok());
  CHECK(stream.Synchronize().ok());
  return *device;
}

// A host copy of `device` (on the device of `stream`).
inline Tensor Down(const Tensor& device, CudaStream& stream) {
  Tensor host = Tensor::Empty(device.shape(), device.dtype());
  CHECK(CopyTensor(device, &host, &stream).ok());
  CHECK(stream.Synchronize().ok());
  return host;
}

inline bool SameBits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// The relative tolerance of a CUDA result against the CPU's. cuBLAS and
// oneDNN sum the products of a GEMM in different orders (blocking, split-K,
// fused multiply-adds), and so do the batch sums of the bias gradients: each
// f32 sum of K terms may differ by up to about K * 2^-24 of the sum of the
// terms' magnitudes, i.e. about 4e-6 for K = 64, and the differences grow
// through the layers of a model, its backward and a few optimizer steps to a
// few 1e-5. 1e-4 leaves room for that and is still far below what a wrong
// index, a missed or doubled gradient contribution or a stale buffer give
// (errors of the order of the values themselves).
inline constexpr double kCudaRelativeTolerance = 1e-4;

// |actual - expected| <= rtol * (|expected| + max |expected|) for every
// element: relative to the element, and to the tensor's scale for elements
// near zero (a batch sum that cancels has no relative accuracy of its own).
inline void ExpectClose(const Tensor& expected, const Tensor& actual, const std::string& what,
                        double rtol = kCudaRelativeTolerance) {
  ASSERT_EQ(expected.numel(), actual.numel()) << what;
  const float* e = expected.data<float>();
  const float* a = actual.data<float>();
  double scale = 0;
  for (int64_t i = 0; i < expected.numel(); ++i) scale = std::max(scale, std::fabs(double{e[i]}));
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    const double bound = rtol * (std::fabs(double{e[i]}) + scale);
    if (!(std::fabs(double{a[i]} - double{e[i]}) <= bound)) {
      if (bad++ == 0) first = i;
    }
  }
  EXPECT_EQ(0, bad) << what << ": " << bad << " of " << expected.numel()
                    << " elements differ; the first at " << first << ": CPU "
                    << (first >= 0 ? e[first] : 0.0f) << ", CUDA " << (first >= 0 ? a[first] : 0.0f)
                    << " (tensor scale " << scale << ")";
}

}  // namespace ember::testing
