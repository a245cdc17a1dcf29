#include "core/mpi_world.h"

#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/internal/mpi_world.h"
#include "core/mutex.h"

namespace ember {
namespace internal {
namespace {

// Tags of the process's control channel (a dup of the world made by InitMpi).
constexpr int kLeaveTag = 1;  // A communicator of another rank left its group.
constexpr int kHelloTag = 2;  // Another rank is making communicator #id.
// A leave notice carries at most this much of the reason, which keeps it a
// small (eager) message.
constexpr size_t kMaxReasonBytes = 1024;
// Messages from destroyed communicators that FinalizeMpi waits for.
constexpr double kFinalizeGraceSeconds = 10;

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

bool LaunchedByMpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

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
  // Serialises JoinNewMpiGroup: ids must follow the same order everywhere.
  Mutex create_mu;
};

ProcessState& Process() {
  static ProcessState* state = new ProcessState();  // Never destroyed: used until exit.
  return *state;
}

// Tests the detached messages; drops those that completed.
void TestDetachedLocked(ProcessState& p) REQUIRES(p.mu) {
  std::erase_if(p.detached, [](PendingMessage& m) {
    int flag = 0;
    return MPI_Test(&m.request, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag;
  });
}

// Makes sure every rank is making communicator #id: names the ranks that do
// not say so by the deadline, and those making another one.
Status Handshake(int64_t id, const MpiWorld& world, Clock::time_point deadline,
                 double timeout_seconds) {
  ProcessState& p = Process();
  const std::string what = StrCat("new_mpi_communicator #", id);
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

// Duplicates the world into group #id's MPI communicator, polling against
// the deadline.
Result<MPI_Comm> DuplicateWorld(int64_t id, Clock::time_point deadline, double timeout_seconds) {
  const std::string what = StrCat("new_mpi_communicator #", id);
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request request = MPI_REQUEST_NULL;
  EMBER_RETURN_IF_ERROR(
      MpiStatus(MPI_Comm_idup(MPI_COMM_WORLD, &comm, &request), what, "MPI_Comm_idup"));
  Backoff backoff;
  while (true) {
    int flag = 0;
    EMBER_RETURN_IF_ERROR(
        MpiStatus(MPI_Test(&request, &flag, MPI_STATUS_IGNORE), what, "MPI_Test"));
    if (flag) break;
    if (Clock::now() >= deadline) {
      // Every rank said hello, so one of them stopped since. The request of a
      // nonblocking collective cannot be freed or cancelled: it is left.
      return Status::DeadlineExceeded(what, ": MPI_Comm_idup did not complete within ",
                                      timeout_seconds, " s");
    }
    backoff.Wait();
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return comm;
}

}  // namespace

Clock::time_point DeadlineAfter(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

Status MpiStatus(int code, const std::string& what, const char* call) {
  if (code == MPI_SUCCESS) return Status::OK();
  return Status::Internal(what, ": ", call, " failed: ", MpiErrorText(code));
}

std::string RankList(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += StrCat(i == 0 ? "" : ", ", ranks[i]);
  return text;
}

int MpiUserTagMax() { return Process().user_tag_max; }

Result<MpiWorld> WorldForNewCommunicator() {
  ProcessState& p = Process();
  MutexLock lock(p.mu);
  if (!p.initialized) return Status::FailedPrecondition("NewMpiCommunicator: call InitMpi first");
  if (p.finalized) return Status::FailedPrecondition("NewMpiCommunicator: MPI was finalised");
  return p.world;
}

Result<MpiGroup> JoinNewMpiGroup(const MpiWorld& world, double timeout_seconds) {
  ProcessState& p = Process();
  MutexLock create(p.create_mu);
  const auto deadline = DeadlineAfter(timeout_seconds);
  int64_t id = 0;
  {
    MutexLock lock(p.mu);
    TestDetachedLocked(p);
    id = p.next_id++;
    p.live.insert(id);
  }
  Status status = Handshake(id, world, deadline, timeout_seconds);
  MPI_Comm comm = MPI_COMM_NULL;
  if (status.ok()) {
    Result<MPI_Comm> duplicate = DuplicateWorld(id, deadline, timeout_seconds);
    if (duplicate.ok()) comm = *duplicate;
    status = duplicate.status();
  }
  if (!status.ok()) {
    MutexLock lock(p.mu);
    p.live.erase(id);
    p.notices.erase(id);
    return status;
  }
  return MpiGroup{id, comm, world.rank, world.size};
}

void RetireMpiGroup(int64_t id, MPI_Comm* comm, std::vector<PendingMessage> unfinished) {
  ProcessState& p = Process();
  MutexLock lock(p.mu);
  for (PendingMessage& m : unfinished) p.detached.push_back(std::move(m));
  TestDetachedLocked(p);
  // Pending operations on the communicator complete normally after the free.
  MPI_Comm_free(comm);
  p.live.erase(id);
  p.notices.erase(id);
}

std::optional<PendingMessage> PostLeaveNotice(int64_t id, int peer, int64_t sent_to_peer,
                                              const Status& reason) {
  const std::string text = reason.message().substr(0, kMaxReasonBytes);
  LeaveNoticeHeader header{id, sent_to_peer, static_cast<int32_t>(reason.code()),
                           static_cast<int32_t>(text.size())};
  PendingMessage m;
  m.bytes = std::make_shared<std::vector<char>>(sizeof(header) + text.size());
  std::memcpy(m.bytes->data(), &header, sizeof(header));
  std::memcpy(m.bytes->data() + sizeof(header), text.data(), text.size());
  m.peer = peer;
  if (MPI_Isend(m.bytes->data(), static_cast<int>(m.bytes->size()), MPI_BYTE, peer, kLeaveTag,
                Process().control, &m.request) != MPI_SUCCESS) {
    return std::nullopt;
  }
  return m;
}

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

std::optional<LeaveNotice> FindLeaveNotice(int64_t id, int peer) {
  ProcessState& p = Process();
  MutexLock lock(p.mu);
  auto by_id = p.notices.find(id);
  if (by_id == p.notices.end()) return std::nullopt;
  auto notice = by_id->second.find(peer);
  if (notice == by_id->second.end()) return std::nullopt;
  return notice->second;
}

}  // namespace internal

using internal::Backoff;
using internal::Clock;
using internal::MpiStatus;
using internal::PendingMessage;
using internal::Process;
using internal::ProcessState;

namespace {

// Ends the process if MPI's start-up outlasts `seconds` (see InitMpi).
class StartupWatchdog {
 public:
  explicit StartupWatchdog(double seconds) {
    if (seconds <= 0) return;
    thread_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
        return;
      }
      char line[256];
      const int n = std::snprintf(line, sizeof(line),
                                  "ember: MPI's start-up did not finish within %g s: a rank of "
                                  "the job was lost while it started; exiting\n",
                                  seconds);
      const ssize_t ignored =
          ::write(STDERR_FILENO, line, std::min(static_cast<size_t>(n), sizeof(line) - 1));
      (void)ignored;
      ::_exit(3);
    });
  }
  ~StartupWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

Result<MpiWorld> InitMpi(int* argc, char*** argv, double timeout_seconds) {
  ProcessState& p = Process();
  MutexLock lock(p.mu);
  if (p.finalized) return Status::FailedPrecondition("InitMpi: MPI was finalised already");
  if (p.initialized) return p.world;
  int already = 0;
  MPI_Initialized(&already);
  MpiWorld world;
  world.launched_by_mpirun = already || internal::LaunchedByMpirun();
  if (!world.launched_by_mpirun) {
    p.world = world;
    p.initialized = true;
    return world;
  }
  const StartupWatchdog watchdog(already ? 0.0 : timeout_seconds);
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
  const auto deadline = internal::DeadlineAfter(internal::kFinalizeGraceSeconds);
  Backoff backoff;
  while (true) {
    internal::TestDetachedLocked(p);
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

}  // namespace ember
