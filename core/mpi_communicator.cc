#include "core/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/in_process_communicator.h"
#include "core/mutex.h"

namespace ember {
namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::shared_ptr<std::vector<char>>;

// Tags of the process's control channel (a dup of the world made by InitMpi).
constexpr int kLeaveTag = 1;  // A communicator of another rank left its group.
constexpr int kHelloTag = 2;  // Another rank is making communicator #id.
// A leave notice carries at most this much of the reason, which keeps it a
// small (eager) message.
constexpr size_t kMaxReasonBytes = 1024;
// Messages from destroyed communicators that FinalizeMpi waits for.
constexpr double kFinalizeGraceSeconds = 10;

Clock::time_point DeadlineAfter(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Spacing of polls: MPI has no blocking wait with a timeout, so waits poll.
// A few yields keep latency low when the peer is about to answer; then
// sleeps growing to 1 ms keep an idle wait from taking a core (ranks are
// often oversubscribed in tests).
class Backoff {
 public:
  void Wait() {
    if (++polls_ <= 64) {
      std::this_thread::yield();
      return;
    }
    const int64_t sleep_us = std::min<int64_t>(1000, 10 * (polls_ - 64));
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
  }

 private:
  int64_t polls_ = 0;
};

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

Status MpiStatus(int code, const std::string& what, const char* call) {
  if (code == MPI_SUCCESS) return Status::OK();
  return Status::Internal(what, ": ", call, " failed: ", MpiErrorText(code));
}

bool LaunchedByMpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

// A message whose completion no call waits for any more, kept with its
// buffer until MPI is done with it.
struct PendingMessage {
  MPI_Request request = MPI_REQUEST_NULL;
  Bytes bytes;
  int peer = -1;
  bool is_receive = false;
};

// What a peer's communicator said when it left its group.
struct LeaveNotice {
  Status reason;
  int64_t sent_to_me = 0;  // Messages it had sent to this rank.
};

// On the wire, before the reason's text.
struct LeaveNoticeHeader {
  int64_t communicator_id;
  int64_t sent_to_you;
  int32_t code;
  int32_t text_bytes;
};

// State of the process, shared by its MPI communicators.
struct ProcessState {
  Mutex mu;
  bool initialized GUARDED_BY(mu) = false;
  bool finalized GUARDED_BY(mu) = false;
  bool mpi_started_by_us GUARDED_BY(mu) = false;
  MpiWorld world GUARDED_BY(mu);
  // Null when MPI is not in use (no mpirun). Written once, by InitMpi.
  MPI_Comm control = MPI_COMM_NULL;
  int user_tag_max = 0;  // Written once, by InitMpi.
  int64_t next_id GUARDED_BY(mu) = 1;
  std::set<int64_t> live GUARDED_BY(mu);
  // By communicator id, then rank. Notices for ids not made here yet are
  // kept; those for destroyed communicators are dropped.
  std::map<int64_t, std::map<int, LeaveNotice>> notices GUARDED_BY(mu);
  std::vector<PendingMessage> detached GUARDED_BY(mu);
  // Serialises NewMpiCommunicator: ids must follow the same order everywhere.
  Mutex create_mu;
};

ProcessState& Process() {
  static ProcessState* state = new ProcessState();  // Never destroyed: used until exit.
  return *state;
}

// Receives every leave notice that has arrived on the control channel.
// Any thread may call it; each notice is received by exactly one.
void PollLeaveNotices() {
  ProcessState& p = Process();
  while (true) {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, kLeaveTag, p.control, &flag, &message, &status) !=
            MPI_SUCCESS ||
        !flag) {
      return;
    }
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    std::vector<char> buffer(static_cast<size_t>(std::max(bytes, 1)));
    // A matched small message: already here, so the receive returns at once.
    if (MPI_Mrecv(buffer.data(), bytes, MPI_BYTE, &message, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
        bytes < static_cast<int>(sizeof(LeaveNoticeHeader))) {
      continue;
    }
    LeaveNoticeHeader header;
    std::memcpy(&header, buffer.data(), sizeof(header));
    const size_t text_bytes = std::min<size_t>(static_cast<size_t>(std::max(header.text_bytes, 0)),
                                               bytes - sizeof(header));
    LeaveNotice notice;
    notice.reason = Status(static_cast<StatusCode>(header.code),
                           std::string(buffer.data() + sizeof(header), text_bytes));
    notice.sent_to_me = header.sent_to_you;
    MutexLock lock(p.mu);
    if (header.communicator_id < p.next_id && p.live.count(header.communicator_id) == 0) continue;
    p.notices[header.communicator_id].emplace(status.MPI_SOURCE, std::move(notice));
  }
}

// Tests the detached messages; drops those that completed.
void TestDetachedLocked(ProcessState& p) REQUIRES(p.mu) {
  std::erase_if(p.detached, [](PendingMessage& m) {
    int flag = 0;
    return MPI_Test(&m.request, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag;
  });
}

enum class OpKind : uint8_t { kAllReduce, kAllGather, kAllToAllV, kBroadcast, kBarrier, kSend };

const char* OpName(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kAllToAllV: return "all_to_all_v";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kBarrier: return "barrier";
    case OpKind::kSend: return "send";
  }
  return "unknown";
}

// What every rank of one collective must agree on; count is -1 where ranks
// may differ (AllToAllV), root -1 where there is none.
struct Signature {
  OpKind kind = OpKind::kBarrier;
  CommDType dtype = CommDType::kF32;
  int64_t count = -1;
  int root = -1;

  bool operator==(const Signature& other) const {
    return kind == other.kind && dtype == other.dtype && count == other.count && root == other.root;
  }
  std::string ToString() const {
    std::string text = OpName(kind);
    if (kind == OpKind::kBarrier) return text;
    text += count >= 0 ? internal::StrCat(" of ", count, " ") : std::string(" of ");
    text += CommDTypeName(dtype);
    if (root >= 0) text += internal::StrCat(" from root ", root);
    return text;
  }
};

// Leads every data message. Ranks share one byte order and layout (one
// build of Ember on one kind of host).
struct WireHeader {
  uint32_t magic;
  uint8_t kind;
  uint8_t dtype;
  uint8_t invalid;  // The sender's arguments were invalid; the payload is its error text.
  uint8_t reserved0;
  int32_t root;
  // The sender's communicator id (the same on every rank): OpenMPI may hand
  // a message that arrives after its communicator was freed to the next
  // communicator that reuses its context id; such strays are dropped.
  int32_t communicator;
  int64_t count;
  int64_t seq;            // Collective number; 0 for Send.
  int64_t payload_count;  // Elements of dtype after the header (bytes of text if invalid).
};
static_assert(sizeof(WireHeader) == 40, "the payload after the header stays 8-byte aligned");
constexpr uint32_t kWireMagic = 0x454d4231;  // "EMB1"

Bytes MakeMessage(int64_t communicator, const Signature& signature, int64_t seq, const void* data,
                  int64_t count) {
  const size_t payload_bytes = static_cast<size_t>(count) * CommDTypeSize(signature.dtype);
  auto bytes = std::make_shared<std::vector<char>>(sizeof(WireHeader) + payload_bytes);
  WireHeader header{kWireMagic,
                    static_cast<uint8_t>(signature.kind),
                    static_cast<uint8_t>(signature.dtype),
                    0,
                    0,
                    signature.root,
                    static_cast<int32_t>(communicator),
                    signature.count,
                    seq,
                    count};
  std::memcpy(bytes->data(), &header, sizeof(header));
  if (payload_bytes > 0) std::memcpy(bytes->data() + sizeof(header), data, payload_bytes);
  return bytes;
}

Bytes MakeInvalidMessage(int64_t communicator, const Signature& signature, int64_t seq,
                         const std::string& problem) {
  Bytes bytes = MakeMessage(communicator, signature, seq, nullptr, 0);
  WireHeader header;
  std::memcpy(&header, bytes->data(), sizeof(header));
  header.invalid = 1;
  header.payload_count = static_cast<int64_t>(problem.size());
  std::memcpy(bytes->data(), &header, sizeof(header));
  bytes->insert(bytes->end(), problem.begin(), problem.end());
  return bytes;
}

// False for a well-formed message of another communicator (see
// WireHeader::communicator).
bool IsFor(int64_t communicator, const std::vector<char>& bytes) {
  if (bytes.size() < sizeof(WireHeader)) return true;  // Malformed: ParseMessage says so.
  WireHeader header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  return header.magic != kWireMagic || header.communicator == static_cast<int32_t>(communicator);
}

// A received data message, its header checked for shape.
struct Received {
  WireHeader header;
  Signature signature;
  const char* payload = nullptr;  // Into `bytes`.
  Bytes bytes;
};

Result<Received> ParseMessage(const std::string& what, int peer, Bytes bytes) {
  Received r;
  const Status malformed =
      Status::Internal(what, ": malformed message of ", bytes->size(), " bytes from rank ", peer);
  if (bytes->size() < sizeof(WireHeader)) return malformed;
  std::memcpy(&r.header, bytes->data(), sizeof(WireHeader));
  const WireHeader& h = r.header;
  if (h.magic != kWireMagic || h.kind > static_cast<uint8_t>(OpKind::kSend) ||
      h.dtype > static_cast<uint8_t>(CommDType::kU64) || h.payload_count < 0) {
    return malformed;
  }
  r.signature = {static_cast<OpKind>(h.kind), static_cast<CommDType>(h.dtype), h.count, h.root};
  const size_t element_bytes = h.invalid ? 1 : CommDTypeSize(r.signature.dtype);
  if (bytes->size() != sizeof(WireHeader) + static_cast<size_t>(h.payload_count) * element_bytes) {
    return malformed;
  }
  r.payload = bytes->data() + sizeof(WireHeader);
  r.bytes = std::move(bytes);
  return r;
}

Status HostOnly(const char* op, ConstCommBuffer buffer) {
  if (buffer.device.is_cpu()) return Status::OK();
  return Status::InvalidArgument(op, ": the MPI communicator moves host buffers; got ",
                                 CommDTypeName(buffer.dtype), " on ", buffer.device.ToString());
}

// MPI counts are int: one message carries at most INT_MAX bytes.
Status FitsOneMessage(const char* op, int64_t bytes) {
  if (bytes + static_cast<int64_t>(sizeof(WireHeader)) <= INT_MAX) return Status::OK();
  return Status::InvalidArgument(op, ": ", bytes, " bytes exceed what one MPI message carries (",
                                 INT_MAX - static_cast<int64_t>(sizeof(WireHeader)), " bytes)");
}

// The type sums are computed in: T, or for integers its unsigned twin, whose
// additions wrap where signed overflow would be undefined.
template <typename T, bool = std::is_integral_v<T>>
struct SumType {
  using type = T;
};
template <typename T>
struct SumType<T, true> {
  using type = std::make_unsigned_t<T>;
};

// out = parts[0] + parts[1] + ..., added in rank order.
template <typename T>
void SumInRankOrder(const std::vector<const char*>& parts, int64_t count, void* out) {
  using Acc = typename SumType<T>::type;
  Acc* sum = static_cast<Acc*>(out);
  std::memcpy(sum, parts[0], static_cast<size_t>(count) * sizeof(T));
  for (size_t r = 1; r < parts.size(); ++r) {
    const Acc* in = reinterpret_cast<const Acc*>(parts[r]);
    for (int64_t i = 0; i < count; ++i) sum[i] += in[i];
  }
}

void SumInRankOrder(const std::vector<const char*>& parts, CommBuffer out) {
  if (out.count == 0) return;
  switch (out.dtype) {
    case CommDType::kF32: return SumInRankOrder<float>(parts, out.count, out.data);
    case CommDType::kF64: return SumInRankOrder<double>(parts, out.count, out.data);
    case CommDType::kI32: return SumInRankOrder<int32_t>(parts, out.count, out.data);
    case CommDType::kI64: return SumInRankOrder<int64_t>(parts, out.count, out.data);
    case CommDType::kU64: return SumInRankOrder<uint64_t>(parts, out.count, out.data);
    case CommDType::kF16:
    case CommDType::kBF16: break;
  }
  LOG(FATAL) << "ValidateAllReduce admits only summable dtypes, got " << CommDTypeName(out.dtype);
}

std::string RankList(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += internal::StrCat(i == 0 ? "" : ", ", ranks[i]);
  return text;
}

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
  Status AllGather(ConstCommBuffer in, CommBuffer out) override;
  Status AllToAllV(ConstCommBuffer in, const std::vector<int64_t>& send_counts, CommBuffer out,
                   const std::vector<int64_t>& recv_counts) override;
  Status Broadcast(CommBuffer data, int root) override;
  Status Barrier() override;
  void Abort(const Status& reason) override;

 private:
  // Runs collective #next: sends outgoing[q] to every peer q and receives
  // one message from each into (*received)[q]; then checks that every peer
  // ran the same collective with valid arguments. `invalid` is this rank's
  // own argument error, returned once the exchange is done.
  Status Exchange(const Signature& signature, const Status& invalid,
                  const std::vector<Bytes>& outgoing, std::vector<Received>* received,
                  std::string* what);
  // Sends `bytes` to `peer`; the copy completes in the background.
  Status Post(const std::string& what, int peer, int tag, Bytes bytes);
  // Waits until every message of `incoming` has arrived, this rank aborts,
  // a peer it waits on leaves, or the deadline passes.
  Status WaitFor(const std::string& what, std::vector<Incoming>& incoming,
                 Clock::time_point deadline);
  // Hands the receives of a failed wait that MPI has matched to pending_,
  // where they complete into their own buffers.
  void Orphan(std::vector<Incoming>& incoming);
  void TestPending();
  Status OwnAbort(const std::string& what) const;
  // Unavailable if `peer` left the group and has nothing more on its way
  // here (for a send: if it left at all).
  Status PeerGone(const std::string& what, int peer, bool for_send) const;
  int CollectiveTag(int64_t seq) const {
    const int max = Process().user_tag_max;
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

  std::atomic<bool> aborted_{false};
  mutable Mutex mu_;
  Status abort_reason_ GUARDED_BY(mu_);
  std::vector<PendingMessage> notices_sent_ GUARDED_BY(mu_);
};

MpiCommunicator::~MpiCommunicator() {
  Abort(Status::Cancelled("its communicator was destroyed"));
  TestPending();
  ProcessState& p = Process();
  MutexLock lock(p.mu);
  {
    MutexLock own(mu_);
    for (PendingMessage& m : notices_sent_) p.detached.push_back(std::move(m));
  }
  for (PendingMessage& m : pending_) p.detached.push_back(std::move(m));
  TestDetachedLocked(p);
  // Pending operations on the communicator complete normally after the free.
  MPI_Comm_free(&comm_);
  p.live.erase(id_);
  p.notices.erase(id_);
}

Status MpiCommunicator::OwnAbort(const std::string& what) const {
  // Acquire: pairs with Abort's release, so abort_reason_ is set when seen.
  if (!aborted_.load(std::memory_order_acquire)) return Status::OK();
  MutexLock lock(mu_);
  return Status::Cancelled(what, ": rank ", rank_, " has aborted: ", abort_reason_.ToString());
}

Status MpiCommunicator::PeerGone(const std::string& what, int peer, bool for_send) const {
  ProcessState& p = Process();
  MutexLock lock(p.mu);
  auto by_id = p.notices.find(id_);
  if (by_id == p.notices.end()) return Status::OK();
  auto notice = by_id->second.find(peer);
  if (notice == by_id->second.end()) return Status::OK();
  // A peer that left after sending what this rank still waits for is not
  // gone yet for that message: it is on its way.
  if (!for_send && received_from_[peer] < notice->second.sent_to_me) return Status::OK();
  return Status::Unavailable(what, ": rank ", peer,
                             " left the group: ", notice->second.reason.ToString());
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
                                Clock::time_point deadline) {
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
                                 std::vector<Received>* received, std::string* what) {
  const auto deadline = DeadlineAfter(options_.timeout_seconds);
  const int64_t seq = next_collective_++;
  *what = internal::StrCat(OpName(signature.kind), " #", seq);
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
  EMBER_RETURN_IF_ERROR(WaitFor(*what, incoming, deadline));
  if (!invalid.ok()) {
    // The checks name the operation; `what` names it with its number.
    std::string problem = invalid.message();
    const std::string op = std::string(OpName(signature.kind)) + ": ";
    if (problem.rfind(op, 0) == 0) problem.erase(0, op.size());
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

Status MpiCommunicator::Send(ConstCommBuffer data, int dst, int tag) {
  EMBER_RETURN_IF_ERROR(ValidatePeer(*this, "send", dst, tag));
  EMBER_RETURN_IF_ERROR(HostOnly("send", data));
  if (tag > Process().user_tag_max) {
    return Status::InvalidArgument("send: tag ", tag, " exceeds ", Process().user_tag_max);
  }
  if (data.count < 0 || (data.count > 0 && data.data == nullptr)) {
    return Status::InvalidArgument("send: invalid buffer of ", data.count, " elements");
  }
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
  EMBER_RETURN_IF_ERROR(ValidatePeer(*this, "recv", src, tag));
  EMBER_RETURN_IF_ERROR(HostOnly("recv", data));
  if (tag > Process().user_tag_max) {
    return Status::InvalidArgument("recv: tag ", tag, " exceeds ", Process().user_tag_max);
  }
  if (data.count < 0 || (data.count > 0 && data.data == nullptr)) {
    return Status::InvalidArgument("recv: invalid buffer of ", data.count, " elements");
  }
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

Status MpiCommunicator::AllReduce(ConstCommBuffer in, CommBuffer out) {
  Status invalid = ValidateAllReduce(in, out);
  if (invalid.ok()) invalid = HostOnly("all_reduce", in);
  if (invalid.ok()) invalid = HostOnly("all_reduce", out);
  if (invalid.ok()) invalid = FitsOneMessage("all_reduce", static_cast<int64_t>(in.bytes()));
  const Signature signature{OpKind::kAllReduce, in.dtype, in.count, -1};
  // One copy of the input, sent to every peer; it is also this rank's
  // contribution, so `out` may be `in`.
  const Bytes mine = invalid.ok()
                         ? MakeMessage(id_, signature, next_collective_, in.data, in.count)
                         : MakeInvalidMessage(id_, signature, next_collective_, invalid.message());
  std::vector<Received> received;
  std::string what;
  EMBER_RETURN_IF_ERROR(
      Exchange(signature, invalid, std::vector<Bytes>(size_, mine), &received, &what));
  std::vector<const char*> parts(size_);
  for (int q = 0; q < size_; ++q) {
    parts[q] = q == rank_ ? mine->data() + sizeof(WireHeader) : received[q].payload;
  }
  SumInRankOrder(parts, out);
  return Status::OK();
}

Status MpiCommunicator::AllGather(ConstCommBuffer in, CommBuffer out) {
  Status invalid = ValidateAllGather(size_, in, out);
  if (invalid.ok()) invalid = HostOnly("all_gather", in);
  if (invalid.ok()) invalid = HostOnly("all_gather", out);
  if (invalid.ok()) invalid = FitsOneMessage("all_gather", static_cast<int64_t>(in.bytes()));
  const Signature signature{OpKind::kAllGather, in.dtype, in.count, -1};
  const Bytes mine = invalid.ok()
                         ? MakeMessage(id_, signature, next_collective_, in.data, in.count)
                         : MakeInvalidMessage(id_, signature, next_collective_, invalid.message());
  std::vector<Received> received;
  std::string what;
  EMBER_RETURN_IF_ERROR(
      Exchange(signature, invalid, std::vector<Bytes>(size_, mine), &received, &what));
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
  const std::string text = kept.message().substr(0, kMaxReasonBytes);
  std::vector<PendingMessage> sent;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    LeaveNoticeHeader header{id_, posted_to_[q].load(std::memory_order_relaxed),
                             static_cast<int32_t>(kept.code()), static_cast<int32_t>(text.size())};
    PendingMessage m;
    m.bytes = std::make_shared<std::vector<char>>(sizeof(header) + text.size());
    std::memcpy(m.bytes->data(), &header, sizeof(header));
    std::memcpy(m.bytes->data() + sizeof(header), text.data(), text.size());
    m.peer = q;
    // A notice that cannot be sent leaves the peers to their timeout.
    if (MPI_Isend(m.bytes->data(), static_cast<int>(m.bytes->size()), MPI_BYTE, q, kLeaveTag,
                  Process().control, &m.request) == MPI_SUCCESS) {
      sent.push_back(std::move(m));
    }
  }
  MutexLock lock(mu_);
  for (PendingMessage& m : sent) notices_sent_.push_back(std::move(m));
}

// Makes sure every rank is making communicator #id: names the ranks that do
// not say so by the deadline, and those making another one.
Status Handshake(int64_t id, const MpiWorld& world, Clock::time_point deadline,
                 double timeout_seconds) {
  ProcessState& p = Process();
  const std::string what = internal::StrCat("new_mpi_communicator #", id);
  std::vector<PendingMessage> hellos;
  for (int q = 0; q < world.size; ++q) {
    if (q == world.rank) continue;
    PendingMessage m;
    m.bytes = std::make_shared<std::vector<char>>(sizeof(id));
    std::memcpy(m.bytes->data(), &id, sizeof(id));
    EMBER_RETURN_IF_ERROR(MpiStatus(
        MPI_Isend(m.bytes->data(), sizeof(id), MPI_BYTE, q, kHelloTag, p.control, &m.request), what,
        "MPI_Isend"));
    hellos.push_back(std::move(m));
  }
  {
    MutexLock lock(p.mu);
    for (PendingMessage& m : hellos) p.detached.push_back(std::move(m));
  }
  std::vector<bool> heard(world.size, false);
  heard[world.rank] = true;
  Backoff backoff;
  while (true) {
    std::vector<int> missing;
    for (int q = 0; q < world.size; ++q) {
      if (heard[q]) continue;
      int flag = 0;
      MPI_Message message;
      EMBER_RETURN_IF_ERROR(
          MpiStatus(MPI_Improbe(q, kHelloTag, p.control, &flag, &message, MPI_STATUS_IGNORE), what,
                    "MPI_Improbe"));
      if (!flag) {
        missing.push_back(q);
        continue;
      }
      int64_t theirs = 0;
      // A matched 8-byte message: already here, so the receive returns at once.
      EMBER_RETURN_IF_ERROR(
          MpiStatus(MPI_Mrecv(&theirs, sizeof(theirs), MPI_BYTE, &message, MPI_STATUS_IGNORE), what,
                    "MPI_Mrecv"));
      if (theirs != id) {
        return Status::InvalidArgument(what, ": rank ", q, " is making its communicator #", theirs,
                                       " meanwhile: every rank must make its MPI communicators in "
                                       "the same order");
      }
      heard[q] = true;
    }
    if (missing.empty()) return Status::OK();
    if (Clock::now() >= deadline) {
      return Status::DeadlineExceeded(what, ": ", RankList(missing), " did not answer within ",
                                      timeout_seconds, " s");
    }
    backoff.Wait();
  }
}

}  // namespace

Result<MpiWorld> InitMpi(int* argc, char*** argv) {
  ProcessState& p = Process();
  MutexLock lock(p.mu);
  if (p.finalized) return Status::FailedPrecondition("InitMpi: MPI was finalised already");
  if (p.initialized) return p.world;
  int already = 0;
  MPI_Initialized(&already);
  MpiWorld world;
  world.launched_by_mpirun = already || LaunchedByMpirun();
  if (!world.launched_by_mpirun) {
    p.world = world;
    p.initialized = true;
    return world;
  }
  int provided = 0;
  if (!already) {
    EMBER_RETURN_IF_ERROR(MpiStatus(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided),
                                    "InitMpi", "MPI_Init_thread"));
    p.mpi_started_by_us = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    return Status::FailedPrecondition("InitMpi: MPI grants thread level ", provided,
                                      " but Ember needs MPI_THREAD_MULTIPLE (", MPI_THREAD_MULTIPLE,
                                      "): its communicators run on several threads at once");
  }
  // Errors become codes, and then Status, instead of aborting the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world.size);
  void* tag_ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
  const int tag_bound = found ? *static_cast<int*>(tag_ub) : 32767;  // The least MPI allows.
  p.user_tag_max = tag_bound / 2;
  // Every rank is starting up, so this blocking collective is harmless.
  EMBER_RETURN_IF_ERROR(
      MpiStatus(MPI_Comm_dup(MPI_COMM_WORLD, &p.control), "InitMpi", "MPI_Comm_dup"));
  p.world = world;
  p.initialized = true;
  return world;
}

Status FinalizeMpi() {
  ProcessState& p = Process();
  MutexLock lock(p.mu);
  if (!p.mpi_started_by_us || p.finalized) return Status::OK();
  if (!p.live.empty()) {
    return Status::FailedPrecondition("FinalizeMpi: ", p.live.size(),
                                      " MPI communicator(s) still exist; destroy them first");
  }
  const auto deadline = DeadlineAfter(kFinalizeGraceSeconds);
  Backoff backoff;
  while (true) {
    TestDetachedLocked(p);
    if (p.detached.empty() || Clock::now() >= deadline) break;
    backoff.Wait();
  }
  if (!p.detached.empty()) {
    LOG(WARNING) << "FinalizeMpi: " << p.detached.size()
                 << " message(s) that no rank received are given up";
    for (PendingMessage& m : p.detached) {
      if (m.is_receive) MPI_Cancel(&m.request);
      MPI_Request_free(&m.request);
    }
  }
  MPI_Comm_free(&p.control);
  p.finalized = true;
  const Status status = MpiStatus(MPI_Finalize(), "FinalizeMpi", "MPI_Finalize");
  p.detached.clear();  // MPI is done with the buffers.
  return status;
}

Result<std::unique_ptr<Communicator>> NewMpiCommunicator(const CommunicatorOptions& options) {
  EMBER_RETURN_IF_ERROR(ValidateCommunicatorOptions(options));
  ProcessState& p = Process();
  MpiWorld world;
  {
    MutexLock lock(p.mu);
    if (!p.initialized) {
      return Status::FailedPrecondition("NewMpiCommunicator: call InitMpi first");
    }
    if (p.finalized) return Status::FailedPrecondition("NewMpiCommunicator: MPI was finalised");
    world = p.world;
  }
  if (!world.launched_by_mpirun) {
    // No MPI: a group of one, which needs no messages at all.
    EMBER_ASSIGN_OR_RETURN(auto group, NewInProcessCommunicators(1, options));
    return std::move(group[0]);
  }
  MutexLock create(p.create_mu);
  const auto deadline = DeadlineAfter(options.timeout_seconds);
  int64_t id = 0;
  {
    MutexLock lock(p.mu);
    TestDetachedLocked(p);
    id = p.next_id++;
    p.live.insert(id);
  }
  auto forget = [&p, id] {
    MutexLock lock(p.mu);
    p.live.erase(id);
    p.notices.erase(id);
  };
  if (Status status = Handshake(id, world, deadline, options.timeout_seconds); !status.ok()) {
    forget();
    return status;
  }
  const std::string what = internal::StrCat("new_mpi_communicator #", id);
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request request = MPI_REQUEST_NULL;
  if (Status status =
          MpiStatus(MPI_Comm_idup(MPI_COMM_WORLD, &comm, &request), what, "MPI_Comm_idup");
      !status.ok()) {
    forget();
    return status;
  }
  Backoff backoff;
  while (true) {
    int flag = 0;
    if (Status status = MpiStatus(MPI_Test(&request, &flag, MPI_STATUS_IGNORE), what, "MPI_Test");
        !status.ok()) {
      forget();
      return status;
    }
    if (flag) break;
    if (Clock::now() >= deadline) {
      // Every rank said hello, so one of them stopped since. The request of a
      // nonblocking collective cannot be freed or cancelled: it is left.
      forget();
      return Status::DeadlineExceeded(what, ": MPI_Comm_idup did not complete within ",
                                      options.timeout_seconds, " s");
    }
    backoff.Wait();
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::unique_ptr<Communicator>(
      std::make_unique<MpiCommunicator>(id, comm, world.rank, world.size, options));
}

}  // namespace ember
