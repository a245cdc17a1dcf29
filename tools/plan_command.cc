// `ember plan`: plans a training job (the flags of `ember train`) on this
// host or on the machines of a cluster file, prints the placement, every
// stage's predicted time, the bottleneck, samples/s and what each device
// needs, and writes the placed graph as DOT and the plan as JSON.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "core/file.h"
#include "scheduler/cost_model.h"
#include "scheduler/planner.h"
#include "tools/commands.h"
#include "tools/plan_flags.h"

namespace {
bool IsPositiveDouble(const char*, double value) { return value > 0; }
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

namespace ember::tools {
namespace {

Status Plan() {
  LogEffectiveFlags({"tools/plan_command.cc", "tools/plan_flags.cc"});
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
