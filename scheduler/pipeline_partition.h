#pragma once

// Splits a model's dense graph (ops/graph.h) into the p·v consecutive chunks
// of a pipeline schedule (pipeline/schedule.h: chunk c runs on rank c % p),
// balancing their predicted time (the ops' FLOPs and bytes at the cost
// model's calibrated rates) within a per-rank activation-memory limit.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "ops/graph.h"
#include "scheduler/cost_model.h"

namespace ember::scheduler {

struct PipelinePartitionOptions {
  int ranks = 1;          // p
  int virtual_stages = 1; // v: chunks per rank
  // Examples per micro-batch: what the chunks' times and activations are for.
  int64_t micro_batch_size = 256;
  // Activation bytes a rank may hold at once; 0: no limit.
  int64_t rank_activation_limit_bytes = 0;
  // Micro-batches whose activations a chunk holds at once (their forward
  // ran, their backward not yet): at most p - r on rank r under 1F1B, m under
  // GPipe. A rank's activation bytes are this times the sum of its chunks'.
  int micro_batches_in_flight = 1;
  // Where the chunks run (an index into the ResourceGraph's devices) and with
  // how many threads.
  int device = 0;
  int threads = 1;
};

// Chunk c holds nodes [first_node, end_node) in the graph's order.
struct PipelineChunk {
  int first_node = 0;
  int end_node = 0;
  // Forward + backward of one micro-batch (CostModel::DenseOpSeconds of its
  // nodes).
  double seconds = 0;
  // Per micro-batch: the activations its nodes make (saved outputs too) and
  // those of earlier chunks it reads (held from its forward to its backward).
  int64_t activation_bytes = 0;
};

struct PipelinePartition {
  std::vector<PipelineChunk> chunks; // p·v, in order.
  // Per rank: micro_batches_in_flight x the activation bytes of its chunks.
  std::vector<int64_t> rank_activation_bytes;
  // The slowest chunk's seconds.
  double bottleneck_seconds = 0;

  // The chunk holding `node`, or -1.
  int ChunkOf(int node) const;
};

// Splits `graph`'s nodes, in their (topological) order, into p·v consecutive
// non-empty chunks that minimise the slowest chunk's time, each rank within
// rank_activation_limit_bytes. The limit couples a rank's v chunks; the
// search caps each chunk alone, from the rank's whole limit down to an equal
// share (1/v) of it (where every split fits) through at most 32 byte counts
// in between, and keeps the fastest split within the limit: with v > 1 it
// may miss an uneven split that fits, never one with an equal share.
// InvalidArgument naming the field for a bad option, or when the graph has
// fewer nodes than chunks; ResourceExhausted naming the node (its bytes and
// the limit) when one node alone exceeds the limit, or naming the ranks and
// their bytes when no split found fits.
Result<PipelinePartition>
PartitionDenseGraph(const ops::Graph &graph, const CostModel &cost,
                    const PipelinePartitionOptions &options);

// "chunk 0: nodes 0-2 (top.0..top.2), 1.2 ms, 65536 bytes" per line.
std::string ToText(const ops::Graph &graph, const PipelinePartition &partition);

} // namespace ember::scheduler
