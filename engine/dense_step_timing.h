#pragma once

// Timing a model's dense step for the planner's calibration
// (scheduler/dense_calibration.h): a Trainer of the model trains
// sequentially on random in-memory batches and the spans of its "dense"
// stage are timed, so what is measured is the trainer's own dense step:
// embedding-bag pooling, the model's forward, the loss, the backward, the
// dense optimizer's update of every parameter and the pooling's backward,
// on the trainer's thread arena with its OpenMP threads.

#include <cstdint>
#include <string>

#include "core/status.h"
#include "engine/model.h"
#include "ops/dense_optimizer.h"

namespace ember::engine {

struct DenseStepTimingOptions {
  // The model (name, shapes, tasks) and its dense optimizer.
  ModelOptions model;
  ops::DenseOptimizerOptions optimizer;
  int threads = 1;
  int64_t batch = 256;
  // Untimed steps first (oneDNN creates its primitives, the allocator fills
  // its cache), then timed ones: about target_seconds worth, between
  // min_steps and max_steps.
  int warmup_steps = 2;
  int min_steps = 3;
  int max_steps = 9;
  double target_seconds = 0.1;
};

// The median seconds of the timed steps' dense stage. Errors of the options
// (InvalidArgument for an unknown model or bad sizes) and of training.
Result<double> TimeDenseStep(const DenseStepTimingOptions& options);

// What the dense step's time depends on, as text: the model's name and
// shapes and the dense optimizer, e.g. "dlrm dense=13 slots=26 dim=16
// tasks=1 bottom=512,256,64 top=512,256 optimizer=adam" (the fields of
// another model that it does not use are left out).
std::string DenseStepDescriptor(const ModelOptions& model,
                                const ops::DenseOptimizerOptions& optimizer);

}  // namespace ember::engine
