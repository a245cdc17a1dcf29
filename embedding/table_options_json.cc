// EmbeddingTableOptions as JSON (embedding/embedding_table.h).
#include <string>

#include "core/json.h"
#include "embedding/embedding_table.h"

namespace ember::embedding {
namespace {

using Policy = EmbeddingTableOptions::EvictionPolicy;
using Admission = AdmissionOptions::Kind;

const char* AdmissionName(Admission kind) {
  switch (kind) {
    case Admission::kNone: return "none";
    case Admission::kFrequency: return "frequency";
    case Admission::kProbability: return "probability";
  }
  return "none";
}

// The value of a name a Parse function reads, or a JsonFieldError.
template <typename T>
T Parsed(const Result<T>& parsed) {
  if (!parsed.ok()) throw JsonFieldError("", "is invalid: " + parsed.status().message());
  return *parsed;
}

// Reads the enum field `key` by name through `parse`.
template <typename T, typename Parse>
void GetNamed(JsonFields& f, const char* key, T* out, Parse parse) {
  std::string name;
  f.Get(key, &name);
  try {
    *out = Parsed(parse(name));
  } catch (const JsonFieldError& e) {
    throw e.Within(key);
  }
}

Result<Admission> ParseAdmission(const std::string& name) {
  for (Admission kind : {Admission::kNone, Admission::kFrequency, Admission::kProbability}) {
    if (name == AdmissionName(kind)) return kind;
  }
  return Status::InvalidArgument("admission \"", name,
                                 "\" is not known; use none, frequency or probability");
}

}  // namespace

// The nested options, found by nlohmann through argument-dependent lookup
// (which an unnamed namespace would hide).
void to_json(Json& j, const SparseOptimizerOptions& o) {
  j = Json{{"type", SparseOptimizerName(o.type)},
           {"learning_rate", o.learning_rate},
           {"initial_accumulator", o.initial_accumulator},
           {"epsilon", o.epsilon},
           {"beta1", o.beta1},
           {"beta2", o.beta2},
           {"ftrl_beta", o.ftrl_beta},
           {"l1", o.l1},
           {"l2", o.l2}};
}

void from_json(const Json& j, SparseOptimizerOptions& o) {
  JsonFields f(j);
  GetNamed(f, "type", &o.type, ParseSparseOptimizer);
  f.Get("learning_rate", &o.learning_rate);
  f.Get("initial_accumulator", &o.initial_accumulator);
  f.Get("epsilon", &o.epsilon);
  f.Get("beta1", &o.beta1);
  f.Get("beta2", &o.beta2);
  f.Get("ftrl_beta", &o.ftrl_beta);
  f.Get("l1", &o.l1);
  f.Get("l2", &o.l2);
  f.Done();
}

void to_json(Json& j, const AdmissionOptions& o) {
  j = Json{{"kind", AdmissionName(o.kind)},
           {"min_count", o.min_count},
           {"sketch_width", o.sketch_width},
           {"sketch_depth", o.sketch_depth},
           {"probability", o.probability}};
}

void from_json(const Json& j, AdmissionOptions& o) {
  JsonFields f(j);
  GetNamed(f, "kind", &o.kind, ParseAdmission);
  f.Get("min_count", &o.min_count);
  f.Get("sketch_width", &o.sketch_width);
  f.Get("sketch_depth", &o.sketch_depth);
  f.Get("probability", &o.probability);
  f.Done();
}

void to_json(Json& j, const EmbeddingTableOptions& o) {
  j = Json{{"dim", o.dim},
           {"num_shards", o.num_shards},
           {"init_scale", o.init_scale},
           {"seed", o.seed},
           {"optimizer", o.optimizer},
           {"weight_storage", o.weight_storage == WeightStorage::kBFloat16 ? "bf16" : "f32"},
           {"admission", o.admission},
           {"ttl_steps", o.ttl_steps},
           {"memory_budget_bytes", o.memory_budget_bytes},
           {"eviction_policy", o.eviction_policy == Policy::kLfu ? "lfu" : "lru"},
           {"disk_block_cache_bytes", o.disk_block_cache_bytes},
           {"disk_write_buffer_bytes", o.disk_write_buffer_bytes},
           {"prefetch_threads", o.prefetch_threads}};
}

void from_json(const Json& j, EmbeddingTableOptions& o) {
  JsonFields f(j);
  f.Get("dim", &o.dim);
  f.Get("num_shards", &o.num_shards);
  f.Get("init_scale", &o.init_scale);
  f.Get("seed", &o.seed);
  f.Get("optimizer", &o.optimizer);
  GetNamed(f, "weight_storage", &o.weight_storage, ParseWeightStorage);
  f.Get("admission", &o.admission);
  f.Get("ttl_steps", &o.ttl_steps);
  f.Get("memory_budget_bytes", &o.memory_budget_bytes);
  GetNamed(f, "eviction_policy", &o.eviction_policy, ParseEvictionPolicy);
  f.Get("disk_block_cache_bytes", &o.disk_block_cache_bytes);
  f.Get("disk_write_buffer_bytes", &o.disk_write_buffer_bytes);
  f.Get("prefetch_threads", &o.prefetch_threads);
  f.Done();
}

}  // namespace ember::embedding
