// MMoE (Ma et al. 2018), multi-task: num_experts expert MLPs (expert_mlp)
// over x0 = [dense, embeddings]; per task a softmax gate over the experts (a
// linear layer of x0), the gate-weighted mixture of the experts' outputs, and
// a tower MLP (top_mlp) to the task's logit. The logits of the tasks are the
// output, task after task.

#include "engine/model_registry.h"
#include "engine/models/layers.h"

namespace ember::engine::models {
namespace {

constexpr char kNumExperts[] = "num_experts";
constexpr char kExpertMlp[] = "expert_mlp";

Status BuildMmoe(const ModelOptions& o, ops::Graph* g) {
  const int num_experts = o.params.Int(kNumExperts);
  const std::vector<int>& expert_mlp = o.params.WidthList(kExpertMlp);
  EMBER_ASSIGN_OR_RETURN(const Inputs in, AddInputs(g, o));
  int64_t d = 0;
  EMBER_ASSIGN_OR_RETURN(const int x0, DenseAndEmbeddings(g, in, &d));
  std::vector<int> experts;
  for (int e = 0; e < num_experts; ++e) {
    EMBER_ASSIGN_OR_RETURN(const int y, AddMlp(g, "expert." + std::to_string(e), x0, d,
                                               expert_mlp, /*last_relu=*/true));
    experts.push_back(y);
  }
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> stacked, g->AddNode("experts", "concat", experts));
  const int64_t hidden = expert_mlp.back();
  std::vector<int> logits;
  for (int t = 0; t < o.num_tasks; ++t) {
    const std::string task = "task." + std::to_string(t);
    EMBER_ASSIGN_OR_RETURN(const int gate_logits,
                           AddMlp(g, task + ".gate", x0, d, {num_experts}, false));
    EMBER_ASSIGN_OR_RETURN(const std::vector<int> gate,
                           g->AddNode(task + ".softmax", "softmax", {gate_logits}));
    EMBER_ASSIGN_OR_RETURN(const std::vector<int> mixed,
                           g->AddNode(task + ".mixture", "mixture", {gate[0], stacked[0]}));
    EMBER_ASSIGN_OR_RETURN(const int logit, AddMlp(g, task + ".tower", mixed[0], hidden,
                                                   WithOutput(o.top_mlp, 1), false));
    logits.push_back(logit);
  }
  if (logits.size() == 1) return g->MarkOutput(logits[0]);
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> all, g->AddNode("logits", "concat", logits));
  return g->MarkOutput(all[0]);
}

}  // namespace

ModelSpec MmoeSpec() {
  ModelSpec spec;
  spec.name = "mmoe";
  spec.description =
      "MMoE (Ma et al. 2018), multi-task: shared expert MLPs, per task a softmax gate over them "
      "and a tower MLP";
  spec.params = {
      {kNumExperts, 4, "experts shared by the tasks.", AtLeast(1)},
      {kExpertMlp, std::vector<int>{256, 64},
       "comma-separated widths of each expert's MLP; the tasks' gates mix the last.", Widths(1)},
  };
  spec.build = &BuildMmoe;
  spec.multi_task = true;
  spec.default_tasks = 2;
  return spec;
}

}  // namespace ember::engine::models
