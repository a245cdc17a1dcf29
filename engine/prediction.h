#pragma once

// The evaluation path of a training step on one batch, shared by the
// trainer's evaluation (Trainer::Predict, Evaluate) and serving (Scorer,
// engine/scorer.h), so that a bundle scores a batch with the very code, and
// the very bits, of the trainer that wrote it.

#include <vector>

#include "core/status.h"
#include "pipeline/training_step.h"

namespace ember::engine {

// Predicts state.batch: its unique keys (TrainingStep::Prepare), their rows
// without changing the table (Lookup), the forward (Forward) and the sigmoid
// of every logit, appended to `*probabilities` example-major (example i's
// task t at i * num_tasks + t). The same batch, table rows, weights, row
// shards and threads give the same bits. Errors: the step's.
// Thread safety: as TrainingStep (one thread at a time per step and state).
Status PredictBatch(pipeline::TrainingStep& step, pipeline::StepState& state,
                    std::vector<float>* probabilities);

}  // namespace ember::engine
