// Pipelined vs sequential training throughput (issue 6), in one run:
//  * the same engine, model, data and thread count trained one batch at a
//    time (--pipeline=off, the baseline) and as a pipeline, with the
//    embedding tables in memory and with the RocksDB tier under a memory
//    budget of --budget_percent of the in-memory table's bytes;
//  * beside each speed-up, the ideal one: the sum of the sequential run's
//    stage times over its slowest stage (what perfect overlap would give if
//    every stage had its own cores), and the fraction of it reached
//    (goal: at least 0.85). With fewer cores than stages that bound cannot
//    be reached, so a second one is printed too: the sequential time over
//    max(slowest stage, the sequential run's CPU seconds / --threads), what
//    overlap can give when the stages share --threads cores;
//  * staleness 0 with early pulls (the default), staleness 0 without them
//    (a pull waits for every in-flight push), and staleness 2.
//   build/tools/bench/pipeline_bench [--threads=2] [--rows=200000]
//       [--vocabulary=20000] [--max_steps=300] [--rounds=3]
//       [--budget_percent=10] [--model=dlrm] [--batch_size=256] [benchmark flags]
//
// Each Google Benchmark run is one training of --max_steps steps with a new
// trainer (creation untimed; manual time = the trainer's training seconds).
// The configurations are registered round by round, so that the cases of a
// tier alternate and a change of load on this shared machine hits them
// alike; the speed-ups are medians over rounds of the per-round ratio.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/file.h"
#include "core/status.h"
#include "core/threads.h"
#include "engine/trainer.h"
#include "io/criteo.h"
#include "io/synthetic.h"

namespace {

using ember::Status;
using ember::ProcessCpuSeconds;
using ember::engine::TrainOptions;
using ember::engine::TrainReport;
using ember::engine::Trainer;

int g_threads = 2;
int64_t g_rows = 200000;
int64_t g_vocabulary = 20000;
int64_t g_max_steps = 300;
int g_rounds = 3;
int g_batch_size = 256;
double g_budget_percent = 10;
std::string g_model = "dlrm";

ember::io::Dataset g_data;
int64_t g_budget_bytes = 0;

struct Mode {
  const char* name;
  bool pipeline;
  int max_staleness;
  bool early_pulls;
};
constexpr Mode kModes[] = {{"sequential", false, 0, true},
                           {"k0_early", true, 0, true},
                           {"k0_no_early", true, 0, false},
                           {"k2", true, 2, true}};
constexpr const char* kTiers[] = {"memory", "budget"};

// What each (tier, mode) measured, one entry per round.
struct Measured {
  std::vector<double> samples_per_sec;
  std::vector<double> ideal_speedup;  // From this run's own stage times.
  std::vector<double> ideal_cpu_speedup;  // Bounded by its CPU seconds too.
  std::vector<double> bottleneck_busy;
  std::vector<std::string> bottleneck;
};
std::map<std::string, Measured> g_measured;

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

TrainOptions BaseOptions() {
  TrainOptions options;
  options.model.name = g_model;
  options.threads = g_threads;
  options.max_steps = g_max_steps;
  options.batch_size = g_batch_size;
  options.show_progress = false;
  options.pipeline.watchdog_seconds = 0;
  return options;
}

Status Train(const TrainOptions& options, TrainReport* report) {
  EMBER_ASSIGN_OR_RETURN(auto trainer,
                         Trainer::Create(options, g_data.num_dense(), g_data.num_slots()));
  EMBER_ASSIGN_OR_RETURN(*report, trainer->Fit(g_data));
  return Status::OK();
}

void BM_Train(benchmark::State& state, const std::string& tier, const Mode& mode) {
  TrainOptions options = BaseOptions();
  options.pipeline.pipelined = mode.pipeline;
  options.pipeline.max_staleness = mode.max_staleness;
  options.pipeline.early_pulls = mode.early_pulls;
  ember::TempDir dir;
  if (tier == "budget") {
    auto path = dir.Create("ember-pipeline-bench");
    if (!path.ok()) {
      state.SkipWithError(path.status().ToString().c_str());
      return;
    }
    options.table.memory_budget_bytes = g_budget_bytes;
    options.table.disk_path = *path;
  }
  for (auto _ : state) {
    TrainReport report;
    const double cpu_before = ProcessCpuSeconds();
    Status status = Train(options, &report);
    const double cpu_seconds = ProcessCpuSeconds() - cpu_before;
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      return;
    }
    state.SetIterationTime(report.train_seconds);
    Measured& m = g_measured[tier + "/" + mode.name];
    m.samples_per_sec.push_back(report.samples_per_sec);
    const auto& times = report.stage_times;
    const std::optional<ember::pipeline::Stage> slowest = times.Bottleneck();
    const double slowest_seconds = slowest ? times.busy_seconds[*slowest] : 0;
    m.ideal_speedup.push_back(slowest ? times.TotalSeconds() / slowest_seconds : 0);
    const double bound = std::max(slowest_seconds, cpu_seconds / g_threads);
    m.ideal_cpu_speedup.push_back(bound > 0 ? report.train_seconds / bound : 0);
    m.bottleneck.push_back(slowest ? ember::pipeline::StageName(*slowest) : "?");
    m.bottleneck_busy.push_back(
        slowest && report.train_seconds > 0 ? slowest_seconds / report.train_seconds : 0);
    state.counters["samples_per_sec"] = report.samples_per_sec;
  }
}

// Per-round ratio of `mode` over the sequential run of the same tier.
std::vector<double> RatiosOverSequential(const std::string& tier, const std::string& mode) {
  const Measured& a = g_measured[tier + "/" + mode];
  const Measured& b = g_measured[tier + "/sequential"];
  std::vector<double> ratios;
  for (size_t i = 0; i < std::min(a.samples_per_sec.size(), b.samples_per_sec.size()); ++i) {
    if (b.samples_per_sec[i] > 0) ratios.push_back(a.samples_per_sec[i] / b.samples_per_sec[i]);
  }
  return ratios;
}

void PrintSummary() {
  std::printf("\nPipelined vs sequential (%d threads, %s, batch %d, %lld steps, median of %d "
              "rounds)\n",
              g_threads, g_model.c_str(), BaseOptions().batch_size,
              static_cast<long long>(g_max_steps), g_rounds);
  std::printf("  ideal = sum of the sequential run's stage times / its slowest stage\n");
  std::printf("  cpu ideal = its time / max(slowest stage, its CPU seconds / %d threads)\n",
              g_threads);
  std::printf("%-8s %-12s %10s %9s %7s %9s %10s %9s  %s\n", "tier", "mode", "samples/s",
              "speed-up", "ideal", "of ideal", "cpu ideal", "of it", "bottleneck (busy)");
  for (const char* tier : kTiers) {
    const Measured& seq = g_measured[std::string(tier) + "/sequential"];
    const double ideal = Median(seq.ideal_speedup);
    const double cpu_ideal = Median(seq.ideal_cpu_speedup);
    for (const Mode& mode : kModes) {
      const Measured& m = g_measured[std::string(tier) + "/" + mode.name];
      if (m.samples_per_sec.empty()) continue;
      if (!mode.pipeline) {
        std::printf("%-8s %-12s %10.0f %9s %7.2f %9s %10.2f %9s  %s (%.0f%%)\n", tier,
                    mode.name, Median(m.samples_per_sec), "1.00", ideal, "", cpu_ideal, "",
                    m.bottleneck.empty() ? "?" : m.bottleneck.back().c_str(),
                    100 * Median(m.bottleneck_busy));
        continue;
      }
      const double speedup = Median(RatiosOverSequential(tier, mode.name));
      std::printf("%-8s %-12s %10.0f %9.2f %7.2f %9.2f %10.2f %9.2f  %s (%.0f%%)\n", tier,
                  mode.name, Median(m.samples_per_sec), speedup, ideal,
                  ideal > 0 ? speedup / ideal : 0, cpu_ideal,
                  cpu_ideal > 0 ? speedup / cpu_ideal : 0,
                  m.bottleneck.empty() ? "?" : m.bottleneck.back().c_str(),
                  100 * Median(m.bottleneck_busy));
    }
  }
}

Status Setup(ember::TempDir* dir) {
  EMBER_ASSIGN_OR_RETURN(std::string path, dir->Create("ember-pipeline-bench-data"));
  ember::io::SyntheticOptions synthetic;
  synthetic.rows = g_rows;
  synthetic.vocabulary = g_vocabulary;
  std::printf("generating %lld rows (vocabulary %lld per slot)...\n",
              static_cast<long long>(g_rows), static_cast<long long>(g_vocabulary));
  std::fflush(stdout);
  EMBER_RETURN_IF_ERROR(
      ember::io::WriteSyntheticCriteo(path + "/train.tsv", synthetic).status());
  EMBER_ASSIGN_OR_RETURN(g_data, ember::io::ReadCriteoFiles({path + "/train.tsv"},
                                                            ember::io::CriteoReadOptions{}));
  // A sequential in-memory run sizes the table (and warms up the process).
  TrainReport report;
  EMBER_RETURN_IF_ERROR(Train(BaseOptions(), &report));
  g_budget_bytes = static_cast<int64_t>(report.embedding.memory_bytes * g_budget_percent / 100);
  std::printf("embedding table after %lld steps: %lld rows, %.1f MiB; budget tier: %.1f MiB "
              "(%.0f%%)\n",
              static_cast<long long>(report.steps), static_cast<long long>(report.embedding.rows),
              report.embedding.memory_bytes / 1048576.0, g_budget_bytes / 1048576.0,
              g_budget_percent);
  return Status::OK();
}

bool ParseFlag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // As `ember` does: passive OpenMP waits (oneDNN beside oneTBB), tuned malloc.
  ember::EnsurePassiveOpenMpWaitPolicy(argv);
  ember::TuneProcessAllocator();
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (ParseFlag(argv[i], "--threads", &v)) {
      g_threads = std::atoi(v.c_str());
    } else if (ParseFlag(argv[i], "--rows", &v)) {
      g_rows = std::atoll(v.c_str());
    } else if (ParseFlag(argv[i], "--vocabulary", &v)) {
      g_vocabulary = std::atoll(v.c_str());
    } else if (ParseFlag(argv[i], "--max_steps", &v)) {
      g_max_steps = std::atoll(v.c_str());
    } else if (ParseFlag(argv[i], "--rounds", &v)) {
      g_rounds = std::atoi(v.c_str());
    } else if (ParseFlag(argv[i], "--budget_percent", &v)) {
      g_budget_percent = std::atof(v.c_str());
    } else if (ParseFlag(argv[i], "--batch_size", &v)) {
      g_batch_size = std::atoi(v.c_str());
    } else if (ParseFlag(argv[i], "--model", &v)) {
      g_model = v;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (g_threads < 1 || g_rows < 1 || g_batch_size < 1 || g_vocabulary < 1 || g_max_steps < 1 || g_rounds < 1 ||
      !(g_budget_percent > 0 && g_budget_percent < 100)) {
    std::fprintf(stderr,
                 "pipeline_bench: --threads, --rows, --vocabulary, --max_steps, --rounds and "
                 "--batch_size must "
                 "be at least 1, --budget_percent in (0, 100)\n");
    return 1;
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  ember::TempDir data_dir;
  if (Status status = Setup(&data_dir); !status.ok()) {
    std::fprintf(stderr, "pipeline_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  for (int round = 0; round < g_rounds; ++round) {
    for (const char* tier : kTiers) {
      for (const Mode& mode : kModes) {
        const std::string name =
            std::string("BM_Train/") + tier + "/" + mode.name + "/round:" + std::to_string(round);
        benchmark::RegisterBenchmark(name.c_str(), [tier, &mode](benchmark::State& state) {
          BM_Train(state, tier, mode);
        })
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kSecond);
      }
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  PrintSummary();
  benchmark::Shutdown();
  return 0;
}
