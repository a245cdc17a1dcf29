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
#include "ops/graph.h"

namespace ember::engine {

// One model of the zoo.
struct ModelSpec {
  // What --model= selects: lowercase, e.g. "dlrm".
  std::string name;
  // One line for help texts: what the model computes, with its paper.
  std::string description;
  // InvalidArgument naming the flag for options of this model's own that it
  // cannot build (mmoe's experts). Runs after the checks every model shares
  // (engine/model_zoo.h: sizes, widths, tasks), so it may assume those.
  // Null: nothing beyond them.
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
  // The options of the model's own that its dense step's time depends on,
  // as text for DenseStepDescriptor (engine/dense_step_timing.h), each
  // field as " name=value": " bottom=512,256,64" for dlrm. Null: none.
  std::function<std::string(const ModelOptions&)> describe;
};

// "512,256,64": MLP widths as descriptors and messages write them.
std::string JoinWidths(const std::vector<int>& widths);

// Thread safety: every method may be called concurrently; a spec, once
// registered, stays at its address for the registry's lifetime. Register
// the models before anything looks them up, so that every caller sees the
// same set.
class ModelRegistry {
 public:
  ModelRegistry() = default;
  ModelRegistry(const ModelRegistry&) = delete;
  ModelRegistry& operator=(const ModelRegistry&) = delete;

  // InvalidArgument for a spec without a name or a build function, or with a
  // default_tasks that its multi_task forbids; AlreadyExists "model X is
  // already registered" for a second model of the same name.
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
