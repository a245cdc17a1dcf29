// ExpertParallel (ops/expert_parallel.h): the dispatch and combine of expert
// rows over the ranks.

#include "ops/expert_parallel.h"

#include <algorithm>
#include <chrono>

#include "core/tensor_copy.h"

namespace ember::ops {

std::vector<ExpertBlock> LocalExpertBlocks(int64_t experts, int64_t capacity) {
  std::vector<ExpertBlock> blocks;
  blocks.reserve(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e) blocks.push_back({e, e * capacity, (e + 1) * capacity});
  return blocks;
}

Status ExpertParallel::CheckExperts(int64_t experts) const {
  if (experts < 1 || experts % ranks() != 0) {
    return Status::InvalidArgument("expert parallelism divides the experts among the ranks: ",
                                   experts, " experts do not divide among ", ranks(),
                                   " ranks (set --num_experts to a multiple of the ranks, or "
                                   "--expert_parallel=false)");
  }
  return Status::OK();
}

int ExpertParallel::NextOf(int node_id) const {
  for (const auto& [id, state] : nodes_) {
    if (state.chain.from == node_id) return id;
  }
  return -1;
}

std::vector<int64_t> ExpertParallel::SendRows(const NodeState& node) const {
  const int64_t per_rank = node.experts / ranks();
  return std::vector<int64_t>(static_cast<size_t>(ranks()),
                              per_rank * node.capacities[static_cast<size_t>(rank())]);
}

std::vector<int64_t> ExpertParallel::ReceiveRows(const NodeState& node) const {
  const int64_t per_rank = node.experts / ranks();
  std::vector<int64_t> rows(node.capacities.size());
  for (size_t s = 0; s < rows.size(); ++s) rows[s] = per_rank * node.capacities[s];
  return rows;
}

namespace {

// Rows to element counts of `width`, and the bytes of the other ranks' share.
std::vector<int64_t> Elements(const std::vector<int64_t>& rows, int64_t width) {
  std::vector<int64_t> counts(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) counts[i] = rows[i] * width;
  return counts;
}

int64_t RemoteBytes(const std::vector<int64_t>& counts, int self) {
  int64_t elements = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (static_cast<int>(i) != self) elements += counts[i];
  }
  return elements * static_cast<int64_t>(sizeof(float));
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int64_t Sum(const std::vector<int64_t>& v) {
  int64_t total = 0;
  for (int64_t x : v) total += x;
  return total;
}

}  // namespace

Result<Tensor> ExpertParallel::Dispatch(int node_id, const Tensor& local, int64_t experts,
                                        int64_t capacity, bool backward,
                                        std::vector<ExpertBlock>* blocks, CudaStream* stream) {
  EMBER_RETURN_IF_ERROR(CheckExperts(experts));
  const auto start = std::chrono::steady_clock::now();
  NodeState& node = nodes_[node_id];
  const bool chained = backward ? node.chain.feeds_next : node.chain.from >= 0;
  if (chained) {
    // Forward: the previous layer's rows; backward: the next layer's
    // gradient of them. Same owners, same blocks.
    if (!backward) {
      const NodeState& from = nodes_[node.chain.from];
      node.experts = from.experts;
      node.capacities = from.capacities;
      node.blocks = from.blocks;
    }
    if (!node.passed.defined() || node.experts != experts ||
        node.capacities[static_cast<size_t>(rank())] != capacity) {
      return Status::FailedPrecondition("an expert layer of a chain ran without its neighbour");
    }
    *blocks = node.blocks;
    Tensor rows = std::move(node.passed);
    node.passed = Tensor();
    return rows;
  }
  if (!backward) {
    node.experts = experts;
    node.capacities.assign(static_cast<size_t>(ranks()), 0);
    const std::vector<int64_t> mine = {capacity};
    EMBER_RETURN_IF_ERROR(
        comm_->AllGather(mine, node.capacities).WithContext("gathering the experts' capacities"));
  } else if (node.experts != experts || node.capacities.empty() ||
             node.capacities[static_cast<size_t>(rank())] != capacity) {
    return Status::FailedPrecondition("the backward of an expert layer without its forward");
  }
  const int64_t width = local.dim(1);
  const std::vector<int64_t> send = Elements(SendRows(node), width);
  const std::vector<int64_t> recv_rows = ReceiveRows(node);
  const std::vector<int64_t> recv = Elements(recv_rows, width);
  Tensor received;
  if (stream == nullptr) {
    received = Tensor::Empty({Sum(recv_rows), width});
  } else {
    EMBER_ASSIGN_OR_RETURN(received, Tensor::Allocate({Sum(recv_rows), width}, DType::kF32,
                                                      local.device(), stream->allocator()));
    // The kernels that wrote `local` are done before it leaves.
    EMBER_RETURN_IF_ERROR(stream->Synchronize().WithContext("before dispatching expert rows"));
  }
  const Tensor outgoing = local.Slice(0, experts * capacity);
  EMBER_RETURN_IF_ERROR(comm_->AllToAllV(outgoing, send, received, recv)
                            .WithContext("dispatching rows to their experts' ranks"));
  sent_bytes_ += RemoteBytes(send, rank());
  received_bytes_ += RemoteBytes(recv, rank());
  blocks->clear();
  const int64_t per_rank = experts / ranks();
  int64_t at = 0;
  for (size_t s = 0; s < node.capacities.size(); ++s) {
    for (int64_t j = 0; j < per_rank; ++j) {
      blocks->push_back({rank() * per_rank + j, at, at + node.capacities[s]});
      at += node.capacities[s];
    }
  }
  node.blocks = *blocks;
  seconds_ += SecondsSince(start);
  return received;
}

Status ExpertParallel::Combine(int node_id, const Tensor& computed, bool backward, Tensor* local,
                               CudaStream* stream) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.capacities.empty()) {
    return Status::FailedPrecondition("combining an expert layer's rows before their dispatch");
  }
  const NodeState& node = it->second;
  const int next = backward ? node.chain.from : node.chain.feeds_next ? NextOf(node_id) : -1;
  if (next >= 0) {
    // Within a chain: the rows stay here for the neighbour.
    nodes_[next].passed = computed;
    const int64_t rows = node.experts * node.capacities[static_cast<size_t>(rank())];
    Tensor between = local->Slice(0, rows);
    if (stream == nullptr) {
      between.SetZero();
      return Status::OK();
    }
    return ZeroTensor(&between, stream);
  }
  if (stream != nullptr) {
    EMBER_RETURN_IF_ERROR(stream->Synchronize().WithContext("before combining expert rows"));
  }
  const auto start = std::chrono::steady_clock::now();
  const int64_t width = computed.dim(1);
  // The reverse of the dispatch: what came from rank s goes back to it.
  const std::vector<int64_t> send = Elements(ReceiveRows(node), width);
  const std::vector<int64_t> recv = Elements(SendRows(node), width);
  Tensor incoming = local->Slice(0, Sum(recv) / std::max<int64_t>(width, 1));
  EMBER_RETURN_IF_ERROR(comm_->AllToAllV(computed, send, incoming, recv)
                            .WithContext("combining the experts' rows"));
  sent_bytes_ += RemoteBytes(send, rank());
  received_bytes_ += RemoteBytes(recv, rank());
  seconds_ += SecondsSince(start);
  return Status::OK();
}

}  // namespace ember::ops
