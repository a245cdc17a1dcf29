// Fully connected forward + backward on a CUDA device at DLRM shapes, in
// GFLOP/s, beside plain cuBLAS GEMMs of the same three products measured in
// the same run, in f32 and with bf16 / f16 compute (f32 master weights).
//   build/tools/bench/dense_cuda_bench [benchmark flags]
// Without a CUDA device it prints "no CUDA device: skipped" and exits 0.
#include <cuda_runtime.h>

#include <cublas_v2.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "ops/dense_ops.h"
#include "ops/dense_ops_cuda.h"
#include "tools/bench/ratio_reporter.h"

namespace {

using ember::CudaStream;
using ember::Tensor;
using ember::ops::ComputePrecision;

CudaStream* g_stream = nullptr;

Tensor RandomDevice(std::vector<int64_t> shape, uint64_t seed) {
  Tensor host = Tensor::Empty(shape);
  ember::RandomStream random(seed);
  for (int64_t i = 0; i < host.numel(); ++i) host.data<float>()[i] = random.Uniform(-1, 1);
  auto device = Tensor::Allocate(std::move(shape), ember::DType::kF32, ember::Device::Cuda(0));
  CHECK(device.ok()) << device.status();
  CHECK(g_stream->CopyToDevice(host.raw_data(), device->raw_data(), host.nbytes()).ok());
  CHECK(g_stream->Synchronize().ok());
  return *device;
}

// One training step of a layer: forward with bias and ReLU, then backward to
// the weights, bias and input. 6 * B * in * out FLOPs.
void BM_FullyConnectedStepCuda(benchmark::State& state) {
  const int64_t batch = state.range(0), in = state.range(1), out = state.range(2);
  const auto precision = static_cast<ComputePrecision>(state.range(3));
  Tensor x = RandomDevice({batch, in}, 1), w = RandomDevice({out, in}, 2), b = RandomDevice({out}, 3);
  Tensor y = RandomDevice({batch, out}, 4), dy = RandomDevice({batch, out}, 5);
  Tensor dx = RandomDevice({batch, in}, 6), dw = RandomDevice({out, in}, 7);
  Tensor db = RandomDevice({out}, 8);
  const auto act = ember::ops::Activation::kRelu;
  for (auto _ : state) {
    if (!ember::ops::FullyConnectedForwardCuda(x, w, b, act, &y, *g_stream, precision).ok() ||
        !ember::ops::FullyConnectedBackwardCuda(x, w, y, dy, act, &dx, &dw, &db, *g_stream,
                                                precision)
             .ok() ||
        !g_stream->Synchronize().ok()) {
      state.SkipWithError("fully connected failed");
      break;
    }
  }
  state.SetLabel(ember::ops::ComputePrecisionName(precision));
  state.counters["GFLOPs"] = benchmark::Counter(6.0 * batch * in * out * state.iterations() / 1e9,
                                                benchmark::Counter::kIsRate);
}

// The same three products (y = x W^T, dW = dy^T x, dx = dy W) as bare cuBLAS
// GEMMs through cublasGemmEx (f32 accumulation) with f32, bf16 or f16
// operands; the 16-bit ones are the f32 buffers read as 16-bit values, so the
// baseline leaves out the casts that the layer pays for.
void BM_CublasGemm(benchmark::State& state) {
  const int64_t batch = state.range(0), in = state.range(1), out = state.range(2);
  const auto precision = static_cast<ComputePrecision>(state.range(3));
  const int B = static_cast<int>(batch), I = static_cast<int>(in), O = static_cast<int>(out);
  Tensor x = RandomDevice({batch, in}, 1), w = RandomDevice({out, in}, 2);
  Tensor dy = RandomDevice({batch, out}, 5), y = RandomDevice({batch, out}, 4);
  Tensor dx = RandomDevice({batch, in}, 6), dw = RandomDevice({out, in}, 7);
  cublasHandle_t handle = nullptr;
  CHECK_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasSetStream(handle, static_cast<cudaStream_t>(g_stream->native()));
  cudaDataType_t type = CUDA_R_32F;
  const void *xs = x.raw_data(), *ws = w.raw_data(), *dys = dy.raw_data();
  if (precision == ComputePrecision::kBf16) type = CUDA_R_16BF;
  if (precision == ComputePrecision::kF16) type = CUDA_R_16F;
  const float one = 1.0f, zero = 0.0f;
  for (auto _ : state) {
    // Column-major: y^T = W x^T, dW^T = x^T dy, dx^T = W^T dy^T.
    cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, O, B, I, &one, ws, type, I, xs, type, I, &zero,
                 y.raw_data(), CUDA_R_32F, O, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, I, O, B, &one, xs, type, I, dys, type, O, &zero,
                 dw.raw_data(), CUDA_R_32F, I, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, I, B, O, &one, ws, type, I, dys, type, O, &zero,
                 dx.raw_data(), CUDA_R_32F, I, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (!g_stream->Synchronize().ok()) {
      state.SkipWithError("cuBLAS failed");
      break;
    }
  }
  cublasDestroy(handle);
  state.SetLabel(ember::ops::ComputePrecisionName(precision));
  state.counters["GFLOPs"] = benchmark::Counter(6.0 * batch * in * out * state.iterations() / 1e9,
                                                benchmark::Counter::kIsRate);
}

// dense_bench.cc's DLRM MLP shapes at batch 2048 (Criteo Kaggle
// configuration), in each precision (0 f32, 1 bf16, 2 f16).
const std::vector<std::pair<int, int>> kShapes = {{512, 256}, {256, 64}, {479, 512}};

void DlrmShapes(benchmark::internal::Benchmark* b) {
  for (int precision = 0; precision < 3; ++precision) {
    for (auto [in, out] : kShapes) b->Args({2048, in, out, precision});
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_FullyConnectedStepCuda)->Apply(DlrmShapes);
BENCHMARK(BM_CublasGemm)->Apply(DlrmShapes);

}  // namespace

int main(int argc, char** argv) {
  if (!ember::CudaDeviceAvailable()) {
    std::printf("dense_cuda_bench: no CUDA device: skipped\n");
    return 0;
  }
  auto stream = CudaStream::Create(0);
  if (!stream.ok()) {
    std::printf("dense_cuda_bench: %s: skipped\n", stream.status().ToString().c_str());
    return 0;
  }
  g_stream = stream->get();
  benchmark::Initialize(&argc, argv);
  ember::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nFully connected step on cuda:0 vs bare cuBLAS GEMMs (goal: at least 0.70):\n");
  for (int precision = 0; precision < 3; ++precision) {
    for (auto [in, out] : kShapes) {
      const std::string shape = "2048/" + std::to_string(in) + "/" + std::to_string(out) + "/" +
                                std::to_string(precision);
      reporter.PrintRatio(
          std::string(ember::ops::ComputePrecisionName(static_cast<ComputePrecision>(precision))) +
              " batch/in/out " + shape.substr(0, shape.rfind('/')),
          "BM_FullyConnectedStepCuda/" + shape + "/real_time", "BM_CublasGemm/" + shape + "/real_time",
          "GFLOPs");
    }
  }
  benchmark::Shutdown();
  return 0;
}
