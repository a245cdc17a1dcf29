#include "engine/job_ranks.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/mpi_communicator.h"
#include "core/nccl_communicator.h"
#include "core/string_collectives.h"
#include "embedding/stored_rows.h"

namespace ember::engine {
namespace {

// Tags of GatherTable's messages on the control communicator.
constexpr int kRowCountTag = 1, kKeysTag = 2, kRowsTag = 3;
// Rows per message: well under MPI's 2 GiB per message for any row width
// Ember allows in practice, and a bounded staging copy.
constexpr int64_t kRowsPerMessage = 1 << 16;
constexpr double kPipelineCommandTimeoutSeconds = 24 * 3600;
// The least that rank 0 waits for the other ranks to take part in a command.
constexpr double kRootCommandSeconds = 30;

std::string FlagsText(const std::vector<JobRanks::Setting>& flags) {
  std::string text;
  for (const JobRanks::Setting& flag : flags) text += flag.name + "=" + flag.value + "\n";
  return text;
}

// The first flag of `mine` whose value differs from `theirs` (or that one
// side lacks), described for an error; empty when none does.
std::string FirstDifference(const std::vector<JobRanks::Setting>& mine, const std::string& theirs,
                            int rank) {
  std::vector<std::pair<std::string, std::string>> other;
  size_t at = 0;
  while (at < theirs.size()) {
    const size_t end = theirs.find('\n', at);
    const std::string line = theirs.substr(at, end - at);
    const size_t eq = line.find('=');
    other.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    at = end + 1;
  }
  for (const JobRanks::Setting& flag : mine) {
    auto it = std::find_if(other.begin(), other.end(),
                           [&](const auto& o) { return o.first == flag.name; });
    if (it == other.end()) {
      return "rank " + std::to_string(rank) + " has --" + flag.name + ", which rank 0 lacks";
    }
    if (it->second != flag.value) {
      return "rank " + std::to_string(rank) + " has --" + flag.name + "=" + flag.value +
             ", rank 0 --" + flag.name + "=" + it->second;
    }
  }
  if (other.size() != mine.size()) {
    return "rank 0 has flags that rank " + std::to_string(rank) + " lacks";
  }
  return "";
}

}  // namespace

Result<std::unique_ptr<JobRanks>> JobRanks::Join(double timeout_seconds) {
  EMBER_ASSIGN_OR_RETURN(const MpiWorld world, InitMpi(nullptr, nullptr, timeout_seconds));
  std::unique_ptr<JobRanks> ranks(new JobRanks());
  ranks->rank_ = world.rank;
  ranks->size_ = world.size;
  if (world.size == 1) return ranks;
  CommunicatorOptions options;
  options.timeout_seconds = timeout_seconds;
  // One communicator per thread that talks to the other ranks, made in the
  // same order on every rank.
  for (std::unique_ptr<Communicator>* comm :
       {&ranks->control_, &ranks->pull_, &ranks->push_, &ranks->dense_, &ranks->data_,
        &ranks->gradients_}) {
    Result<std::unique_ptr<Communicator>> made = NewMpiCommunicator(options);
    if (!made.ok()) return made.status().WithContext("joining the other ranks of the job");
    *comm = *std::move(made);
  }
  // Ranks 1.. of a pipeline wait on it for rank 0's next command while rank
  // 0 reads, evaluates or writes a checkpoint, for as long as that takes:
  // rank 0's heartbeat, not this timeout, bounds the wait for a rank 0 that
  // is stopped or dead. A rank 0 that fails aborts it (they stop at once).
  // Rank 0 itself waits only for the ranks to take part in its commands,
  // which they do at once (they wait for them): its side keeps the rank
  // timeout (at least kRootCommandSeconds, for the other ranks' start-up),
  // so that a rank that died or stopped while the others waited for a
  // command fails the job, named, instead of holding rank 0's next command
  // for ever.
  CommunicatorOptions commands = options;
  commands.timeout_seconds =
      std::max(timeout_seconds,
               world.rank == 0 ? kRootCommandSeconds : kPipelineCommandTimeoutSeconds);
  for (auto [comm, comm_options] : {std::pair{&ranks->commands_, commands},
                                    std::pair{&ranks->heartbeats_, options}}) {
    Result<std::unique_ptr<Communicator>> made = NewMpiCommunicator(comm_options);
    if (!made.ok()) return made.status().WithContext("joining the other ranks of the job");
    *comm = *std::move(made);
  }
  JobRanks* joined = ranks.get();
  ranks->heartbeat_ = std::make_unique<Heartbeat>(
      ranks->heartbeats_.get(), 0, timeout_seconds,
      [joined](const Status& silence) { joined->Abort(silence); });
  LOG(INFO) << "rank " << world.rank << " of " << world.size << " (mpirun)";
  return ranks;
}

JobRanks::~JobRanks() = default;

RankGroup JobRanks::group() const {
  return {pull_.get(), push_.get(), dense_.get(), control_.get(), data_.get(), gradients_.get()};
}

Status JobRanks::CheckSameSettings(const std::vector<Setting>& flags) {
  if (!several()) return Status::OK();
  std::string text = FlagsText(flags);
  std::string root_text = text;
  EMBER_RETURN_IF_ERROR(BroadcastString(*control_, 0, &root_text));
  std::string difference = FirstDifference(flags, root_text, rank_);
  // Which ranks differ; the first of them tells the others what.
  std::vector<int32_t> differs(static_cast<size_t>(size_), 0);
  std::vector<int32_t> mine = {difference.empty() ? 0 : 1};
  EMBER_RETURN_IF_ERROR(control_->AllGather(mine, differs));
  const auto first = std::find(differs.begin(), differs.end(), 1);
  if (first == differs.end()) return Status::OK();
  EMBER_RETURN_IF_ERROR(
      BroadcastString(*control_, static_cast<int>(first - differs.begin()), &difference));
  return Status::InvalidArgument("the ranks of this job were started with different flags: ",
                                 difference, " (every rank must run the same command)");
}

Result<std::unique_ptr<embedding::EmbeddingTable>> JobRanks::GatherTable(
    embedding::EmbeddingTable& table, const embedding::EmbeddingTableOptions& options) {
  if (!several()) return std::unique_ptr<embedding::EmbeddingTable>();
  embedding::StoredRows& stored = table.stored_rows();
  const int64_t floats = stored.row_floats();
  std::vector<embedding::Key> keys;
  std::vector<float> rows;
  EMBER_RETURN_IF_ERROR(stored.Scan([&](embedding::Key key, const float* row) {
    keys.push_back(key);
    rows.insert(rows.end(), row, row + floats);
    return Status::OK();
  }));
  if (rank_ != 0) {
    std::vector<int64_t> count = {static_cast<int64_t>(keys.size())};
    EMBER_RETURN_IF_ERROR(control_->Send(count, 0, kRowCountTag));
    for (int64_t begin = 0; begin < count[0]; begin += kRowsPerMessage) {
      const int64_t n = std::min(kRowsPerMessage, count[0] - begin);
      EMBER_RETURN_IF_ERROR(control_->Send(ConstCommBuffer(keys.data() + begin, n), 0, kKeysTag));
      EMBER_RETURN_IF_ERROR(
          control_->Send(ConstCommBuffer(rows.data() + begin * floats, n * floats), 0, kRowsTag));
    }
    EMBER_RETURN_IF_ERROR(control_->Barrier());
    return std::unique_ptr<embedding::EmbeddingTable>();
  }
  embedding::EmbeddingTableOptions in_memory = options;
  in_memory.memory_budget_bytes = 0;
  in_memory.disk_path.clear();
  in_memory.track_changes = false;
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<embedding::EmbeddingTable> all,
                         embedding::NewMemoryTable(in_memory));
  embedding::StoredRows& into = all->stored_rows();
  EMBER_RETURN_IF_ERROR(into.WriteRows(keys, rows.data()));
  for (int r = 1; r < size_; ++r) {
    std::vector<int64_t> count(1);
    EMBER_RETURN_IF_ERROR(control_->Recv(count, r, kRowCountTag));
    for (int64_t begin = 0; begin < count[0]; begin += kRowsPerMessage) {
      const int64_t n = std::min(kRowsPerMessage, count[0] - begin);
      keys.resize(static_cast<size_t>(n));
      rows.resize(static_cast<size_t>(n * floats));
      EMBER_RETURN_IF_ERROR(control_->Recv(keys, r, kKeysTag));
      EMBER_RETURN_IF_ERROR(control_->Recv(rows, r, kRowsTag));
      EMBER_RETURN_IF_ERROR(into.WriteRows(keys, rows.data()));
    }
  }
  EMBER_RETURN_IF_ERROR(control_->Barrier());
  return all;
}

Status JobRanks::UseNcclForDense(int device, double timeout_seconds) {
  if (!several()) return Status::OK();
  NcclCommunicatorOptions options;
  options.communicator.timeout_seconds = timeout_seconds;
  Result<std::unique_ptr<Communicator>> nccl = NewNcclCommunicator(*control_, device, options);
  if (!nccl.ok()) return nccl.status().WithContext("the dense all-reduce over NCCL");
  dense_ = *std::move(nccl);
  return Status::OK();
}

Result<int64_t> JobRanks::SumOverRanks(int64_t value) {
  if (!several()) return value;
  std::vector<int64_t> sum = {value};
  EMBER_RETURN_IF_ERROR(control_->AllReduce(sum, sum));
  return sum[0];
}

void JobRanks::Abort(const Status& reason) {
  for (Communicator* comm :
       {pull_.get(), push_.get(), dense_.get(), control_.get(), data_.get(), gradients_.get(),
        commands_.get()}) {
    if (comm != nullptr) comm->Abort(reason);
  }
}

Status FinishJobRanks() { return FinalizeMpi(); }

}  // namespace ember::engine
