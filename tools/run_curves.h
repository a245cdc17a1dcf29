#pragma once

// The history of a run's evaluations (engine::EvalPoint) for the metrics
// JSON, and drawn as curves (--plot_out).

#include <string>
#include <vector>

#include "core/json_fwd.h"
#include "engine/training_progress.h"

namespace ember::tools {

// The evaluations during training as a JSON array of objects (step,
// examples, train_loss, test_auc, test_logloss, samples_per_sec).
Json HistoryJson(const std::vector<engine::EvalPoint>& history);

// The run's curves as SVG: training loss and test logloss in one panel, test
// AUC in another, against training examples; `model` names the plot.
std::string RunCurvesSvg(const std::vector<engine::EvalPoint>& history, const std::string& model);

}  // namespace ember::tools
