#include "core/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/in_process_communicator.h"
#include "core/internal/mpi_wire.h"
#include "core/internal/mpi_world.h"
#include "core/mutex.h"

namespace ember {
namespace {

using internal::Backoff;
using internal::Bytes;
using internal::Clock;
using internal::DeadlineAfter;
using internal::FitsOneMessage;
using internal::HostOnly;
using internal::IsFor;
using internal::MakeInvalidMessage;
using internal::MakeMessage;
using internal::MpiStatus;
using internal::MpiUserTagMax;
using internal::OpKind;
using internal::OpName;
using internal::ParseMessage;
using internal::PendingMessage;
using internal::PollLeaveNotices;
using internal::RankList;
using internal::Received;
using internal::Signature;
using internal::SumInRankOrder;
using internal::WireHeader;

// One message this rank waits for.
struct Incoming {
  int peer = -1;
  int tag = 0;
  bool matched = false;  // Probed; `request` receives it into `bytes`.
  bool done = false;
  MPI_Request request = MPI_REQUEST_NULL;
  Bytes bytes;
};

// Thread safety: as Communicator: one calling thread at a time, Abort from
// any thread. Different MpiCommunicators are independent (MPI_THREAD_MULTIPLE).
class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(int64_t id, MPI_Comm comm, int rank, int size, const CommunicatorOptions& options)
      : id_(id),
        comm_(comm),
        rank_(rank),
        size_(size),
        options_(options),
        posted_to_(new std::atomic<int64_t>[size]),
        received_from_(size, 0) {
    for (int q = 0; q < size; ++q) posted_to_[q].store(0, std::memory_order_relaxed);
  }
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status Send(ConstCommBuffer data, int dst, int tag) override;
  Status Recv(CommBuffer data, int src, int tag) override;
  Status AllReduce(ConstCommBuffer in, CommBuffer out) override;
  Status ReduceScatter(ConstCommBuffer in, CommBuffer out) override;
  Status AllGather(ConstCommBuffer in, CommBuffer out) override;
  Status AllToAllV(ConstCommBuffer in, const std::vector<int64_t>& send_counts, CommBuffer out,
                   const std::vector<int64_t>& recv_counts) override;
  Status Broadcast(CommBuffer data, int root) override;
  Status Barrier() override;
  std::optional<CommCounters> counters() const override {
    return CommCounters{messages_sent_.load(std::memory_order_relaxed),
                        bytes_sent_.load(std::memory_order_relaxed)};
  }
  void Abort(const Status& reason) override;

 private:
  // Runs collective #next: sends outgoing[q] to every peer q and receives
  // one message from each into (*received)[q]; then checks that every peer
  // ran the same collective with valid arguments. `invalid` is this rank's
  // own argument error, returned once the exchange is done.
  // With `second_half`, the exchange continues the last collective (the
  // all-gather half of AllReduce): same number and tag, which MPI's
  // non-overtaking order keeps apart from the first half's messages.
  Status Exchange(const Signature& signature, const Status& invalid,
                  const std::vector<Bytes>& outgoing, std::vector<Received>* received,
                  std::string* what, bool second_half = false);
  // The reduce-scatter half of AllReduce and ReduceScatter: block q of `in`
  // (elements [begins[q], begins[q + 1])) goes to rank q, and this rank sums
  // the size() copies of its own block in rank order into `block`. `invalid`
  // is the op's own argument check. `block` may lie inside `in`.
  Status ReduceBlocks(const Signature& signature, Status invalid, ConstCommBuffer in,
                      const std::vector<int64_t>& begins, CommBuffer block, std::string* what);
  // The exchange of AllGather: after `invalid` (the op's own
  // argument check), checks that `in` and `out` are host buffers and `in`
  // fits one message, then sends `in` to every peer and receives theirs into
  // (*received)[q]. Returns this rank's message (its copy of `in`).
  Result<Bytes> ExchangeInputs(OpKind kind, Status invalid, ConstCommBuffer in, ConstCommBuffer out,
                               std::vector<Received>* received);
  // The argument checks of Send and Recv (`op`) with `peer`: InvalidArgument
  // for a bad peer or tag, a device buffer or a buffer without data.
  Status CheckPointToPoint(const char* op, ConstCommBuffer data, int peer, int tag) const;
  // Sends `bytes` to `peer`; the copy completes in the background.
  Status Post(const std::string& what, int peer, int tag, Bytes bytes);
  // Waits until every message of `incoming` has arrived, this rank aborts,
  // a peer it waits on leaves, or the deadline passes. In a `collective`,
  // also until any member aborts (leaves with a failure, not a Cancelled
  // destruction): the members a collective still waits on may be waiting
  // for that one themselves, or be dead where MPI does not say so, and a
  // collective of a failed job never completes.
  Status WaitFor(const std::string& what, std::vector<Incoming>& incoming,
                 Clock::time_point deadline, bool collective = false);
  // Hands the receives of a failed wait that MPI has matched to pending_,
  // where they complete into their own buffers.
  void Orphan(std::vector<Incoming>& incoming);
  void TestPending();
  Status OwnAbort(const std::string& what) const;
  // Unavailable if `peer` left the group and has nothing more on its way
  // here (for a send: if it left at all).
  Status PeerGone(const std::string& what, int peer, bool for_send) const;
  int CollectiveTag(int64_t seq) const {
    const int max = MpiUserTagMax();
    return max + 1 + static_cast<int>(seq % max);
  }

  const int64_t id_;
  MPI_Comm comm_;
  const int rank_;
  const int size_;
  const CommunicatorOptions options_;
  // Messages posted to each peer; read by Abort on any thread for its
  // notices, where a relaxed snapshot suffices (the count only has to cover
  // what the peer can receive, and nothing is posted after a clean exit).
  std::unique_ptr<std::atomic<int64_t>[]> posted_to_;
  // Only the calling thread touches these.
  std::vector<int64_t> received_from_;
  std::vector<PendingMessage> pending_;
  int64_t next_collective_ = 1;
  std::atomic<int64_t> messages_sent_{0};
  std::atomic<int64_t> bytes_sent_{0};

  std::atomic<bool> aborted_{false};
  mutable Mutex mu_;
  Status abort_reason_ GUARDED_BY(mu_);
  std::vector<PendingMessage> notices_sent_ GUARDED_BY(mu_);
};

MpiCommunicator::~MpiCommunicator() {
  Abort(Status::Cancelled("its communicator was destroyed"));
  TestPending();
  std::vector<PendingMessage> unfinished;
  {
    MutexLock lock(mu_);
    unfinished = std::move(notices_sent_);
  }
  for (PendingMessage& m : pending_) unfinished.push_back(std::move(m));
  internal::RetireMpiGroup(id_, &comm_, std::move(unfinished));
}

Status MpiCommunicator::OwnAbort(const std::string& what) const {
  // Acquire: pairs with Abort's release, so abort_reason_ is set when seen.
  if (!aborted_.load(std::memory_order_acquire)) return Status::OK();
  MutexLock lock(mu_);
  return Status::Cancelled(what, ": rank ", rank_, " has aborted: ", abort_reason_.ToString());
}

Status MpiCommunicator::PeerGone(const std::string& what, int peer, bool for_send) const {
  const std::optional<internal::LeaveNotice> notice = internal::FindLeaveNotice(id_, peer);
  if (!notice) return Status::OK();
  // A peer that left after sending what this rank still waits for is not
  // gone yet for that message: it is on its way.
  if (!for_send && received_from_[peer] < notice->sent_to_me) return Status::OK();
  return Status::Unavailable(what, ": rank ", peer, " left the group: ", notice->reason.ToString());
}

void MpiCommunicator::TestPending() {
  std::erase_if(pending_, [this](PendingMessage& m) {
    int flag = 0;
    if (MPI_Test(&m.request, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return true;
    if (flag && m.is_receive) ++received_from_[m.peer];
    return flag != 0;
  });
}

Status MpiCommunicator::Post(const std::string& what, int peer, int tag, Bytes bytes) {
  PendingMessage m;
  m.bytes = std::move(bytes);
  m.peer = peer;
  EMBER_RETURN_IF_ERROR(MpiStatus(MPI_Isend(m.bytes->data(), static_cast<int>(m.bytes->size()),
                                            MPI_BYTE, peer, tag, comm_, &m.request),
                                  what, "MPI_Isend"));
  posted_to_[peer].fetch_add(1, std::memory_order_relaxed);
  messages_sent_.fetch_add(1, std::memory_order_relaxed);
  bytes_sent_.fetch_add(static_cast<int64_t>(m.bytes->size()), std::memory_order_relaxed);
  pending_.push_back(std::move(m));
  return Status::OK();
}

void MpiCommunicator::Orphan(std::vector<Incoming>& incoming) {
  for (Incoming& in : incoming) {
    if (!in.matched || in.done) continue;
    PendingMessage m;
    m.request = in.request;
    m.bytes = std::move(in.bytes);
    m.peer = in.peer;
    m.is_receive = true;
    pending_.push_back(std::move(m));
  }
}

Status MpiCommunicator::WaitFor(const std::string& what, std::vector<Incoming>& incoming,
                                Clock::time_point deadline, bool collective) {
  Backoff backoff;
  while (true) {
    Status status = OwnAbort(what);
    std::vector<int> missing;
    for (Incoming& in : incoming) {
      if (!status.ok()) break;
      if (!in.matched && !in.done) {
        int flag = 0, bytes = 0;
        MPI_Message message;
        MPI_Status probe;
        status = MpiStatus(MPI_Improbe(in.peer, in.tag, comm_, &flag, &message, &probe), what,
                           "MPI_Improbe");
        if (status.ok() && flag) {
          MPI_Get_count(&probe, MPI_BYTE, &bytes);
          in.bytes = std::make_shared<std::vector<char>>(static_cast<size_t>(bytes));
          status = MpiStatus(MPI_Imrecv(in.bytes->data(), bytes, MPI_BYTE, &message, &in.request),
                             what, "MPI_Imrecv");
          in.matched = status.ok();
        }
      }
      if (status.ok() && in.matched && !in.done) {
        int flag = 0;
        status = MpiStatus(MPI_Test(&in.request, &flag, MPI_STATUS_IGNORE), what, "MPI_Test");
        if (flag && !IsFor(id_, *in.bytes)) {
          VLOG(1) << what << ": dropped a stray message of another communicator from rank "
                  << in.peer;
          in.matched = false;
          in.bytes.reset();
        } else if (flag) {
          in.done = true;
          ++received_from_[in.peer];
        }
      }
      if (!in.done) missing.push_back(in.peer);
    }
    if (status.ok() && missing.empty()) return Status::OK();
    if (status.ok()) {
      PollLeaveNotices();
      for (int peer : missing) {
        if (status = PeerGone(what, peer, /*for_send=*/false); !status.ok()) break;
      }
      for (int peer = 0; collective && status.ok() && peer < size_; ++peer) {
        if (peer == rank_) continue;
        const std::optional<internal::LeaveNotice> notice = internal::FindLeaveNotice(id_, peer);
        if (notice && notice->reason.code() != StatusCode::kCancelled) {
          status = Status::Unavailable(what, ": rank ", peer, " left the group: ",
                                       notice->reason.ToString());
        }
      }
    }
    if (status.ok() && Clock::now() >= deadline) {
      std::sort(missing.begin(), missing.end());
      missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
      status = Status::DeadlineExceeded(what, ": ", RankList(missing), " did not answer within ",
                                        options_.timeout_seconds, " s");
    }
    if (!status.ok()) {
      Orphan(incoming);
      return status;
    }
    TestPending();
    backoff.Wait();
  }
}

Status MpiCommunicator::Exchange(const Signature& signature, const Status& invalid,
                                 const std::vector<Bytes>& outgoing,
                                 std::vector<Received>* received, std::string* what,
                                 bool second_half) {
  const auto deadline = DeadlineAfter(options_.timeout_seconds);
  const int64_t seq = second_half ? next_collective_ - 1 : next_collective_++;
  *what = internal::StrCat(OpName(signature.kind), " #", seq,
                           second_half ? " (all-gather half)" : "");
  // Checked before any communication: peers then time out or see us gone.
  EMBER_RETURN_IF_ERROR(OwnAbort(*what));
  TestPending();
  const int tag = CollectiveTag(seq);
  std::vector<Incoming> incoming;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    EMBER_RETURN_IF_ERROR(Post(*what, q, tag, outgoing[q]));
    Incoming in;
    in.peer = q;
    in.tag = tag;
    incoming.push_back(std::move(in));
  }
  EMBER_RETURN_IF_ERROR(WaitFor(*what, incoming, deadline, /*collective=*/true));
  if (!invalid.ok()) {
    const std::string problem = internal::ArgumentProblem(signature.kind, invalid);
    return Status(invalid.code(), internal::StrCat(*what, ": ", problem));
  }
  received->assign(size_, Received());
  for (Incoming& in : incoming) {
    EMBER_ASSIGN_OR_RETURN(Received r, ParseMessage(*what, in.peer, std::move(in.bytes)));
    (*received)[in.peer] = std::move(r);
  }
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    const Received& r = (*received)[q];
    if (r.header.seq != seq) {
      return Status::InvalidArgument(*what, ": rank ", q, " sent its collective #", r.header.seq,
                                     " here (the ranks are out of step)");
    }
    if (r.header.invalid) {
      return Status::InvalidArgument(*what, ": rank ", q, " passed invalid arguments: ",
                                     std::string(r.payload, r.header.payload_count));
    }
    if (!(r.signature == signature)) {
      return Status::InvalidArgument(*what, ": rank ", rank_, " called ", signature.ToString(),
                                     " but rank ", q, " called ", r.signature.ToString());
    }
  }
  return Status::OK();
}

Status MpiCommunicator::CheckPointToPoint(const char* op, ConstCommBuffer data, int peer,
                                          int tag) const {
  EMBER_RETURN_IF_ERROR(ValidatePeer(*this, op, peer, tag));
  EMBER_RETURN_IF_ERROR(HostOnly(op, data));
  if (tag > MpiUserTagMax()) {
    return Status::InvalidArgument(op, ": tag ", tag, " exceeds ", MpiUserTagMax());
  }
  if (data.count < 0 || (data.count > 0 && data.data == nullptr)) {
    return Status::InvalidArgument(op, ": invalid buffer of ", data.count, " elements");
  }
  return Status::OK();
}

Status MpiCommunicator::Send(ConstCommBuffer data, int dst, int tag) {
  EMBER_RETURN_IF_ERROR(CheckPointToPoint("send", data, dst, tag));
  EMBER_RETURN_IF_ERROR(FitsOneMessage("send", static_cast<int64_t>(data.bytes())));
  const std::string what = internal::StrCat("send to rank ", dst, " (tag ", tag, ")");
  EMBER_RETURN_IF_ERROR(OwnAbort(what));
  TestPending();
  PollLeaveNotices();
  EMBER_RETURN_IF_ERROR(PeerGone(what, dst, /*for_send=*/true));
  return Post(
      what, dst, tag,
      MakeMessage(id_, {OpKind::kSend, data.dtype, data.count, -1}, 0, data.data, data.count));
}

Status MpiCommunicator::Recv(CommBuffer data, int src, int tag) {
  EMBER_RETURN_IF_ERROR(CheckPointToPoint("recv", data, src, tag));
  const std::string what = internal::StrCat("recv from rank ", src, " (tag ", tag, ")");
  const auto deadline = DeadlineAfter(options_.timeout_seconds);
  EMBER_RETURN_IF_ERROR(OwnAbort(what));
  TestPending();
  std::vector<Incoming> incoming(1);
  incoming[0].peer = src;
  incoming[0].tag = tag;
  EMBER_RETURN_IF_ERROR(WaitFor(what, incoming, deadline));
  EMBER_ASSIGN_OR_RETURN(Received r, ParseMessage(what, src, std::move(incoming[0].bytes)));
  if (r.signature.kind != OpKind::kSend || r.header.invalid) {
    return Status::Internal(what, ": rank ", src, " sent a message that is not a send");
  }
  if (r.signature.dtype != data.dtype || r.signature.count != data.count) {
    return Status::InvalidArgument(what, ": rank ", src, " sent ", r.signature.count, " ",
                                   CommDTypeName(r.signature.dtype), " but rank ", rank_,
                                   " expects ", data.count, " ", CommDTypeName(data.dtype));
  }
  if (data.count > 0) std::memcpy(data.data, r.payload, ConstCommBuffer(data).bytes());
  return Status::OK();
}

Result<Bytes> MpiCommunicator::ExchangeInputs(OpKind kind, Status invalid, ConstCommBuffer in,
                                              ConstCommBuffer out,
                                              std::vector<Received>* received) {
  const char* op = OpName(kind);
  if (invalid.ok()) invalid = HostOnly(op, in);
  if (invalid.ok()) invalid = HostOnly(op, out);
  if (invalid.ok()) invalid = FitsOneMessage(op, static_cast<int64_t>(in.bytes()));
  const Signature signature{kind, in.dtype, in.count, -1};
  // One copy of the input, sent to every peer.
  const Bytes mine = invalid.ok()
                         ? MakeMessage(id_, signature, next_collective_, in.data, in.count)
                         : MakeInvalidMessage(id_, signature, next_collective_, invalid.message());
  std::string what;
  EMBER_RETURN_IF_ERROR(
      Exchange(signature, invalid, std::vector<Bytes>(size_, mine), received, &what));
  return mine;
}

// Where block q of an AllReduce of `count` elements over `size` ranks starts:
// blocks differ by at most one element, the first count % size one longer.
std::vector<int64_t> BlockBegins(int64_t count, int size) {
  std::vector<int64_t> begins(size + 1);
  const int64_t base = count / size, longer = count % size;
  for (int q = 0; q <= size; ++q) begins[q] = q * base + std::min<int64_t>(q, longer);
  return begins;
}

Status MpiCommunicator::ReduceBlocks(const Signature& signature, Status invalid,
                                     ConstCommBuffer in, const std::vector<int64_t>& begins,
                                     CommBuffer block, std::string* what) {
  const char* op = OpName(signature.kind);
  if (invalid.ok()) invalid = HostOnly(op, in);
  if (invalid.ok()) invalid = HostOnly(op, block);
  if (invalid.ok()) invalid = FitsOneMessage(op, (begins[1] - begins[0]) *
                                                     static_cast<int64_t>(CommDTypeSize(in.dtype)));
  const size_t element_bytes = CommDTypeSize(in.dtype);
  const char* from = static_cast<const char*>(in.data);
  std::vector<Bytes> outgoing(size_);
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    outgoing[q] = invalid.ok() ? MakeMessage(id_, signature, next_collective_,
                                             from + begins[q] * element_bytes,
                                             begins[q + 1] - begins[q])
                               : MakeInvalidMessage(id_, signature, next_collective_,
                                                    invalid.message());
  }
  // This rank's own part, copied before `block` (which may be in it) is written.
  std::vector<char> own;
  if (invalid.ok()) {
    own.assign(from + begins[rank_] * element_bytes, from + begins[rank_ + 1] * element_bytes);
  }
  std::vector<Received> received;
  EMBER_RETURN_IF_ERROR(Exchange(signature, invalid, outgoing, &received, what));
  std::vector<const char*> parts(size_);
  for (int q = 0; q < size_; ++q) {
    if (q != rank_ && received[q].header.payload_count != block.count) {
      return Status::Internal(*what, ": rank ", q, " sent ", received[q].header.payload_count,
                              " elements of block ", rank_, " for ", block.count);
    }
    parts[q] = q == rank_ ? own.data() : received[q].payload;
  }
  internal::SumInRankOrder(parts, block);
  return Status::OK();
}

Status MpiCommunicator::AllReduce(ConstCommBuffer in, CommBuffer out) {
  // A reduce-scatter (rank q sums block q in rank order) and an all-gather of
  // the summed blocks: every element is the rank-ordered sum, as the contract
  // asks, for 2 (size - 1) / size x count elements sent per rank.
  const Signature signature{OpKind::kAllReduce, in.dtype, in.count, -1};
  const std::vector<int64_t> begins = BlockBegins(std::max<int64_t>(in.count, 0), size_);
  const size_t element_bytes = CommDTypeSize(in.dtype);
  CommBuffer mine = out;
  mine.data = static_cast<char*>(out.data) + begins[rank_] * element_bytes;
  mine.count = begins[rank_ + 1] - begins[rank_];
  std::string what;
  EMBER_RETURN_IF_ERROR(
      ReduceBlocks(signature, ValidateAllReduce(in, out), in, begins, mine, &what));
  std::vector<Received> received;
  EMBER_RETURN_IF_ERROR(Exchange(
      signature, Status::OK(),
      std::vector<Bytes>(size_, MakeMessage(id_, signature, next_collective_ - 1, mine.data,
                                            mine.count)),
      &received, &what, /*second_half=*/true));
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    const int64_t count = begins[q + 1] - begins[q];
    if (received[q].header.payload_count != count) {
      return Status::Internal(what, ": rank ", q, " sent ", received[q].header.payload_count,
                              " elements of block ", q, " for ", count);
    }
    if (count > 0) {
      std::memcpy(static_cast<char*>(out.data) + begins[q] * element_bytes, received[q].payload,
                  static_cast<size_t>(count) * element_bytes);
    }
  }
  return Status::OK();
}

Status MpiCommunicator::ReduceScatter(ConstCommBuffer in, CommBuffer out) {
  const Signature signature{OpKind::kReduceScatter, in.dtype, in.count, -1};
  std::vector<int64_t> begins(size_ + 1);
  for (int q = 0; q <= size_; ++q) begins[q] = q * std::max<int64_t>(out.count, 0);
  std::string what;
  return ReduceBlocks(signature, ValidateReduceScatter(size_, in, out), in, begins, out, &what);
}

Status MpiCommunicator::AllGather(ConstCommBuffer in, CommBuffer out) {
  std::vector<Received> received;
  EMBER_RETURN_IF_ERROR(
      ExchangeInputs(OpKind::kAllGather, ValidateAllGather(size_, in, out), in, out, &received)
          .status());
  const size_t block_bytes = in.bytes();
  if (block_bytes == 0) return Status::OK();
  char* dst = static_cast<char*>(out.data);
  for (int q = 0; q < size_; ++q) {
    const char* from = q == rank_ ? static_cast<const char*>(in.data) : received[q].payload;
    std::memcpy(dst + q * block_bytes, from, block_bytes);
  }
  return Status::OK();
}

Status MpiCommunicator::AllToAllV(ConstCommBuffer in, const std::vector<int64_t>& send_counts,
                                  CommBuffer out, const std::vector<int64_t>& recv_counts) {
  Status invalid = ValidateAllToAllV(size_, in, send_counts, out, recv_counts);
  if (invalid.ok()) invalid = HostOnly("all_to_all_v", in);
  if (invalid.ok()) invalid = HostOnly("all_to_all_v", out);
  const size_t element_bytes = CommDTypeSize(in.dtype);
  for (int q = 0; invalid.ok() && q < size_; ++q) {
    invalid = FitsOneMessage("all_to_all_v", send_counts[q] * static_cast<int64_t>(element_bytes));
  }
  const Signature signature{OpKind::kAllToAllV, in.dtype, -1, -1};
  std::vector<Bytes> outgoing(size_);
  if (invalid.ok()) {
    const char* from = static_cast<const char*>(in.data);
    for (int q = 0; q < size_; ++q) {
      if (q != rank_)
        outgoing[q] = MakeMessage(id_, signature, next_collective_, from, send_counts[q]);
      from += send_counts[q] * element_bytes;
    }
  } else {
    outgoing.assign(size_, MakeInvalidMessage(id_, signature, next_collective_, invalid.message()));
  }
  std::vector<Received> received;
  std::string what;
  EMBER_RETURN_IF_ERROR(Exchange(signature, invalid, outgoing, &received, &what));
  for (int q = 0; q < size_; ++q) {
    if (q != rank_ && received[q].header.payload_count != recv_counts[q]) {
      return Status::InvalidArgument(what, ": rank ", q, " sends ",
                                     received[q].header.payload_count, " elements to rank ", rank_,
                                     " but rank ", rank_, " expects ", recv_counts[q]);
    }
  }
  int64_t own_offset = 0;
  for (int q = 0; q < rank_; ++q) own_offset += send_counts[q];
  char* dst = static_cast<char*>(out.data);
  for (int q = 0; q < size_; ++q) {
    const size_t bytes = static_cast<size_t>(recv_counts[q]) * element_bytes;
    if (bytes == 0) continue;
    const char* from = q == rank_ ? static_cast<const char*>(in.data) + own_offset * element_bytes
                                  : received[q].payload;
    std::memcpy(dst, from, bytes);
    dst += bytes;
  }
  return Status::OK();
}

Status MpiCommunicator::Broadcast(CommBuffer data, int root) {
  Status invalid = ValidateBroadcast(size_, data, root);
  if (invalid.ok()) invalid = HostOnly("broadcast", data);
  if (invalid.ok())
    invalid = FitsOneMessage("broadcast", static_cast<int64_t>(ConstCommBuffer(data).bytes()));
  const Signature signature{OpKind::kBroadcast, data.dtype, data.count, root};
  // Non-roots send the root (and each other) their signature only: every
  // rank then knows who joined and whether all agree.
  std::vector<Bytes> outgoing;
  if (!invalid.ok()) {
    outgoing.assign(size_, MakeInvalidMessage(id_, signature, next_collective_, invalid.message()));
  } else if (rank_ == root) {
    outgoing.assign(size_, MakeMessage(id_, signature, next_collective_, data.data, data.count));
  } else {
    outgoing.assign(size_, MakeMessage(id_, signature, next_collective_, nullptr, 0));
  }
  std::vector<Received> received;
  std::string what;
  EMBER_RETURN_IF_ERROR(Exchange(signature, invalid, outgoing, &received, &what));
  if (rank_ == root || data.count == 0) return Status::OK();
  if (received[root].header.payload_count != data.count) {
    return Status::Internal(what, ": root ", root, " sent ", received[root].header.payload_count,
                            " elements for ", data.count);
  }
  std::memcpy(data.data, received[root].payload, ConstCommBuffer(data).bytes());
  return Status::OK();
}

Status MpiCommunicator::Barrier() {
  const Signature signature{OpKind::kBarrier, CommDType::kF32, -1, -1};
  std::vector<Received> received;
  std::string what;
  return Exchange(
      signature, Status::OK(),
      std::vector<Bytes>(size_, MakeMessage(id_, signature, next_collective_, nullptr, 0)),
      &received, &what);
}

void MpiCommunicator::Abort(const Status& reason) {
  Status kept;
  {
    MutexLock lock(mu_);
    if (!abort_reason_.ok()) return;
    abort_reason_ = reason.ok() ? Status::Cancelled("aborted without a reason") : reason;
    kept = abort_reason_;
  }
  // Release: OwnAbort's acquire then sees abort_reason_.
  aborted_.store(true, std::memory_order_release);
  std::vector<PendingMessage> sent;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    // A notice that cannot be sent leaves the peers to their timeout.
    std::optional<PendingMessage> notice = internal::PostLeaveNotice(
        id_, q, posted_to_[q].load(std::memory_order_relaxed), kept);
    if (notice) sent.push_back(std::move(*notice));
  }
  MutexLock lock(mu_);
  for (PendingMessage& m : sent) notices_sent_.push_back(std::move(m));
}

}  // namespace

Result<std::unique_ptr<Communicator>> NewMpiCommunicator(const CommunicatorOptions& options) {
  EMBER_RETURN_IF_ERROR(ValidateCommunicatorOptions(options));
  EMBER_ASSIGN_OR_RETURN(MpiWorld world, internal::WorldForNewCommunicator());
  if (!world.launched_by_mpirun) {
    // No MPI: a group of one, which needs no messages at all.
    EMBER_ASSIGN_OR_RETURN(auto group, NewInProcessCommunicators(1, options));
    return std::move(group[0]);
  }
  EMBER_ASSIGN_OR_RETURN(internal::MpiGroup group,
                         internal::JoinNewMpiGroup(world, options.timeout_seconds));
  return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(
      group.id, group.comm, group.rank, group.size, options));
}

}  // namespace ember
