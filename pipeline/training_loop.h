#pragma once

// The training loop: batches from a BatchSource through the stages of a
// TrainingStep (pipeline/training_step.h), one batch at a time or as an
// asynchronous pipeline, with the policies that keep either exact:
//
// * sequential (RunSequentialTraining): every stage on batch i, then batch
//   i + 1, on the caller's arena with every thread; a read-ahead thread at
//   the lowest priority reads and prepares batch i + 1 while i trains (and,
//   with a disk tier, prefetches its rows), on the cores the step leaves idle.
// * pipelined (RunPipelinedTraining): a worker per stage (runner in
//   pipeline/pipelined_runner.h), up to `depth` batches in flight; the
//   staleness gate (pipeline/staleness.h) makes a pull wait for the pushes
//   it must see, and early pulls read the rows no in-flight batch will
//   update before waiting for the rest.
//
// Both evict expired rows at the same points (after the push of step i and
// before the pull of step i + 1 when i + 1 is an eviction step) and stop at a
// barrier where their owner asks for one (hooks.barrier_due): between steps,
// with every earlier batch pushed and counted (hooks.done) and no later one
// begun, and the data position of the next batch. The owner writes
// checkpoints and evaluates there (hooks.at_barrier). With max_staleness 0 a
// pipelined run trains exactly the sequential run's model, with or without
// barriers.

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "core/threads.h"
#include "core/trace.h"
#include "io/batch_source.h"
#include "pipeline/stage.h"
#include "pipeline/staleness.h"
#include "pipeline/training_step.h"

namespace ember::pipeline {

struct TrainingLoopOptions {
  // Run the stages as an asynchronous pipeline (a worker per stage, up to
  // depth batches in flight); false runs them one batch at a time, the
  // reference the pipeline is checked against.
  bool pipelined = true;
  int depth = 4;
  // Pipelined runs: the threads of each stage after reading (the read stage
  // runs on the caller's thread), each in [1, the job's threads]. All zero:
  // scheduler::TrainerStageThreads (1 for unique, a quarter of the threads
  // for pull and push, every thread for dense). Sequential runs give every
  // stage every thread. With max_staleness 0 the result is that of
  // sequential training with the dense stage's thread count (oneDNN may
  // split a reduction differently for another count).
  PerStage<int> stage_threads;
  // The most pushes of earlier batches a pulled row may miss; 0 gives the
  // sequential result bit for bit.
  int max_staleness = 0;
  // Let a pull wait only for in-flight batches that share rows with it
  // (otherwise for the last max_staleness + 1 pushes, whatever their rows).
  bool early_pulls = true;
  // Prefetch the rows of the next batch while one trains (a hint to a table
  // with a disk tier; the trainer turns it off for a table without one).
  bool prefetch = true;
  // Sequential runs: read and prepare the next batch on a thread at the
  // lowest priority while the current one trains. The result is the same
  // either way.
  bool read_ahead = true;
  // Expired rows are evicted before the pull of every step that is a
  // multiple of this (> 0); 0: never.
  int64_t evict_every_steps = 0;
  // Warn when a stage stays on one batch longer than this; 0: no watchdog.
  double watchdog_seconds = 300.0;
  // Who trains, for the watchdog's warnings ("rank 2 of 4"); empty: nobody
  // is named (one process).
  std::string who;
  // A span per stage per batch when set (not owned).
  Tracer* tracer = nullptr;
};

// Checks the options' ranges; `threads` is the job's thread count.
Status ValidateTrainingLoopOptions(const TrainingLoopOptions& options, int threads);

// What the loop asks of its owner; every function is called on the loop's
// reading thread, between steps.
struct TrainingLoopHooks {
  // Whether to train a batch after `trained` batches of this run; false
  // ends the run (the step limit, a stop request).
  std::function<bool(int64_t trained)> go_on;
  // Whether the loop stops at a barrier before the job's step `step` (> 0):
  // for a checkpoint, an evaluation, anything that needs the table and the
  // model quiescent. Unset: never.
  std::function<bool(int64_t step)> barrier_due;
  // Called at the barrier before the job's step `step`, after the job's first
  // `step` steps, with the data position after them (empty when the source
  // cannot say or track_position is false): every earlier batch has pushed
  // and gone through `done`, no later one is read, so the table and the model
  // are quiescent and may be read (or saved) from this thread. An error
  // stops the run.
  std::function<Status(int64_t step, const std::string& data_position)> at_barrier;
  // Whether barriers need the data's position (ResumePosition), e.g. for
  // checkpoints.
  bool track_position = false;
  // Called with every trained batch after its last stage, in batch order.
  std::function<void(StepState& state)> done;
};

// What a run measured and where it ended.
struct TrainingLoopResult {
  // Busy time of each stage; a pull's time waiting for pushes is left out
  // (it is in staleness.wait_seconds).
  StageTimes times;
  // Threads of each stage (sequential runs: the arena's for every stage).
  PerStage<int> threads;
  // Pipelined runs: the staleness of every pulled row, and the watchdog's
  // reports.
  StalenessHistogram staleness;
  int64_t stalls = 0;
  // The data position after the last batch trained (empty when not tracked
  // or the source cannot say).
  std::string end_position;
};

// Trains batches of `data` from the job's step `first_step` on through
// `step`, in `arena`, until the data ends or hooks.go_on says no. The first
// error of a stage, of reading or of a checkpoint stops the run.
Status RunSequentialTraining(TrainingStep& step, io::BatchSource& data, ThreadArena& arena,
                             int64_t first_step, const TrainingLoopOptions& options,
                             const TrainingLoopHooks& hooks, TrainingLoopResult* result);
Status RunPipelinedTraining(TrainingStep& step, io::BatchSource& data, ThreadArena& arena,
                            int64_t first_step, const TrainingLoopOptions& options,
                            const TrainingLoopHooks& hooks, TrainingLoopResult* result);

// Whether expired rows are evicted before the pull of the job's step `step`
// (options.evict_every_steps; both loops evict at the same steps).
bool EvictsBefore(const TrainingLoopOptions& options, int64_t step);

// Where `data` is now for a checkpoint: its ResumePosition, or empty when
// `track` is false or the source cannot say.
Result<std::string> DataPosition(const io::BatchSource& data, bool track);

}  // namespace ember::pipeline
