#include "engine/model_zoo.h"

namespace ember::engine {
std::string MultiTaskModels(const ModelRegistry& models) {
  std::string names;
  for (const ModelSpec* spec : models.Specs()) {
    if (spec->multi_task) names += (names.empty() ? "--model=" : " or --model=") + spec->name;
  }
  return names;
}

namespace {

// The checks every model shares.
Status CheckSharedOptions(const ModelOptions& o, const ModelSpec& spec,
                          const ModelRegistry& models) {
  if (o.num_dense < 0) return Status::InvalidArgument("dense feature count ", o.num_dense, " < 0");
  if (o.num_slots < 1) return Status::InvalidArgument("the model needs at least one slot");
  if (o.embedding_dim < 1) {
    return Status::InvalidArgument("--embedding_dim must be positive, got ", o.embedding_dim);
  }
  for (int w : o.top_mlp) {
    if (w < 1) return Status::InvalidArgument("--top_mlp widths must be positive, got ", w);
  }
  if (o.num_tasks < 1) return Status::InvalidArgument("the model needs at least one task");
  if (o.num_tasks > 1 && !spec.multi_task) {
    const std::string multi_task = MultiTaskModels(models);
    if (multi_task.empty()) {
      return Status::InvalidArgument("the data has ", o.num_tasks,
                                     " labels per example, but --model=", o.name,
                                     " predicts one and no model predicts several");
    }
    return Status::InvalidArgument("the data has ", o.num_tasks,
                                   " labels per example, but --model=", o.name,
                                   " predicts one; use ", multi_task, " for multi-task data");
  }
  return Status::OK();
}

}  // namespace

Result<ModelOptions> ResolveModelOptions(const ModelOptions& options,
                                         const ModelRegistry& models) {
  EMBER_ASSIGN_OR_RETURN(const ModelSpec* spec, models.Find(options.name));
  for (const auto& [name, value] : options.params.values()) {
    if (spec->FindParam(name) != nullptr) continue;
    bool of_another_model = false;
    for (const ModelSpec* other : models.Specs()) {
      of_another_model = of_another_model || other->FindParam(name) != nullptr;
    }
    if (of_another_model) continue;  // As its flag is: ignored, and dropped.
    std::string own;
    for (const ModelParamSpec& param : spec->params) own += (own.empty() ? "--" : ", --") + param.name;
    return Status::InvalidArgument("--", name, " is not an option of any model (--model=",
                                   options.name, ": ",
                                   own.empty() ? "it has no options of its own"
                                               : "its own options are " + own,
                                   ")");
  }
  ModelOptions resolved = options;
  resolved.params = ModelParams();
  for (const ModelParamSpec& param : spec->params) {
    const ModelParamValue* given = options.params.Find(param.name);
    EMBER_ASSIGN_OR_RETURN(ModelParamValue value,
                           CheckModelParam(param, given != nullptr ? *given : param.default_value));
    resolved.params.Set(param.name, std::move(value));
  }
  return resolved;
}

Result<ModelOptions> ResolveModelOptions(const ModelOptions& options) {
  return ResolveModelOptions(options, DefaultModelRegistry());
}

Result<std::unique_ptr<ops::Graph>> BuildModelGraph(const ModelOptions& options,
                                                    const ops::OpRegistry& registry,
                                                    const ModelRegistry& models) {
  EMBER_ASSIGN_OR_RETURN(const ModelSpec* spec, models.Find(options.name));
  EMBER_RETURN_IF_ERROR(CheckSharedOptions(options, *spec, models));
  EMBER_ASSIGN_OR_RETURN(const ModelOptions resolved, ResolveModelOptions(options, models));
  if (spec->validate) EMBER_RETURN_IF_ERROR(spec->validate(resolved));
  auto graph = std::make_unique<ops::Graph>(&registry);
  EMBER_RETURN_IF_ERROR(spec->build(resolved, graph.get()));
  return graph;
}

Result<std::unique_ptr<ops::Graph>> BuildModelGraph(const ModelOptions& options,
                                                    const ops::OpRegistry& registry) {
  return BuildModelGraph(options, registry, DefaultModelRegistry());
}

std::vector<std::string> ModelNames() { return DefaultModelRegistry().Names(); }

Status CheckModelName(const std::string& name) {
  return DefaultModelRegistry().Find(name).status();
}

int DefaultTaskCount(const std::string& name) {
  Result<const ModelSpec*> spec = DefaultModelRegistry().Find(name);
  return spec.ok() ? (*spec)->default_tasks : 1;
}

}  // namespace ember::engine
