// Serving speed (issue 34), as ratios measured in the same run:
// * the scorer's examples/s (`ember predict`'s path: the trainer's
//   evaluation, 2 threads, batches of 4096) beside the trainer's samples/s on
//   the same model and data (forward only vs forward + backward + updates);
// * libember_serving's latency at batch 1, 64 and 512 (median and p99 over
//   the calls of a run, each calling thread's percentiles averaged over the
//   threads) and its throughput from 1 and 2 calling threads (calls on one
//   thread each: ember_model_open(..., 1, ...));
// * the same forward through PyTorch on this machine, timed alike
//   (tools/bench/torch_serving.py, the model of tools/bench/torch_ctr.py),
//   when python3-torch is installed (scripts/install_deps.sh
//   --with-bench-baseline); a line says so otherwise.
//   build/tools/bench/serving_bench [--benchmark_filter=...] [--torch_seconds=S]
// The model is DLRM at its default widths on generated Criteo-shaped data,
// trained briefly and exported to a temporary bundle.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/file.h"
#include "core/json.h"
#include "engine/bundle.h"
#include "engine/scorer.h"
#include "engine/serving/ember_serving.h"
#include "engine/trainer.h"
#include "io/batch_source.h"
#include "io/criteo.h"
#include "io/synthetic.h"
#include "tools/bench/ratio_reporter.h"

namespace {

using namespace ember;

constexpr int kThreads = 2;

struct Setup {
  TempDir dir;
  io::Dataset data;
  std::unique_ptr<engine::Trainer> trainer;
  ember_model* model = nullptr;
};

Setup& Shared() {
  static Setup* setup = [] {
    auto* s = new Setup;
    const std::string dir = *s->dir.Create("ember-serving-bench");
    io::SyntheticOptions synthetic;
    synthetic.rows = 16384;
    CHECK(io::WriteSyntheticCriteo(dir + "/data.tsv", synthetic).ok());
    s->data = *io::ReadCriteoFiles({dir + "/data.tsv"}, io::CriteoReadOptions{});
    engine::TrainOptions options;
    options.threads = kThreads;
    options.show_progress = false;
    options.epochs = 1;
    s->trainer = *engine::Trainer::Create(options, s->data.num_dense(), s->data.num_slots());
    CHECK(s->trainer->Fit(s->data).ok());
    const engine::BundleConfig config =
        engine::BundleConfigOf(s->trainer->options(), io::FormatSpec{}, false, 0);
    CHECK(engine::WriteBundle(dir + "/bundle", config, s->trainer->model(), s->trainer->table())
              .ok());
    ember_error error;
    CHECK_EQ(EMBER_OK, ember_model_open((dir + "/bundle").c_str(), 1, &s->model, &error))
        << error.message;
    return s;
  }();
  return *setup;
}

// Training samples/s: one epoch over the data per iteration.
void BM_Train(benchmark::State& state) {
  Setup& s = Shared();
  for (auto _ : state) CHECK(s.trainer->Fit(s.data).ok());
  state.counters["examples/s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * s.data.size()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Train)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same model's scores of the same data (the trainer's evaluation path,
// --threads 2, batches of 4096), as `ember predict` runs it.
void BM_Predict(benchmark::State& state) {
  Setup& s = Shared();
  for (auto _ : state) CHECK(s.trainer->Predict(s.data).ok());
  state.counters["examples/s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * s.data.size()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Predict)->Unit(benchmark::kMillisecond)->UseRealTime();

// libember_serving, ember_score_keys at batch state.range(0), one thread
// per call, from state.threads() calling threads at once. Each thread times
// its own calls; its median and p99 are averaged over the threads
// (kAvgThreads: counters are otherwise summed over threads), and examples/s
// counts every thread's examples over the run's wall time.
void BM_CLibrary(benchmark::State& state) {
  Setup& s = Shared();
  const int64_t batch = state.range(0);
  const io::Batch& all = s.data.all();
  const int64_t first = (state.thread_index() * 997) % (s.data.size() - batch);
  std::vector<int64_t> offsets(all.offsets.begin() + first * all.num_slots,
                               all.offsets.begin() + (first + batch) * all.num_slots + 1);
  const int64_t base = offsets[0];
  for (int64_t& o : offsets) o -= base;
  const float* dense = all.dense.data() + first * all.num_dense;
  std::vector<float> scores(batch);
  std::vector<double> micros;
  micros.reserve(1 << 16);
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const ember_code code = ember_score_keys(s.model, batch, dense, offsets.data(),
                                             all.keys.data() + base, scores.data(), nullptr);
    micros.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - start).count());
    CHECK_EQ(EMBER_OK, code);
  }
  std::sort(micros.begin(), micros.end());
  state.counters["p50_us"] =
      benchmark::Counter(micros[micros.size() / 2], benchmark::Counter::kAvgThreads);
  state.counters["p99_us"] = benchmark::Counter(
      micros[std::min(micros.size() - 1, micros.size() * 99 / 100)],
      benchmark::Counter::kAvgThreads);
  state.counters["examples/s"] = benchmark::Counter(static_cast<double>(state.iterations() * batch),
                                                    benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CLibrary)->Arg(1)->Arg(64)->Arg(512)->Threads(1)->UseRealTime();
BENCHMARK(BM_CLibrary)->Arg(64)->Arg(512)->Threads(2)->UseRealTime();

std::string CLibraryRun(int batch, int threads) {
  return "BM_CLibrary/" + std::to_string(batch) + "/real_time/threads:" + std::to_string(threads);
}

// One run of tools/bench/torch_serving.py.
struct TorchRun {
  int batch = 0;
  int threads = 0;
  double p50_us = 0;
  double p99_us = 0;
  double examples_per_sec = 0;
};

double NumberField(const Json& object, const char* key) {
  if (!object.is_object()) return 0.0;
  const auto field = object.find(key);
  return field != object.end() && field->is_number() ? field->get<double>() : 0.0;
}

// The same model's forward through PyTorch, timed by torch_serving.py; the
// reason when it cannot be (no python3-torch, the script failed).
Result<std::vector<TorchRun>> MeasureTorch(double seconds, std::string* version) {
  Setup& s = Shared();
  const engine::ModelOptions& model = s.trainer->options().model;
  auto widths = [](const std::vector<int>& w) {
    std::string text;
    for (int x : w) {
      if (!text.empty()) text += ',';
      text += std::to_string(x);
    }
    return text;
  };
  const std::string command =
      std::string("/usr/bin/python3 ") + EMBER_TORCH_SERVING + " --model=dlrm --num_dense=" +
      std::to_string(s.data.num_dense()) + " --num_slots=" + std::to_string(s.data.num_slots()) +
      " --table_rows=" + std::to_string(std::max<int64_t>(1, s.trainer->table().num_rows())) +
      " --embedding_dim=" + std::to_string(model.embedding_dim) +
      " --bottom_mlp=" + widths(model.params.WidthList("bottom_mlp")) + " --top_mlp=" + widths(model.top_mlp) +
      " --batches=1,64,512 --throughput=64:2,512:1,512:2 --seconds=" + std::to_string(seconds) +
      " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return Status::IOError("cannot run ", command);
  std::string output;
  std::array<char, 4096> buffer;
  for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) {
    output.append(buffer.data(), n);
  }
  const int status = ::pclose(pipe);
  while (!output.empty() && output.back() == '\n') output.pop_back();
  if (status != 0) return Status::Unavailable(output);
  const size_t brace = output.rfind("\n{");
  EMBER_ASSIGN_OR_RETURN(const Json result, ParseJsonText(brace == std::string::npos
                                                              ? output
                                                              : output.substr(brace + 1)));
  const auto torch = result.is_object() ? result.find("torch") : result.end();
  *version = torch != result.end() && torch->is_string() ? torch->get<std::string>() : "?";
  std::vector<TorchRun> runs;
  if (const auto items = result.is_object() ? result.find("runs") : result.end();
      items != result.end() && items->is_array()) {
    for (const Json& item : *items) {
      runs.push_back({static_cast<int>(NumberField(item, "batch")),
                      static_cast<int>(NumberField(item, "threads")), NumberField(item, "p50_us"),
                      NumberField(item, "p99_us"), NumberField(item, "examples_per_sec")});
    }
  }
  return runs;
}

void PrintReport(const bench::RatioReporter& reporter, double torch_seconds) {
  std::printf("\nPredict vs training on the same model and data (2 threads, examples/s):\n");
  reporter.PrintRatio("predict / train", "BM_Predict/real_time", "BM_Train/real_time",
                      "examples/s");
  std::printf("\nlibember_serving, 2 calling threads vs 1:\n");
  for (int batch : {64, 512}) {
    if (reporter.Counter(CLibraryRun(batch, 1), "examples/s") == 0) continue;
    reporter.PrintRatio("batch " + std::to_string(batch) + ", 2 threads / 1",
                        CLibraryRun(batch, 2), CLibraryRun(batch, 1), "examples/s");
  }
  if (torch_seconds <= 0) return;
  std::string version;
  Result<std::vector<TorchRun>> torch = MeasureTorch(torch_seconds, &version);
  if (!torch.ok()) {
    std::printf("\nPyTorch: not measured: %s\n", torch.status().message().c_str());
    return;
  }
  std::printf("\nThe same forward through PyTorch %s (one thread per call), vs "
              "libember_serving:\n", version.c_str());
  std::printf("%-22s %12s %12s %12s %12s %14s %14s %8s\n", "batch/threads", "torch p50us",
              "ember p50us", "torch p99us", "ember p99us", "torch ex/s", "ember ex/s",
              "ember/torch ex/s");
  for (const TorchRun& t : *torch) {
    const std::string run = CLibraryRun(t.batch, t.threads);
    const double ember = reporter.Counter(run, "examples/s");
    std::printf("%-22s %12.1f %12.1f %12.1f %12.1f %14.0f %14.0f %8.2f\n",
                (std::to_string(t.batch) + "/" + std::to_string(t.threads)).c_str(), t.p50_us,
                reporter.Counter(run, "p50_us"), t.p99_us, reporter.Counter(run, "p99_us"),
                t.examples_per_sec, ember, t.examples_per_sec > 0 ? ember / t.examples_per_sec : 0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // --torch_seconds=S: time each PyTorch case for S seconds; 0 skips PyTorch.
  double torch_seconds = 1.0;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--torch_seconds=", 16) == 0) {
      torch_seconds = std::atof(argv[i] + 16);
      std::copy(argv + i + 1, argv + argc, argv + i);
      --argc;
      --i;
    }
  }
  benchmark::Initialize(&argc, argv);
  bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  PrintReport(reporter, torch_seconds);
  benchmark::Shutdown();
  return 0;
}
