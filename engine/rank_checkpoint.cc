#include "engine/rank_checkpoint.h"

#include <vector>

#include <filesystem>

#include "core/crash_point.h"
#include "core/file.h"
#include "core/json.h"
#include "embedding/checkpoint.h"

namespace ember::engine {
namespace {

constexpr const char* kFormat = "ember-ranks";
constexpr int kVersion = 1;

std::string RanksPath(const std::string& dir) { return dir + "/RANKS"; }

// The RANKS file: {format, version, ranks, step}.
struct RanksFile {
  std::string format = kFormat;
  int64_t version = kVersion;
  int64_t ranks = 0;
  int64_t step = 0;
};

void to_json(Json& j, const RanksFile& r) {
  j = Json{{"format", r.format}, {"version", r.version}, {"ranks", r.ranks}, {"step", r.step}};
}

// Fields this build does not know are ignored, as they always were.
void from_json(const Json& j, RanksFile& r) {
  JsonFields f(j);
  f.Get("format", &r.format);
  f.Get("version", &r.version);
  f.Get("ranks", &r.ranks);
  f.Get("step", &r.step);
}

}  // namespace

std::string RankCheckpointDir(const std::string& dir, int rank) {
  return dir + "/rank-" + std::to_string(rank);
}

bool HasRanksRecord(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::exists(RanksPath(dir), ec);
}

std::string RecordedRankDir(const std::string& dir, const RanksRecord& record, int rank) {
  return record.unranked ? dir : RankCheckpointDir(dir, rank);
}

Result<RanksRecord> FindRanksCheckpoint(const std::string& dir) {
  const std::string path = RanksPath(dir);
  Result<std::string> text = ReadFile(path);
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
    // A job of one process without ranks: its checkpoints are in dir.
    Result<std::vector<int64_t>> steps = embedding::SnapshotSteps(dir + "/embedding");
    if (steps.ok() && !steps->empty()) return RanksRecord{1, steps->back(), true};
    return Status::NotFound("no checkpoint in ", dir);
  }
  if (!text.ok()) return text.status();
  Result<Json> json = ParseJsonText(*text);
  if (!json.ok()) return Status::DataLoss(path, ": not JSON (", json.status().message(), ")");
  const Result<RanksFile> record = FromJson<RanksFile>(*json, RanksFile{"", 0});
  if (!record.ok() || record->format != kFormat) {
    return Status::DataLoss(path, ": not a ranks' checkpoint record");
  }
  const auto [format, version, ranks, step] = *record;
  if (version != kVersion) {
    return Status::DataLoss(path, ": version ", version, ", this Ember reads ", kVersion);
  }
  if (ranks < 1 || step < 0) {
    return Status::DataLoss(path, ": ", ranks, " ranks at step ", step, " is no checkpoint");
  }
  return RanksRecord{static_cast<int>(ranks), step, false};
}

Result<std::vector<std::unique_ptr<DirectoryLock>>> LockCheckpointDirectories(
    const std::string& dir, int rank, bool ranks_layout) {
  std::vector<std::string> dirs;
  if (rank == 0) dirs.push_back(dir);
  if (ranks_layout) dirs.push_back(RankCheckpointDir(dir, rank));
  std::vector<std::unique_ptr<DirectoryLock>> locks;
  for (const std::string& locked : dirs) {
    EMBER_ASSIGN_OR_RETURN(auto lock, DirectoryLock::Acquire(locked));
    locks.push_back(std::move(lock));
  }
  return locks;
}

Status CommitRanksCheckpoint(Communicator* control, const std::string& dir, int64_t step) {
  const auto write = [&](int ranks) {
    const RanksFile record{kFormat, kVersion, ranks, step};
    return WriteFileAtomic(RanksPath(dir), JsonText(Json(record), 2) + "\n")
        .WithContext("committing the ranks' checkpoint");
  };
  if (control == nullptr) return write(1);
  CrashPoint("ranks.saved");
  EMBER_RETURN_IF_ERROR(control->Barrier().WithContext("waiting for every rank's checkpoint"));
  CrashPoint("ranks.all_saved");
  Status written;
  if (control->rank() == 0) written = write(control->size());
  CrashPoint("ranks.committed");
  // Rank 0's outcome for everyone: a failed commit fails every rank.
  std::vector<int32_t> ok = {written.ok() ? 1 : 0};
  EMBER_RETURN_IF_ERROR(control->Broadcast(ok, 0));
  if (!written.ok()) return written;
  if (ok[0] == 0) {
    return Status::Internal("rank 0 could not commit the checkpoint of step ", step, " in ", dir);
  }
  return Status::OK();
}

}  // namespace ember::engine
