// `ember plan`: plans a training job (the flags of `ember train`) on this
// host or on the machines of a cluster file, prints the placement, every
// stage's predicted time, the bottleneck, samples/s and what each device
// needs, and writes the placed graph as DOT and the plan as JSON. With
// --draw_schedule it draws a pipeline schedule instead (pipeline/
// schedule_drawing.h) and plans nothing.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "core/file.h"
#include "pipeline/schedule.h"
#include "pipeline/schedule_drawing.h"
#include "scheduler/cost_model.h"
#include "scheduler/planner.h"
#include "tools/commands.h"
#include "tools/plan_flags.h"

namespace {
bool IsPositiveDouble(const char*, double value) { return value > 0; }
bool IsPositiveInt(const char*, int32_t value) { return value > 0; }
}  // namespace

DEFINE_string(plan_out, "",
              "plan: write the plan as JSON here (with predicted_samples_per_sec); `ember train "
              "--plan=FILE` runs it. Empty: don't.");
DEFINE_string(dot_out, "plan.dot",
              "plan: write the placed task graph (ops clustered by device) as Graphviz DOT here; "
              "empty: don't.");
DEFINE_double(network_scale, 1.0,
              "plan: multiply the bandwidth of every network link of the resource graph by this "
              "(e.g. 0.1 to ask how the plan changes on a 10x slower network).");
DEFINE_validator(network_scale, &IsPositiveDouble);
DEFINE_string(draw_schedule, "",
              "plan: instead of planning, draw one step of the pipeline schedule of this kind "
              "(gpipe, 1f1b, interleaved) as text, with its predicted bubble, for equal chunks "
              "(backward = 2 x forward). Empty: plan the job.");
DEFINE_int32(schedule_ranks, 2, "plan --draw_schedule: pipeline ranks (p), >= 1.");
DEFINE_validator(schedule_ranks, &IsPositiveInt);
DEFINE_int32(schedule_virtual_stages, 1,
             "plan --draw_schedule: chunks (virtual stages) per rank (v), >= 1; > 1 needs "
             "--draw_schedule=interleaved or gpipe.");
DEFINE_validator(schedule_virtual_stages, &IsPositiveInt);
DEFINE_int32(schedule_micro_batches, 4,
             "plan --draw_schedule: micro-batches per step (m), >= 1; interleaved needs a "
             "multiple of --schedule_ranks.");
DEFINE_validator(schedule_micro_batches, &IsPositiveInt);

namespace ember::tools {
namespace {

// Draws --draw_schedule for the --schedule_* shape on stdout.
Status DrawSchedule() {
  const pipeline::ScheduleShape shape{FLAGS_schedule_ranks, FLAGS_schedule_virtual_stages,
                                      FLAGS_schedule_micro_batches};
  Result<pipeline::Schedule> schedule = pipeline::BuiltinSchedules().Make(FLAGS_draw_schedule, shape);
  if (!schedule.ok()) return schedule.status().WithContext("--draw_schedule");
  EMBER_ASSIGN_OR_RETURN(const std::string drawing, pipeline::DrawScheduleText(*schedule));
  std::printf("%s", drawing.c_str());
  std::fflush(stdout);
  return Status::OK();
}

Status Plan() {
  LogEffectiveFlags({"tools/plan_command.cc", "tools/plan_flags.cc"});
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
  EMBER_ASSIGN_OR_RETURN(const scheduler::Plan plan,
                         scheduler::MakePlan(in.program, cost, in.planner, in.start, &evaluations));
  std::printf("%s\n%s", in.graph.Summary().c_str(), plan.ToText().c_str());
  std::fflush(stdout);
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
