#pragma once

// The model zoo: each model's dense half as an op graph over the inputs
// "dense" [num_dense] (absent when num_dense is 0) and "pooled"
// [num_slots * dim] (the pooled embedding of every slot, slot after slot),
// with one output: the click logit [1], or for mmoe a logit per task
// [num_tasks].
//
//  * dlrm (Naumov et al. 2019): bottom MLP over the dense features, dot
//    interaction of its output with every slot's embedding, top MLP over
//    [bottom output, interactions]. Without dense features there is no
//    bottom MLP: the slots interact among themselves and the top MLP reads
//    [embeddings, interactions].
//  * deepfm (Guo et al. 2017): FM second-order term over the slots'
//    embeddings, through a learned scale (starting at 0), + a first-order
//    linear term over [dense, embeddings] + a deep MLP over [dense,
//    embeddings], summed into the logit. (The paper's first-order term has a
//    weight per id; here it is linear in the embeddings, which the sparse
//    optimizer trains per id. Without the scale, the unweighted sum of all
//    325 pairs of Criteo's 26 slots cost 0.025 AUC on planted data.)
//  * wide_deep (Cheng et al. 2016): a wide linear model over [dense,
//    embeddings] + a deep MLP over the same, summed. Cross-product features
//    for the wide part are for the data to provide as extra slots.
//  * dcn_v2 (Wang et al. 2021), stacked: cross_layers cross layers (full
//    rank, or rank cross_rank) over x0 = [dense, embeddings], then the MLP.
//  * mmoe (Ma et al. 2018), multi-task: num_experts expert MLPs (expert_mlp)
//    over x0 = [dense, embeddings]; per task a softmax gate over the experts
//    (a linear layer of x0), the gate-weighted mixture of the experts'
//    outputs, and a tower MLP (top_mlp) to the task's logit. The logits of
//    the tasks are the output, task after task.
// Only mmoe predicts more than one task; the others refuse num_tasks > 1.

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/model.h"
#include "ops/graph.h"

namespace ember::engine {

// The graph of `options.name`; InvalidArgument for an unknown name or bad
// sizes.
Result<std::unique_ptr<ops::Graph>> BuildModelGraph(const ModelOptions& options,
                                                    const ops::OpRegistry& registry);

// The models BuildModelGraph knows.
std::vector<std::string> ModelNames();

// InvalidArgument "--model=X is not known; available: ..." unless `name` is
// one of ModelNames().
Status CheckModelName(const std::string& name);

}  // namespace ember::engine
