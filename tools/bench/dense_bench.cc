// Fully connected forward + backward at DLRM shapes, in GFLOP/s, beside a
// plain oneDNN SGEMM of the same shapes measured in the same run.
//   build/tools/bench/dense_bench [--threads=N] [benchmark flags]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include "core/random.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "ops/dense_ops.h"
#include "tools/bench/ratio_reporter.h"

namespace {

using ember::Tensor;

int g_threads = 2;

Tensor Random(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t = Tensor::Empty(std::move(shape));
  ember::RandomStream random(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = random.Uniform(-1, 1);
  return t;
}

// One training step of a layer: forward, then backward to the weights, bias
// and input. 6 * B * in * out FLOPs.
void BM_FullyConnectedStep(benchmark::State& state) {
  const int64_t batch = state.range(0), in = state.range(1), out = state.range(2);
  ember::SetOpenMpThreads(g_threads);
  Tensor x = Random({batch, in}, 1), w = Random({out, in}, 2), b = Random({out}, 3);
  Tensor y = Tensor::Empty({batch, out}), dy = Random({batch, out}, 4);
  Tensor dx = Tensor::Empty({batch, in}), dw = Tensor::Empty({out, in}), db = Tensor::Empty({out});
  for (auto _ : state) {
    if (!ember::ops::FullyConnectedForward(x, w, b, ember::ops::Activation::kRelu, &y).ok() ||
        !ember::ops::FullyConnectedBackward(x, w, y, dy, ember::ops::Activation::kRelu, &dx, &dw,
                                            &db)
             .ok()) {
      state.SkipWithError("fully connected failed");
      break;
    }
  }
  state.counters["GFLOPs"] = benchmark::Counter(6.0 * batch * in * out * state.iterations() / 1e9,
                                                benchmark::Counter::kIsRate);
}

// The same three products (y = x W^T, dW = dy^T x, dx = dy W) as bare SGEMMs.
void BM_DnnlSgemm(benchmark::State& state) {
  const int64_t batch = state.range(0), in = state.range(1), out = state.range(2);
  ember::SetOpenMpThreads(g_threads);
  Tensor x = Random({batch, in}, 1), w = Random({out, in}, 2), dy = Random({batch, out}, 4);
  Tensor y = Tensor::Empty({batch, out}), dx = Tensor::Empty({batch, in});
  Tensor dw = Tensor::Empty({out, in});
  for (auto _ : state) {
    dnnl_sgemm('N', 'T', batch, out, in, 1.0f, x.data<float>(), in, w.data<float>(), in, 0.0f,
               y.data<float>(), out);
    dnnl_sgemm('T', 'N', out, in, batch, 1.0f, dy.data<float>(), out, x.data<float>(), in, 0.0f,
               dw.data<float>(), in);
    dnnl_sgemm('N', 'N', batch, in, out, 1.0f, dy.data<float>(), out, w.data<float>(), in, 0.0f,
               dx.data<float>(), in);
    benchmark::DoNotOptimize(dx.raw_data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(6.0 * batch * in * out * state.iterations() / 1e9,
                                                benchmark::Counter::kIsRate);
}

// DLRM's MLP shapes at batch 2048 (Criteo Kaggle configuration).
void DlrmShapes(benchmark::internal::Benchmark* b) {
  for (auto [in, out] : std::vector<std::pair<int, int>>{{512, 256}, {256, 64}, {479, 512}}) {
    b->Args({2048, in, out});
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_FullyConnectedStep)->Apply(DlrmShapes);
BENCHMARK(BM_DnnlSgemm)->Apply(DlrmShapes);

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) g_threads = std::atoi(argv[i] + 10);
  }
  benchmark::Initialize(&argc, argv);
  ember::bench::RatioReporter reporter;
  std::printf("threads: %d (OpenMP, for oneDNN)\n", g_threads);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nFully connected step vs bare SGEMM (goal: at least 0.70):\n");
  for (const char* shape : {"2048/512/256", "2048/256/64", "2048/479/512"}) {
    reporter.PrintRatio(std::string("batch/in/out ") + shape,
                        std::string("BM_FullyConnectedStep/") + shape + "/real_time",
                        std::string("BM_DnnlSgemm/") + shape + "/real_time", "GFLOPs");
  }
  benchmark::Shutdown();
  return 0;
}
