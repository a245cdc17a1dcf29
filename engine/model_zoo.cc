#include "engine/model_zoo.h"

#include <algorithm>

namespace ember::engine {
namespace {

using ops::Graph;
using ops::Initializer;
using ops::OpAttrs;

// Adds fully connected layers from `x` (width `in`) through `widths`; hidden
// layers use ReLU, the last one `last_relu`. Returns the last output.
Result<int> AddMlp(Graph* g, const std::string& name, int x, int64_t in,
                   const std::vector<int>& widths, bool last_relu) {
  for (size_t l = 0; l < widths.size(); ++l) {
    const std::string layer = name + "." + std::to_string(l);
    const int64_t out = widths[l];
    EMBER_ASSIGN_OR_RETURN(const int w,
                           g->AddParameter(layer + ".weight", {out, in}, Initializer::kHeUniform,
                                           in));
    EMBER_ASSIGN_OR_RETURN(const int b, g->AddParameter(layer + ".bias", {out}, Initializer::kZeros));
    const bool relu = l + 1 < widths.size() || last_relu;
    EMBER_ASSIGN_OR_RETURN(const std::vector<int> y,
                           g->AddNode(layer, "fully_connected", {x, w, b},
                                      OpAttrs().Set("activation", relu ? 1 : 0)));
    x = y[0];
    in = out;
  }
  return x;
}

// `hidden` followed by a last width `output`, not repeated when the last
// hidden width already equals it.
std::vector<int> WithOutput(std::vector<int> hidden, int output) {
  if (hidden.empty() || hidden.back() != output) hidden.push_back(output);
  return hidden;
}

Status CheckOptions(const ModelOptions& o) {
  if (o.num_dense < 0) return Status::InvalidArgument("dense feature count ", o.num_dense, " < 0");
  if (o.num_slots < 1) return Status::InvalidArgument("the model needs at least one slot");
  if (o.embedding_dim < 1) {
    return Status::InvalidArgument("--embedding_dim must be positive, got ", o.embedding_dim);
  }
  for (int w : o.bottom_mlp) {
    if (w < 1) return Status::InvalidArgument("--bottom_mlp widths must be positive, got ", w);
  }
  for (int w : o.top_mlp) {
    if (w < 1) return Status::InvalidArgument("--top_mlp widths must be positive, got ", w);
  }
  if (o.cross_layers < 0 || o.cross_rank < 0) {
    return Status::InvalidArgument("--cross_layers and --cross_rank must be >= 0");
  }
  if (o.num_tasks < 1) return Status::InvalidArgument("the model needs at least one task");
  if (o.num_tasks > 1 && o.name != "mmoe") {
    return Status::InvalidArgument("the data has ", o.num_tasks, " labels per example, but --model=",
                                   o.name, " predicts one; use --model=mmoe for multi-task data");
  }
  if (o.name == "mmoe") {
    if (o.num_experts < 1) {
      return Status::InvalidArgument("--num_experts must be >= 1, got ", o.num_experts);
    }
    if (o.expert_mlp.empty()) return Status::InvalidArgument("--expert_mlp needs a width");
    for (int w : o.expert_mlp) {
      if (w < 1) return Status::InvalidArgument("--expert_mlp widths must be positive, got ", w);
    }
  }
  return Status::OK();
}

// The inputs every model reads: "dense" (when there are dense features) and
// "pooled".
struct Inputs {
  int dense = -1;
  int pooled = -1;
  int64_t pooled_width = 0;
};

Result<Inputs> AddInputs(Graph* g, const ModelOptions& o) {
  Inputs in;
  if (o.num_dense > 0) {
    EMBER_ASSIGN_OR_RETURN(in.dense, g->AddInput("dense", {o.num_dense}));
  }
  in.pooled_width = int64_t{o.num_slots} * o.embedding_dim;
  EMBER_ASSIGN_OR_RETURN(in.pooled, g->AddInput("pooled", {in.pooled_width}));
  return in;
}

// [dense, pooled], or pooled alone without dense features.
Result<int> DenseAndEmbeddings(Graph* g, const Inputs& in, int64_t* width) {
  if (in.dense < 0) {
    *width = in.pooled_width;
    return in.pooled;
  }
  *width = g->values()[in.dense].shape[0] + in.pooled_width;
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> x, g->AddNode("x0", "concat", {in.dense, in.pooled}));
  return x[0];
}

Status BuildDlrm(Graph* g, const ModelOptions& o) {
  EMBER_ASSIGN_OR_RETURN(const Inputs in, AddInputs(g, o));
  const int dim = o.embedding_dim;
  int top_in = in.pooled;
  int64_t top_width = in.pooled_width;
  if (in.dense >= 0) {
    // The bottom MLP's output is one more feature vector, and the top MLP
    // reads it beside the pairwise dots: one dlrm_interaction node does the
    // concatenations and the dots in one pass.
    EMBER_ASSIGN_OR_RETURN(const int direct,
                           AddMlp(g, "bottom", in.dense, o.num_dense, WithOutput(o.bottom_mlp, dim),
                                  /*last_relu=*/true));
    EMBER_ASSIGN_OR_RETURN(const std::vector<int> t,
                           g->AddNode("interaction", "dlrm_interaction", {direct, in.pooled}));
    top_in = t[0];
    const int64_t features = int64_t{o.num_slots} + 1;
    top_width = dim + features * (features - 1) / 2;
  } else if (o.num_slots >= 2) {
    EMBER_ASSIGN_OR_RETURN(const std::vector<int> pairs,
                           g->AddNode("interaction", "dot_interaction", {in.pooled},
                                      OpAttrs().Set("features", o.num_slots)));
    EMBER_ASSIGN_OR_RETURN(const std::vector<int> t,
                           g->AddNode("top_in", "concat", {in.pooled, pairs[0]}));
    top_in = t[0];
    top_width += int64_t{o.num_slots} * (o.num_slots - 1) / 2;
  }
  EMBER_ASSIGN_OR_RETURN(const int logit, AddMlp(g, "top", top_in, top_width,
                                                 WithOutput(o.top_mlp, 1), /*last_relu=*/false));
  return g->MarkOutput(logit);
}

Status BuildWideDeep(Graph* g, const ModelOptions& o) {
  EMBER_ASSIGN_OR_RETURN(const Inputs in, AddInputs(g, o));
  int64_t width = 0;
  EMBER_ASSIGN_OR_RETURN(const int x, DenseAndEmbeddings(g, in, &width));
  EMBER_ASSIGN_OR_RETURN(const int wide, AddMlp(g, "wide", x, width, {1}, false));
  EMBER_ASSIGN_OR_RETURN(const int deep,
                         AddMlp(g, "deep", x, width, WithOutput(o.top_mlp, 1), false));
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> logit, g->AddNode("logit", "add", {wide, deep}));
  return g->MarkOutput(logit[0]);
}

Status BuildDeepFm(Graph* g, const ModelOptions& o) {
  EMBER_ASSIGN_OR_RETURN(const Inputs in, AddInputs(g, o));
  int64_t width = 0;
  EMBER_ASSIGN_OR_RETURN(const int x, DenseAndEmbeddings(g, in, &width));
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> fm,
                         g->AddNode("fm", "fm_interaction", {in.pooled},
                                    OpAttrs().Set("features", o.num_slots)));
  EMBER_ASSIGN_OR_RETURN(const int linear, AddMlp(g, "linear", x, width, {1}, false));
  EMBER_ASSIGN_OR_RETURN(const int deep,
                         AddMlp(g, "deep", x, width, WithOutput(o.top_mlp, 1), false));
  // The FM term through a learned scale (a 1 x 1 layer, starting at 0), so
  // that the model weighs the sum of all pairs' dots against the deep part.
  EMBER_ASSIGN_OR_RETURN(const int scale, g->AddParameter("fm.scale", {1, 1}, Initializer::kZeros));
  EMBER_ASSIGN_OR_RETURN(const int shift, g->AddParameter("fm.bias", {1}, Initializer::kZeros));
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> fm_scaled,
                         g->AddNode("fm.scaled", "fully_connected", {fm[0], scale, shift}));
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> shallow,
                         g->AddNode("fm_linear", "add", {fm_scaled[0], linear}));
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> logit,
                         g->AddNode("logit", "add", {shallow[0], deep}));
  return g->MarkOutput(logit[0]);
}

Status BuildDcnV2(Graph* g, const ModelOptions& o) {
  EMBER_ASSIGN_OR_RETURN(const Inputs in, AddInputs(g, o));
  int64_t d = 0;
  EMBER_ASSIGN_OR_RETURN(const int x0, DenseAndEmbeddings(g, in, &d));
  int xl = x0;
  for (int l = 0; l < o.cross_layers; ++l) {
    const std::string layer = "cross." + std::to_string(l);
    EMBER_ASSIGN_OR_RETURN(const int b, g->AddParameter(layer + ".bias", {d}, Initializer::kZeros));
    std::vector<int> y;
    // Glorot-uniform weights (He uniform with fan_in = fan_in + fan_out).
    if (o.cross_rank > 0) {
      const int64_t r = o.cross_rank;
      EMBER_ASSIGN_OR_RETURN(const int u, g->AddParameter(layer + ".u", {d, r},
                                                          Initializer::kHeUniform, d + r));
      EMBER_ASSIGN_OR_RETURN(const int v, g->AddParameter(layer + ".v", {d, r},
                                                          Initializer::kHeUniform, d + r));
      EMBER_ASSIGN_OR_RETURN(y, g->AddNode(layer, "cross_layer_low_rank", {x0, xl, u, v, b}));
    } else {
      EMBER_ASSIGN_OR_RETURN(const int w, g->AddParameter(layer + ".weight", {d, d},
                                                          Initializer::kHeUniform, 2 * d));
      EMBER_ASSIGN_OR_RETURN(y, g->AddNode(layer, "cross_layer", {x0, xl, w, b}));
    }
    xl = y[0];
  }
  EMBER_ASSIGN_OR_RETURN(const int logit,
                         AddMlp(g, "deep", xl, d, WithOutput(o.top_mlp, 1), false));
  return g->MarkOutput(logit);
}

Status BuildMmoe(Graph* g, const ModelOptions& o) {
  EMBER_ASSIGN_OR_RETURN(const Inputs in, AddInputs(g, o));
  int64_t d = 0;
  EMBER_ASSIGN_OR_RETURN(const int x0, DenseAndEmbeddings(g, in, &d));
  std::vector<int> experts;
  for (int e = 0; e < o.num_experts; ++e) {
    EMBER_ASSIGN_OR_RETURN(const int y, AddMlp(g, "expert." + std::to_string(e), x0, d,
                                               o.expert_mlp, /*last_relu=*/true));
    experts.push_back(y);
  }
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> stacked, g->AddNode("experts", "concat", experts));
  const int64_t hidden = o.expert_mlp.back();
  std::vector<int> logits;
  for (int t = 0; t < o.num_tasks; ++t) {
    const std::string task = "task." + std::to_string(t);
    EMBER_ASSIGN_OR_RETURN(const int gate_logits,
                           AddMlp(g, task + ".gate", x0, d, {o.num_experts}, false));
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

std::vector<std::string> ModelNames() {
  return {"dlrm", "deepfm", "wide_deep", "dcn_v2", "mmoe"};
}

Status CheckModelName(const std::string& name) {
  const std::vector<std::string> models = ModelNames();
  if (std::find(models.begin(), models.end(), name) != models.end()) return Status::OK();
  std::string known;
  for (const std::string& model : models) known += (known.empty() ? "" : ", ") + model;
  return Status::InvalidArgument("--model=", name, " is not known; available: ", known);
}

Result<std::unique_ptr<ops::Graph>> BuildModelGraph(const ModelOptions& options,
                                                    const ops::OpRegistry& registry) {
  EMBER_RETURN_IF_ERROR(CheckModelName(options.name));
  EMBER_RETURN_IF_ERROR(CheckOptions(options));
  auto graph = std::make_unique<Graph>(&registry);
  if (options.name == "dlrm") {
    EMBER_RETURN_IF_ERROR(BuildDlrm(graph.get(), options));
  } else if (options.name == "wide_deep") {
    EMBER_RETURN_IF_ERROR(BuildWideDeep(graph.get(), options));
  } else if (options.name == "deepfm") {
    EMBER_RETURN_IF_ERROR(BuildDeepFm(graph.get(), options));
  } else if (options.name == "dcn_v2") {
    EMBER_RETURN_IF_ERROR(BuildDcnV2(graph.get(), options));
  } else if (options.name == "mmoe") {
    EMBER_RETURN_IF_ERROR(BuildMmoe(graph.get(), options));
  } else {
    return CheckModelName(options.name);
  }
  return graph;
}

}  // namespace ember::engine
