#pragma once

// The model zoo's entry points: each model's dense half as an op graph over
// the inputs "dense" [num_dense] (absent when num_dense is 0) and "pooled"
// [num_slots * dim] (the pooled embedding of every slot, slot after slot),
// with one output: the click logit [1], or for a multi-task model a logit per
// task [num_tasks], task after task.
//
// The models themselves live in engine/models/, one file each (dlrm, deepfm,
// wide_deep, dcn_v2, mmoe; each file says what its model computes), and are
// looked up by name in DefaultModelRegistry() (engine/model_registry.h).
// Only multi-task models (mmoe) take num_tasks > 1.

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/model_options.h"
#include "engine/model_registry.h"
#include "ops/graph.h"
#include "ops/op_registry.h"

namespace ember::engine {

// `options` with every parameter its model declares (ModelSpec::params) and
// no other: those given, checked, and the defaults of the others, in
// declaration order; a given parameter of another model is dropped (as its
// flag is ignored: options and flagfiles may serve several models).
// InvalidArgument for an unknown model (as CheckModelName), a parameter no
// model declares ("--bottom_mpl is not an option of any model (--model=dlrm:
// its own options are --bottom_mlp)"), or a value of another kind or that
// fails its check (naming its flag).
Result<ModelOptions> ResolveModelOptions(const ModelOptions& options,
                                         const ModelRegistry& models);
Result<ModelOptions> ResolveModelOptions(const ModelOptions& options);

// The graph of `options.name` from DefaultModelRegistry(), built from the
// resolved options. InvalidArgument for an unknown name or bad options:
// first the checks every model shares (dense features >= 0, a slot, a
// positive --embedding_dim, positive --top_mlp widths, a task, and one task
// unless the model is multi-task), then ResolveModelOptions' (each
// parameter's own), then the model's (ModelSpec::validate).
Result<std::unique_ptr<ops::Graph>> BuildModelGraph(const ModelOptions& options,
                                                    const ops::OpRegistry& registry);
// The same with the models of `models`.
Result<std::unique_ptr<ops::Graph>> BuildModelGraph(const ModelOptions& options,
                                                    const ops::OpRegistry& registry,
                                                    const ModelRegistry& models);

// The models BuildModelGraph knows, in registration order.
std::vector<std::string> ModelNames();

// InvalidArgument "--model=X is not known; available: ..." unless `name` is
// one of ModelNames().
Status CheckModelName(const std::string& name);

// "--model=a or --model=b": the models of `models` that predict several
// tasks; empty when none does.
std::string MultiTaskModels(const ModelRegistry& models = DefaultModelRegistry());

// The tasks of data generated for model `name` when the user names none
// (ModelSpec::default_tasks): 2 for mmoe, 1 for the others and for a name
// that is not known (whose error comes when the model is built).
int DefaultTaskCount(const std::string& name);

}  // namespace ember::engine
