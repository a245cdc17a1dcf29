// The sequential training loop (pipeline/training_loop.h): one batch at a
// time, with a read-ahead thread.

#include <glog/logging.h>

#include <memory>
#include <utility>
#include <vector>

#include "pipeline/sequential_runner.h"
#include "pipeline/training_loop.h"

namespace ember::pipeline {
bool EvictsBefore(const TrainingLoopOptions& options, int64_t step) {
  return options.evict_every_steps > 0 && step > 0 && step % options.evict_every_steps == 0;
}

Result<std::string> DataPosition(const io::BatchSource& data, bool track) {
  if (!track) return std::string();
  Result<std::string> position = data.ResumePosition();
  if (position.ok() || position.status().code() != StatusCode::kUnimplemented) return position;
  return std::string();
}

Status RunSequentialTraining(TrainingStep& step, io::BatchSource& data, ThreadArena& arena,
                             int64_t first_step, const TrainingLoopOptions& options,
                             const TrainingLoopHooks& hooks, TrainingLoopResult* result) {
  embedding::EmbeddingTable& table = step.table();
  result->threads = PerStage<int>::Filled(arena.threads());
  int64_t trained = 0;
  // A batch read ahead was prepared when it was read.
  const std::vector<StageWork<StepState>> stages = {
      {Stage::kUnique, [&](StepState& s) { return s.prepared ? Status::OK() : step.Prepare(s); }},
      {Stage::kPull, [&](StepState& s) { return step.Pull(s); }},
      {Stage::kDense, [&](StepState& s) { return step.DenseTrain(s); }},
      {Stage::kPush,
       [&](StepState& s) {
         EMBER_RETURN_IF_ERROR(step.Push(s));
         // Eviction after the push of step i, before the pull of step i + 1.
         if (EvictsBefore(options, s.step + 1)) {
           const int64_t evicted = table.EvictExpired();
           VLOG(1) << "step " << s.step << ": evicted " << evicted << " expired rows";
         }
         return Status::OK();
       }},
  };
  Status status;
  // Read-ahead: batch i + 1 is read and prepared (its unique keys, input
  // tensors and the table's grouping of its keys; with a disk tier its rows
  // prefetched, so that its Pull finds them in memory) while batch i trains,
  // by a thread that runs only on the cores the step leaves idle (SCHED_IDLE:
  // a step thread that wakes gets its core at once, which nice 19 does not
  // give). Without read_ahead, and with a disk tier to prefetch for, this
  // thread's work is done between steps.
  const bool read_ahead = options.read_ahead || options.prefetch;
  StepState current;
  StepState ahead;
  Result<bool> ahead_read = false;  // Whether `ahead` holds a batch, or why reading failed.
  // The data position before `ahead` was read, for a checkpoint taken before
  // it trains (empty when not tracked), or why it is unknown.
  Result<std::string> before_ahead = std::string();
  bool have_ahead = false;  // `ahead` was read (ahead_read says how it went).
  // Reads the next batch into `s`; when `prepare`, also runs the unique stage
  // on it (else the stage runs it in its turn).
  const auto read = [&](StepState& s, bool prepare) -> Result<bool> {
    s.prepared = false;
    Result<bool> more = data.Next(&s.batch);
    if (!more.ok()) return more.status().WithContext("reading the training data");
    if (!*more) return false;
    s.epoch = data.epoch();
    if (prepare) {
      EMBER_RETURN_IF_ERROR(step.Prepare(s));
      s.prepared = true;
      // The table's own key pass for the Pull (grouping by shard), also off
      // the step's critical path.
      table.PrepareKeys(s.unique_keys);
      if (options.prefetch) table.Prefetch(s.unique_keys);
    }
    return true;
  };
  // Reads ahead the batch of index `index` (taking the data position first).
  const auto read_ahead_now = [&](int64_t index) {
    TraceSpan span(options.tracer, "read ahead", "stage", index);
    before_ahead = DataPosition(data, hooks.track_position);
    ahead_read = before_ahead.ok() ? read(ahead, /*prepare=*/true) : before_ahead.status();
  };
  // Where the data is after the last batch trained: before the batch read
  // ahead, unless reading ahead found the end of the data.
  const auto position_after_trained = [&]() -> Result<std::string> {
    const bool at_end = have_ahead && ahead_read.ok() && !*ahead_read;
    return have_ahead && !at_end ? before_ahead : DataPosition(data, hooks.track_position);
  };
  // Last, so that it stops before what its functions use is destroyed.
  std::unique_ptr<BackgroundThread> reader;
  if (options.read_ahead) {
    reader = std::make_unique<BackgroundThread>(arena.threads(), /*nice_increment=*/19,
                                                /*only_idle_cores=*/true);
  }
  const auto done = [&](StepState& s) {
    ++trained;
    if (hooks.done) hooks.done(s);
  };
  arena.Execute([&] {
    SetOpenMpThreads(arena.threads());
    auto next = [&](int64_t, StepState& s) {
      if (reader) reader->Wait();
      if (!status.ok() || !hooks.go_on(trained)) return false;
      // Between steps: every earlier one is done, the next not begun. The
      // data position is the one before the batch read ahead, if any.
      if (trained > 0 && hooks.barrier_due && hooks.barrier_due(first_step + trained)) {
        Result<std::string> position = position_after_trained();
        status = position.ok() ? hooks.at_barrier(first_step + trained, *position)
                               : position.status();
        if (!status.ok()) return false;
      }
      Result<bool> more = false;
      if (have_ahead) {
        std::swap(s, ahead);
        more = std::move(ahead_read);
        have_ahead = false;
      } else {
        more = read(s, /*prepare=*/false);
      }
      if (!more.ok()) status = more.status();
      if (!more.ok() || !*more) return false;
      s.index = trained;
      s.step = first_step + s.index;
      if (read_ahead && hooks.go_on(trained + 1)) {
        have_ahead = true;
        const int64_t index = trained + 1;
        if (reader) {
          reader->Start([&read_ahead_now, index] { read_ahead_now(index); });
        } else {
          read_ahead_now(index);
        }
      }
      return true;
    };
    const Status run = RunSequential<StepState>(stages, next, current, options.tracer,
                                                &result->times, done);
    if (status.ok()) status = run;
  });
  if (reader) reader->Wait();
  if (!status.ok()) return status;
  if (have_ahead && !ahead_read.ok()) {
    // The batch after the last trained could not be read: nothing trained
    // on it, but the data is broken where training would go on.
    LOG(WARNING) << "reading ahead after the last step: " << ahead_read.status();
  }
  EMBER_ASSIGN_OR_RETURN(result->end_position, position_after_trained());
  return Status::OK();
}

}  // namespace ember::pipeline
