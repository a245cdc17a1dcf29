#pragma once

// Placer: assigns each op of a Program to a device of a ResourceGraph within
// the devices' memory: the sparse ops to CPU sockets (the embedding table in
// DRAM up to a limit, the rest on disk), the dense ops to the GPUs when they
// fit there and run faster (transfers included) than on the CPU, else to
// the CPU. Data-parallel dense replicas (one per GPU) are ordered into a
// ring greedily so that neighbours share the fastest links.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/cost_model.h"
#include "scheduler/program.h"
#include "scheduler/resource_graph.h"

namespace ember::scheduler {

struct PlacerOptions {
  // DRAM the embedding memory tier may use on each host; 0: 80% of the
  // host's DRAM less `reserve_bytes`.
  int64_t memory_limit_bytes = 0;
  int64_t reserve_bytes = int64_t{1} << 30;
  // Place dense ops on GPUs when that is faster.
  bool allow_gpu = true;
  // GPU memory kept free (CUDA context, allocator slack).
  int64_t gpu_reserve_bytes = int64_t{1} << 30;
};

struct Placement {
  int cpu = 0;           // The socket of the sparse stages (first host).
  int dense_device = 0;  // A CPU socket or the first GPU replica.
  int disk = -1;         // The disk tier's device; -1: none.
  // Device of each op of the Program.
  std::vector<int> op_device;
  // Data-parallel dense replicas in ring order (one entry on a CPU or a
  // single GPU) and the hosts the table is sharded over.
  std::vector<int> replicas;
  int sparse_hosts = 1;
  double table_bytes = 0.0;       // The whole table (all hosts).
  int64_t memory_tier_bytes = 0;  // Per host; 0: the whole table in memory.
  double dense_bytes = 0.0;       // Parameters, state and activations of a replica.
  std::string rationale;
};

// Bytes of the dense side of one replica at `batch`: parameters, gradients,
// optimizer state, and the activations (forward values and their gradients).
double DenseMemoryBytes(const Program& program, int64_t batch);

// Places `program` at `batch` examples per replica. ResourceExhausted,
// saying what and how much, when the table fits neither in memory nor on
// the disks, or the dense side fits on no device.
Result<Placement> Place(const Program& program, const CostModel& cost, int64_t batch,
                        const PlacerOptions& options);

}  // namespace ember::scheduler
