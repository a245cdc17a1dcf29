#pragma once

// Programs and resource graphs for the scheduler's tests.

#include <memory>

#include "ops/graph.h"
#include "ops/op_registry.h"
#include "scheduler/program.h"
#include "scheduler/resource_graph.h"

namespace ember::scheduler::test {

// A DLRM-shaped dense side: [dense, pooled] -> `hidden` -> 1.
inline std::unique_ptr<ops::Graph> MlpGraph(int num_dense, int num_slots, int dim, int hidden) {
  auto g = std::make_unique<ops::Graph>(&ops::DefaultOpRegistry());
  const int dense = *g->AddInput("dense", {num_dense});
  const int pooled = *g->AddInput("pooled", {int64_t{num_slots} * dim});
  const int x = (*g->AddNode("x0", "concat", {dense, pooled}))[0];
  const int64_t in = num_dense + int64_t{num_slots} * dim;
  const int w1 = *g->AddParameter("fc1.weight", {hidden, in}, ops::Initializer::kHeUniform, in);
  const int b1 = *g->AddParameter("fc1.bias", {hidden}, ops::Initializer::kZeros);
  const int h =
      (*g->AddNode("fc1", "fully_connected", {x, w1, b1}, ops::OpAttrs().Set("activation", 1)))[0];
  const int w2 = *g->AddParameter("fc2.weight", {1, hidden}, ops::Initializer::kHeUniform, hidden);
  const int b2 = *g->AddParameter("fc2.bias", {1}, ops::Initializer::kZeros);
  const int y = (*g->AddNode("fc2", "fully_connected", {h, w2, b2}))[0];
  (void)g->MarkOutput(y);
  return g;
}

// A DCN-v2-shaped dense side: [dense, pooled] -> one cross layer (which
// saves z, "cross:saved0", for its backward) -> 1.
inline std::unique_ptr<ops::Graph> CrossGraph(int num_dense, int num_slots, int dim) {
  auto g = std::make_unique<ops::Graph>(&ops::DefaultOpRegistry());
  const int dense = *g->AddInput("dense", {num_dense});
  const int pooled = *g->AddInput("pooled", {int64_t{num_slots} * dim});
  const int x = (*g->AddNode("x0", "concat", {dense, pooled}))[0];
  const int64_t d = num_dense + int64_t{num_slots} * dim;
  const int w = *g->AddParameter("cross.weight", {d, d}, ops::Initializer::kHeUniform, 2 * d);
  const int b = *g->AddParameter("cross.bias", {d}, ops::Initializer::kZeros);
  const int c = (*g->AddNode("cross", "cross_layer", {x, x, w, b}))[0];
  const int w2 = *g->AddParameter("fc.weight", {1, d}, ops::Initializer::kHeUniform, d);
  const int b2 = *g->AddParameter("fc.bias", {1}, ops::Initializer::kZeros);
  const int y = (*g->AddNode("fc", "fully_connected", {c, w2, b2}))[0];
  (void)g->MarkOutput(y);
  return g;
}

// A mixture of experts: [dense, pooled] -> gate over `experts` -> top-1
// routing with capacity factor 1 (one slot per example) -> expert layers of
// `hidden` (then `hidden2` when > 0) -> combine -> 1.
inline std::unique_ptr<ops::Graph> MoeGraph(int num_dense, int num_slots, int dim, int experts,
                                            int hidden, int hidden2 = 0) {
  auto g = std::make_unique<ops::Graph>(&ops::DefaultOpRegistry());
  const int dense = *g->AddInput("dense", {num_dense});
  const int pooled = *g->AddInput("pooled", {int64_t{num_slots} * dim});
  const int x = (*g->AddNode("x0", "concat", {dense, pooled}))[0];
  const int64_t in = num_dense + int64_t{num_slots} * dim;
  ops::OpAttrs routing;
  routing.Set("experts", experts).Set("k", 1).Set("slots", 1).Set("capacity_factor", 1.0);
  const int wg = *g->AddParameter("gate.weight", {experts, in}, ops::Initializer::kHeUniform, in);
  const int bg = *g->AddParameter("gate.bias", {experts}, ops::Initializer::kZeros);
  const int logits = (*g->AddNode("gate", "fully_connected", {x, wg, bg}))[0];
  const int probs = (*g->AddNode("softmax", "softmax", {logits}))[0];
  const std::vector<int> gate = *g->AddNode("route", "moe_route", {probs}, routing);
  const int buffers = (*g->AddNode("dispatch", "moe_dispatch", {x, gate[1]}, routing))[0];
  const int we = *g->AddParameter("expert.weight", {experts, hidden, in},
                                  ops::Initializer::kHeUniform, in);
  const int be = *g->AddParameter("expert.bias", {experts, hidden}, ops::Initializer::kZeros);
  ops::OpAttrs fc = routing;
  fc.Set("activation", 1);
  int h = (*g->AddNode("expert", "moe_expert_fc", {buffers, we, be}, fc))[0];
  if (hidden2 > 0) {
    const int we2 = *g->AddParameter("expert2.weight", {experts, hidden2, hidden},
                                     ops::Initializer::kHeUniform, hidden);
    const int be2 = *g->AddParameter("expert2.bias", {experts, hidden2}, ops::Initializer::kZeros);
    h = (*g->AddNode("expert2", "moe_expert_fc", {h, we2, be2}, fc))[0];
    hidden = hidden2;
  }
  const int mixed = (*g->AddNode("combine", "moe_combine", {h, gate[0], gate[1]}, routing))[0];
  const int w2 = *g->AddParameter("fc.weight", {1, hidden}, ops::Initializer::kHeUniform, hidden);
  const int b2 = *g->AddParameter("fc.bias", {1}, ops::Initializer::kZeros);
  const int y = (*g->AddNode("fc", "fully_connected", {mixed, w2, b2}))[0];
  (void)g->MarkOutput(y);
  return g;
}

inline SparseFeatures Features(int64_t vocabulary, int64_t examples) {
  SparseFeatures f;
  f.slot_vocabulary.assign(f.num_slots, vocabulary);
  f.training_examples = examples;
  return f;
}

inline Program MlpProgram(int hidden, int64_t vocabulary = 1000, int64_t examples = 100000) {
  const SparseFeatures f = Features(vocabulary, examples);
  auto graph = MlpGraph(f.num_dense, f.num_slots, f.embedding_dim, hidden);
  return *BuildProgram("mlp", *graph, f);
}

// One host: a CPU socket with `cores` cores and `dram` bytes, optional GPUs
// and a disk, with made-up but plausible rates.
inline ResourceGraph Host(int cores, int64_t dram, int gpus = 0, int64_t gpu_memory = 0,
                          int64_t disk_free = int64_t{1} << 40) {
  ResourceGraph graph;
  graph.hosts.push_back({"h", {}});
  DeviceNode cpu;
  cpu.cores = cores;
  cpu.memory_bytes = dram;
  cpu.rates.gemm_gflops_per_core = 50;
  cpu.rates.gemm_gflops = 45.0 * cores;
  cpu.rates.memory_gbps = 20;
  const int c = graph.AddDevice(0, DeviceKind::kCpu, cpu);
  for (int i = 0; i < gpus; ++i) {
    DeviceNode gpu;
    gpu.memory_bytes = gpu_memory;
    gpu.rates.gemm_gflops = 20000;
    gpu.rates.memory_gbps = 1000;
    const int g = graph.AddDevice(0, DeviceKind::kGpu, gpu);
    graph.AddLink(c, g, LinkKind::kPcie, 12.0, 10.0);
  }
  if (disk_free > 0) {
    DeviceNode disk;
    disk.memory_bytes = disk_free;
    disk.rates.random_reads_per_sec = 100000;
    const int d = graph.AddDevice(0, DeviceKind::kDisk, disk);
    graph.AddLink(c, d, LinkKind::kPcie, 2.0, 80.0);
  }
  return graph;
}

}  // namespace ember::scheduler::test
