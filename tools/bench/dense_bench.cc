// Fully connected forward + backward at DLRM shapes, in GFLOP/s, beside a
// plain oneDNN SGEMM of the same shapes measured in the same run, and the
// same bare products in bf16; and the embedding-bag pooling of the DLRM step
// (BM_EmbeddingBagStep, forward + backward) beside a bare copy of each bag's
// row (BM_BagRowCopy).
//   build/tools/bench/dense_bench [--threads=N] [--rounds=R] [--shapes=B/IN/OUT,...]
//       [benchmark flags]
// --shapes replaces the default DLRM layers (tools/bench/run.sh measures the
// SGEMM rate at the shapes of each model it benchmarks).
//
// The baseline is the three products a layer's step needs (y = x W^T,
// dW = dy^T x, dx = dy W) as bare dnnl_sgemm calls, and nothing else. The
// fully connected step does the same products plus everything a layer needs
// around them: the bias and ReLU in the forward pass, the ReLU mask on dy and
// the bias gradient in the backward pass. Both sides count the same 6 B in out
// FLOPs, so the ratio is the fraction of bare-GEMM speed the layer keeps.
//
// Two ratios are printed. The first divides the GFLOP/s of the two Google
// Benchmark runs, which run one after the other. The second times the two
// sides in alternating bursts of about 20 ms (`--rounds` pairs per shape,
// default 15) and takes the median of the per-pair ratios: a build running
// beside the bench on a small machine moves the first by a factor of several,
// the second much less, because both sides of each pair see the same load.
//
// BM_Bf16Gemm runs the same three products with bf16 operands, f32 sums and
// f32 outputs (ops/internal/matmul.h, as --dense_precision=bf16 does),
// the operands rounded to bf16 once before the timed loop: the rate a bf16
// layer's GEMMs can reach, which tools/bench/suite.py uses for the floor of
// its bf16 cases. On a CPU without AVX512-BF16 or AMX it is not registered
// and the bench says so ("BM_Bf16Gemm: skipped, ...").
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include "core/dtype.h"
#include "core/random.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "ops/dense_ops.h"
#include "ops/internal/matmul.h"
#include "tools/bench/ratio_reporter.h"

namespace {

using ember::Tensor;

int g_threads = 2;

// The shapes {batch, in, out} measured: by default DLRM's MLP layers at batch
// 2048 (Criteo Kaggle configuration); --shapes replaces them.
std::vector<std::array<int64_t, 3>> g_shapes = {{2048, 512, 256}, {2048, 256, 64}, {2048, 479, 512}};

Tensor Random(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t = Tensor::Empty(std::move(shape));
  ember::RandomStream random(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = random.Uniform(-1, 1);
  return t;
}

// One layer's tensors; the fully connected step and the bare products use
// the same inputs.
struct Layer {
  Layer(int64_t batch, int64_t in, int64_t out)
      : batch(batch),
        in(in),
        out(out),
        x(Random({batch, in}, 1)),
        w(Random({out, in}, 2)),
        b(Random({out}, 3)),
        dy(Random({batch, out}, 4)),
        y(Tensor::Empty({batch, out})),
        dx(Tensor::Empty({batch, in})),
        dw(Tensor::Empty({out, in})),
        db(Tensor::Empty({out})) {}

  // One training step of a layer: forward, then backward to the weights, bias
  // and input. 6 * B * in * out FLOPs.
  bool FullyConnectedStep() {
    return ember::ops::FullyConnectedForward(x, w, b, ember::ops::Activation::kRelu, &y).ok() &&
           ember::ops::FullyConnectedBackward(x, w, y, dy, ember::ops::Activation::kRelu, &dx, &dw,
                                              &db)
               .ok();
  }

  // The same three products (y = x W^T, dW = dy^T x, dx = dy W) as bare SGEMMs.
  void Sgemms() {
    dnnl_sgemm('N', 'T', batch, out, in, 1.0f, x.data<float>(), in, w.data<float>(), in, 0.0f,
               y.data<float>(), out);
    dnnl_sgemm('T', 'N', out, in, batch, 1.0f, dy.data<float>(), out, x.data<float>(), in, 0.0f,
               dw.data<float>(), in);
    dnnl_sgemm('N', 'N', batch, in, out, 1.0f, dy.data<float>(), out, w.data<float>(), in, 0.0f,
               dx.data<float>(), in);
    benchmark::DoNotOptimize(dx.raw_data());
  }

  double Flops() const { return 6.0 * batch * in * out; }

  int64_t batch, in, out;
  Tensor x, w, b, dy, y, dx, dw, db;
};

std::vector<ember::BFloat16> ToBf16(const Tensor& t) {
  std::vector<ember::BFloat16> out(t.numel());
  ember::FloatsToBFloat16(t.data<float>(), t.numel(), out.data());
  return out;
}

// A layer's x, W and dy rounded to bf16, once: the bf16 GEMMs are timed
// without the conversions a bf16 layer also pays.
struct Bf16Operands {
  explicit Bf16Operands(const Layer& layer)
      : x(ToBf16(layer.x)), w(ToBf16(layer.w)), dy(ToBf16(layer.dy)) {}

  // The products of Layer::Sgemms with bf16 operands, into the layer's f32
  // y, dW and dx.
  ember::Status Gemms(Layer& layer) const {
    using ember::ops::internal::Bf16Gemm;
    const int64_t batch = layer.batch, in = layer.in, out = layer.out;
    EMBER_RETURN_IF_ERROR(Bf16Gemm("y = x W^T", 'N', 'T', batch, out, in, x.data(), in, w.data(),
                                   in, layer.y.data<float>(), out));
    EMBER_RETURN_IF_ERROR(Bf16Gemm("dW = dy^T x", 'T', 'N', out, in, batch, dy.data(), out,
                                   x.data(), in, layer.dw.data<float>(), in));
    EMBER_RETURN_IF_ERROR(Bf16Gemm("dx = dy W", 'N', 'N', batch, in, out, dy.data(), out, w.data(),
                                   in, layer.dx.data<float>(), in));
    benchmark::DoNotOptimize(layer.dx.raw_data());
    return ember::Status::OK();
  }

  std::vector<ember::BFloat16> x, w, dy;
};

void BM_FullyConnectedStep(benchmark::State& state) {
  ember::SetOpenMpThreads(g_threads);
  Layer layer(state.range(0), state.range(1), state.range(2));
  for (auto _ : state) {
    if (!layer.FullyConnectedStep()) {
      state.SkipWithError("fully connected failed");
      break;
    }
  }
  state.counters["GFLOPs"] =
      benchmark::Counter(layer.Flops() * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void BM_DnnlSgemm(benchmark::State& state) {
  ember::SetOpenMpThreads(g_threads);
  Layer layer(state.range(0), state.range(1), state.range(2));
  for (auto _ : state) layer.Sgemms();
  state.counters["GFLOPs"] =
      benchmark::Counter(layer.Flops() * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void BM_Bf16Gemm(benchmark::State& state) {
  ember::SetOpenMpThreads(g_threads);
  Layer layer(state.range(0), state.range(1), state.range(2));
  const Bf16Operands operands(layer);
  for (auto _ : state) {
    const ember::Status status = operands.Gemms(layer);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
  }
  state.counters["GFLOPs"] =
      benchmark::Counter(layer.Flops() * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// Embedding-bag pooling as the dense stage of the suite's DLRM case runs it:
// 2048 x 26 bags of one row each, drawn from 30,000 pulled rows of `dim`
// floats; the sum forward and its backward, on a ThreadArena of --threads.
struct BagCase {
  explicit BagCase(int64_t dim)
      : rows(ember::Tensor::Empty({kRows, dim})),
        row_index(ember::Tensor::Empty({kBags}, ember::DType::kI64)),
        offsets(ember::Tensor::Empty({kBags + 1}, ember::DType::kI64)),
        out(ember::Tensor::Empty({kBags, dim})),
        drows(ember::Tensor::Empty({kRows, dim})) {
    ember::RandomStream random(1);
    float* r = rows.data<float>();
    for (int64_t i = 0; i < rows.numel(); ++i) r[i] = static_cast<float>(random.Uniform(-1, 1));
    int64_t* idx = row_index.data<int64_t>();
    int64_t* off = offsets.data<int64_t>();
    for (int64_t b = 0; b < kBags; ++b) {
      idx[b] = static_cast<int64_t>(random.NextBelow(kRows));
      off[b] = b;
    }
    off[kBags] = kBags;
  }

  bool Step() {
    using ember::ops::Pooling;
    return ember::ops::EmbeddingBagForward(rows, row_index, offsets, Pooling::kSum, &out).ok() &&
           ember::ops::EmbeddingBagBackward(out, row_index, offsets, Pooling::kSum, &drows).ok();
  }

  // The baseline: each bag's row copied to its output, the forward's bare
  // memory traffic, split over the arena's threads as the op splits bags.
  void CopyRows() {
    const int64_t dim = rows.dim(1);
    const float* r = rows.data<float>();
    const int64_t* idx = row_index.data<int64_t>();
    float* o = out.data<float>();
    ember::ParallelFor(0, kBags, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        std::memcpy(o + b * dim, r + idx[b] * dim, static_cast<size_t>(dim) * sizeof(float));
      }
    });
    benchmark::DoNotOptimize(o);
  }

  static constexpr int64_t kBags = 2048 * 26, kRows = 30000;
  ember::Tensor rows, row_index, offsets, out, drows;
};

void BM_EmbeddingBagStep(benchmark::State& state) {
  BagCase bags(state.range(0));
  ember::ThreadArena arena(g_threads);
  for (auto _ : state) {
    bool ok = false;
    arena.Execute([&] { ok = bags.Step(); });
    if (!ok) {
      state.SkipWithError("embedding bag failed");
      break;
    }
  }
  state.counters["bags/s"] = benchmark::Counter(static_cast<double>(BagCase::kBags) *
                                                    state.iterations(),
                                                benchmark::Counter::kIsRate);
}

void BM_BagRowCopy(benchmark::State& state) {
  BagCase bags(state.range(0));
  ember::ThreadArena arena(g_threads);
  for (auto _ : state) arena.Execute([&] { bags.CopyRows(); });
  state.counters["bags/s"] = benchmark::Counter(static_cast<double>(BagCase::kBags) *
                                                    state.iterations(),
                                                benchmark::Counter::kIsRate);
}

// Seconds per call of `fn`, over `calls` calls.
template <typename Fn>
double SecondsPerCall(int calls, Fn fn) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls;
}

// The median over `rounds` pairs of (SGEMM time / fully connected step time),
// the two timed in alternating bursts of about 20 ms; 0 if the step fails.
double PairedRatio(int64_t batch, int64_t in, int64_t out, int rounds) {
  ember::SetOpenMpThreads(g_threads);
  Layer layer(batch, in, out);
  bool ok = true;
  auto step = [&] { ok = layer.FullyConnectedStep() && ok; };
  auto sgemms = [&] { layer.Sgemms(); };
  SecondsPerCall(3, step);  // primitive creation and warm caches
  const double estimate = std::max(SecondsPerCall(3, sgemms), 1e-6);
  const int calls = std::max(1, static_cast<int>(0.02 / estimate));
  std::vector<double> ratios;
  for (int r = 0; r < rounds; ++r) {
    const double fc = SecondsPerCall(calls, step);
    const double gemm = SecondsPerCall(calls, sgemms);
    ratios.push_back(gemm / fc);
  }
  if (!ok || ratios.empty()) return 0.0;
  std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
  return ratios[ratios.size() / 2];
}

// Google Benchmark arguments {batch, in, out} for each shape.
void Shapes(benchmark::internal::Benchmark* b) {
  for (const auto& shape : g_shapes) b->Args({shape[0], shape[1], shape[2]});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

// Parses "B/IN/OUT,B/IN/OUT,..." into g_shapes; false if malformed.
bool ParseShapes(const char* text) {
  std::vector<std::array<int64_t, 3>> shapes;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::array<int64_t, 3> shape{};
    char slash1 = 0, slash2 = 0;
    std::istringstream fields(item);
    if (!(fields >> shape[0] >> slash1 >> shape[1] >> slash2 >> shape[2]) || slash1 != '/' ||
        slash2 != '/' || shape[0] < 1 || shape[1] < 1 || shape[2] < 1) {
      return false;
    }
    shapes.push_back(shape);
  }
  if (shapes.empty()) return false;
  g_shapes = std::move(shapes);
  return true;
}

std::string ShapeName(const std::array<int64_t, 3>& shape) {
  return std::to_string(shape[0]) + "/" + std::to_string(shape[1]) + "/" +
         std::to_string(shape[2]);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) g_threads = std::atoi(argv[i] + 10);
    if (std::strncmp(argv[i], "--rounds=", 9) == 0) rounds = std::atoi(argv[i] + 9);
    if (std::strncmp(argv[i], "--shapes=", 9) == 0 && !ParseShapes(argv[i] + 9)) {
      std::fprintf(stderr, "dense_bench: --shapes wants B/IN/OUT,... with positive sizes\n");
      return 1;
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RegisterBenchmark("BM_FullyConnectedStep", BM_FullyConnectedStep)->Apply(Shapes);
  benchmark::RegisterBenchmark("BM_DnnlSgemm", BM_DnnlSgemm)->Apply(Shapes);
  // Bf16Gemm refuses to run without bf16 hardware; the case is then left out
  // with a line saying why rather than failed, and tools/bench/suite.py skips
  // its bf16 cases.
  const bool bf16 = ember::ops::internal::CpuHasBf16();
  if (bf16) benchmark::RegisterBenchmark("BM_Bf16Gemm", BM_Bf16Gemm)->Apply(Shapes);
  for (auto* bench : {benchmark::RegisterBenchmark("BM_EmbeddingBagStep", BM_EmbeddingBagStep),
                      benchmark::RegisterBenchmark("BM_BagRowCopy", BM_BagRowCopy)}) {
    bench->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  ember::bench::RatioReporter reporter;
  std::printf("threads: %d (OpenMP, for oneDNN)\n", g_threads);
  if (!bf16) {
    std::printf(
        "BM_Bf16Gemm: skipped, oneDNN runs no bf16 products in hardware here (the CPU has "
        "neither AVX512-BF16 nor AMX, or ONEDNN_MAX_CPU_ISA forbids them)\n");
  }
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nFully connected step vs bare SGEMM (goal: at least 0.70):\n");
  for (const auto& shape : g_shapes) {
    const std::string name = ShapeName(shape);
    reporter.PrintRatio("batch/in/out " + name, "BM_FullyConnectedStep/" + name + "/real_time",
                        "BM_DnnlSgemm/" + name + "/real_time", "GFLOPs");
  }
  if (bf16) {
    std::printf("\nBare bf16 GEMM vs bare SGEMM:\n");
    for (const auto& shape : g_shapes) {
      const std::string name = ShapeName(shape);
      reporter.PrintRatio("batch/in/out " + name, "BM_Bf16Gemm/" + name + "/real_time",
                          "BM_DnnlSgemm/" + name + "/real_time", "GFLOPs");
    }
  }
  if (rounds > 0) {
    std::printf("\nThe same, median of %d alternating pairs (goal: at least 0.70):\n", rounds);
    for (const auto& shape : g_shapes) {
      std::printf("batch/in/out %-34s %.2f\n", ShapeName(shape).c_str(),
                  PairedRatio(shape[0], shape[1], shape[2], rounds));
    }
  }
  std::printf("\nEmbedding-bag forward + backward (2048 x 26 bags of one row) vs copying each "
              "bag's row:\n");
  for (const char* dim : {"16", "64"}) {
    reporter.PrintRatio(std::string("dim ") + dim,
                        std::string("BM_EmbeddingBagStep/") + dim + "/real_time",
                        std::string("BM_BagRowCopy/") + dim + "/real_time", "bags/s");
  }
  benchmark::Shutdown();
  return 0;
}
