// Serving speed (issue 34): the trainer's samples/s beside the scorer's
// examples/s on the same model (forward only), measured in the same run; and
// libember_serving's latency at batch 1, 64 and 512 (median and p99 over the
// calls of a run) and its throughput from 1 and 2 threads.
//   build/tools/bench/serving_bench [--benchmark_filter=...]
// The model is DLRM at its default widths on generated Criteo-shaped data,
// trained briefly and exported to a temporary bundle.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/file.h"
#include "engine/bundle.h"
#include "engine/scorer.h"
#include "engine/serving/ember_serving.h"
#include "engine/trainer.h"
#include "io/batch_source.h"
#include "io/criteo.h"
#include "io/synthetic.h"

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
  state.SetItemsProcessed(state.iterations() * s.data.size());
}
BENCHMARK(BM_Train)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same model's scores of the same data (the trainer's evaluation path,
// --threads 2, batches of 4096), as `ember predict` runs it.
void BM_Predict(benchmark::State& state) {
  Setup& s = Shared();
  for (auto _ : state) CHECK(s.trainer->Predict(s.data).ok());
  state.SetItemsProcessed(state.iterations() * s.data.size());
}
BENCHMARK(BM_Predict)->Unit(benchmark::kMillisecond)->UseRealTime();

// libember_serving, ember_score_keys at batch state.range(0), one thread
// per call: latency percentiles over the run's calls and examples/s.
void BM_CLibrary(benchmark::State& state) {
  Setup& s = Shared();
  const int64_t batch = state.range(0);
  const io::Batch& all = s.data.all();
  const int64_t first = (state.thread_index() * 997) % (s.data.size() - batch);
  std::vector<int64_t> offsets(all.offsets.begin() + first * all.num_slots,
                               all.offsets.begin() + (first + batch) * all.num_slots + 1);
  const int64_t base = offsets[0];
  for (int64_t& o : offsets) o -= base;
  std::vector<float> scores(batch);
  std::vector<double> micros;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const ember_code code = ember_score_keys(s.model, batch, all.dense.data() + first * 13,
                                             offsets.data(), all.keys.data() + base,
                                             scores.data(), nullptr);
    micros.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - start).count());
    CHECK_EQ(EMBER_OK, code);
  }
  std::sort(micros.begin(), micros.end());
  state.counters["p50_us"] = micros[micros.size() / 2];
  state.counters["p99_us"] = micros[std::min(micros.size() - 1, micros.size() * 99 / 100)];
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_CLibrary)->Arg(1)->Arg(64)->Arg(512)->Threads(1)->UseRealTime();
BENCHMARK(BM_CLibrary)->Arg(512)->Threads(2)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
