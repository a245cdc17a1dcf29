#pragma once

// What `ember train` says about a run (tools/train_command.cc): the stages'
// and the embedding table's summary lines, and the "train" object of
// --metrics_out.

#include <cstdint>
#include <string>

#include "core/json_fwd.h"
#include "embedding/embedding_table.h"
#include "engine/training_progress.h"
#include "pipeline/stage.h"

namespace ember::tools {

// Each stage's busy time and busy fraction of the run's `seconds`, the
// bottleneck, and the ideal pipeline speed-up (the sum of the stage times
// over the slowest one).
std::string StageSummary(const pipeline::StageTimes& times, double seconds);
// The table's rows, memory, tiers and disk rates over the run's `seconds`.
std::string EmbeddingSummary(const embedding::TableStats& t, double seconds);
// The run's examples, speed, stages, staleness, embedding table, MoE
// counts and evaluations, as --metrics_out's "train" (the caller adds the
// model hash).
Json TrainReportJson(const engine::TrainReport& report, int64_t timing_warmup_steps);

}  // namespace ember::tools
