#pragma once

// The model registry: what the engine and the tools know about each model of
// the zoo, by name. A model is one file of engine/models/ that returns its
// ModelSpec, added by one call (engine/models/builtin.cc for the built-in
// ones); nothing outside its file names it. Registration is explicit, never
// by static initialisers (which linkers drop from static libraries).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "engine/model_options.h"
#include "engine/model_params.h"
#include "ops/graph.h"

namespace ember::engine {

// One model of the zoo.
struct ModelSpec {
  // What --model= selects: lowercase, e.g. "dlrm".
  std::string name;
  // One line for help texts: what the model computes, with its paper.
  std::string description;
  // The model's own hyper-parameters, in the order help texts and manifests
  // list them (engine/model_params.h): each gets a flag, a manifest field
  // and a default without any other file naming it.
  std::vector<ModelParamSpec> params;
  // InvalidArgument naming the flags for options the model cannot build
  // together (moe's --moe_top_k > --num_experts). Runs after the checks
  // every model shares (engine/model_zoo.h: sizes, widths, tasks) and each
  // parameter's own, so it may assume those. Null: nothing beyond them.
  std::function<Status(const ModelOptions&)> validate;
  // Adds the model's inputs ("dense" when num_dense > 0, then "pooled"), its
  // parameters, nodes and outputs to the empty `graph` (the layout
  // engine/model_zoo.h describes). Runs after validate; errors are the
  // graph's. Required.
  std::function<Status(const ModelOptions&, ops::Graph* graph)> build;
  // Whether the model predicts several tasks (a logit per task); a model
  // that does not refuses num_tasks > 1.
  bool multi_task = false;
  // Tasks (labels per example) of data generated for the model when the
  // user names none. REQUIRES: 1, or more for a multi-task model.
  int default_tasks = 1;

  // The declaration of parameter `name`; nullptr when the model has none.
  const ModelParamSpec* FindParam(std::string_view name) const;
};

// Thread safety: every method may be called concurrently; a spec, once
// registered, stays at its address for the registry's lifetime. Register
// the models before anything looks them up, so that every caller sees the
// same set.
class ModelRegistry {
 public:
  ModelRegistry() = default;
  ModelRegistry(const ModelRegistry&) = delete;
  ModelRegistry& operator=(const ModelRegistry&) = delete;

  // InvalidArgument for a spec without a name or a build function, with a
  // default_tasks that its multi_task forbids, or with a parameter that is
  // unnamed, declared twice, named like an option every model has
  // (ModelOptions: "num_slots", ...), of a default its check refuses, or of
  // another kind or default than a registered model's parameter of the same
  // name (one flag serves both); AlreadyExists "model X is already
  // registered" for a second model of the same name.
  Status Register(ModelSpec spec);
  // The spec of `name`; InvalidArgument "--model=X is not known; available:
  // a, b, ..." (the names in registration order) when there is none.
  Result<const ModelSpec*> Find(const std::string& name) const;
  // The registered names, in registration order.
  std::vector<std::string> Names() const;
  // The specs, in registration order.
  std::vector<const ModelSpec*> Specs() const;

 private:
  mutable Mutex mu_;
  std::vector<std::unique_ptr<const ModelSpec>> specs_ GUARDED_BY(mu_);
};

// The registry of this process: the built-in models (RegisterBuiltinModels,
// engine/models/builtin.h), registered on first use, then any added with
// RegisterModel. The entry points of engine/model_zoo.h look models up here.
const ModelRegistry& DefaultModelRegistry();

// Adds a model to DefaultModelRegistry(), e.g. from a program's main before
// it parses its flags; the errors of ModelRegistry::Register.
Status RegisterModel(ModelSpec spec);

}  // namespace ember::engine
