// DLRM (Naumov et al. 2019): a bottom MLP over the dense features, the dot
// interaction of its output with every slot's embedding, and a top MLP over
// [bottom output, interactions]. Without dense features there is no bottom
// MLP: the slots interact among themselves and the top MLP reads
// [embeddings, interactions].

#include "engine/model_registry.h"
#include "engine/models/layers.h"

namespace ember::engine::models {
namespace {

Status BuildDlrm(const ModelOptions& o, ops::Graph* g) {
  EMBER_ASSIGN_OR_RETURN(const Inputs in, AddInputs(g, o));
  const int dim = o.embedding_dim;
  int top_in = in.pooled;
  int64_t top_width = in.pooled_width;
  if (in.dense >= 0) {
    // The bottom MLP's output is one more feature vector, and the top MLP
    // reads it beside the pairwise dots: one dlrm_interaction node does the
    // concatenations and the dots in one pass.
    EMBER_ASSIGN_OR_RETURN(const int direct,
                           AddMlp(g, "bottom", in.dense, o.num_dense, WithOutput(o.params.WidthList(kBottomMlp), dim),
                                  /*last_relu=*/true));
    EMBER_ASSIGN_OR_RETURN(const std::vector<int> t,
                           g->AddNode("interaction", "dlrm_interaction", {direct, in.pooled}));
    top_in = t[0];
    const int64_t features = int64_t{o.num_slots} + 1;
    top_width = dim + features * (features - 1) / 2;
  } else if (o.num_slots >= 2) {
    EMBER_ASSIGN_OR_RETURN(const std::vector<int> pairs,
                           g->AddNode("interaction", "dot_interaction", {in.pooled},
                                      ops::OpAttrs().Set("features", o.num_slots)));
    EMBER_ASSIGN_OR_RETURN(const std::vector<int> t,
                           g->AddNode("top_in", "concat", {in.pooled, pairs[0]}));
    top_in = t[0];
    top_width += int64_t{o.num_slots} * (o.num_slots - 1) / 2;
  }
  EMBER_ASSIGN_OR_RETURN(const int logit, AddMlp(g, "top", top_in, top_width,
                                                 WithOutput(o.top_mlp, 1), /*last_relu=*/false));
  return g->MarkOutput(logit);
}

}  // namespace

ModelSpec DlrmSpec() {
  ModelSpec spec;
  spec.name = "dlrm";
  spec.description =
      "DLRM (Naumov et al. 2019): bottom MLP over the dense features, pairwise dots with the "
      "slots' embeddings, top MLP";
  spec.build = &BuildDlrm;
  spec.params = {BottomMlpParam()};
  return spec;
}

}  // namespace ember::engine::models
