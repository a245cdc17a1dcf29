// Pipeline schedules run for real (issue 32): p ranks as threads with the
// in-process communicator, each chunk's forward and backward a fixed amount
// of arithmetic (equal chunks, backward = 2 x forward), every compute
// instruction timestamped. Per case (kind, p, v, m):
//  * bubble: each rank's idle time within the step (from the first
//    instruction of any rank to the last end of any rank, minus the rank's
//    compute time) over its compute time, averaged over ranks and steps,
//    beside Narayanan et al.'s (p - 1) / (v m) for equal chunks;
//  * step time: measured vs SimulateSchedule's (pipeline/
//    schedule_simulator.h) from the chunk times measured alone on one thread
//    before the case ("sim_step_ms"), and from the mean forward and backward
//    times of each measured step itself ("sim_own_over_measured": what is
//    left is the schedule's waiting, not the cores' speed);
//  * bubble_min: the least bubble over the steps (the step least disturbed
//    by other processes on a shared machine).
//   build-pp/tools/bench/schedule_bench [--forward_ms=2] [benchmark flags]
// Each Google Benchmark iteration is one step (manual time = its span).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/in_process_communicator.h"
#include "pipeline/schedule.h"
#include "pipeline/schedule_simulator.h"
#include "pipeline/stage_executor.h"

namespace {

using Clock = std::chrono::steady_clock;
using ember::Status;
using namespace ember::pipeline;

double g_forward_ms = 2.0;
int64_t g_iterations_per_ms = 0; // Of Spin, measured at start-up.
constexpr int64_t kMessageFloats = 256;

// Arithmetic the compiler cannot drop: `iterations` dependent steps.
float Spin(int64_t iterations, float seed) {
  float x = seed;
  for (int64_t i = 0; i < iterations; ++i)
    x = x * 0.999999f + 1e-7f;
  return x;
}

void CalibrateSpin() {
  int64_t n = 1 << 20;
  for (;;) {
    const auto start = Clock::now();
    benchmark::DoNotOptimize(Spin(n, 1.0f));
    const double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (ms > 50) {
      g_iterations_per_ms = static_cast<int64_t>(static_cast<double>(n) / ms);
      return;
    }
    n *= 2;
  }
}

struct Interval {
  Clock::time_point start, end;
  bool backward = false;
};

// Equal chunks of spinning arithmetic; records when each compute ran.
class SpinWork final : public ChunkWork {
public:
  int64_t OutputElements(int, int) const override { return kMessageFloats; }
  Status Forward(int, int, const std::vector<float> &input,
                 std::vector<float> *output) override {
    const auto start = Clock::now();
    const float x =
        Spin(static_cast<int64_t>(g_forward_ms * g_iterations_per_ms),
             input.empty() ? 1.0f : input[0]);
    output->assign(kMessageFloats, x);
    busy_.push_back({start, Clock::now(), false});
    return Status::OK();
  }
  Status Backward(int, int, const std::vector<float> &grad,
                  std::vector<float> *input_grad) override {
    const auto start = Clock::now();
    const float x =
        Spin(static_cast<int64_t>(2 * g_forward_ms * g_iterations_per_ms),
             grad.empty() ? 1.0f : grad[0]);
    input_grad->assign(kMessageFloats, x);
    busy_.push_back({start, Clock::now(), true});
    return Status::OK();
  }
  Status OptimizerStep() override { return Status::OK(); }
  std::vector<Interval> &busy() { return busy_; }

private:
  std::vector<Interval> busy_;
};

// One step of `schedule` on p threads; returns each rank's compute intervals.
std::vector<std::vector<Interval>>
RunStep(const Schedule &schedule,
        std::vector<std::unique_ptr<ember::Communicator>> &comms) {
  const int p = schedule.shape.ranks;
  std::vector<SpinWork> work(static_cast<size_t>(p));
  std::vector<Status> statuses(static_cast<size_t>(p));
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      // Start together: thread creation is not part of the step.
      ready.fetch_add(1);
      while (ready.load() < p)
        std::this_thread::yield();
      statuses[r] = RunRankSchedule(schedule, r, work[r], comms[r].get());
    });
  }
  for (std::thread &t : threads)
    t.join();
  std::vector<std::vector<Interval>> busy;
  for (int r = 0; r < p; ++r) {
    if (!statuses[r].ok()) {
      std::fprintf(stderr, "rank %d: %s\n", r, statuses[r].ToString().c_str());
      std::exit(1);
    }
    busy.push_back(std::move(work[r].busy()));
  }
  return busy;
}

void BM_Schedule(benchmark::State &state, std::string kind) {
  const ScheduleShape shape{static_cast<int>(state.range(0)),
                            static_cast<int>(state.range(1)),
                            static_cast<int>(state.range(2))};
  const Schedule schedule = *BuiltinSchedules().Make(kind, shape);
  auto comms = *ember::NewInProcessCommunicators(shape.ranks);
  // Chunk times alone on one thread: the simulator's costs.
  SpinWork alone;
  std::vector<float> out;
  for (int i = 0; i < 5; ++i) {
    (void)alone.Forward(0, 0, {}, &out);
    (void)alone.Backward(0, 0, {}, &out);
  }
  double forward_s = 0, backward_s = 0;
  for (size_t i = 0; i < alone.busy().size(); ++i) {
    const double s = std::chrono::duration<double>(alone.busy()[i].end -
                                                   alone.busy()[i].start)
                         .count();
    (i % 2 == 0 ? forward_s : backward_s) += s / 5;
  }
  ScheduleCosts costs;
  costs.forward_seconds = {forward_s};
  costs.backward_seconds = {backward_s};
  const Timeline predicted = *SimulateSchedule(schedule, costs);

  double bubble_sum = 0, idle_sum = 0, step_sum = 0, own_sim_sum = 0;
  double bubble_min = 1e9;
  int steps = 0;
  for (auto _ : state) {
    const auto busy = RunStep(schedule, comms);
    Clock::time_point begin = busy[0].front().start, end = busy[0].back().end;
    for (const auto &rank : busy) {
      for (const Interval &i : rank) {
        begin = std::min(begin, i.start);
        end = std::max(end, i.end);
      }
    }
    const double step = std::chrono::duration<double>(end - begin).count();
    double bubble = 0, idle = 0;
    double seconds_of[2] = {0, 0};
    int count_of[2] = {0, 0};
    for (const auto &rank : busy) {
      double compute = 0;
      for (const Interval &i : rank) {
        const double s = std::chrono::duration<double>(i.end - i.start).count();
        compute += s;
        seconds_of[i.backward] += s;
        ++count_of[i.backward];
      }
      bubble += (step - compute) / compute / shape.ranks;
      idle += (step - compute) / step / shape.ranks;
    }
    ScheduleCosts own;
    own.forward_seconds = {seconds_of[0] / count_of[0]};
    own.backward_seconds = {seconds_of[1] / count_of[1]};
    own_sim_sum += SimulateSchedule(schedule, own)->step_seconds / step;
    state.SetIterationTime(step);
    bubble_min = std::min(bubble_min, bubble);
    bubble_sum += bubble;
    idle_sum += idle;
    step_sum += step;
    ++steps;
  }
  const double formula = static_cast<double>(shape.ranks - 1) /
                         (shape.virtual_stages * shape.micro_batches);
  state.counters["bubble"] = bubble_sum / steps;
  state.counters["bubble_formula"] = formula;
  state.counters["bubble_pts_off"] = 100 * (bubble_sum / steps - formula);
  state.counters["bubble_min"] = bubble_min;
  state.counters["idle_fraction"] = idle_sum / steps;
  state.counters["sim_own_over_measured"] = own_sim_sum / steps;
  state.counters["step_ms"] = 1e3 * step_sum / steps;
  state.counters["sim_step_ms"] = 1e3 * predicted.step_seconds;
  state.counters["sim_over_measured"] =
      predicted.step_seconds / (step_sum / steps);
}

} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--forward_ms=", 13) == 0)
      g_forward_ms = std::atof(argv[i] + 13);
  }
  CalibrateSpin();
  std::printf(
      "spin: %lld iterations/ms; forward %.2f ms, backward %.2f ms per chunk\n",
      static_cast<long long>(g_iterations_per_ms), g_forward_ms,
      2 * g_forward_ms);
  for (const char *kind : {"1f1b", "interleaved"}) {
    for (int v : {1, 2}) {
      if (std::string(kind) == "1f1b" && v != 1)
        continue;
      if (std::string(kind) == "interleaved" && v == 1)
        continue;
      for (int m : {4, 8}) {
        benchmark::RegisterBenchmark(("schedule/" + std::string(kind)).c_str(),
                                     BM_Schedule, kind)
            ->Args({2, v, m})
            ->ArgNames({"p", "v", "m"})
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->Iterations(20);
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
