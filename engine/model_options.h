#pragma once

// What the model zoo (engine/model_zoo.h) builds a model's dense half from:
// its name, the shapes of its inputs and its hyperparameters, and where the
// dense half runs.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "core/json_fwd.h"
#include "engine/model_params.h"
#include "ops/precision.h"

namespace ember {
class JsonFields;
}  // namespace ember

namespace ember::engine {

struct ModelOptions {
  // dlrm, deepfm, wide_deep, dcn_v2, mmoe or moe (see engine/model_zoo.h).
  std::string name = "dlrm";
  // Dense features; 0 for data without any (libSVM, libFFM).
  int num_dense = 13;
  int num_slots = 26;
  int embedding_dim = 16;
  // Widths of the MLP before the final logit (DLRM's top MLP, the deep part
  // of the others).
  std::vector<int> top_mlp = {512, 256};
  // Labels (tasks) per example; more than one needs a multi-task model.
  int num_tasks = 1;
  // The model's own hyper-parameters (ModelSpec::params of `name`: dlrm's
  // bottom_mlp, dcn_v2's cross_layers, ...); one not given takes its
  // declared default when the model is built.
  ModelParams params;
  uint64_t seed = 1;
  // Where the dense half runs: its parameters, gradients, optimizer state and
  // activations live there. The same seed gives the same initial parameters
  // on every device. Default: the CPU.
  Device device = Device::Cpu();
  // The GEMM arithmetic of the fully connected layers on a CUDA device
  // (ops/precision.h: 16-bit inputs, f32 accumulation and f32 master weights);
  // the CPU computes in f32 only.
  ops::ComputePrecision precision = ops::ComputePrecision::kF32;
  // On the CPU: the row shards each batch runs in (ops::GraphExecutor::
  // set_row_shards): 0, one per thread of the arena that runs the step; 1,
  // none (every kernel on the whole batch with all the threads).
  int cpu_row_shards = 0;
};

// The options as a bundle's manifest and a job record hold them
// (engine/bundle.h, engine/job_record.h): every field but `device` (a
// bundle scores on the CPU), seed as a decimal string (JSON readers that
// hold numbers as doubles would round it), precision by its name, and each
// parameter of the model (its declared ones, defaults included) as a field
// of its own name. from_json is strict (core/json.h) for the shared fields
// and a model that is not registered; of the model's parameters one absent
// or null (a file written before the parameter existed) keeps its default,
// and the fields of other models' parameters that files before bundle
// version 3 wrote for every model (bottom_mlp, cross_layers, ...) are
// skipped.
void to_json(Json& j, const ModelOptions& m);
void from_json(const Json& j, ModelOptions& m);

// Whether `name` is a field of the options every model has (name,
// num_slots, seed, ...): a model's parameter may not be named so.
bool IsSharedModelOption(std::string_view name);

// A 64-bit seed as manifests write it, a decimal string, and the required
// field `key` of `fields` read back: throws JsonFieldError (core/json.h)
// naming `key` when it is missing or not such a string.
Json SeedJson(uint64_t seed);
void GetSeed(JsonFields& fields, const char* key, uint64_t* seed);

}  // namespace ember::engine
