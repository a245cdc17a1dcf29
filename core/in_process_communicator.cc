#include "core/in_process_communicator.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "core/internal/collective.h"
#include "core/mutex.h"

namespace ember {
namespace {

using Clock = std::chrono::steady_clock;

using internal::OpKind;
using internal::OpName;
using internal::Signature;

// What one rank brought to a collective.
struct Contribution {
  Status invalid;          // Its arguments broke a REQUIRES.
  std::vector<char> data;  // A copy of its input.
  std::vector<int64_t> send_counts;
  std::vector<int64_t> recv_counts;
};

// One collective, shared by the ranks until each has taken its result.
struct Collective {
  Signature signature;  // Of the first rank that joined.
  int first_rank = -1;
  std::vector<Contribution> contributions;  // Per rank.
  std::vector<bool> joined;                 // Per rank.
  int joined_count = 0;
  int done_count = 0;
  Status failure;  // Once set, every rank that reaches the collective returns it.
};

struct Message {
  CommDType dtype;
  int64_t count;
  std::vector<char> bytes;
};

// The state a group's communicators share.
struct GroupState {
  GroupState(int size, const CommunicatorOptions& options)
      : size(size), options(options), gone(size), last_call(size), in_call(size, false) {}

  const int size;
  const CommunicatorOptions options;
  Mutex mu;
  // Notified on every change below; few ranks wait, so one for all suffices.
  std::condition_variable changed;
  std::map<int64_t, Collective> collectives GUARDED_BY(mu);  // By number, from 1.
  std::map<std::tuple<int, int, int>, std::deque<Message>> mailboxes GUARDED_BY(mu);  // src,dst,tag
  std::vector<Status> gone GUARDED_BY(mu);  // Per rank: OK while it is a member.
  // Per rank, for timeout messages: its last call ("recv from rank 0 (tag 2)",
  // "all_reduce #11") and whether it is still waiting in it.
  std::vector<std::string> last_call GUARDED_BY(mu);
  std::vector<bool> in_call GUARDED_BY(mu);

  // Waits for a change or the deadline; false once the deadline has passed.
  bool WaitUntil(Clock::time_point deadline) REQUIRES(mu) {
    if (Clock::now() >= deadline) return false;
    std::unique_lock<std::mutex> lock(mu.native(), std::adopt_lock);
    changed.wait_until(lock, deadline);
    lock.release();
    return true;
  }

  // "rank 3 is waiting in recv from rank 0 (tag 2)", "rank 3 last called
  // all_reduce #11" or "rank 3 has made no call".
  std::string Whereabouts(int rank) const REQUIRES(mu) {
    if (last_call[rank].empty()) return internal::StrCat("rank ", rank, " has made no call");
    return internal::StrCat("rank ", rank, in_call[rank] ? " is waiting in " : " last called ",
                            last_call[rank]);
  }
  void EnterCall(int rank, const std::string& what) REQUIRES(mu) {
    last_call[rank] = what;
    in_call[rank] = true;
  }
  void LeaveCall(int rank) REQUIRES(mu) { in_call[rank] = false; }
};

Status HostOnly(const char* op, ConstCommBuffer buffer) {
  if (buffer.device.is_cpu()) return Status::OK();
  return Status::InvalidArgument(op, ": the in-process communicator moves host buffers; got ",
                                 CommDTypeName(buffer.dtype), " on ", buffer.device.ToString());
}

std::vector<char> CopyOf(ConstCommBuffer buffer) {
  const char* begin = static_cast<const char*>(buffer.data);
  return buffer.bytes() == 0 ? std::vector<char>()
                             : std::vector<char>(begin, begin + buffer.bytes());
}

// InvalidArgument naming the first pair (in sender, receiver order) whose
// counts disagree; every rank checks every pair so that all report the same.
Status CheckCountsPairUp(const std::string& what, const std::vector<Contribution>& contributions) {
  const int size = static_cast<int>(contributions.size());
  for (int q = 0; q < size; ++q) {
    for (int p = 0; p < size; ++p) {
      const int64_t sent = contributions[q].send_counts[p];
      const int64_t expected = contributions[p].recv_counts[q];
      if (sent != expected) {
        return Status::InvalidArgument(what, ": rank ", q, " sends ", sent, " elements to rank ", p,
                                       " but rank ", p, " expects ", expected);
      }
    }
  }
  return Status::OK();
}

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<GroupState> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  ~InProcessCommunicator() override { Abort(Status::Cancelled("its communicator was destroyed")); }
  InProcessCommunicator(const InProcessCommunicator&) = delete;
  InProcessCommunicator& operator=(const InProcessCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return group_->size; }

  Status Send(ConstCommBuffer data, int dst, int tag) override;
  Status Recv(CommBuffer data, int src, int tag) override;
  Status AllReduce(ConstCommBuffer in, CommBuffer out) override;
  Status ReduceScatter(ConstCommBuffer in, CommBuffer out) override;
  Status AllGather(ConstCommBuffer in, CommBuffer out) override;
  Status AllToAllV(ConstCommBuffer in, const std::vector<int64_t>& send_counts, CommBuffer out,
                   const std::vector<int64_t>& recv_counts) override;
  Status Broadcast(CommBuffer data, int root) override;
  Status Barrier() override;
  void Abort(const Status& reason) override;

 private:
  using Compute = std::function<Status(const std::string& what, const Collective&)>;

  // Joins the next collective with `mine`, waits until every rank has joined
  // (or the collective fails), runs `compute` on the joined collective without
  // the lock, and leaves it.
  Status RunCollective(const Signature& signature, Contribution mine, const Compute& compute);
  // The joining half of RunCollective: the collective once every rank has
  // joined, or the error that ends it.
  Result<Collective*> Join(int64_t id, const std::string& what, const Signature& signature,
                           Contribution mine);
  Status OwnAbortLocked(const std::string& what) const REQUIRES(group_->mu);
  // Unavailable naming the first of `missing` that left the group, if any.
  Status PeerGoneLocked(const std::string& what, const std::vector<int>& missing) const
      REQUIRES(group_->mu);
  Status TimeoutLocked(const std::string& what, const std::vector<int>& missing) const
      REQUIRES(group_->mu);

  const std::shared_ptr<GroupState> group_;
  const int rank_;
  int64_t next_collective_ = 1;  // Only this rank's thread touches it.
};

Status InProcessCommunicator::OwnAbortLocked(const std::string& what) const {
  const Status& reason = group_->gone[rank_];
  if (reason.ok()) return Status::OK();
  return Status::Cancelled(what, ": rank ", rank_, " has aborted: ", reason.ToString());
}

Status InProcessCommunicator::PeerGoneLocked(const std::string& what,
                                             const std::vector<int>& missing) const {
  for (int peer : missing) {
    const Status& reason = group_->gone[peer];
    if (!reason.ok()) {
      return Status::Unavailable(what, ": rank ", peer, " left the group: ", reason.ToString());
    }
  }
  return Status::OK();
}

Status InProcessCommunicator::TimeoutLocked(const std::string& what,
                                            const std::vector<int>& missing) const {
  std::string ranks;
  std::string whereabouts;
  for (size_t i = 0; i < missing.size(); ++i) {
    ranks += internal::StrCat(i == 0 ? "" : ", ", missing[i]);
    whereabouts += (i == 0 ? "" : "; ") + group_->Whereabouts(missing[i]);
  }
  return Status::DeadlineExceeded(what, ": ", missing.size() == 1 ? "rank " : "ranks ", ranks,
                                  " did not answer within ", group_->options.timeout_seconds,
                                  " s (", whereabouts, ")");
}

Result<Collective*> InProcessCommunicator::Join(int64_t id, const std::string& what,
                                                const Signature& signature, Contribution mine) {
  GroupState& g = *group_;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(g.options.timeout_seconds));
  MutexLock lock(g.mu);
  Collective& c = g.collectives[id];
  if (c.first_rank < 0) {
    c.signature = signature;
    c.first_rank = rank_;
    c.contributions.resize(g.size);
    c.joined.assign(g.size, false);
  }
  // A rank with invalid arguments gets its own error at once; the others
  // get one naming it.
  Status status;
  if (!mine.invalid.ok()) {
    const std::string problem = internal::ArgumentProblem(signature.kind, mine.invalid);
    status = Status::InvalidArgument(what, ": ", problem);
    if (c.failure.ok()) {
      c.failure =
          Status::InvalidArgument(what, ": rank ", rank_, " passed invalid arguments: ", problem);
    }
  } else if (c.failure.ok() && !(c.signature == signature)) {
    c.failure =
        Status::InvalidArgument(what, ": rank ", c.first_rank, " called ", c.signature.ToString(),
                                " but rank ", rank_, " called ", signature.ToString());
  }
  c.contributions[rank_] = std::move(mine);
  c.joined[rank_] = true;
  ++c.joined_count;
  g.changed.notify_all();
  g.EnterCall(rank_, what);
  while (status.ok()) {
    if (!c.failure.ok()) {
      status = c.failure;
      break;
    }
    if (status = OwnAbortLocked(what); !status.ok()) break;
    if (c.joined_count == g.size) break;
    std::vector<int> missing;
    for (int r = 0; r < g.size; ++r) {
      if (!c.joined[r]) missing.push_back(r);
    }
    if (Status gone = PeerGoneLocked(what, missing); !gone.ok()) {
      c.failure = gone;
    } else if (!g.WaitUntil(deadline)) {
      c.failure = TimeoutLocked(what, missing);
    }
    if (!c.failure.ok()) g.changed.notify_all();
  }
  g.LeaveCall(rank_);
  if (!status.ok()) {
    if (++c.done_count == g.size) g.collectives.erase(id);
    return status;
  }
  // Contributions do not change once every rank has joined, and map nodes
  // stay put while others are added or erased: the caller may read without
  // the lock until it leaves the collective.
  return &c;
}

Status InProcessCommunicator::RunCollective(const Signature& signature, Contribution mine,
                                            const Compute& compute) {
  const int64_t id = next_collective_++;
  const std::string what = internal::StrCat(OpName(signature.kind), " #", id);
  {
    MutexLock lock(group_->mu);
    EMBER_RETURN_IF_ERROR(OwnAbortLocked(what));
  }
  EMBER_ASSIGN_OR_RETURN(Collective * c, Join(id, what, signature, std::move(mine)));
  const Status status = compute(what, *c);
  MutexLock lock(group_->mu);
  if (++c->done_count == group_->size) group_->collectives.erase(id);
  return status;
}

Status InProcessCommunicator::Send(ConstCommBuffer data, int dst, int tag) {
  EMBER_RETURN_IF_ERROR(ValidatePeer(*this, "send", dst, tag));
  EMBER_RETURN_IF_ERROR(HostOnly("send", data));
  if (data.count < 0 || (data.count > 0 && data.data == nullptr)) {
    return Status::InvalidArgument("send: invalid buffer of ", data.count, " elements");
  }
  const std::string what = internal::StrCat("send to rank ", dst, " (tag ", tag, ")");
  Message message{data.dtype, data.count, CopyOf(data)};
  MutexLock lock(group_->mu);
  EMBER_RETURN_IF_ERROR(OwnAbortLocked(what));
  EMBER_RETURN_IF_ERROR(PeerGoneLocked(what, {dst}));
  group_->last_call[rank_] = what;
  group_->mailboxes[{rank_, dst, tag}].push_back(std::move(message));
  group_->changed.notify_all();
  return Status::OK();
}

Status InProcessCommunicator::Recv(CommBuffer data, int src, int tag) {
  EMBER_RETURN_IF_ERROR(ValidatePeer(*this, "recv", src, tag));
  EMBER_RETURN_IF_ERROR(HostOnly("recv", data));
  if (data.count < 0 || (data.count > 0 && data.data == nullptr)) {
    return Status::InvalidArgument("recv: invalid buffer of ", data.count, " elements");
  }
  const std::string what = internal::StrCat("recv from rank ", src, " (tag ", tag, ")");
  GroupState& g = *group_;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(g.options.timeout_seconds));
  Message message;
  {
    MutexLock lock(g.mu);
    std::deque<Message>& box = g.mailboxes[{src, rank_, tag}];
    g.EnterCall(rank_, what);
    Status status;
    while (true) {
      if (status = OwnAbortLocked(what); !status.ok()) break;
      if (!box.empty()) break;
      if (status = PeerGoneLocked(what, {src}); !status.ok()) break;
      if (!g.WaitUntil(deadline)) {
        status = TimeoutLocked(what, {src});
        break;
      }
    }
    g.LeaveCall(rank_);
    EMBER_RETURN_IF_ERROR(status);
    message = std::move(box.front());
    box.pop_front();
  }
  if (message.dtype != data.dtype || message.count != data.count) {
    return Status::InvalidArgument(what, ": rank ", src, " sent ", message.count, " ",
                                   CommDTypeName(message.dtype), " but rank ", rank_, " expects ",
                                   data.count, " ", CommDTypeName(data.dtype));
  }
  if (!message.bytes.empty()) std::memcpy(data.data, message.bytes.data(), message.bytes.size());
  return Status::OK();
}

Status InProcessCommunicator::AllReduce(ConstCommBuffer in, CommBuffer out) {
  Contribution mine;
  mine.invalid = ValidateAllReduce(in, out);
  if (mine.invalid.ok()) mine.invalid = HostOnly("all_reduce", in);
  if (mine.invalid.ok()) mine.invalid = HostOnly("all_reduce", out);
  if (mine.invalid.ok()) mine.data = CopyOf(in);
  return RunCollective({OpKind::kAllReduce, in.dtype, in.count, -1}, std::move(mine),
                       [&](const std::string&, const Collective& c) {
                         std::vector<const char*> parts;
                         for (const Contribution& from : c.contributions) {
                           parts.push_back(from.data.data());
                         }
                         internal::SumInRankOrder(parts, out);
                         return Status::OK();
                       });
}

Status InProcessCommunicator::ReduceScatter(ConstCommBuffer in, CommBuffer out) {
  Contribution mine;
  mine.invalid = ValidateReduceScatter(size(), in, out);
  if (mine.invalid.ok()) mine.invalid = HostOnly("reduce_scatter", in);
  if (mine.invalid.ok()) mine.invalid = HostOnly("reduce_scatter", out);
  if (mine.invalid.ok()) mine.data = CopyOf(in);
  const size_t block_bytes = ConstCommBuffer(out).bytes();
  return RunCollective({OpKind::kReduceScatter, in.dtype, in.count, -1}, std::move(mine),
                       [&](const std::string&, const Collective& c) {
                         std::vector<const char*> parts;
                         for (const Contribution& from : c.contributions) {
                           parts.push_back(from.data.data() + rank_ * block_bytes);
                         }
                         internal::SumInRankOrder(parts, out);
                         return Status::OK();
                       });
}

Status InProcessCommunicator::AllGather(ConstCommBuffer in, CommBuffer out) {
  Contribution mine;
  mine.invalid = ValidateAllGather(size(), in, out);
  if (mine.invalid.ok()) mine.invalid = HostOnly("all_gather", in);
  if (mine.invalid.ok()) mine.invalid = HostOnly("all_gather", out);
  if (mine.invalid.ok()) mine.data = CopyOf(in);
  return RunCollective({OpKind::kAllGather, in.dtype, in.count, -1}, std::move(mine),
                       [&](const std::string&, const Collective& c) {
                         char* dst = static_cast<char*>(out.data);
                         for (const Contribution& from : c.contributions) {
                           if (from.data.empty()) continue;
                           std::memcpy(dst, from.data.data(), from.data.size());
                           dst += from.data.size();
                         }
                         return Status::OK();
                       });
}

Status InProcessCommunicator::AllToAllV(ConstCommBuffer in, const std::vector<int64_t>& send_counts,
                                        CommBuffer out, const std::vector<int64_t>& recv_counts) {
  Contribution mine;
  mine.invalid = ValidateAllToAllV(size(), in, send_counts, out, recv_counts);
  if (mine.invalid.ok()) mine.invalid = HostOnly("all_to_all_v", in);
  if (mine.invalid.ok()) mine.invalid = HostOnly("all_to_all_v", out);
  if (mine.invalid.ok()) {
    mine.data = CopyOf(in);
    mine.send_counts = send_counts;
    mine.recv_counts = recv_counts;
  }
  const size_t element_bytes = CommDTypeSize(in.dtype);
  return RunCollective({OpKind::kAllToAllV, in.dtype, -1, -1}, std::move(mine),
                       [&](const std::string& what, const Collective& c) {
                         EMBER_RETURN_IF_ERROR(CheckCountsPairUp(what, c.contributions));
                         char* dst = static_cast<char*>(out.data);
                         for (int q = 0; q < size(); ++q) {
                           const Contribution& from = c.contributions[q];
                           int64_t offset = 0;
                           for (int p = 0; p < rank_; ++p) offset += from.send_counts[p];
                           const size_t bytes =
                               static_cast<size_t>(from.send_counts[rank_]) * element_bytes;
                           if (bytes == 0) continue;
                           std::memcpy(dst, from.data.data() + offset * element_bytes, bytes);
                           dst += bytes;
                         }
                         return Status::OK();
                       });
}

Status InProcessCommunicator::Broadcast(CommBuffer data, int root) {
  Contribution mine;
  mine.invalid = ValidateBroadcast(size(), data, root);
  if (mine.invalid.ok()) mine.invalid = HostOnly("broadcast", data);
  if (mine.invalid.ok() && root == rank_) mine.data = CopyOf(data);
  return RunCollective({OpKind::kBroadcast, data.dtype, data.count, root}, std::move(mine),
                       [&](const std::string&, const Collective& c) {
                         const std::vector<char>& from = c.contributions[root].data;
                         if (root != rank_ && !from.empty()) {
                           std::memcpy(data.data, from.data(), from.size());
                         }
                         return Status::OK();
                       });
}

Status InProcessCommunicator::Barrier() {
  return RunCollective({OpKind::kBarrier, CommDType::kF32, -1, -1}, Contribution(),
                       [](const std::string&, const Collective&) { return Status::OK(); });
}

void InProcessCommunicator::Abort(const Status& reason) {
  MutexLock lock(group_->mu);
  if (!group_->gone[rank_].ok()) return;
  group_->gone[rank_] = reason.ok() ? Status::Cancelled("aborted without a reason") : reason;
  group_->changed.notify_all();
}

}  // namespace

Result<std::vector<std::unique_ptr<Communicator>>> NewInProcessCommunicators(
    int size, const CommunicatorOptions& options) {
  if (size < 1) return Status::InvalidArgument("a communicator group needs at least one rank");
  EMBER_RETURN_IF_ERROR(ValidateCommunicatorOptions(options));
  auto group = std::make_shared<GroupState>(size, options);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<InProcessCommunicator>(group, r));
  return ranks;
}

}  // namespace ember
