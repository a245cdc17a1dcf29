// MoE: DLRM (Naumov et al. 2019) with its top MLP's hidden layers replaced by
// a routed sparse mixture of experts (Shazeer et al. 2017; GShard, Lepikhin
// et al. 2020; Switch Transformer, Fedus et al. 2021). The bottom MLP and the
// dot interaction are DLRM's (without dense features the slots interact among
// themselves, as in dlrm.cc); their output t goes to
//
//   a gate: softmax(W_g u + b_g) over num_experts experts, u being t or, with
//     moe_gate_input "bottom", the bottom MLP's output (the dense features
//     alone: where those tell apart groups of examples that follow different
//     functions, the gate reads the groups without the interaction's pairs
//     in the way), with the auxiliary
//     load-balancing loss of GShard/Switch (weight moe_aux_loss_weight) on
//     its probabilities;
//   top-k routing (moe_top_k): each example goes to its k most probable
//     experts, each expert taking at most ceil(moe_capacity_factor * k * B /
//     num_experts) examples of a batch of B, in example order; a choice past
//     that is dropped (its share of the output is zero) and counted;
//   the experts: num_experts MLPs of widths moe_expert_mlp (empty: top_mlp's),
//     ReLU after every layer as in DLRM's top MLP, each applied to the
//     examples routed to it;
//   the combination: the sum of an example's experts' outputs weighted by the
//     gate (with k = 1 its probability, as Switch; with k > 1 the top-k
//     probabilities renormalised to sum to 1, as GShard);
//   and a linear layer to the logit.
//
// Each example thus pays for k experts (times the capacity factor's slack),
// whatever num_experts is: parameters grow with the experts, the FLOPs per
// example do not. The layer's graph: ops/moe_expert_ops.h.

#include <cmath>
#include <limits>
#include <string>

#include "engine/model_registry.h"
#include "engine/models/layers.h"

namespace ember::engine::models {
namespace {

// The capacity factor's bound: slots per example (ceil(factor * k)) stay
// small, and the capacity of any batch stays well inside a routing value.
constexpr double kMaxCapacityFactor = 64.0;
// How much smaller than He's the initial weights of a gate reading the
// interaction are.
constexpr int64_t kGateInitShrink = 10;

constexpr char kNumExperts[] = "num_experts";
constexpr char kTopK[] = "moe_top_k";
constexpr char kCapacityFactor[] = "moe_capacity_factor";
constexpr char kExpertMlp[] = "moe_expert_mlp";
constexpr char kAuxLossWeight[] = "moe_aux_loss_weight";
constexpr char kGateInput[] = "moe_gate_input";

std::vector<int> ExpertWidths(const ModelOptions& o) {
  const std::vector<int>& widths = o.params.WidthList(kExpertMlp);
  return widths.empty() ? o.top_mlp : widths;
}

bool GateReadsBottom(const ModelOptions& o) { return o.params.String(kGateInput) == "bottom"; }

// The checks across parameters (each parameter's own are its check).
Status CheckMoe(const ModelOptions& o) {
  if (o.params.Int(kTopK) > o.params.Int(kNumExperts)) {
    return Status::InvalidArgument("--moe_top_k=", o.params.Int(kTopK),
                                   " must be in [1, --num_experts=", o.params.Int(kNumExperts),
                                   "]");
  }
  if (GateReadsBottom(o) && o.num_dense < 1) {
    return Status::InvalidArgument(
        "--moe_gate_input=bottom needs dense features (the bottom MLP's input); there are none");
  }
  if (ExpertWidths(o).empty()) {
    return Status::InvalidArgument(
        "--model=moe needs expert widths: set --moe_expert_mlp (or --top_mlp, its default)");
  }
  return Status::OK();
}

// DLRM's bottom MLP and interaction (dlrm.cc): the value the top MLP would
// read, and its width; and the bottom MLP's output in `*bottom` (-1 without
// dense features), of width embedding_dim.
Result<int> AddDlrmFront(const ModelOptions& o, ops::Graph* g, int64_t* width, int* bottom) {
  *bottom = -1;
  EMBER_ASSIGN_OR_RETURN(const Inputs in, AddInputs(g, o));
  const int dim = o.embedding_dim;
  *width = in.pooled_width;
  if (in.dense >= 0) {
    EMBER_ASSIGN_OR_RETURN(const int direct,
                           AddMlp(g, "bottom", in.dense, o.num_dense, WithOutput(o.params.WidthList(kBottomMlp), dim),
                                  /*last_relu=*/true));
    *bottom = direct;
    EMBER_ASSIGN_OR_RETURN(const std::vector<int> t,
                           g->AddNode("interaction", "dlrm_interaction", {direct, in.pooled}));
    const int64_t features = int64_t{o.num_slots} + 1;
    *width = dim + features * (features - 1) / 2;
    return t[0];
  }
  if (o.num_slots < 2) return in.pooled;
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> pairs,
                         g->AddNode("interaction", "dot_interaction", {in.pooled},
                                    ops::OpAttrs().Set("features", o.num_slots)));
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> t,
                         g->AddNode("top_in", "concat", {in.pooled, pairs[0]}));
  *width += int64_t{o.num_slots} * (o.num_slots - 1) / 2;
  return t[0];
}

// The MoE block over `x` (width `in`): the gate over `u` (width
// `gate_in`), balance, route, dispatch, the experts, combine. Returns the
// combined output, of the experts' last width.
Result<int> AddMoeBlock(const ModelOptions& o, ops::Graph* g, int x, int64_t in, int u,
                        int64_t gate_in) {
  const int64_t experts = o.params.Int(kNumExperts), k = o.params.Int(kTopK);
  const double capacity_factor = o.params.Double(kCapacityFactor);
  const int64_t slots = static_cast<int64_t>(std::ceil(capacity_factor * k));
  ops::OpAttrs routing;
  routing.Set("experts", experts).Set("k", k).Set("slots", slots)
      .Set("capacity_factor", capacity_factor);
  // A gate reading the interaction starts near uniform (Switch's reduced
  // initialisation scale): He uniform for a fan-in kGateInitShrink^2 times
  // the input's, so weights kGateInitShrink times smaller. At He's own scale
  // the wide input makes the first softmaxes near one-hot, one expert takes
  // every example and most are dropped before the balance loss can spread
  // them. The bottom MLP's output is narrow (embedding_dim): He's scale
  // gives the experts different examples from the start, and the gate
  // settled on the clusters more reliably so (tests/engine/moe_test.cc).
  const int64_t shrink = GateReadsBottom(o) ? 1 : kGateInitShrink;
  EMBER_ASSIGN_OR_RETURN(const int wg,
                         g->AddParameter("moe.gate.weight", {experts, gate_in},
                                         ops::Initializer::kHeUniform,
                                         gate_in * shrink * shrink));
  EMBER_ASSIGN_OR_RETURN(const int bg, g->AddParameter("moe.gate.bias", {experts},
                                                       ops::Initializer::kZeros));
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> gate_out,
                         g->AddNode("moe.gate", "fully_connected", {u, wg, bg}));
  const int gate_logits = gate_out[0];
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> probs,
                         g->AddNode("moe.softmax", "softmax", {gate_logits}));
  EMBER_ASSIGN_OR_RETURN(
      const std::vector<int> balanced,
      g->AddNode("moe.balance", "moe_balance", {probs[0]},
                 ops::OpAttrs().Set("weight", o.params.Double(kAuxLossWeight))));
  ops::OpAttrs route = routing;
  route.Set("normalize", k > 1 ? 1 : 0);
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> gate,
                         g->AddNode("moe.route", "moe_route", {balanced[0]}, route));
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> buffers,
                         g->AddNode("moe.dispatch", "moe_dispatch", {x, gate[1]}, routing));
  int h = buffers[0];
  int64_t width = in;
  const std::vector<int> widths = ExpertWidths(o);
  for (size_t l = 0; l < widths.size(); ++l) {
    const std::string layer = "moe.expert." + std::to_string(l);
    const int64_t out = widths[l];
    // He uniform over each expert's fan-in, as AddMlp does for one layer.
    EMBER_ASSIGN_OR_RETURN(const int w, g->AddParameter(layer + ".weight", {experts, out, width},
                                                        ops::Initializer::kHeUniform, width));
    EMBER_ASSIGN_OR_RETURN(const int b, g->AddParameter(layer + ".bias", {experts, out},
                                                        ops::Initializer::kZeros));
    ops::OpAttrs fc = routing;
    fc.Set("activation", 1);
    // The routing too: an inference reads each row's expert from it.
    EMBER_ASSIGN_OR_RETURN(const std::vector<int> y,
                           g->AddNode(layer, "moe_expert_fc", {h, w, b, gate[1]}, fc));
    h = y[0];
    width = out;
  }
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> combined,
                         g->AddNode("moe.combine", "moe_combine", {h, gate[0], gate[1]}, routing));
  return combined[0];
}

Status BuildMoe(const ModelOptions& o, ops::Graph* g) {
  int64_t width = 0;
  int bottom = -1;
  EMBER_ASSIGN_OR_RETURN(const int t, AddDlrmFront(o, g, &width, &bottom));
  const bool from_bottom = GateReadsBottom(o);
  EMBER_ASSIGN_OR_RETURN(const int mixed,
                         AddMoeBlock(o, g, t, width, from_bottom ? bottom : t,
                                     from_bottom ? o.embedding_dim : width));
  EMBER_ASSIGN_OR_RETURN(const int logit, AddMlp(g, "top.out", mixed, ExpertWidths(o).back(), {1},
                                                 /*last_relu=*/false));
  return g->MarkOutput(logit);
}

}  // namespace

ModelSpec MoeSpec() {
  ModelSpec spec;
  spec.name = "moe";
  spec.description =
      "MoE: DLRM with its top MLP's hidden layers replaced by a routed sparse mixture of expert "
      "MLPs (top-k gate with a capacity factor and a load-balancing loss; GShard, Switch)";
  spec.validate = &CheckMoe;
  spec.build = &BuildMoe;
  spec.params = {
      BottomMlpParam(),
      {kNumExperts, 4, "experts the examples are routed among.", AtLeast(1)},
      {kTopK, 2, "experts each example is routed to (the gate's top k), 1 to --num_experts.",
       AtLeast(1)},
      {kCapacityFactor, 1.25,
       "an expert's buffer holds ceil(factor * k * batch / experts) examples per step; choices "
       "past it are dropped (counted). > 0, at most 64.",
       InRange(0.0, kMaxCapacityFactor, /*low_open=*/true)},
      {kExpertMlp, std::vector<int>{},
       "comma-separated widths of each expert's MLP (they replace the top MLP's hidden "
       "layers); empty: those of --top_mlp.",
       Widths(0)},
      {kAuxLossWeight, 0.01,
       "weight of the auxiliary load-balancing loss (GShard/Switch: experts x sum of dispatch "
       "fraction x mean gate probability, 1 when uniform); 0 turns it off.",
       InRange(0.0, std::numeric_limits<double>::max(), /*low_open=*/false)},
      {kGateInput, std::string("interaction"),
       "what the gate reads: interaction (the interaction's output, which the experts read "
       "too) or bottom (the bottom MLP's output over the dense features alone; needs dense "
       "features).",
       OneOf({"interaction", "bottom"})},
  };
  return spec;
}

}  // namespace ember::engine::models
