#pragma once

// The planner's flags, shared by `ember plan` and `ember train --plan`
// (defined in plan_flags.cc), and the glue between them and the scheduler:
// the Program of the model the training flags describe, the resource graph
// (this host, calibrated, or a cluster file) and the planner's options.

#include <gflags/gflags_declare.h>

#include <string>

#include "core/status.h"
#include "engine/trainer.h"
#include "scheduler/cost_model.h"
#include "scheduler/plan.h"
#include "scheduler/planner.h"
#include "scheduler/program.h"
#include "scheduler/resource_graph.h"

DECLARE_string(plan);
DECLARE_string(cluster);

namespace ember::tools {

// Everything a plan is made from.
struct PlanInputs {
  scheduler::ResourceGraph graph;
  scheduler::Program program;
  scheduler::PlannerOptions planner;
  // The knobs the flags give (the search starts there).
  scheduler::PlanKnobs start;
  // Stage scales from --plan_refine_from or the host's saved refinement.
  scheduler::StageScales stage_scales;
  // The model's dense step timed on this host (none for a cluster file).
  scheduler::DenseMeasurement dense;
  // Where the program's table size comes from (the training data's distinct
  // keys, measured or estimated, or the generated data's vocabularies), for
  // the plan's rationale.
  std::string table_sizing;
  // Knobs fixed by flags set on the command line (the planner leaves them).
  bool fixed_threads = false;
  bool fixed_pipeline = false;
  bool fixed_depth = false;
};

// Reads the model, data and training flags (by name, so that `ember plan`
// takes the flags of `ember train`), builds the Program, discovers and
// calibrates this host (or reads --cluster), times the model's dense step
// on this host at the thread counts and batch sizes the planner considers
// (scheduler/dense_calibration.h; cached), and sets the planner's choices
// from the --plan_* flags. Errors name the flag or file.
Result<PlanInputs> PlanInputsFromFlags();

// The model the flags describe (--model and its widths, experts and MoE
// options; the data's shape from --num_dense, --num_slots and --tasks, which
// a trainer replaces by its data's). Errors name the flag.
Result<engine::ModelOptions> ModelOptionsFromFlags();

// The cost model of `in`: its graph (borrowed: `in` must outlive the
// model), stage scales and dense measurement.
scheduler::CostModel PlanCostModel(const PlanInputs& in);

// `ember train`: --plan=auto plans with the knobs the command line leaves
// free; --plan=off keeps the flags as they are (threads checked against the
// host); --plan=FILE runs a plan written by `ember plan --plan_out`. Writes
// the plan's knobs into `options` and returns the plan.
Result<scheduler::Plan> ApplyTrainPlan(engine::TrainOptions* options);

// Copies a plan's knobs into TrainOptions.
void ApplyPlanToOptions(const scheduler::Plan& plan, engine::TrainOptions* options);

}  // namespace ember::tools
