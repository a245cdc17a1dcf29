// The pipelined training loop (pipeline/training_loop.h): a worker per
// stage, the staleness gate between pulls and pushes, early pulls, and the
// checkpoint barrier.

#include <glog/logging.h>

#include <algorithm>
#include <vector>

#include "core/mutex.h"
#include "pipeline/pipelined_runner.h"
#include "pipeline/training_loop.h"
#include "scheduler/planner.h"

namespace ember::pipeline {
namespace {

// The threads of each stage: the options', or the default the planner costs.
PerStage<int> StageThreads(const TrainingLoopOptions& options, int threads) {
  const bool given = std::any_of(options.stage_threads.begin(), options.stage_threads.end(),
                                 [](int t) { return t > 0; });
  PerStage<int> split = given ? options.stage_threads
                              : scheduler::TrainerStageThreads(threads, /*pipeline=*/true);
  // Reading runs on the caller's thread, in its arena.
  split[Stage::kRead] = 0;
  return split;
}

}  // namespace

Status ValidateTrainingLoopOptions(const TrainingLoopOptions& o, int threads) {
  if (o.depth < 1) return Status::InvalidArgument("--pipeline_depth must be >= 1, got ", o.depth);
  const bool given = std::any_of(o.stage_threads.begin(), o.stage_threads.end(),
                                 [](int t) { return t != 0; });
  if (given) {
    for (Stage s : kAllStages) {
      if (s == Stage::kRead) continue;
      const int t = o.stage_threads[s];
      if (t < 1 || t > threads) {
        return Status::InvalidArgument("--stage_threads: the ", StageName(s), " stage's ", t,
                                       " threads are outside [1, ", threads,
                                       "] (the job's threads)");
      }
    }
  }
  if (o.max_staleness < 0) {
    return Status::InvalidArgument("--max_staleness must be >= 0, got ", o.max_staleness);
  }
  if (o.evict_every_steps < 0) {
    return Status::InvalidArgument("eviction every ", o.evict_every_steps, " steps");
  }
  if (!(o.watchdog_seconds >= 0)) {
    return Status::InvalidArgument("--watchdog_seconds must be >= 0, got ", o.watchdog_seconds);
  }
  return Status::OK();
}

Status RunPipelinedTraining(TrainingStep& step, io::BatchSource& data, ThreadArena& arena,
                            int64_t first_step, const TrainingLoopOptions& options,
                            const TrainingLoopHooks& hooks, TrainingLoopResult* result) {
  embedding::EmbeddingTable& table = step.table();
  StalenessGate gate(options.max_staleness, options.early_pulls);
  // The time a pull waits for pushes shows in the trace as a "pull wait"
  // span (category "wait") inside its pull span.
  const auto await_pull = [&](StepState& s, bool after_all_pushes) {
    TraceSpan wait(options.tracer, "pull wait", "wait", s.index);
    return gate.AwaitPull(s.index, s.sorted_keys, after_all_pushes);
  };
  const std::vector<StageWork<StepState>> stages = {
      // unique: also the sorted keys for the gate, and the disk prefetch,
      // which the read-ahead of the pipeline turns into loading while
      // earlier batches train.
      {Stage::kUnique,
       [&](StepState& s) {
         EMBER_RETURN_IF_ERROR(step.Prepare(s));
         TrainingStep::SortKeys(s);
         if (options.prefetch) table.Prefetch(s.unique_keys);
         return Status::OK();
       }},
      // pull: waits for the pushes it must see; evicts expired rows (after
      // every earlier push, as sequential training does) on the pull thread.
      {Stage::kPull,
       [&](StepState& s) {
         const bool evict = EvictsBefore(options, s.step);
         if (evict || !options.early_pulls) {
           EMBER_RETURN_IF_ERROR(await_pull(s, evict));
           if (evict) {
             const int64_t evicted = table.EvictExpired();
             VLOG(1) << "before step " << s.step << ": evicted " << evicted << " expired rows";
           }
           return step.Pull(s);
         }
         // Early pull: the rows no in-flight batch will update (beyond the
         // staleness bound) are final now; read them, then wait for the
         // pushes the others need and read those.
         gate.Staleness(s.sorted_keys, &s.staleness);
         std::vector<int64_t> early, late;
         for (size_t i = 0; i < s.sorted_keys.size(); ++i) {
           (s.staleness[i] <= options.max_staleness ? early : late).push_back(s.sorted_order[i]);
         }
         if (late.empty() || early.empty()) {
           EMBER_RETURN_IF_ERROR(await_pull(s, false));
           return step.Pull(s);
         }
         table.set_step(s.step);
         EMBER_RETURN_IF_ERROR(step.PullPart(s, early));
         EMBER_RETURN_IF_ERROR(await_pull(s, false));
         return step.PullPart(s, late);
       }},
      {Stage::kDense, [&](StepState& s) { return step.DenseTrain(s); }},
      {Stage::kPush,
       [&](StepState& s) {
         EMBER_RETURN_IF_ERROR(step.Push(s));
         gate.MarkPushed(s.index);
         return Status::OK();
       }},
  };
  PipelineOptions pipeline_options;
  pipeline_options.stage_threads = StageThreads(options, arena.threads());
  result->threads = pipeline_options.stage_threads;
  result->threads[Stage::kRead] = 1;
  // The dense stage is the critical path: the others yield it the cores
  // when there are too few for all (measured on 2 cores: without this,
  // preempted oneDNN threads made the dense stage a third slower).
  pipeline_options.stage_nice = PerStage<int>::Filled(10);
  pipeline_options.stage_nice[Stage::kDense] = 0;
  pipeline_options.watchdog_seconds = options.watchdog_seconds;
  pipeline_options.tracer = options.tracer;
  // Batches through `done` (on the push worker), for the barrier to wait on:
  // a batch has pushed before `done` has counted it.
  Mutex done_mu;
  CondVar done_cv;
  int64_t trained = 0;   // Guarded by done_mu.
  bool stopped = false;  // Guarded by done_mu.
  const auto await_done = [&](int64_t batches) -> Status {
    MutexLock lock(done_mu);
    done_cv.Wait(done_mu, [&] { return trained >= batches || stopped; });
    if (trained < batches) return Status::Cancelled("the pipeline stopped at a barrier");
    return Status::OK();
  };
  pipeline_options.on_stop = [&] {
    gate.Cancel();
    {
      MutexLock lock(done_mu);
      stopped = true;
    }
    done_cv.NotifyAll();
  };
  pipeline_options.on_stall = [&](Stage stage, int64_t item, double seconds) {
    LOG(WARNING) << "watchdog" << (options.who.empty() ? "" : " (" + options.who + ")")
                 << ": stage " << StageName(stage) << " has been on batch " << item
                 << " for " << static_cast<int64_t>(seconds) << " s";
  };
  std::vector<StepState> states(std::max(1, options.depth));
  auto read = [&](int64_t index, StepState& s) -> Result<bool> {
    if (!hooks.go_on(index)) return false;
    if (index > 0 && hooks.barrier_due && hooks.barrier_due(first_step + index)) {
      // A barrier: with no later batch read, nothing is in flight once
      // every earlier batch has pushed and been counted.
      EMBER_RETURN_IF_ERROR(gate.AwaitPushed(index));
      EMBER_RETURN_IF_ERROR(await_done(index));
      EMBER_ASSIGN_OR_RETURN(const std::string position,
                             DataPosition(data, hooks.track_position));
      EMBER_RETURN_IF_ERROR(hooks.at_barrier(first_step + index, position));
    }
    Result<bool> more = data.Next(&s.batch);
    if (!more.ok()) return more.status().WithContext("reading the training data");
    s.index = index;
    s.step = first_step + index;
    s.epoch = data.epoch();
    return *more;
  };
  const auto done = [&](StepState& s) {
    if (hooks.done) hooks.done(s);
    {
      MutexLock lock(done_mu);
      ++trained;
    }
    done_cv.NotifyAll();
  };
  PipelineStats stats;
  Status status;
  // The reader runs in the caller's arena; each stage in its own.
  arena.Execute([&] {
    status = RunPipelined<StepState>(stages, states, read, done, pipeline_options, &stats);
  });
  result->times = stats.times;
  result->staleness = gate.histogram();
  // The pull stage's time waiting for pushes is not work: report it apart.
  double& pull_seconds = result->times.busy_seconds[Stage::kPull];
  pull_seconds = std::max(0.0, pull_seconds - result->staleness.wait_seconds);
  result->stalls = stats.stalls;
  EMBER_RETURN_IF_ERROR(status);
  // The eviction sequential training does after its last push.
  if (EvictsBefore(options, first_step + trained)) table.EvictExpired();
  // Every batch read was trained: the source is where the last one ended.
  EMBER_ASSIGN_OR_RETURN(result->end_position, DataPosition(data, hooks.track_position));
  return Status::OK();
}

}  // namespace ember::pipeline
