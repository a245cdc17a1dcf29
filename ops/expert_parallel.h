#pragma once

// Expert parallelism for the expert layers of a mixture of experts
// (moe_expert_fc, ops/moe_expert_ops.h), as in GShard and DeepSpeed-MoE: the
// E experts are divided among the N ranks of a data-parallel job, rank r
// computing experts [r * E/N, (r + 1) * E/N) for every rank's examples.
//
// An expert layer's forward on rank r:
//   1. dispatch: its buffers hold expert e's rows at [e * C_r, (e + 1) * C_r)
//      (C_r the capacity of rank r's batch); the rows of expert e go to e's
//      owner, rows [p * L * C_r, (p + 1) * L * C_r) to rank p, L = E/N, in
//      one AllToAllV. Rank r receives, source rank by source rank, the C_s
//      rows of each of its L experts from rank s;
//   2. its experts run on what it received;
//   3. combine: the results go back where their rows came from (AllToAllV),
//      into rows [0, E * C_r) of the layer's output.
// The backward does the same with the output's gradient, and sends the
// inputs' gradient back. Consecutive expert layers (an expert MLP) form a
// chain (set_chain): their rows stay on the owners between the layers, so an
// MLP's rows cross once each way per pass whatever its depth; each owner sums its experts' parameter gradients
// over the source ranks in rank order and leaves the other experts' zero, so
// that the data-parallel all-reduce in rank order (pipeline/training_step.h)
// gives every rank the owner's bits. The experts' weights stay on every rank,
// updated alike: the compute and the routing are divided, not the weights'
// memory. A rank's batch is one group of the routing (ops/op_registry.h,
// rows_grouped), so N ranks compute, bit for bit, what one rank computes in
// N row ranges (GraphExecutor::set_row_shards).
//
// Only training forwards (and their backward) exchange: a forward for
// evaluation computes every expert here, from the replicated weights, so
// that ranks may evaluate different batches, or one rank alone.
//
// Bytes per chain of expert layers and step, summed over the ranks: each
// routed row crosses once each way in the forward and in the backward, so
// about rows * (in + out) * 4 bytes * 2 (forward and backward) * (N - 1) / N,
// `in` the chain's first layer's input width and `out` its last's output.

#include <cstdint>
#include <map>
#include <vector>

#include "core/communicator.h"
#include "core/cuda_stream.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ember::ops {

// Rows [begin, end) of a tensor of expert rows, all of expert `expert`.
struct ExpertBlock {
  int64_t expert = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

// The blocks of a rank's own buffers: expert e's rows at [e * capacity,
// (e + 1) * capacity), for every expert.
std::vector<ExpertBlock> LocalExpertBlocks(int64_t experts, int64_t capacity);

// Thread safety: one thread at a time (the dense stage's), as its
// communicator.
class ExpertParallel {
 public:
  // `comm` (not owned) joins the ranks; every rank's ExpertParallel issues
  // the same collectives in the same order, so it may share the dense
  // stage's communicator (the training step's collectives come between whole
  // forwards and backwards).
  explicit ExpertParallel(Communicator* comm) : comm_(comm) {}

  int rank() const { return comm_->rank(); }
  int ranks() const { return comm_->size(); }
  // InvalidArgument unless `experts` divide evenly among the ranks.
  Status CheckExperts(int64_t experts) const;

  // Chains node `to` after node `from`: `to` reads the output of `from`,
  // which nothing else reads, so their rows stay on the owners between the
  // two. Called before the first forward, alike on every rank.
  void ChainLayers(int from, int to) {
    nodes_[to].chain.from = from;
    nodes_[from].chain.feeds_next = true;
  }

  // Step 1 of the forward (backward = false) of node `node`, or of its
  // backward (true, with the forward's capacities): sends each expert's rows
  // of `local` (f32 [rows, width], rows >= experts * capacity) to its owner
  // and returns the rows this rank's experts received, source rank by source
  // rank, with their blocks (in that order: an expert's blocks come in
  // source rank order). The forward learns every rank's capacity (one
  // AllGather). Within a chain it sends nothing: the forward returns the
  // rows the previous layer computed here, the backward the gradient the
  // next layer's backward left here (`local` is not read).
  // On a CUDA device (`stream` set: the kernel's), the rows stay on the
  // device: the communicator must take device buffers (NCCL), and the
  // stream is waited for before the rows leave.
  Result<Tensor> Dispatch(int node, const Tensor& local, int64_t experts, int64_t capacity,
                          bool backward, std::vector<ExpertBlock>* blocks,
                          CudaStream* stream = nullptr);
  // Step 3: sends `computed` (laid out as Dispatch returned its rows, any
  // width) back where its rows came from, into rows [0, experts * capacity)
  // of `*local` (the rest untouched). Within a chain it keeps them here for
  // the next layer's forward (or the previous layer's backward) and zeroes
  // those rows of `*local`. REQUIRES: Dispatch for `node`, in the same
  // pass, before.
  Status Combine(int node, const Tensor& computed, bool backward, Tensor* local,
                 CudaStream* stream = nullptr);

  // What a node keeps from its forward to its backward (the rows its
  // experts received and computed); replaced at the next forward.
  std::vector<Tensor>& kept(int node) { return nodes_[node].kept; }

  // Bytes this rank sent to other ranks, and received from them, and the
  // seconds it spent in the exchanges (waits for the others included),
  // since construction.
  int64_t sent_bytes() const { return sent_bytes_; }
  int64_t received_bytes() const { return received_bytes_; }
  double seconds() const { return seconds_; }

 private:
  // A node's place in a chain of expert layers: the node whose output is
  // its input (-1: its rows come from the dispatch), and whether its output
  // goes only to the next layer of the chain.
  struct Chain {
    int from = -1;
    bool feeds_next = false;
  };
  struct NodeState {
    Chain chain;
    int64_t experts = 0;
    std::vector<int64_t> capacities;  // Per rank, from the forward.
    std::vector<ExpertBlock> blocks;  // Of the received rows.
    std::vector<Tensor> kept;
    Tensor passed;  // Rows a neighbour in the chain left for this node.
  };
  // The node whose chain.from is `node`, or -1.
  int NextOf(int node) const;
  // Rows this rank sends to, and receives from, each rank.
  std::vector<int64_t> SendRows(const NodeState& node) const;
  std::vector<int64_t> ReceiveRows(const NodeState& node) const;

  Communicator* comm_;
  std::map<int, NodeState> nodes_;
  int64_t sent_bytes_ = 0;
  int64_t received_bytes_ = 0;
  double seconds_ = 0.0;
};

}  // namespace ember::ops
