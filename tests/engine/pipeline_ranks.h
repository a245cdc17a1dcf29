#pragma once

// Runs the ranks of a pipeline (engine/train_options.h pipeline_parallel) as
// threads of one test: rank r trains with options_of(r) over stages[r] and
// commands[r]; ranks 1.. serve their chunks, rank 0 runs `drive` on its
// trainer and then finishes the pipeline. A rank that fails aborts both its
// communicators, so that the others stop. Returns every rank's status.

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/communicator.h"
#include "engine/trainer.h"

namespace ember::test {

inline std::vector<Status> RunPipelineRanks(
    std::vector<std::unique_ptr<Communicator>>& stages,
    std::vector<std::unique_ptr<Communicator>>& commands,
    const std::function<engine::TrainOptions(int)>& options_of, int num_dense, int num_slots,
    const std::function<Status(engine::Trainer&)>& drive) {
  const int p = static_cast<int>(stages.size());
  std::vector<Status> statuses(static_cast<size_t>(p));
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      engine::TrainOptions options = options_of(r);
      options.pipeline_parallel.stages = stages[r].get();
      options.pipeline_parallel.commands = commands[r].get();
      statuses[r] = [&]() -> Status {
        EMBER_ASSIGN_OR_RETURN(auto trainer,
                               engine::Trainer::Create(options, num_dense, num_slots));
        if (r > 0) return trainer->ServePipeline();
        EMBER_RETURN_IF_ERROR(drive(*trainer));
        return trainer->FinishPipeline();
      }();
      if (!statuses[r].ok()) {
        stages[r]->Abort(statuses[r]);
        commands[r]->Abort(statuses[r]);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

// The first failing rank's status, naming it; OK when every rank finished.
inline Status FirstFailure(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (!statuses[r].ok()) return statuses[r].WithContext("rank " + std::to_string(r));
  }
  return Status::OK();
}

}  // namespace ember::test
