#include "pipeline/stage_executor.h"

#include <map>
#include <utility>

namespace ember::pipeline {
namespace {

using TensorKey = std::pair<int, int>;  // (micro-batch, chunk)

// The tensors a rank holds between instructions.
struct RankState {
  std::map<TensorKey, std::vector<float>> inputs;        // (mb, c): chunk c's input
  std::map<TensorKey, std::vector<float>> output_grads;  // (mb, c): gradient of c's output
  std::map<TensorKey, std::vector<float>> outbox;        // (mb, c): what c sends next
};

std::vector<float> Take(std::map<TensorKey, std::vector<float>>& tensors, TensorKey key) {
  const auto it = tensors.find(key);
  if (it == tensors.end()) return {};
  std::vector<float> value = std::move(it->second);
  tensors.erase(it);
  return value;
}

class RankExecutor {
 public:
  RankExecutor(const Schedule& schedule, int rank, ChunkWork& work, Communicator* comm)
      : shape_(schedule.shape), rank_(rank), work_(work), comm_(comm) {}

  Status Run(const Instr& instr) {
    const TensorKey key{instr.micro_batch, instr.chunk};
    const int last = shape_.chunks() - 1;
    switch (instr.kind) {
      case InstrKind::kForward: {
        std::vector<float> output;
        EMBER_RETURN_IF_ERROR(
            work_.Forward(instr.micro_batch, instr.chunk, Take(state_.inputs, key), &output));
        if (instr.chunk == last) return Status::OK();
        const bool local = shape_.RankOf(instr.chunk + 1) == rank_;
        (local ? state_.inputs[{instr.micro_batch, instr.chunk + 1}] : state_.outbox[key]) =
            std::move(output);
        return Status::OK();
      }
      case InstrKind::kBackward: {
        std::vector<float> input_grad;
        EMBER_RETURN_IF_ERROR(work_.Backward(instr.micro_batch, instr.chunk,
                                             Take(state_.output_grads, key), &input_grad));
        if (instr.chunk == 0) return Status::OK();
        const bool local = shape_.RankOf(instr.chunk - 1) == rank_;
        (local ? state_.output_grads[{instr.micro_batch, instr.chunk - 1}] : state_.outbox[key]) =
            std::move(input_grad);
        return Status::OK();
      }
      case InstrKind::kSendActivation:
      case InstrKind::kSendGrad: {
        const std::vector<float> message = Take(state_.outbox, key);
        return comm_->Send(message, instr.peer, MessageTag(shape_, instr));
      }
      case InstrKind::kRecvActivation: {
        std::vector<float>& input = state_.inputs[{instr.micro_batch, instr.chunk + 1}];
        input.resize(static_cast<size_t>(work_.OutputElements(instr.micro_batch, instr.chunk)));
        return comm_->Recv(input, instr.peer, MessageTag(shape_, instr));
      }
      case InstrKind::kRecvGrad: {
        // The gradient of chunk - 1's output (chunk's input).
        std::vector<float>& grad = state_.output_grads[{instr.micro_batch, instr.chunk - 1}];
        grad.resize(static_cast<size_t>(work_.OutputElements(instr.micro_batch, instr.chunk - 1)));
        return comm_->Recv(grad, instr.peer, MessageTag(shape_, instr));
      }
      case InstrKind::kOptimizerStep:
        return work_.OptimizerStep();
    }
    return Status::Internal("unknown instruction kind");
  }

 private:
  const ScheduleShape shape_;
  const int rank_;
  ChunkWork& work_;
  Communicator* comm_;
  RankState state_;
};

}  // namespace

int MessageTag(const ScheduleShape& shape, const Instr& instr) {
  const bool grad = instr.kind == InstrKind::kSendGrad || instr.kind == InstrKind::kRecvGrad;
  return ((grad ? 1 : 0) * shape.micro_batches + instr.micro_batch) * shape.chunks() + instr.chunk;
}

Status RunRankSchedule(const Schedule& schedule, int rank, ChunkWork& work, Communicator* comm) {
  const int p = schedule.shape.ranks;
  if (rank < 0 || rank >= p || static_cast<int>(schedule.ranks.size()) != p) {
    return Status::InvalidArgument("rank ", rank, " is not a rank of schedule ", schedule.kind,
                                   " (", ToString(schedule.shape), ")");
  }
  if (p > 1 && (comm == nullptr || comm->rank() != rank || comm->size() != p)) {
    return Status::InvalidArgument("schedule ", schedule.kind, " (", ToString(schedule.shape),
                                   ") on rank ", rank, " needs a communicator of rank ", rank,
                                   " in a group of ", p);
  }
  RankExecutor executor(schedule, rank, work, comm);
  const std::vector<Instr>& list = schedule.ranks[static_cast<size_t>(rank)];
  for (size_t i = 0; i < list.size(); ++i) {
    Status status = executor.Run(list[i]);
    if (status.ok()) continue;
    status = status.WithContext(internal::StrCat("schedule ", schedule.kind, " rank ", rank,
                                                 " instruction ", i, " (", ToString(list[i]), ")"));
    if (comm != nullptr) comm->Abort(status);
    return status;
  }
  return Status::OK();
}

}  // namespace ember::pipeline
