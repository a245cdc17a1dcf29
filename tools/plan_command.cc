// `ember plan`: plans a training job (the flags of `ember train`) on this
// host or on the machines of a cluster file, prints the placement, every
// stage's predicted time, the bottleneck, samples/s and what each device
// needs, and writes the placed graph as DOT and the plan as JSON. With
// --draw_schedule it draws a pipeline schedule instead (pipeline/
// schedule_drawing.h) and plans nothing. With --pipeline_ranks it also
// chooses how to pipeline the model's dense graph over ranks (pipeline/
// pipeline_choice.h).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "core/file.h"
#include "engine/model_zoo.h"
#include "ops/op_registry.h"
#include "pipeline/pipeline_choice.h"
#include "pipeline/schedule.h"
#include "pipeline/schedule_drawing.h"
#include "scheduler/cost_model.h"
#include "scheduler/planner.h"
#include "tools/commands.h"
#include "tools/flag_validators.h"
#include "tools/plan_flags.h"

DEFINE_string(plan_out, "",
              "plan: write the plan as JSON here (with predicted_samples_per_sec); `ember train "
              "--plan=FILE` runs it. Empty: don't.");
DEFINE_string(dot_out, "plan.dot",
              "plan: write the placed task graph (ops clustered by device) as Graphviz DOT here; "
              "empty: don't.");
DEFINE_double(network_scale, 1.0,
              "plan: multiply the bandwidth of every network link of the resource graph by this "
              "(e.g. 0.1 to ask how the plan changes on a 10x slower network).");
DEFINE_validator(network_scale, &ember::tools::IsPositiveDouble);
DEFINE_string(draw_schedule, "",
              "plan: instead of planning, draw one step of the pipeline schedule of this kind "
              "(gpipe, 1f1b, interleaved, zb-h1) as text, with its predicted bubble, for equal "
              "chunks (backward = 2 x forward, half of it the weight gradients zb-h1 runs "
              "apart). Empty: plan the job.");
DEFINE_int32(schedule_ranks, 2, "plan --draw_schedule: pipeline ranks (p), >= 1.");
DEFINE_validator(schedule_ranks, &ember::tools::IsPositive32);
DEFINE_int32(schedule_virtual_stages, 1,
             "plan --draw_schedule: chunks (virtual stages) per rank (v), >= 1; > 1 needs "
             "--draw_schedule=interleaved or gpipe.");
DEFINE_validator(schedule_virtual_stages, &ember::tools::IsPositive32);
DEFINE_int32(schedule_micro_batches, 4,
             "plan --draw_schedule: micro-batches per step (m), >= 1; interleaved needs a "
             "multiple of --schedule_ranks.");
DEFINE_validator(schedule_micro_batches, &ember::tools::IsPositive32);
DEFINE_int32(schedule_group, 0,
             "plan --draw_schedule=interleaved: micro-batches that pass through each chunk in "
             "turn (G, as --pipeline_group), in [p, m] with m mod G 0 or >= p; 0: p.");
DEFINE_validator(schedule_group, &ember::tools::IsNonNegative32);
DEFINE_int32(pipeline_ranks, 0,
             "plan: also choose pipeline parallelism of the model's dense graph over up to this "
             "many ranks: the ranks p, chunks per rank v, micro-batches m of the plan's batch "
             "and schedule (gpipe, 1f1b, interleaved, zb-h1) the schedule simulator predicts "
             "fastest, ranks filling the hosts (this one, or --cluster's) and sharing their "
             "threads. "
             "0: don't.");
DEFINE_validator(pipeline_ranks, &ember::tools::IsNonNegative32);
DEFINE_string(pipeline_activation_limit, "",
              "plan --pipeline_ranks: activation memory a pipeline rank may hold at once (e.g. "
              "512MB); candidates over it are left out. Empty: no limit.");

namespace ember::tools {
namespace {

// Draws --draw_schedule for the --schedule_* shape on stdout.
Status DrawSchedule() {
  const pipeline::ScheduleShape shape{FLAGS_schedule_ranks, FLAGS_schedule_virtual_stages,
                                      FLAGS_schedule_micro_batches, FLAGS_schedule_group};
  Result<pipeline::Schedule> schedule = pipeline::BuiltinSchedules().Make(FLAGS_draw_schedule, shape);
  if (!schedule.ok()) return schedule.status().WithContext("--draw_schedule");
  EMBER_ASSIGN_OR_RETURN(const std::string drawing, pipeline::DrawScheduleText(*schedule));
  std::printf("%s", drawing.c_str());
  std::fflush(stdout);
  return Status::OK();
}

// Chooses the pipeline of --pipeline_ranks for `plan`'s batch, prints it
// and records it in the plan.
Status PlanPipeline(const scheduler::CostModel& cost, scheduler::Plan* plan) {
  EMBER_ASSIGN_OR_RETURN(const engine::ModelOptions model, ModelOptionsFromFlags());
  EMBER_ASSIGN_OR_RETURN(const auto graph,
                         engine::BuildModelGraph(model, ops::DefaultOpRegistry()));
  pipeline::PipelineChoiceOptions options;
  options.batch_size = plan->batch_size;
  options.max_ranks = FLAGS_pipeline_ranks;
  if (!FLAGS_pipeline_activation_limit.empty()) {
    EMBER_ASSIGN_OR_RETURN(
        options.rank_activation_limit_bytes,
        ParseByteSize("pipeline_activation_limit", FLAGS_pipeline_activation_limit));
  }
  options.placement = pipeline::RankPlacementOf(cost);
  Result<pipeline::PipelineChoice> choice = pipeline::ChoosePipeline(*graph, cost, options);
  if (!choice.ok()) return choice.status().WithContext("--pipeline_ranks");
  const pipeline::RankPlacement& place = options.placement;
  std::printf(
      "pipeline parallelism of the dense graph (%zu nodes) over up to %d ranks, batch %lld, "
      "ranks over %d host(s) (%d threads each, shared by a host's ranks), loopback %.1f GB/s, "
      "network %.1f GB/s:\n%s",
      graph->nodes().size(), options.max_ranks, static_cast<long long>(options.batch_size),
      place.hosts, place.threads, place.loopback.bytes_per_second / 1e9,
      place.network.bytes_per_second / 1e9, pipeline::ToText(*choice).c_str());
  std::fflush(stdout);
  const pipeline::PipelineCandidate& chosen = choice->chosen;
  scheduler::PipelineParallelPrediction& p = plan->pipeline_parallel;
  p.ranks = chosen.shape.ranks;
  p.virtual_stages = chosen.shape.virtual_stages;
  p.micro_batches = chosen.shape.micro_batches;
  p.schedule = chosen.kind;
  p.step_seconds = chosen.step_seconds;
  p.samples_per_sec = chosen.samples_per_second;
  p.bubble_ratio = chosen.bubble_ratio;
  p.rank_activation_bytes = chosen.rank_activation_bytes;
  p.unpipelined_step_seconds = choice->unpipelined.step_seconds;
  return Status::OK();
}

Status Plan() {
  LogEffectiveFlags({"tools/plan_command.cc", "tools/plan_flags.cc", "tools/model_flags.cc"});
  if (!FLAGS_draw_schedule.empty()) return DrawSchedule();
  for (const std::string& path : {FLAGS_plan_out, FLAGS_dot_out}) {
    if (!path.empty()) EMBER_RETURN_IF_ERROR(CheckWritableDestination(path));
  }
  EMBER_ASSIGN_OR_RETURN(PlanInputs in, PlanInputsFromFlags());
  for (scheduler::Link& link : in.graph.links) {
    if (link.kind == scheduler::LinkKind::kNetwork) link.gbps *= FLAGS_network_scale;
  }
  const scheduler::CostModel cost = PlanCostModel(in);
  int evaluations = 0;
  EMBER_ASSIGN_OR_RETURN(scheduler::Plan plan,
                         scheduler::MakePlan(in.program, cost, in.planner, in.start, &evaluations));
  std::printf("%s\n%s", in.graph.Summary().c_str(), plan.ToText().c_str());
  std::fflush(stdout);
  if (FLAGS_pipeline_ranks > 0) EMBER_RETURN_IF_ERROR(PlanPipeline(cost, &plan));
  if (!FLAGS_dot_out.empty()) {
    EMBER_RETURN_IF_ERROR(WriteFileAtomic(FLAGS_dot_out, plan.ToDot(in.program)));
    LOG(INFO) << "wrote the placed graph to " << FLAGS_dot_out;
  }
  if (!FLAGS_plan_out.empty()) {
    EMBER_RETURN_IF_ERROR(WriteFileAtomic(FLAGS_plan_out, plan.ToJson()));
    LOG(INFO) << "wrote the plan to " << FLAGS_plan_out;
  }
  return Status::OK();
}

}  // namespace

int RunPlan() {
  const Status status = Plan();
  if (!status.ok()) {
    std::fprintf(stderr, "ember plan: %s\n", status.ToString().c_str());
    return ExitCodeFor(status);
  }
  return kExitOk;
}

}  // namespace ember::tools
