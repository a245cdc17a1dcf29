#include "pipeline/schedule.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "pipeline/schedule_kinds.h"

namespace ember::pipeline {
namespace {

// The message a compute sends, if its tensor goes to another rank.
std::optional<Instr> SendAfter(const ScheduleShape& shape, const Instr& compute, int rank) {
  const int chunk = compute.chunk;
  if (compute.kind == InstrKind::kForward && chunk + 1 < shape.chunks() &&
      shape.RankOf(chunk + 1) != rank) {
    return Instr{InstrKind::kSendActivation, compute.micro_batch, chunk, shape.RankOf(chunk + 1)};
  }
  if (compute.kind == InstrKind::kBackward && chunk > 0 && shape.RankOf(chunk - 1) != rank) {
    return Instr{InstrKind::kSendGrad, compute.micro_batch, chunk, shape.RankOf(chunk - 1)};
  }
  return std::nullopt;
}

// The message a compute receives, if its input comes from another rank.
std::optional<Instr> RecvBefore(const ScheduleShape& shape, const Instr& compute, int rank) {
  const int chunk = compute.chunk;
  if (compute.kind == InstrKind::kForward && chunk > 0 && shape.RankOf(chunk - 1) != rank) {
    return Instr{InstrKind::kRecvActivation, compute.micro_batch, chunk - 1,
                 shape.RankOf(chunk - 1)};
  }
  if (compute.kind == InstrKind::kBackward && chunk + 1 < shape.chunks() &&
      shape.RankOf(chunk + 1) != rank) {
    return Instr{InstrKind::kRecvGrad, compute.micro_batch, chunk + 1, shape.RankOf(chunk + 1)};
  }
  return std::nullopt;
}

// The receive that matches `send` on its peer, sent by rank `src`.
Instr MatchingRecv(const Instr& send, int src) {
  const InstrKind kind =
      send.kind == InstrKind::kSendActivation ? InstrKind::kRecvActivation : InstrKind::kRecvGrad;
  return Instr{kind, send.micro_batch, send.chunk, src};
}

}  // namespace

std::string ToString(const Instr& instr) {
  std::ostringstream out;
  const auto id = [&] { out << instr.micro_batch << "." << instr.chunk; };
  switch (instr.kind) {
    case InstrKind::kForward:
      out << "F";
      id();
      break;
    case InstrKind::kBackward:
      out << "B";
      id();
      break;
    case InstrKind::kBackwardWeight:
      out << "W";
      id();
      break;
    case InstrKind::kSendActivation:
      out << "SendAct(";
      id();
      out << ">r" << instr.peer << ")";
      break;
    case InstrKind::kRecvActivation:
      out << "RecvAct(";
      id();
      out << "<r" << instr.peer << ")";
      break;
    case InstrKind::kSendGrad:
      out << "SendGrad(";
      id();
      out << ">r" << instr.peer << ")";
      break;
    case InstrKind::kRecvGrad:
      out << "RecvGrad(";
      id();
      out << "<r" << instr.peer << ")";
      break;
    case InstrKind::kOptimizerStep:
      out << "Step";
      break;
  }
  return out.str();
}

bool Schedule::splits_backward() const {
  for (const std::vector<Instr>& rank : ranks) {
    for (const Instr& instr : rank) {
      if (instr.kind == InstrKind::kBackwardWeight) return true;
    }
  }
  return false;
}

InstrKind ReleaseKind(const Schedule& schedule) {
  return schedule.splits_backward() ? InstrKind::kBackwardWeight : InstrKind::kBackward;
}

std::string ToString(const ScheduleShape& shape) {
  return internal::StrCat("p=", shape.ranks, " v=", shape.virtual_stages,
                          " m=", shape.micro_batches,
                          shape.group > 0 ? " G=" + std::to_string(shape.group) : "");
}

Status ValidateShape(const ScheduleShape& shape) {
  if (shape.ranks < 1)
    return Status::InvalidArgument("schedule ranks must be >= 1, got ", shape.ranks);
  if (shape.virtual_stages < 1) {
    return Status::InvalidArgument("schedule virtual stages must be >= 1, got ",
                                   shape.virtual_stages);
  }
  if (shape.micro_batches < 1) {
    return Status::InvalidArgument("schedule micro-batches must be >= 1, got ",
                                   shape.micro_batches);
  }
  if (shape.group < 0) {
    return Status::InvalidArgument("schedule micro-batch group must be >= 0 (0: the ranks), got ",
                                   shape.group);
  }
  return Status::OK();
}

Result<Schedule> LowerToInstructions(const std::string& kind, const ScheduleShape& shape,
                                     const std::vector<std::vector<Instr>>& compute) {
  EMBER_RETURN_IF_ERROR(ValidateShape(shape));
  const int p = shape.ranks;
  if (static_cast<int>(compute.size()) != p) {
    return Status::Internal("schedule ", kind, " (", ToString(shape), ") gave ", compute.size(),
                            " ranks' orders for ", p, " ranks");
  }
  // What each channel (src, dst) carries, in the order src sends it.
  std::map<std::pair<int, int>, std::vector<Instr>> channels;
  for (int rank = 0; rank < p; ++rank) {
    for (const Instr& instr : compute[static_cast<size_t>(rank)]) {
      if (const auto send = SendAfter(shape, instr, rank)) {
        channels[{rank, send->peer}].push_back(MatchingRecv(*send, rank));
      }
    }
  }
  Schedule schedule{kind, shape, std::vector<std::vector<Instr>>(static_cast<size_t>(p))};
  std::map<std::pair<int, int>, size_t> received;  // per channel, how many so far
  for (int rank = 0; rank < p; ++rank) {
    std::vector<Instr>& out = schedule.ranks[static_cast<size_t>(rank)];
    const std::vector<Instr>& order = compute[static_cast<size_t>(rank)];
    for (size_t i = 0; i < order.size(); ++i) {
      const Instr& instr = order[i];
      if (!instr.is_compute()) {
        return Status::Internal("schedule ", kind, " (", ToString(shape), "): rank ", rank,
                                " instruction ", i, " (", ToString(instr),
                                ") is not a compute instruction");
      }
      if (const auto recv = RecvBefore(shape, instr, rank)) {
        const std::vector<Instr>& channel = channels[{recv->peer, rank}];
        size_t& next = received[{recv->peer, rank}];
        // Received already, ahead of a message sent after it that an
        // earlier instruction needed (interleaved groups wider than p).
        bool found = std::find(channel.begin(), channel.begin() + next, *recv) !=
                     channel.begin() + next;
        while (!found && next < channel.size()) {
          found = channel[next] == *recv;
          out.push_back(channel[next++]);
        }
        if (!found) {
          return Status::Internal("schedule ", kind, " (", ToString(shape), "): rank ", rank,
                                  " instruction ", i, " (", ToString(instr), ") needs ",
                                  ToString(*recv), ", which rank ", recv->peer,
                                  " sends later or never");
        }
      }
      out.push_back(instr);
      if (const auto send = SendAfter(shape, instr, rank)) out.push_back(*send);
    }
    out.push_back(Instr::OptimizerStep());
  }
  return schedule;
}

Status ScheduleRegistry::Add(const std::string& name, ComputeOrder order) {
  if (name.empty()) return Status::InvalidArgument("a schedule kind needs a name");
  if (!orders_.emplace(name, std::move(order)).second) {
    return Status::AlreadyExists("schedule kind ", name, " is already registered");
  }
  return Status::OK();
}

Result<Schedule> ScheduleRegistry::Make(const std::string& name, const ScheduleShape& shape) const {
  const auto it = orders_.find(name);
  if (it == orders_.end()) {
    std::string known;
    for (const std::string& n : names()) known += (known.empty() ? "" : ", ") + n;
    return Status::NotFound("unknown schedule kind '", name, "' (known: ", known, ")");
  }
  EMBER_RETURN_IF_ERROR(ValidateShape(shape));
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::vector<Instr>> compute, it->second(shape));
  return LowerToInstructions(name, shape, compute);
}

std::vector<std::string> ScheduleRegistry::names() const {
  std::vector<std::string> names;
  for (const auto& [name, order] : orders_) names.push_back(name);
  return names;
}

const ScheduleRegistry& BuiltinSchedules() {
  static const ScheduleRegistry registry = [] {
    ScheduleRegistry r;
    RegisterBuiltinSchedules(r);
    return r;
  }();
  return registry;
}

}  // namespace ember::pipeline
