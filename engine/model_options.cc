#include "engine/model_options.h"

#include <charconv>
#include <string>

#include "core/json.h"

namespace ember::engine {
namespace {

// A number that a manifest may hold as null (the older writer wrote a
// non-finite number so): null keeps `out`.
void GetNumberOrNull(JsonFields& fields, const char* key, double* out) {
  const Json* value = fields.Raw(key);
  if (value == nullptr) throw JsonFieldError(key, "is missing");
  if (!value->is_null()) fields.Get(key, out);
}

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
           {"bottom_mlp", m.bottom_mlp},
           {"top_mlp", m.top_mlp},
           {"cross_layers", m.cross_layers},
           {"cross_rank", m.cross_rank},
           {"num_experts", m.num_experts},
           {"expert_mlp", m.expert_mlp},
           {"moe_top_k", m.moe_top_k},
           {"moe_capacity_factor", m.moe_capacity_factor},
           {"moe_expert_mlp", m.moe_expert_mlp},
           {"moe_aux_loss_weight", m.moe_aux_loss_weight},
           {"moe_gate_input", m.moe_gate_input},
           {"seed", SeedJson(m.seed)},
           {"precision", ops::ComputePrecisionName(m.precision)},
           {"cpu_row_shards", m.cpu_row_shards}};
}

void from_json(const Json& j, ModelOptions& m) {
  JsonFields f(j);
  f.Get("name", &m.name);
  f.Get("num_dense", &m.num_dense);
  f.Get("num_slots", &m.num_slots);
  f.Get("num_tasks", &m.num_tasks);
  f.Get("embedding_dim", &m.embedding_dim);
  f.Get("bottom_mlp", &m.bottom_mlp);
  f.Get("top_mlp", &m.top_mlp);
  f.Get("cross_layers", &m.cross_layers);
  f.Get("cross_rank", &m.cross_rank);
  f.Get("num_experts", &m.num_experts);
  f.Get("expert_mlp", &m.expert_mlp);
  f.Get("moe_top_k", &m.moe_top_k);
  GetNumberOrNull(f, "moe_capacity_factor", &m.moe_capacity_factor);
  f.Get("moe_expert_mlp", &m.moe_expert_mlp);
  GetNumberOrNull(f, "moe_aux_loss_weight", &m.moe_aux_loss_weight);
  f.Optional("moe_gate_input", &m.moe_gate_input);
  GetSeed(f, "seed", &m.seed);
  std::string precision;
  f.Get("precision", &precision);
  Result<ops::ComputePrecision> parsed = ops::ParseComputePrecision(precision);
  if (!parsed.ok()) throw JsonFieldError("precision", parsed.status().message());
  m.precision = *parsed;
  f.Get("cpu_row_shards", &m.cpu_row_shards);
  f.Done();
}

}  // namespace ember::engine
