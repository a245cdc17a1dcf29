#include "engine/model_registry.h"

#include <glog/logging.h>

#include <utility>

#include "engine/models/builtin.h"

namespace ember::engine {
namespace {

ModelRegistry& MutableDefaultRegistry() {
  // Never destroyed: specs handed out stay valid until the process exits.
  static ModelRegistry* registry = [] {
    auto* r = new ModelRegistry();
    const Status status = models::RegisterBuiltinModels(r);
    CHECK(status.ok()) << "registering the built-in models: " << status;
    return r;
  }();
  return *registry;
}

}  // namespace

const ModelParamSpec* ModelSpec::FindParam(std::string_view param) const {
  for (const ModelParamSpec& p : params) {
    if (p.name == param) return &p;
  }
  return nullptr;
}

Status ModelRegistry::Register(ModelSpec spec) {
  if (spec.name.empty()) return Status::InvalidArgument("a model needs a name");
  if (!spec.build) return Status::InvalidArgument("model ", spec.name, " has no build function");
  if (spec.default_tasks < 1 || (spec.default_tasks > 1 && !spec.multi_task)) {
    return Status::InvalidArgument("model ", spec.name, " defaults to ", spec.default_tasks,
                                   " tasks but ",
                                   spec.multi_task ? "needs at least one" : "predicts one");
  }
  for (size_t i = 0; i < spec.params.size(); ++i) {
    const ModelParamSpec& param = spec.params[i];
    if (param.name.empty()) return Status::InvalidArgument("model ", spec.name, ": a parameter needs a name");
    if (IsSharedModelOption(param.name)) {
      return Status::InvalidArgument("model ", spec.name, ": parameter ", param.name,
                                     " is an option every model has");
    }
    if (spec.FindParam(param.name) != &param) {
      return Status::InvalidArgument("model ", spec.name, " declares ", param.name, " twice");
    }
    const Result<ModelParamValue> checked = CheckModelParam(param, param.default_value);
    if (!checked.ok()) {
      return Status::InvalidArgument("model ", spec.name, ": the default of ",
                                     checked.status().message());
    }
  }
  MutexLock lock(mu_);
  for (const auto& known : specs_) {
    if (known->name == spec.name) {
      return Status::AlreadyExists("model ", spec.name, " is already registered");
    }
    for (const ModelParamSpec& param : spec.params) {
      const ModelParamSpec* other = known->FindParam(param.name);
      if (other != nullptr && other->default_value != param.default_value) {
        return Status::InvalidArgument(
            "model ", spec.name, " declares --", param.name, " as ",
            ModelParamKindName(KindOf(param.default_value)), " defaulting to ",
            FormatModelParamValue(param.default_value), " but model ", known->name, " as ",
            ModelParamKindName(KindOf(other->default_value)), " defaulting to ",
            FormatModelParamValue(other->default_value), ": models share a parameter's flag");
      }
    }
  }
  specs_.push_back(std::make_unique<const ModelSpec>(std::move(spec)));
  return Status::OK();
}

Result<const ModelSpec*> ModelRegistry::Find(const std::string& name) const {
  std::string known;
  {
    MutexLock lock(mu_);
    for (const auto& spec : specs_) {
      if (spec->name == name) return spec.get();
      known += (known.empty() ? "" : ", ") + spec->name;
    }
  }
  return Status::InvalidArgument("--model=", name, " is not known; available: ", known);
}

std::vector<std::string> ModelRegistry::Names() const {
  std::vector<std::string> names;
  MutexLock lock(mu_);
  for (const auto& spec : specs_) names.push_back(spec->name);
  return names;
}

std::vector<const ModelSpec*> ModelRegistry::Specs() const {
  std::vector<const ModelSpec*> specs;
  MutexLock lock(mu_);
  for (const auto& spec : specs_) specs.push_back(spec.get());
  return specs;
}

const ModelRegistry& DefaultModelRegistry() { return MutableDefaultRegistry(); }

Status RegisterModel(ModelSpec spec) { return MutableDefaultRegistry().Register(std::move(spec)); }

}  // namespace ember::engine
