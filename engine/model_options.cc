#include "engine/model_options.h"

#include <charconv>
#include <string>

#include "core/json.h"
#include "engine/model_registry.h"

namespace ember::engine {
namespace {

// The fields of the options every model has, as to_json writes them.
constexpr const char* kSharedFields[] = {"name",    "num_dense",      "num_slots",
                                         "num_tasks", "embedding_dim", "top_mlp",
                                         "seed",    "precision",      "cpu_row_shards"};

// The parameters that manifests before bundle version 3 (and job records
// before that change) wrote for every model, whichever it was: skipped
// where the model does not declare them.
constexpr const char* kEveryModelFields[] = {
    "bottom_mlp",  "cross_layers", "cross_rank",          "num_experts",    "expert_mlp",
    "moe_top_k",   "moe_capacity_factor", "moe_expert_mlp", "moe_aux_loss_weight",
    "moe_gate_input"};

}  // namespace

Json SeedJson(uint64_t seed) { return std::to_string(seed); }

void GetSeed(JsonFields& fields, const char* key, uint64_t* seed) {
  const Json* value = fields.Raw(key);
  if (value == nullptr) throw JsonFieldError(key, "is missing");
  const std::string* text = value->get_ptr<const std::string*>();
  if (text == nullptr) throw JsonFieldError(key, "is not a string");
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), *seed);
  if (text->empty() || ec != std::errc() || end != text->data() + text->size()) {
    throw JsonFieldError(key, "is not an unsigned integer: " + *text);
  }
}

void to_json(Json& j, const ModelOptions& m) {
  j = Json{{"name", m.name},
           {"num_dense", m.num_dense},
           {"num_slots", m.num_slots},
           {"num_tasks", m.num_tasks},
           {"embedding_dim", m.embedding_dim},
           {"top_mlp", m.top_mlp}};
  // The declared parameters, defaults included, in declaration order; then
  // any given that the model does not declare (a name not registered), so
  // that nothing given is lost.
  Result<const ModelSpec*> spec = DefaultModelRegistry().Find(m.name);
  if (spec.ok()) {
    for (const ModelParamSpec& param : (*spec)->params) {
      const ModelParamValue* value = m.params.Find(param.name);
      j[param.name] = ModelParamJson(value != nullptr ? *value : param.default_value);
    }
  }
  for (const auto& [name, value] : m.params.values()) {
    if (!j.contains(name)) j[name] = ModelParamJson(value);
  }
  j["seed"] = SeedJson(m.seed);
  j["precision"] = ops::ComputePrecisionName(m.precision);
  j["cpu_row_shards"] = m.cpu_row_shards;
}

void from_json(const Json& j, ModelOptions& m) {
  JsonFields f(j);
  f.Get("name", &m.name);
  f.Get("num_dense", &m.num_dense);
  f.Get("num_slots", &m.num_slots);
  f.Get("num_tasks", &m.num_tasks);
  f.Get("embedding_dim", &m.embedding_dim);
  f.Get("top_mlp", &m.top_mlp);
  Result<const ModelSpec*> spec = DefaultModelRegistry().Find(m.name);
  if (!spec.ok()) throw JsonFieldError("name", spec.status().message());
  m.params = ModelParams();
  for (const ModelParamSpec& param : (*spec)->params) {
    const Json* value = f.Raw(param.name.c_str());
    const ModelParamKind kind = KindOf(param.default_value);
    if (value == nullptr || (value->is_null() && kind == ModelParamKind::kDouble)) {
      m.params.Set(param.name, param.default_value);
      continue;
    }
    try {
      m.params.Set(param.name, ModelParamFromJson(*value, kind));
    } catch (const JsonFieldError& e) {
      throw e.Within(param.name);
    }
  }
  for (const char* legacy : kEveryModelFields) f.Raw(legacy);
  GetSeed(f, "seed", &m.seed);
  std::string precision;
  f.Get("precision", &precision);
  Result<ops::ComputePrecision> parsed = ops::ParseComputePrecision(precision);
  if (!parsed.ok()) throw JsonFieldError("precision", parsed.status().message());
  m.precision = *parsed;
  f.Get("cpu_row_shards", &m.cpu_row_shards);
  f.Done();
}

bool IsSharedModelOption(std::string_view name) {
  for (const char* shared : kSharedFields) {
    if (name == shared) return true;
  }
  return false;
}

}  // namespace ember::engine
