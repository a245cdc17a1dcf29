#include "tools/model_flags.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>

#include "engine/model_registry.h"
#include "engine/model_zoo.h"

namespace ember::tools {
namespace {

// What help shows as the file that defines these flags (its FlagSources
// rows, tools/help.cc).
constexpr char kFlagFile[] = "tools/model_flags.cc";

// gflags keeps pointers to a flag's name, help and storage for the life of
// the process: they live here, never destroyed.
struct FlagStore {
  std::deque<std::string> texts;
  std::deque<int32_t> ints;
  std::deque<double> doubles;
  std::deque<std::string> strings;
};

FlagStore& Store() {
  static FlagStore* store = new FlagStore();
  return *store;
}

const char* Keep(std::string text) { return Store().texts.emplace_back(std::move(text)).c_str(); }

// The current value of --model, kept where DefineModelFlags put it.
std::string* model_flag = nullptr;

void DefineFlag(const std::string& name, const std::string& help,
                const engine::ModelParamValue& default_value) {
  gflags::CommandLineFlagInfo existing;
  CHECK(!gflags::GetCommandLineFlagInfo(name.c_str(), &existing))
      << "model parameter --" << name << " is also a flag of " << existing.filename;
  FlagStore& store = Store();
  const char* flag_name = Keep(name);
  const char* flag_help = Keep(help);
  switch (engine::KindOf(default_value)) {
    case engine::ModelParamKind::kInt: {
      int32_t& current = store.ints.emplace_back(std::get<int>(default_value));
      int32_t& initial = store.ints.emplace_back(std::get<int>(default_value));
      gflags::FlagRegisterer(flag_name, flag_help, kFlagFile, &current, &initial);
      break;
    }
    case engine::ModelParamKind::kDouble: {
      double& current = store.doubles.emplace_back(std::get<double>(default_value));
      double& initial = store.doubles.emplace_back(std::get<double>(default_value));
      gflags::FlagRegisterer(flag_name, flag_help, kFlagFile, &current, &initial);
      break;
    }
    case engine::ModelParamKind::kString:
    case engine::ModelParamKind::kWidths: {
      // Widths are text ("512,256,64"), parsed when the options are made.
      const std::string text = engine::FormatModelParamValue(default_value);
      std::string& current = store.strings.emplace_back(text);
      std::string& initial = store.strings.emplace_back(text);
      gflags::FlagRegisterer(flag_name, flag_help, kFlagFile, &current, &initial);
      break;
    }
  }
}

// "dlrm, deepfm, ..., mmoe (multi-task) or moe".
std::string ModelList() {
  std::string list;
  const std::vector<const engine::ModelSpec*> specs = engine::DefaultModelRegistry().Specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i > 0) list += i + 1 == specs.size() ? " or " : ", ";
    list += specs[i]->name + (specs[i]->multi_task ? " (multi-task)" : "");
  }
  return list;
}

// The models declaring each parameter, by name, and the parameters in
// registration and declaration order.
struct ParamUse {
  const engine::ModelParamSpec* first = nullptr;
  std::vector<const engine::ModelSpec*> models;
};

std::vector<std::pair<std::string, ParamUse>> ParamUses() {
  std::vector<std::pair<std::string, ParamUse>> uses;
  for (const engine::ModelSpec* spec : engine::DefaultModelRegistry().Specs()) {
    for (const engine::ModelParamSpec& param : spec->params) {
      auto it = std::find_if(uses.begin(), uses.end(),
                             [&](const auto& use) { return use.first == param.name; });
      if (it == uses.end()) it = uses.insert(uses.end(), {param.name, ParamUse{&param, {}}});
      it->second.models.push_back(spec);
    }
  }
  return uses;
}

// "--model=dlrm, moe: <help>" when the models say the same, else each
// model's words after its name.
std::string ParamHelp(const std::string& name, const ParamUse& use) {
  bool same = true;
  for (const engine::ModelSpec* spec : use.models) {
    same = same && spec->FindParam(name)->help == use.first->help;
  }
  std::string help;
  if (same) {
    for (const engine::ModelSpec* spec : use.models) {
      help += (help.empty() ? "--model=" : ", ") + spec->name;
    }
    return help + ": " + use.first->help;
  }
  for (const engine::ModelSpec* spec : use.models) {
    help += (help.empty() ? "--model=" : " --model=") + spec->name + ": " +
            spec->FindParam(name)->help;
  }
  return help;
}

}  // namespace

void DefineModelFlags() {
  static std::once_flag once;
  std::call_once(once, [] {
    FlagStore& store = Store();
    model_flag = &store.strings.emplace_back("dlrm");
    std::string& initial = store.strings.emplace_back("dlrm");
    gflags::FlagRegisterer(
        "model",
        Keep("Model to train: " + ModelList() +
             " (engine/models/<name>.cc says what each computes; the flags after --model "
             "in this topic are their own options)."),
        kFlagFile, model_flag, &initial);
    for (const auto& [name, use] : ParamUses()) {
      DefineFlag(name, ParamHelp(name, use), use.first->default_value);
    }
  });
}

std::string ModelFlag() {
  CHECK(model_flag != nullptr) << "DefineModelFlags() was not called";
  return *model_flag;
}

std::vector<std::string> ModelParamFlagNames() {
  std::vector<std::string> names;
  for (const auto& [name, use] : ParamUses()) names.push_back(name);
  return names;
}

Result<engine::ModelParams> ModelParamsFromFlags(const std::string& model) {
  DefineModelFlags();
  EMBER_ASSIGN_OR_RETURN(const engine::ModelSpec* spec, engine::DefaultModelRegistry().Find(model));
  engine::ModelParams params;
  for (const auto& [name, use] : ParamUses()) {
    gflags::CommandLineFlagInfo info = gflags::GetCommandLineFlagInfoOrDie(name.c_str());
    const engine::ModelParamSpec* param = spec->FindParam(name);
    if (param == nullptr) {
      if (!info.is_default) {
        LOG(WARNING) << "--" << name << " does not apply to --model=" << model << "; ignored";
      }
      continue;
    }
    EMBER_ASSIGN_OR_RETURN(
        engine::ModelParamValue value,
        engine::ParseModelParamValue(name, engine::KindOf(param->default_value),
                                     info.current_value));
    params.Set(name, std::move(value));
  }
  return params;
}

}  // namespace ember::tools
