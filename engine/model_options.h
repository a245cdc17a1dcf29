#pragma once

// What the model zoo (engine/model_zoo.h) builds a model's dense half from:
// its name, the shapes of its inputs and its hyperparameters, and where the
// dense half runs.

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/json_fwd.h"
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
  // DLRM: widths of the bottom MLP after the dense input. Its output is one
  // of the interacting vectors, so it must be embedding_dim wide: when the
  // last width differs, a final layer to embedding_dim is added ({512, 256,
  // 64} and {512, 256, 64, 16} give the same network for dim 16).
  std::vector<int> bottom_mlp = {512, 256, 64};
  // Widths of the MLP before the final logit (DLRM's top MLP, the deep part
  // of the others).
  std::vector<int> top_mlp = {512, 256};
  // DCN-v2: cross layers, and their rank (0: full rank).
  int cross_layers = 3;
  int cross_rank = 0;
  // Labels (tasks) per example; more than one needs a multi-task model.
  int num_tasks = 1;
  // MMoE: experts shared by the tasks, and each expert's MLP widths (the
  // last is the width every task's gate mixes).
  int num_experts = 4;
  std::vector<int> expert_mlp = {256, 64};
  // MoE (engine/models/moe.cc), a routed sparse mixture of num_experts
  // experts: the experts each example goes to (top-k of the gate), the
  // capacity factor (an expert's buffer holds ceil(factor * k * batch /
  // num_experts) examples; choices past it are dropped), each expert's MLP
  // widths (empty: those of top_mlp, which the experts replace) and the
  // weight of the auxiliary load-balancing loss (Switch's alpha).
  int moe_top_k = 2;
  double moe_capacity_factor = 1.25;
  std::vector<int> moe_expert_mlp;
  double moe_aux_loss_weight = 0.01;
  // What the MoE gate reads: "interaction" (the interaction's output, which
  // the experts read too) or "bottom" (the bottom MLP's output over the
  // dense features alone; needs num_dense > 0), for data whose examples
  // fall into groups the dense features tell apart.
  std::string moe_gate_input = "interaction";
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

// The options as a bundle's manifest holds them (engine/bundle.h): every
// field but `device` (a bundle scores on the CPU), seed as a decimal string
// (JSON readers that hold numbers as doubles would round it), precision by
// its name. from_json is strict (core/json.h), but moe_gate_input may be
// absent and moe_capacity_factor and moe_aux_loss_weight null (bundles
// written before them): they keep their values.
void to_json(Json& j, const ModelOptions& m);
void from_json(const Json& j, ModelOptions& m);

// A 64-bit seed as manifests write it, a decimal string, and the required
// field `key` of `fields` read back: throws JsonFieldError (core/json.h)
// naming `key` when it is missing or not such a string.
Json SeedJson(uint64_t seed);
void GetSeed(JsonFields& fields, const char* key, uint64_t* seed);

}  // namespace ember::engine
