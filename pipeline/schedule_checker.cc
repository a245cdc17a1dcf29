#include "pipeline/schedule_checker.h"

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ember::pipeline {
namespace {

// An instruction's identity without its peer: what "exactly once" counts.
using Key = std::tuple<InstrKind, int, int>;
Key KeyOf(const Instr& instr) { return {instr.kind, instr.micro_batch, instr.chunk}; }

class Checker {
 public:
  explicit Checker(const Schedule& schedule)
      : schedule_(schedule),
        shape_(schedule.shape),
        chunks_(shape_.chunks()),
        splits_(schedule.splits_backward()) {}

  Status Run() {
    EMBER_RETURN_IF_ERROR(ValidateShape(shape_).WithContext(Name()));
    if (static_cast<int>(schedule_.ranks.size()) != shape_.ranks) {
      return Status::InvalidArgument(Name(), ": ", schedule_.ranks.size(),
                                     " instruction lists for ", shape_.ranks, " ranks");
    }
    for (int rank = 0; rank < shape_.ranks; ++rank) {
      EMBER_RETURN_IF_ERROR(CheckRank(rank));
    }
    // Every send now has its receive: each compute that needs a message from
    // another rank runs, after its receive, and each message has one sender.
    return Simulate();
  }

 private:
  std::string Name() const {
    return internal::StrCat("schedule ", schedule_.kind, " (", ToString(shape_), ")");
  }
  Status Error(int rank, size_t index, const std::string& what) const {
    const Instr& instr = schedule_.ranks[static_cast<size_t>(rank)][index];
    return Status::InvalidArgument(Name(), ": rank ", rank, " instruction ", index, " (",
                                   ToString(instr), "): ", what);
  }

  // The peer a send or receive must name, or -1 when the message cannot
  // exist on this rank (it does not cross ranks or its chunk is elsewhere).
  int ExpectedPeer(const Instr& instr, int rank) const {
    const int c = instr.chunk;
    switch (instr.kind) {
      case InstrKind::kSendActivation:
        return c + 1 < chunks_ && shape_.RankOf(c) == rank ? shape_.RankOf(c + 1) : -1;
      case InstrKind::kRecvActivation:
        return c + 1 < chunks_ && shape_.RankOf(c + 1) == rank ? shape_.RankOf(c) : -1;
      case InstrKind::kSendGrad:
        return c > 0 && shape_.RankOf(c) == rank ? shape_.RankOf(c - 1) : -1;
      case InstrKind::kRecvGrad:
        return c > 0 && shape_.RankOf(c - 1) == rank ? shape_.RankOf(c) : -1;
      default:
        return -1;
    }
  }

  // Well formed where one instruction can tell.
  Status CheckInstr(int rank, size_t index) const {
    const std::vector<Instr>& list = schedule_.ranks[static_cast<size_t>(rank)];
    const Instr& instr = list[index];
    if (instr.kind == InstrKind::kOptimizerStep) {
      if (index + 1 != list.size()) {
        return Error(rank, index, "the optimizer step must be the rank's last instruction");
      }
      return Status::OK();
    }
    if (instr.micro_batch < 0 || instr.micro_batch >= shape_.micro_batches) {
      return Error(rank, index, "micro-batch out of range");
    }
    if (instr.chunk < 0 || instr.chunk >= chunks_) return Error(rank, index, "chunk out of range");
    if (instr.is_compute()) {
      if (shape_.RankOf(instr.chunk) != rank) {
        return Error(
            rank, index,
            internal::StrCat("chunk ", instr.chunk, " lives on rank ", shape_.RankOf(instr.chunk)));
      }
      return Status::OK();
    }
    const int peer = ExpectedPeer(instr, rank);
    if (peer < 0 || peer == rank) {
      return Error(rank, index, "this message does not cross from or to this rank");
    }
    if (instr.peer != peer) {
      return Error(rank, index, internal::StrCat("the peer must be rank ", peer));
    }
    return Status::OK();
  }

  // Well formed, complete and ordered on one rank.
  Status CheckRank(int rank) const {
    const std::vector<Instr>& list = schedule_.ranks[static_cast<size_t>(rank)];
    if (list.empty() || list.back().kind != InstrKind::kOptimizerStep) {
      return Status::InvalidArgument(Name(), ": rank ", rank,
                                     " does not end with the optimizer step");
    }
    std::map<Key, size_t> seen;  // first index of each instruction
    for (size_t i = 0; i < list.size(); ++i) {
      EMBER_RETURN_IF_ERROR(CheckInstr(rank, i));
      const auto [it, inserted] = seen.emplace(KeyOf(list[i]), i);
      if (!inserted) {
        return Error(rank, i, internal::StrCat("duplicate of instruction ", it->second));
      }
      const std::string missing = MissingPrerequisite(list[i], rank, seen);
      if (!missing.empty()) return Error(rank, i, "runs before " + missing);
    }
    for (int mb = 0; mb < shape_.micro_batches; ++mb) {
      for (int c = rank; c < chunks_; c += shape_.ranks) {
        for (const Instr& need :
             {Instr::Forward(mb, c), Instr::Backward(mb, c), Instr::BackwardWeight(mb, c)}) {
          if (need.kind == InstrKind::kBackwardWeight && !splits_) continue;
          if (seen.count(KeyOf(need)) == 0) {
            return Status::InvalidArgument(Name(), ": rank ", rank, " never runs ", ToString(need));
          }
        }
      }
    }
    return Status::OK();
  }

  // What `instr` needs that has not run on this rank yet ("" if nothing).
  std::string MissingPrerequisite(const Instr& instr, int rank,
                                  const std::map<Key, size_t>& seen) const {
    const int mb = instr.micro_batch, c = instr.chunk;
    const auto need = [&](InstrKind kind, int chunk, int peer) -> std::string {
      const Instr required{kind, mb, chunk, peer};
      return seen.count(KeyOf(required)) ? "" : ToString(required);
    };
    const auto local = [&](int chunk) { return shape_.RankOf(chunk) == rank; };
    switch (instr.kind) {
      case InstrKind::kForward:
        if (c == 0) return "";
        return local(c - 1) ? need(InstrKind::kForward, c - 1, -1)
                            : need(InstrKind::kRecvActivation, c - 1, shape_.RankOf(c - 1));
      case InstrKind::kBackward: {
        std::string missing = need(InstrKind::kForward, c, -1);
        if (!missing.empty() || c + 1 == chunks_) return missing;
        return local(c + 1) ? need(InstrKind::kBackward, c + 1, -1)
                            : need(InstrKind::kRecvGrad, c + 1, shape_.RankOf(c + 1));
      }
      case InstrKind::kBackwardWeight:
        return need(InstrKind::kBackward, c, -1);
      case InstrKind::kSendActivation:
        return need(InstrKind::kForward, c, -1);
      case InstrKind::kSendGrad:
        return need(InstrKind::kBackward, c, -1);
      default:
        return "";
    }
  }

  // Runs every rank as far as it can: buffered sends, blocking receives,
  // messages between two ranks matched in sending order.
  Status Simulate() const {
    const int p = shape_.ranks;
    std::vector<size_t> next(static_cast<size_t>(p), 0);
    std::map<std::pair<int, int>, std::deque<Instr>> channels;
    for (bool progress = true; progress;) {
      progress = false;
      for (int rank = 0; rank < p; ++rank) {
        const std::vector<Instr>& list = schedule_.ranks[static_cast<size_t>(rank)];
        for (size_t& i = next[static_cast<size_t>(rank)]; i < list.size(); ++i, progress = true) {
          const Instr& instr = list[i];
          if (instr.is_send()) channels[{rank, instr.peer}].push_back(instr);
          if (!instr.is_recv()) continue;
          std::deque<Instr>& channel = channels[{instr.peer, rank}];
          if (channel.empty()) break;
          if (!Matches(channel.front(), instr)) {
            return Error(rank, i,
                         internal::StrCat("the next message from rank ", instr.peer, " is ",
                                          ToString(channel.front()),
                                          ": sends and receives are in different orders"));
          }
          channel.pop_front();
        }
      }
    }
    std::string stuck;
    for (int rank = 0; rank < p; ++rank) {
      const size_t i = next[static_cast<size_t>(rank)];
      const std::vector<Instr>& list = schedule_.ranks[static_cast<size_t>(rank)];
      if (i == list.size()) continue;
      stuck += internal::StrCat(stuck.empty() ? "" : "; ", "rank ", rank, " waits at instruction ",
                                i, " (", ToString(list[i]), ")");
    }
    if (!stuck.empty()) return Status::InvalidArgument(Name(), ": deadlock: ", stuck);
    return Status::OK();
  }

  static bool Matches(const Instr& send, const Instr& recv) {
    const InstrKind expected =
        send.kind == InstrKind::kSendActivation ? InstrKind::kRecvActivation : InstrKind::kRecvGrad;
    return recv.kind == expected && recv.micro_batch == send.micro_batch &&
           recv.chunk == send.chunk;
  }

  const Schedule& schedule_;
  const ScheduleShape shape_;
  const int chunks_;
  const bool splits_;  // Every backward has its kBackwardWeight.
};

}  // namespace

Status CheckSchedule(const Schedule& schedule) { return Checker(schedule).Run(); }

namespace {

bool IsGradMessage(const Instr& instr) {
  return instr.kind == InstrKind::kSendGrad || instr.kind == InstrKind::kRecvGrad;
}

// Whether `a` on rank `ra` and `b` on rank `rb` are the two ends of one
// message.
bool Counterparts(const Instr& a, int ra, const Instr& b, int rb) {
  return a.peer == rb && b.peer == ra && a.is_send() != b.is_send() &&
         IsGradMessage(a) == IsGradMessage(b) && a.micro_batch == b.micro_batch &&
         a.chunk == b.chunk;
}

}  // namespace

Status CheckRendezvous(const Schedule& schedule) {
  const int p = schedule.shape.ranks;
  if (static_cast<int>(schedule.ranks.size()) != p) {
    return Status::InvalidArgument("schedule ", schedule.kind, ": ", schedule.ranks.size(),
                                   " instruction lists for ", p, " ranks");
  }
  auto is_transfer = [](const Instr& instr) { return instr.is_send() || instr.is_recv(); };
  // Per rank: its current group [begin, end) and which of it has matched.
  std::vector<size_t> begin(p, 0), end(p, 0);
  std::vector<std::vector<bool>> matched(p);
  auto open_group = [&](int r) {
    const std::vector<Instr>& list = schedule.ranks[r];
    while (begin[r] < list.size() && !is_transfer(list[begin[r]])) ++begin[r];
    end[r] = begin[r];
    while (end[r] < list.size() && is_transfer(list[end[r]])) ++end[r];
    matched[r].assign(end[r] - begin[r], false);
  };
  for (int r = 0; r < p; ++r) open_group(r);
  for (;;) {
    bool progress = false, finished = true;
    for (int r = 0; r < p; ++r) {
      for (size_t i = begin[r]; i < end[r]; ++i) {
        if (matched[r][i - begin[r]]) continue;
        const Instr& a = schedule.ranks[r][i];
        const int q = a.peer;
        if (q < 0 || q >= p) continue;
        for (size_t j = begin[q]; j < end[q]; ++j) {
          if (!matched[q][j - begin[q]] && Counterparts(a, r, schedule.ranks[q][j], q)) {
            matched[r][i - begin[r]] = true;
            matched[q][j - begin[q]] = true;
            progress = true;
            break;
          }
        }
      }
    }
    for (int r = 0; r < p; ++r) {
      if (begin[r] >= schedule.ranks[r].size()) continue;
      finished = false;
      if (std::find(matched[r].begin(), matched[r].end(), false) == matched[r].end()) {
        begin[r] = end[r];
        open_group(r);
        progress = true;
      }
    }
    if (finished) return Status::OK();
    if (progress) continue;
    std::string stuck;
    for (int r = 0; r < p; ++r) {
      if (begin[r] >= schedule.ranks[r].size()) continue;
      stuck += internal::StrCat(stuck.empty() ? "" : "; ", "rank ", r, " at instructions ",
                                begin[r], "..", end[r] - 1, " (");
      for (size_t i = begin[r]; i < end[r]; ++i) {
        if (i > begin[r]) stuck += ' ';
        stuck += ToString(schedule.ranks[r][i]);
      }
      stuck += ")";
    }
    return Status::InvalidArgument("schedule ", schedule.kind, " (", ToString(schedule.shape),
                                   "): with sends that wait for their receive, deadlock: ",
                                   stuck);
  }
}

}  // namespace ember::pipeline
