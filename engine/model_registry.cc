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

std::string JoinWidths(const std::vector<int>& widths) {
  std::string out;
  for (int w : widths) {
    if (!out.empty()) out += ',';
    out += std::to_string(w);
  }
  return out;
}

Status ModelRegistry::Register(ModelSpec spec) {
  if (spec.name.empty()) return Status::InvalidArgument("a model needs a name");
  if (!spec.build) return Status::InvalidArgument("model ", spec.name, " has no build function");
  if (spec.default_tasks < 1 || (spec.default_tasks > 1 && !spec.multi_task)) {
    return Status::InvalidArgument("model ", spec.name, " defaults to ", spec.default_tasks,
                                   " tasks but ",
                                   spec.multi_task ? "needs at least one" : "predicts one");
  }
  MutexLock lock(mu_);
  for (const auto& known : specs_) {
    if (known->name == spec.name) {
      return Status::AlreadyExists("model ", spec.name, " is already registered");
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
