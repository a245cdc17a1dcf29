#include "pipeline/stage_executor.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/schedule_checker.h"

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
      : shape_(schedule.shape),
        splits_(schedule.splits_backward()),
        rank_(rank),
        work_(work),
        comm_(comm) {}

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
        std::vector<float> output_grad = Take(state_.output_grads, key);
        EMBER_RETURN_IF_ERROR(
            splits_ ? work_.BackwardInput(instr.micro_batch, instr.chunk, output_grad, &input_grad)
                    : work_.Backward(instr.micro_batch, instr.chunk, output_grad, &input_grad));
        if (instr.chunk == 0) return Status::OK();
        const bool local = shape_.RankOf(instr.chunk - 1) == rank_;
        (local ? state_.output_grads[{instr.micro_batch, instr.chunk - 1}] : state_.outbox[key]) =
            std::move(input_grad);
        return Status::OK();
      }
      case InstrKind::kBackwardWeight:
        return work_.BackwardWeight(instr.micro_batch, instr.chunk);
      case InstrKind::kSendActivation:
      case InstrKind::kSendGrad:
      case InstrKind::kRecvActivation:
      case InstrKind::kRecvGrad:
        return Transfer({instr});
      case InstrKind::kOptimizerStep:
        return work_.OptimizerStep();
    }
    return Status::Internal("unknown instruction kind");
  }

  // Runs consecutive sends and receives as one group
  // (Communicator::SendRecvGroup): on a backend whose sends wait for their
  // receive, two ranks that exchange in both directions at once both go on.
  Status Transfer(const std::vector<Instr>& group) {
    std::vector<std::vector<float>> outgoing;  // Alive until the group is done.
    outgoing.reserve(group.size());
    std::vector<PeerTransfer> transfers;
    for (const Instr& instr : group) {
      const TensorKey key{instr.micro_batch, instr.chunk};
      PeerTransfer t;
      t.peer = instr.peer;
      t.tag = MessageTag(shape_, instr);
      t.send = instr.is_send();
      if (t.send) {
        outgoing.push_back(Take(state_.outbox, key));
        t.data = CommBuffer(outgoing.back());
      } else if (instr.kind == InstrKind::kRecvActivation) {
        std::vector<float>& input = state_.inputs[{instr.micro_batch, instr.chunk + 1}];
        input.resize(static_cast<size_t>(work_.OutputElements(instr.micro_batch, instr.chunk)));
        t.data = CommBuffer(input);
      } else {
        // The gradient of chunk - 1's output (chunk's input).
        std::vector<float>& grad = state_.output_grads[{instr.micro_batch, instr.chunk - 1}];
        grad.resize(
            static_cast<size_t>(work_.OutputElements(instr.micro_batch, instr.chunk - 1)));
        t.data = CommBuffer(grad);
      }
      transfers.push_back(t);
    }
    return transfers.size() == 1 && transfers[0].send
               ? comm_->Send(transfers[0].data, transfers[0].peer, transfers[0].tag)
           : transfers.size() == 1
               ? comm_->Recv(transfers[0].data, transfers[0].peer, transfers[0].tag)
               : comm_->SendRecvGroup(transfers);
  }

 private:
  const ScheduleShape shape_;
  const bool splits_;  // kBackward runs BackwardInput, kBackwardWeight BackwardWeight.
  const int rank_;
  ChunkWork& work_;
  Communicator* comm_;
  RankState state_;
};

}  // namespace

double RankScheduleTimes::bubble_ratio() const {
  return busy_seconds > 0 ? (total_seconds - busy_seconds) / busy_seconds : 0;
}

std::string ToString(const RankScheduleTimes& times) {
  char text[160];
  std::snprintf(text, sizeof(text),
                "measured bubble (idle / busy) %.4f over %lld steps (busy %.4g s of %.4g s)",
                times.bubble_ratio(), static_cast<long long>(times.steps), times.busy_seconds,
                times.total_seconds);
  return text;
}

int MessageTag(const ScheduleShape& shape, const Instr& instr) {
  const bool grad = instr.kind == InstrKind::kSendGrad || instr.kind == InstrKind::kRecvGrad;
  return ((grad ? 1 : 0) * shape.micro_batches + instr.micro_batch) * shape.chunks() + instr.chunk;
}

Status RunRankSchedule(const Schedule& schedule, int rank, ChunkWork& work, Communicator* comm,
                       RankScheduleTimes* times) {
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
  if (comm != nullptr && comm->sends_wait_for_receives()) {
    EMBER_RETURN_IF_ERROR(CheckRendezvous(schedule));
  }
  RankExecutor executor(schedule, rank, work, comm);
  const std::vector<Instr>& list = schedule.ranks[static_cast<size_t>(rank)];
  auto is_transfer = [](const Instr& instr) { return instr.is_send() || instr.is_recv(); };
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const Clock::time_point start = Clock::now();
  double busy = 0;
  for (size_t i = 0; i < list.size();) {
    // A compute alone; a run of consecutive sends and receives as a group.
    size_t end = i + 1;
    while (is_transfer(list[i]) && end < list.size() && is_transfer(list[end])) ++end;
    const Clock::time_point before = Clock::now();
    Status status = end == i + 1 ? executor.Run(list[i])
                                 : executor.Transfer({list.begin() + i, list.begin() + end});
    if (!is_transfer(list[i])) busy += seconds(Clock::now() - before);
    if (!status.ok()) {
      std::string what = ToString(list[i]);
      for (size_t k = i + 1; k < end; ++k) {
        what += ' ';
        what += ToString(list[k]);
      }
      status = status.WithContext(internal::StrCat(
          "schedule ", schedule.kind, " rank ", rank, " instruction", end == i + 1 ? " " : "s ",
          i, end == i + 1 ? "" : internal::StrCat("..", end - 1), " (", what, ")"));
      if (comm != nullptr) comm->Abort(status);
      return status;
    }
    i = end;
  }
  if (times != nullptr) {
    ++times->steps;
    times->busy_seconds += busy;
    times->total_seconds += seconds(Clock::now() - start);
  }
  return Status::OK();
}

}  // namespace ember::pipeline
