#include "embedding/checkpoint.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <memory>
#include <utility>

#include "core/crash_point.h"
#include "core/file.h"
#include "core/json.h"
#include "embedding/internal/checkpoint_format.h"
#include "embedding/stored_rows.h"

namespace ember::embedding {
namespace {

namespace fs = std::filesystem;

using internal::CheckFileSizes;
using internal::DataFileName;
using internal::DecodeKeys;
using internal::DecodeRecord;
using internal::EncodeRecord;
using internal::FileEntry;
using internal::kManifestFile;
using internal::kRemovedFile;
using internal::ListSnapshotNames;
using internal::Manifest;
using internal::ManifestToJson;
using internal::ReadManifest;
using internal::ReadSnapshotManifest;
using internal::ReadVerifiedFile;
using internal::RecordBytes;
using internal::SnapshotDirName;
using internal::SnapshotName;

constexpr char kTempPrefix[] = ".tmp-";
// Keys per ReadRows/WriteRows/EraseRows call while saving and restoring.
constexpr int64_t kBatchRows = 16384;
constexpr size_t kWriteBufferBytes = size_t{1} << 20;

std::string ErrnoText() { return std::strerror(errno); }

Status FsyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path, ": cannot open for fsync: ", ErrnoText());
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Status::IOError(path, ": fsync failed: ", ErrnoText());
  return Status::OK();
}

// A data file being written: buffered, hashed, fsynced on Close.
class DataFile {
 public:
  DataFile(std::string path, int fd, int64_t* budget_bytes)
      : path_(std::move(path)), fd_(fd), budget_bytes_(budget_bytes) {
    buffer_.reserve(kWriteBufferBytes);
  }
  DataFile(const DataFile&) = delete;
  DataFile& operator=(const DataFile&) = delete;
  ~DataFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  static Result<std::unique_ptr<DataFile>> Create(const std::string& path, int64_t* budget_bytes) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return Status::IOError(path, ": cannot create: ", ErrnoText());
    return std::make_unique<DataFile>(path, fd, budget_bytes);
  }

  Status Append(const char* data, size_t size) {
    hash_.Update(data, size);
    bytes_ += static_cast<int64_t>(size);
    if (buffer_.size() + size > kWriteBufferBytes) EMBER_RETURN_IF_ERROR(Flush());
    if (size > kWriteBufferBytes) return WriteAll(data, size);
    buffer_.insert(buffer_.end(), data, data + size);
    return Status::OK();
  }

  // Flushes, fsyncs and closes the file.
  Status Close() {
    EMBER_RETURN_IF_ERROR(Flush());
    if (::fsync(fd_) != 0) return Status::IOError(path_, ": fsync failed: ", ErrnoText());
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) return Status::IOError(path_, ": close failed: ", ErrnoText());
    return Status::OK();
  }

  int64_t bytes() const { return bytes_; }
  uint64_t hash() const { return hash_.Digest(); }

 private:
  Status Flush() {
    EMBER_RETURN_IF_ERROR(WriteAll(buffer_.data(), buffer_.size()));
    buffer_.clear();
    return Status::OK();
  }
  Status WriteAll(const char* data, size_t size) {
    if (*budget_bytes_ >= 0 && static_cast<int64_t>(size) > *budget_bytes_) {
      // The test seam: write what the "disk" still takes, then fail.
      const size_t allowed = static_cast<size_t>(*budget_bytes_);
      *budget_bytes_ = 0;
      Status ignored = WriteRaw(data, allowed);
      ignored.IgnoreError();
      return Status::IOError(path_, ": write failed: injected failure (fail_after_bytes)");
    }
    if (*budget_bytes_ >= 0) *budget_bytes_ -= static_cast<int64_t>(size);
    return WriteRaw(data, size);
  }
  Status WriteRaw(const char* data, size_t size) {
    while (size > 0) {
      const ssize_t n = ::write(fd_, data, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::IOError(path_, ": write failed: ", ErrnoText());
      }
      data += n;
      size -= static_cast<size_t>(n);
    }
    return Status::OK();
  }

  const std::string path_;
  int fd_;
  int64_t* budget_bytes_;  // Bytes the seam still lets through; < 0: unlimited.
  std::vector<char> buffer_;
  XxHash64Stream hash_;  // Manifest::checksum's default, xxh64.
  int64_t bytes_ = 0;
};

// Builds one snapshot (or export) in a temporary directory and commits it
// with a rename; removes the temporary directory unless committed.
class SnapshotWriter {
 public:
  // `parent` must exist. Records are key + `record_floats` floats.
  SnapshotWriter(std::string parent, std::string final_name, const char* file_prefix,
                 int64_t record_floats, int64_t file_bytes, int64_t fail_after_bytes)
      : parent_(std::move(parent)),
        final_path_((fs::path(parent_) / final_name).string()),
        temp_path_(
            (fs::path(parent_) / (kTempPrefix + final_name + "-" + std::to_string(::getpid())))
                .string()),
        file_prefix_(file_prefix),
        record_floats_(record_floats),
        records_per_file_(std::max<int64_t>(1, file_bytes / RecordBytes(record_floats))),
        budget_bytes_(fail_after_bytes) {
    record_.resize(RecordBytes(record_floats));
  }
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;
  ~SnapshotWriter() {
    std::error_code ec;
    if (!committed_) fs::remove_all(temp_path_, ec);
  }

  Status Begin() {
    std::error_code ec;
    fs::remove_all(temp_path_, ec);
    if (!fs::create_directory(temp_path_, ec)) {
      return Status::IOError(temp_path_, ": cannot create directory: ", ec.message());
    }
    return Status::OK();
  }

  // Appends key + the first record_floats floats of `row`.
  Status Add(Key key, const float* row) {
    if (file_ == nullptr || file_records_ == records_per_file_) {
      EMBER_RETURN_IF_ERROR(CloseFile());
      const std::string name = DataFileName(file_prefix_, static_cast<int64_t>(files_.size()));
      EMBER_ASSIGN_OR_RETURN(file_, DataFile::Create(Path(name), &budget_bytes_));
      files_.push_back(FileEntry{name, 0, 0, 0});
      file_records_ = 0;
    }
    EncodeRecord(key, row, record_floats_, record_.data());
    EMBER_RETURN_IF_ERROR(file_->Append(record_.data(), record_.size()));
    ++file_records_;
    ++rows_;
    return Status::OK();
  }

  Status AddRemovedKeys(const std::vector<Key>& keys) {
    EMBER_RETURN_IF_ERROR(CloseFile());
    EMBER_ASSIGN_OR_RETURN(file_, DataFile::Create(Path(kRemovedFile), &budget_bytes_));
    files_.push_back(FileEntry{kRemovedFile, 0, 0, 0});
    EMBER_RETURN_IF_ERROR(
        file_->Append(reinterpret_cast<const char*>(keys.data()), 8 * keys.size()));
    file_records_ = static_cast<int64_t>(keys.size());
    return CloseFile();
  }

  int64_t rows() const { return rows_; }

  // Fills in rows, record_bytes and files, writes MANIFEST, fsyncs and
  // renames. An existing directory at the final path is exchanged with the
  // new one and removed when `replace` is true.
  Status Commit(Manifest manifest, bool replace,
                const std::function<Status(const std::string&)>& before_commit) {
    EMBER_RETURN_IF_ERROR(CloseFile());
    CrashPoint("checkpoint.snapshot_files");
    manifest.rows = rows_;
    manifest.record_bytes = RecordBytes(manifest.row_floats);
    manifest.files = files_;
    const std::string manifest_path = Path(kManifestFile);
    const std::string json = ManifestToJson(manifest);
    {
      int64_t unlimited = -1;
      EMBER_ASSIGN_OR_RETURN(auto file, DataFile::Create(manifest_path, &unlimited));
      EMBER_RETURN_IF_ERROR(file->Append(json.data(), json.size()));
      EMBER_RETURN_IF_ERROR(file->Close());
    }
    EMBER_RETURN_IF_ERROR(FsyncPath(temp_path_));
    CrashPoint("checkpoint.snapshot_manifest");
    if (before_commit) EMBER_RETURN_IF_ERROR(before_commit(temp_path_));
    std::error_code ec;
    if (replace && fs::exists(final_path_, ec)) {
      if (::renameat2(AT_FDCWD, temp_path_.c_str(), AT_FDCWD, final_path_.c_str(),
                      RENAME_EXCHANGE) != 0) {
        return Status::IOError(final_path_, ": exchange with ", temp_path_,
                               " failed: ", ErrnoText());
      }
      committed_ = true;
      EMBER_RETURN_IF_ERROR(FsyncPath(parent_));
      fs::remove_all(temp_path_, ec);  // Now the replaced export.
      return Status::OK();
    }
    if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
      return Status::IOError(final_path_, ": rename from ", temp_path_, " failed: ", ErrnoText());
    }
    committed_ = true;
    EMBER_RETURN_IF_ERROR(FsyncPath(parent_));
    CrashPoint("checkpoint.snapshot_renamed");
    return Status::OK();
  }

 private:
  std::string Path(const std::string& name) const { return (fs::path(temp_path_) / name).string(); }

  Status CloseFile() {
    if (file_ == nullptr) return Status::OK();
    EMBER_RETURN_IF_ERROR(file_->Close());
    files_.back().records = file_records_;
    files_.back().bytes = file_->bytes();
    files_.back().hash = file_->hash();
    file_.reset();
    return Status::OK();
  }

  const std::string parent_;
  const std::string final_path_;
  const std::string temp_path_;
  const char* const file_prefix_;
  const int64_t record_floats_;
  const int64_t records_per_file_;
  int64_t budget_bytes_;
  std::vector<char> record_;
  std::unique_ptr<DataFile> file_;
  int64_t file_records_ = 0;
  int64_t rows_ = 0;
  std::vector<FileEntry> files_;
  bool committed_ = false;
};

// Removes the temporary directories in `parent` of saves interrupted
// earlier: all of them when `final_name` is empty (a checkpoint directory),
// else those of `final_name` only (.tmp-<final_name>-<pid>).
void RemoveTemporaries(const std::string& parent, const std::string& final_name) {
  std::error_code ec;
  const std::string prefix = kTempPrefix + (final_name.empty() ? "" : final_name + "-");
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    if (!final_name.empty() &&
        name.find_first_not_of("0123456789", prefix.size()) != std::string::npos) {
      continue;
    }
    std::error_code remove_ec;
    fs::remove_all(it->path(), remove_ec);
    if (remove_ec) LOG(WARNING) << it->path() << ": cannot remove: " << remove_ec.message();
  }
}

SnapshotInfo ToInfo(const SnapshotName& name, const Manifest& m) {
  SnapshotInfo info;
  info.kind = name.kind;
  info.step = m.step;
  info.base_step = m.base_step;
  info.table_step = m.table_step;
  info.dim = static_cast<int>(m.dim);
  info.row_floats = m.row_floats;
  info.optimizer = m.optimizer;
  info.rows = m.rows;
  info.removed = m.removed;
  info.path = name.path;
  return info;
}

struct ChainLink {
  std::string path;
  Manifest manifest;
};

// The newest full snapshot in `names` and the deltas after it, with their
// manifests checked against each other, the table and `optimizer`, and their
// data files' sizes checked.
Result<std::vector<ChainLink>> ReadChain(const std::string& dir, std::vector<SnapshotName> names,
                                         int dim, int64_t row_floats, const std::string& optimizer,
                                         int64_t max_step) {
  names.erase(std::remove_if(names.begin(), names.end(),
                             [&](const SnapshotName& n) { return n.step > max_step; }),
              names.end());
  auto newest_full = std::find_if(names.rbegin(), names.rend(), [](const SnapshotName& n) {
    return n.kind == SnapshotInfo::Kind::kFull;
  });
  if (newest_full == names.rend()) return Status::NotFound(dir, ": no full snapshot to restore");
  std::vector<ChainLink> chain;
  for (auto it = newest_full.base() - 1; it != names.end(); ++it) {
    EMBER_ASSIGN_OR_RETURN(Manifest m, ReadSnapshotManifest(*it));
    if (!chain.empty() && m.base_step != chain.back().manifest.step) {
      return Status::DataLoss(it->path, ": delta on step ", m.base_step,
                              ", but the snapshots before it end at step ",
                              chain.back().manifest.step);
    }
    if (m.dim != dim || m.row_floats != row_floats) {
      return Status::InvalidArgument(it->path, ": rows of dim ", m.dim, " and ", m.row_floats,
                                     " floats; the table has dim ", dim, " and ", row_floats,
                                     " floats");
    }
    if (!m.optimizer.empty() && !optimizer.empty() && m.optimizer != optimizer) {
      return Status::InvalidArgument(it->path, ": saved with optimizer ", m.optimizer,
                                     ", the table uses ", optimizer);
    }
    EMBER_RETURN_IF_ERROR(CheckFileSizes(it->path, m));
    chain.push_back(ChainLink{it->path, std::move(m)});
  }
  return chain;
}

// Removes the snapshots older than the `keep`-th newest full snapshot.
// Failures are logged: the save that calls this has already committed.
void RemoveOldSnapshots(const std::string& dir, int keep) {
  Result<std::vector<SnapshotName>> names = ListSnapshotNames(dir);
  if (!names.ok()) {
    LOG(WARNING) << "Checkpoint: cannot list old snapshots to remove: " << names.status();
    return;
  }
  std::vector<int64_t> full_steps;
  for (const SnapshotName& name : *names) {
    if (name.kind == SnapshotInfo::Kind::kFull) full_steps.push_back(name.step);
  }
  if (static_cast<int64_t>(full_steps.size()) <= keep) return;
  const int64_t oldest_kept = full_steps[full_steps.size() - keep];
  // Oldest first: a crash part-way leaves a prefix removed, never a hole in
  // a chain that is still kept.
  for (const SnapshotName& name : *names) {
    if (name.step >= oldest_kept) break;
    std::error_code ec;
    fs::remove_all(name.path, ec);
    if (ec) LOG(WARNING) << name.path << ": cannot remove old snapshot: " << ec.message();
  }
}

// Writes the stored rows of `keys` (sorted) to `writer`; keys without a row
// go to `vanished`.
Status WriteStoredRows(StoredRows& table, const std::vector<Key>& keys, SnapshotWriter& writer,
                       std::vector<Key>* vanished) {
  const int64_t row_floats = table.row_floats();
  std::vector<float> rows;
  std::vector<int64_t> missing;
  for (size_t begin = 0; begin < keys.size(); begin += kBatchRows) {
    const std::vector<Key> batch(keys.begin() + begin,
                                 keys.begin() + std::min(keys.size(), begin + kBatchRows));
    rows.resize(batch.size() * row_floats);
    missing.clear();
    EMBER_RETURN_IF_ERROR(table.ReadRows(batch, rows.data(), &missing));
    size_t next_missing = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (next_missing < missing.size() && missing[next_missing] == static_cast<int64_t>(i)) {
        vanished->push_back(batch[i]);
        ++next_missing;
        continue;
      }
      EMBER_RETURN_IF_ERROR(writer.Add(batch[i], rows.data() + i * row_floats));
    }
  }
  return Status::OK();
}

// Applies the records of `bytes` (key + row_floats floats each) with WriteRows.
Status WriteRecords(StoredRows& table, const std::string& bytes, int64_t row_floats) {
  const int64_t record_bytes = RecordBytes(row_floats);
  const int64_t records = static_cast<int64_t>(bytes.size()) / record_bytes;
  std::vector<Key> keys;
  std::vector<float> rows;
  for (int64_t begin = 0; begin < records; begin += kBatchRows) {
    const int64_t n = std::min(kBatchRows, records - begin);
    keys.resize(n);
    rows.resize(n * row_floats);
    const char* record = bytes.data() + begin * record_bytes;
    for (int64_t i = 0; i < n; ++i, record += record_bytes) {
      DecodeRecord(record, row_floats, &keys[i], rows.data() + i * row_floats);
    }
    EMBER_RETURN_IF_ERROR(table.WriteRows(keys, rows.data()));
  }
  return Status::OK();
}

Status EraseKeys(StoredRows& table, const std::vector<Key>& keys) {
  for (size_t begin = 0; begin < keys.size(); begin += kBatchRows) {
    const size_t end = std::min(keys.size(), begin + kBatchRows);
    EMBER_RETURN_IF_ERROR(
        table.EraseRows(std::vector<Key>(keys.begin() + begin, keys.begin() + end)));
  }
  return Status::OK();
}

// Applies one verified snapshot (full or delta) to the table.
Status ApplySnapshot(StoredRows& table, const std::string& dir, const Manifest& m) {
  for (const FileEntry& file : m.files) {
    EMBER_ASSIGN_OR_RETURN(std::string bytes, ReadVerifiedFile(dir, file, m.checksum));
    if (file.name == kRemovedFile) {
      EMBER_RETURN_IF_ERROR(EraseKeys(table, DecodeKeys(bytes)));
    } else {
      EMBER_RETURN_IF_ERROR(WriteRecords(table, bytes, m.row_floats));
    }
  }
  return Status::OK();
}

// `a` without the elements of `b`; both sorted.
std::vector<Key> Difference(const std::vector<Key>& a, const std::vector<Key>& b) {
  std::vector<Key> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::vector<Key> Union(const std::vector<Key>& a, const std::vector<Key>& b) {
  std::vector<Key> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace

// --- ListCheckpoints ---------------------------------------------------------

Result<std::vector<SnapshotInfo>> ListCheckpoints(const std::string& dir) {
  EMBER_ASSIGN_OR_RETURN(std::vector<SnapshotName> names, ListSnapshotNames(dir));
  std::vector<SnapshotInfo> infos;
  for (const SnapshotName& name : names) {
    EMBER_ASSIGN_OR_RETURN(Manifest m, ReadSnapshotManifest(name));
    infos.push_back(ToInfo(name, m));
  }
  return infos;
}

Result<std::vector<int64_t>> SnapshotSteps(const std::string& dir) {
  EMBER_ASSIGN_OR_RETURN(std::vector<SnapshotName> names, ListSnapshotNames(dir));
  std::vector<int64_t> steps;
  for (const SnapshotName& name : names) steps.push_back(name.step);
  return steps;
}

// --- Checkpointer ------------------------------------------------------------

Checkpointer::Checkpointer(EmbeddingTable& table, CheckpointOptions options)
    : table_(table), rows_(table.stored_rows()), options_(std::move(options)) {}

Result<int64_t> Checkpointer::NewestStep() const {
  EMBER_ASSIGN_OR_RETURN(std::vector<SnapshotName> names, ListSnapshotNames(options_.dir));
  return names.empty() ? int64_t{-1} : names.back().step;
}

Status Checkpointer::SaveFull(int64_t step) {
  if (options_.dir.empty()) return Status::InvalidArgument("CheckpointOptions.dir is empty");
  if (step < 0) return Status::InvalidArgument("checkpoint step ", step, " is negative");
  EMBER_RETURN_IF_ERROR(MakeDirectories(options_.dir));
  EMBER_ASSIGN_OR_RETURN(const int64_t newest, NewestStep());
  if (step <= newest) {
    return Status::InvalidArgument(options_.dir, ": full snapshot at step ", step,
                                   ", but the directory already holds step ", newest);
  }
  RemoveTemporaries(options_.dir, "");
  SnapshotWriter writer(options_.dir, SnapshotDirName("full", step), "rows", rows_.row_floats(),
                        options_.file_bytes, options_.fail_after_bytes);
  EMBER_RETURN_IF_ERROR(writer.Begin());
  EMBER_RETURN_IF_ERROR(
      rows_.Scan([&](Key key, const float* row) { return writer.Add(key, row); }));
  Manifest m;
  m.kind = "full";
  m.step = step;
  m.table_step = table_.step();
  m.eviction_step = rows_.eviction_step();
  m.dim = table_.dim();
  m.row_floats = rows_.row_floats();
  m.optimizer = options_.optimizer;
  EMBER_RETURN_IF_ERROR(writer.Commit(std::move(m), /*replace=*/false, options_.before_commit));

  // Nothing changed the table since Scan, so what TakeChanges reports is
  // covered by the snapshot.
  std::vector<Key> changed, removed;
  rows_.TakeChanges(&changed, &removed);
  pending_changed_.clear();
  pending_removed_.clear();
  base_step_ = step;
  LOG(INFO) << "Checkpoint: full snapshot of " << writer.rows() << " rows at step " << step
            << " in " << options_.dir;

  if (options_.keep_full_snapshots > 0)
    RemoveOldSnapshots(options_.dir, options_.keep_full_snapshots);
  return Status::OK();
}

Status Checkpointer::SaveDelta(int64_t step) {
  if (options_.dir.empty()) return Status::InvalidArgument("CheckpointOptions.dir is empty");
  if (!rows_.tracks_changes()) {
    return Status::FailedPrecondition(
        "a delta snapshot needs a table made with EmbeddingTableOptions::track_changes");
  }
  Result<std::vector<SnapshotName>> names = ListSnapshotNames(options_.dir);
  if (!names.ok() && names.status().code() != StatusCode::kNotFound) return names.status();
  const bool has_full =
      names.ok() && std::any_of(names->begin(), names->end(), [](const SnapshotName& n) {
        return n.kind == SnapshotInfo::Kind::kFull;
      });
  if (!has_full) {
    return Status::FailedPrecondition(options_.dir,
                                      ": a delta snapshot needs a full snapshot there first");
  }
  const int64_t newest = names->back().step;
  if (base_step_ != newest) {
    return Status::FailedPrecondition(
        options_.dir, ": the newest snapshot (step ", newest,
        ") was neither saved nor restored by this Checkpointer, so the table's "
        "changes are "
        "not relative to it; save a full snapshot");
  }
  if (step <= newest) {
    return Status::InvalidArgument(options_.dir, ": delta snapshot at step ", step,
                                   ", but the directory already holds step ", newest);
  }
  RemoveTemporaries(options_.dir, "");

  // From here on a failure keeps the changes in pending_* for the next try.
  std::vector<Key> changed, removed;
  rows_.TakeChanges(&changed, &removed);
  pending_changed_ = Union(Difference(pending_changed_, removed), changed);
  pending_removed_ = Union(Difference(pending_removed_, changed), removed);

  const int64_t row_floats = rows_.row_floats();
  SnapshotWriter writer(options_.dir, SnapshotDirName("delta", step), "rows", row_floats,
                        options_.file_bytes, options_.fail_after_bytes);
  EMBER_RETURN_IF_ERROR(writer.Begin());
  std::vector<Key> vanished;  // Reported changed but gone: saved as removed.
  EMBER_RETURN_IF_ERROR(WriteStoredRows(rows_, pending_changed_, writer, &vanished));
  const std::vector<Key> all_removed = Union(pending_removed_, vanished);
  EMBER_RETURN_IF_ERROR(writer.AddRemovedKeys(all_removed));
  Manifest m;
  m.kind = "delta";
  m.step = step;
  m.base_step = base_step_;
  m.table_step = table_.step();
  m.eviction_step = rows_.eviction_step();
  m.dim = table_.dim();
  m.row_floats = row_floats;
  m.optimizer = options_.optimizer;
  m.removed = static_cast<int64_t>(all_removed.size());
  EMBER_RETURN_IF_ERROR(writer.Commit(std::move(m), /*replace=*/false, options_.before_commit));
  LOG(INFO) << "Checkpoint: delta snapshot of " << writer.rows() << " rows and "
            << all_removed.size() << " removed keys at step " << step << " in " << options_.dir;
  pending_changed_.clear();
  pending_removed_.clear();
  base_step_ = step;
  return Status::OK();
}

Result<int64_t> Checkpointer::RestoreLatest() {
  return RestoreAt(std::numeric_limits<int64_t>::max());
}

Status Checkpointer::SetAsideSnapshotsAfter(int64_t step) {
  EMBER_ASSIGN_OR_RETURN(std::vector<SnapshotName> names, ListSnapshotNames(options_.dir));
  for (const SnapshotName& name : names) {
    if (name.step <= step) continue;
    const fs::path from(name.path);
    const fs::path to = from.parent_path() / ("damaged-" + from.filename().string());
    std::error_code ec;
    fs::remove_all(to, ec);  // Set aside before, by an earlier restore.
    fs::rename(from, to, ec);
    if (ec) return Status::IOError(name.path, ": cannot set it aside: ", ec.message());
    LOG(WARNING) << "Checkpoint: set aside " << name.path << " as " << to.string();
  }
  return FsyncPath(options_.dir);
}

Result<int64_t> Checkpointer::RestoreAt(int64_t step) {
  EMBER_ASSIGN_OR_RETURN(std::vector<SnapshotName> names, ListSnapshotNames(options_.dir));
  // The whole chain is checked before the table is touched.
  EMBER_ASSIGN_OR_RETURN(std::vector<ChainLink> chain,
                         ReadChain(options_.dir, std::move(names), table_.dim(), rows_.row_floats(),
                                   options_.optimizer, step));
  std::vector<Key> existing;
  EMBER_RETURN_IF_ERROR(rows_.Scan([&](Key key, const float*) {
    existing.push_back(key);
    return Status::OK();
  }));
  EMBER_RETURN_IF_ERROR(EraseKeys(rows_, existing));
  for (const ChainLink& link : chain) {
    EMBER_RETURN_IF_ERROR(ApplySnapshot(rows_, link.path, link.manifest));
  }
  const int64_t chain_step = chain.back().manifest.step;
  table_.set_step(chain.back().manifest.table_step);
  // Rows the saved table had expired lazily (on disk) are in the snapshots
  // (a delta never lists them as removed): expire them again.
  rows_.RestoreEvictionStep(chain.back().manifest.eviction_step);
  std::vector<Key> changed, removed;
  rows_.TakeChanges(&changed, &removed);
  pending_changed_.clear();
  pending_removed_.clear();
  base_step_ = chain_step;
  LOG(INFO) << "Checkpoint: restored step " << chain_step << " (" << table_.num_rows()
            << " rows) from " << chain.size() << " snapshot(s) in " << options_.dir;
  return chain_step;
}

// --- Serving export ----------------------------------------------------------

Status ExportForServing(EmbeddingTable& table, const std::string& path,
                        const ServingExportOptions& options) {
  const fs::path target = fs::path(path).lexically_normal();
  const std::string name = target.filename().string();
  if (name.empty() || name == "." || name == "..") {
    return Status::InvalidArgument("serving export path ", JsonText(path), " names no directory");
  }
  const std::string parent = target.has_parent_path() ? target.parent_path().string() : ".";
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    return Status::InvalidArgument(path, ": directory ", parent, " does not exist");
  }
  RemoveTemporaries(parent, name);
  StoredRows& rows = table.stored_rows();
  SnapshotWriter writer(parent, name, "vectors", table.dim(), options.file_bytes,
                        options.fail_after_bytes);
  EMBER_RETURN_IF_ERROR(writer.Begin());
  EMBER_RETURN_IF_ERROR(rows.Scan([&](Key key, const float* row) {
    return options.keep && !options.keep(key, row) ? Status::OK() : writer.Add(key, row);
  }));
  Manifest m;
  m.kind = "serving";
  m.step = options.step;
  m.table_step = table.step();
  m.eviction_step = rows.eviction_step();
  m.dim = table.dim();
  m.row_floats = table.dim();
  EMBER_RETURN_IF_ERROR(writer.Commit(std::move(m), /*replace=*/true, options.before_commit));
  LOG(INFO) << "Exported " << writer.rows() << " vectors of dim " << table.dim() << " to " << path;
  return Status::OK();
}

Result<int64_t> ReadServingExport(
    const std::string& path, const std::function<Status(Key key, const float* vector)>& visit) {
  EMBER_ASSIGN_OR_RETURN(Manifest m, ReadManifest(path));
  if (m.kind != "serving" || m.row_floats != m.dim) {
    return Status::DataLoss(path, "/", kManifestFile, ": a ", m.kind,
                            " snapshot, not a serving export");
  }
  EMBER_RETURN_IF_ERROR(CheckFileSizes(path, m));
  std::vector<float> vector(m.dim);
  int64_t count = 0;
  for (const FileEntry& file : m.files) {
    EMBER_ASSIGN_OR_RETURN(std::string bytes, ReadVerifiedFile(path, file, m.checksum));
    for (int64_t i = 0; i < file.records; ++i) {
      const char* record = bytes.data() + i * m.record_bytes;
      Key key;
      DecodeRecord(record, m.dim, &key, vector.data());
      EMBER_RETURN_IF_ERROR(visit(key, vector.data()));
      ++count;
    }
  }
  return count;
}

}  // namespace ember::embedding
