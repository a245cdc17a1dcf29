#include "embedding/checkpoint.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <utility>

#include "core/file.h"
#include "core/json.h"
#include "core/random.h"

namespace ember::embedding {

// Records are the in-memory bytes of keys and floats.
static_assert(std::endian::native == std::endian::little,
              "checkpoint files are little-endian; a big-endian host needs byte swaps");

namespace {

namespace fs = std::filesystem;

constexpr char kFormat[] = "ember-embedding-snapshot";
constexpr int64_t kVersion = 1;
constexpr char kManifest[] = "MANIFEST";
constexpr char kRemovedFile[] = "removed.bin";
constexpr char kTempPrefix[] = ".tmp-";
// Keys per ReadRows/WriteRows/EraseRows call while saving and restoring.
constexpr int64_t kBatchRows = 16384;
constexpr size_t kWriteBufferBytes = size_t{1} << 20;

std::string ErrnoText() { return std::strerror(errno); }

std::string StepName(const char *kind, int64_t step) {
  char name[48];
  std::snprintf(name, sizeof(name), "%s-%020lld", kind, static_cast<long long>(step));
  return name;
}

std::string DataFileName(const char *prefix, int64_t index) {
  char name[48];
  std::snprintf(name, sizeof(name), "%s-%05lld.bin", prefix, static_cast<long long>(index));
  return name;
}

std::string HexHash(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

Status FsyncPath(const std::string &path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path, ": cannot open for fsync: ", ErrnoText());
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Status::IOError(path, ": fsync failed: ", ErrnoText());
  return Status::OK();
}

// --- Manifests -------------------------------------------------------------

struct FileEntry {
  std::string name;
  int64_t records = 0;
  int64_t bytes = 0;
  uint64_t hash = 0;
};

struct Manifest {
  std::string kind;  // "full", "delta" or "serving".
  int64_t step = 0;
  int64_t base_step = -1;
  int64_t table_step = 0;
  // The table's eviction_step() when saved (-1: none). Optional when read
  // (snapshots written before it existed hold no TTL state: -1).
  int64_t eviction_step = -1;
  int64_t dim = 0;
  int64_t row_floats = 0;
  int64_t record_bytes = 0;
  std::string optimizer;
  int64_t rows = 0;
  int64_t removed = 0;
  std::vector<FileEntry> files;  // Data files, then removed.bin for deltas.
};

std::string ManifestToJson(const Manifest &m) {
  std::string files = "[";
  for (size_t i = 0; i < m.files.size(); ++i) {
    JsonObject file;
    file.Add("name", m.files[i].name)
        .Add("records", m.files[i].records)
        .Add("bytes", m.files[i].bytes)
        .Add("hash", HexHash(m.files[i].hash));
    std::string line = file.ToString(/*indent=*/-1);
    line.pop_back();  // ToString ends with a newline.
    files += (i > 0 ? ",\n    " : "\n    ") + line;
  }
  files += m.files.empty() ? "]" : "\n  ]";
  JsonObject o;
  o.Add("format", kFormat)
      .Add("version", kVersion)
      .Add("kind", m.kind)
      .Add("step", m.step)
      .Add("base_step", m.base_step)
      .Add("table_step", m.table_step)
      .Add("eviction_step", m.eviction_step)
      .Add("dim", m.dim)
      .Add("row_floats", m.row_floats)
      .Add("record_bytes", m.record_bytes)
      .Add("optimizer", m.optimizer)
      .Add("rows", m.rows)
      .Add("removed", m.removed)
      .AddRaw("files", files);
  return o.ToString();
}

// Reads field `key` of `object` into `out`; false if missing or mistyped.
bool GetInt(const JsonValue &object, const char *key, int64_t *out) {
  const JsonValue *v = object.Find(key);
  if (v == nullptr || v->type != JsonValue::Type::kNumber) return false;
  auto [end, ec] = std::from_chars(v->text.data(), v->text.data() + v->text.size(), *out);
  return ec == std::errc() && end == v->text.data() + v->text.size();
}

bool GetString(const JsonValue &object, const char *key, std::string *out) {
  const JsonValue *v = object.Find(key);
  if (v == nullptr || v->type != JsonValue::Type::kString) return false;
  *out = v->text;
  return true;
}

Result<FileEntry> ParseFileEntry(const JsonValue &v) {
  FileEntry file;
  std::string hash;
  if (v.type != JsonValue::Type::kObject || !GetString(v, "name", &file.name) ||
      !GetInt(v, "records", &file.records) || !GetInt(v, "bytes", &file.bytes) ||
      !GetString(v, "hash", &hash) || hash.size() != 16) {
    return Status::DataLoss("malformed entry in \"files\"");
  }
  auto [end, ec] = std::from_chars(hash.data(), hash.data() + hash.size(), file.hash, 16);
  // A file name must stay inside its snapshot directory.
  if (ec != std::errc() || end != hash.data() + hash.size() || file.name.empty() ||
      file.name.find('/') != std::string::npos || file.name[0] == '.' || file.records < 0 ||
      file.bytes < 0) {
    return Status::DataLoss("malformed entry in \"files\" for ", JsonQuote(file.name));
  }
  return file;
}

// Reads and validates dir/MANIFEST; DataLoss naming it on any defect.
Result<Manifest> ReadManifest(const std::string &dir) {
  const std::string path = (fs::path(dir) / kManifest).string();
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return Status::DataLoss(path, ": missing");
    return text.status();
  }
  Result<JsonValue> parsed = ParseJson(*text);
  const JsonValue root = parsed.ok() ? std::move(parsed).value() : JsonValue();
  if (root.type != JsonValue::Type::kObject) {
    return Status::DataLoss(path, ": not a JSON object (truncated?)");
  }
  Manifest m;
  std::string format;
  int64_t version = 0;
  if (!GetString(root, "format", &format) || format != kFormat ||
      !GetInt(root, "version", &version)) {
    return Status::DataLoss(path, ": not an ", kFormat, " manifest");
  }
  if (version != kVersion) {
    return Status::DataLoss(path, ": format version ", version, ", this build reads ", kVersion);
  }
  if (!GetString(root, "kind", &m.kind) || !GetInt(root, "step", &m.step) ||
      !GetInt(root, "base_step", &m.base_step) || !GetInt(root, "table_step", &m.table_step) ||
      !GetInt(root, "dim", &m.dim) || !GetInt(root, "row_floats", &m.row_floats) ||
      !GetInt(root, "record_bytes", &m.record_bytes) ||
      !GetString(root, "optimizer", &m.optimizer) || !GetInt(root, "rows", &m.rows) ||
      !GetInt(root, "removed", &m.removed)) {
    return Status::DataLoss(path, ": missing or mistyped field");
  }
  if (root.Find("eviction_step") != nullptr && !GetInt(root, "eviction_step", &m.eviction_step)) {
    return Status::DataLoss(path, ": mistyped field \"eviction_step\"");
  }
  if ((m.kind != "full" && m.kind != "delta" && m.kind != "serving") || m.dim < 1 ||
      m.row_floats < m.dim || m.record_bytes != 8 + 4 * m.row_floats || m.rows < 0 ||
      m.removed < 0) {
    return Status::DataLoss(path, ": inconsistent fields");
  }
  const JsonValue *files = root.Find("files");
  if (files == nullptr || files->type != JsonValue::Type::kArray) {
    return Status::DataLoss(path, ": missing \"files\"");
  }
  int64_t records = 0;
  int64_t removed = 0;
  for (const JsonValue &v : files->items) {
    Result<FileEntry> file = ParseFileEntry(v);
    if (!file.ok()) return Status::DataLoss(path, ": ", file.status().message());
    const bool is_removed = file->name == kRemovedFile;
    const int64_t size = is_removed ? 8 : m.record_bytes;
    if (file->bytes != file->records * size) {
      return Status::DataLoss(path, ": ", file->name, " has ", file->records, " records but ",
                              file->bytes, " bytes");
    }
    (is_removed ? removed : records) += file->records;
    m.files.push_back(std::move(*file));
  }
  if (records != m.rows || removed != m.removed) {
    return Status::DataLoss(path, ": files hold ", records, " rows and ", removed,
                            " removed keys, manifest says ", m.rows, " and ", m.removed);
  }
  return m;
}

// dir/file's bytes after checking its size and hash against the manifest.
Result<std::string> ReadVerifiedFile(const std::string &dir, const FileEntry &file) {
  const std::string path = (fs::path(dir) / file.name).string();
  Result<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound) return Status::DataLoss(path, ": missing");
    return bytes.status();
  }
  if (static_cast<int64_t>(bytes->size()) != file.bytes) {
    return Status::DataLoss(path, ": ", bytes->size(), " bytes, manifest says ", file.bytes);
  }
  Fnv1a64Words hash;
  hash.Update(bytes->data(), bytes->size());
  if (hash.Digest() != file.hash) {
    return Status::DataLoss(path, ": hash ", HexHash(hash.Digest()), ", manifest says ",
                            HexHash(file.hash));
  }
  return std::move(*bytes);
}

// Checks, without reading them, that the data files are there with their sizes.
Status CheckFileSizes(const std::string &dir, const Manifest &m) {
  for (const FileEntry &file : m.files) {
    const std::string path = (fs::path(dir) / file.name).string();
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) return Status::DataLoss(path, ": missing (", ec.message(), ")");
    if (static_cast<int64_t>(size) != file.bytes) {
      return Status::DataLoss(path, ": ", size, " bytes, manifest says ", file.bytes);
    }
  }
  return Status::OK();
}

// --- Writing ---------------------------------------------------------------

// A data file being written: buffered, hashed, fsynced on Close.
class DataFile {
 public:
  DataFile(std::string path, int fd, int64_t *budget_bytes)
      : path_(std::move(path)), fd_(fd), budget_bytes_(budget_bytes) {
    buffer_.reserve(kWriteBufferBytes);
  }
  DataFile(const DataFile &) = delete;
  DataFile &operator=(const DataFile &) = delete;
  ~DataFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  static Result<std::unique_ptr<DataFile>> Create(const std::string &path, int64_t *budget_bytes) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return Status::IOError(path, ": cannot create: ", ErrnoText());
    return std::make_unique<DataFile>(path, fd, budget_bytes);
  }

  Status Append(const char *data, size_t size) {
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
  Status WriteAll(const char *data, size_t size) {
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
  Status WriteRaw(const char *data, size_t size) {
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
  int64_t *budget_bytes_;  // Bytes the seam still lets through; < 0: unlimited.
  std::vector<char> buffer_;
  Fnv1a64Words hash_;
  int64_t bytes_ = 0;
};

// Builds one snapshot (or export) in a temporary directory and commits it
// with a rename; removes the temporary directory unless committed.
class SnapshotWriter {
 public:
  // `parent` must exist. Records are key + `record_floats` floats.
  SnapshotWriter(std::string parent, std::string final_name, const char *file_prefix,
                 int64_t record_floats, int64_t file_bytes, int64_t fail_after_bytes)
      : parent_(std::move(parent)),
        final_path_((fs::path(parent_) / final_name).string()),
        temp_path_(
            (fs::path(parent_) / (kTempPrefix + final_name + "-" + std::to_string(::getpid())))
                .string()),
        file_prefix_(file_prefix),
        record_floats_(record_floats),
        records_per_file_(std::max<int64_t>(1, file_bytes / (8 + 4 * record_floats))),
        budget_bytes_(fail_after_bytes) {
    record_.resize(8 + 4 * record_floats);
  }
  SnapshotWriter(const SnapshotWriter &) = delete;
  SnapshotWriter &operator=(const SnapshotWriter &) = delete;
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
  Status Add(Key key, const float *row) {
    if (file_ == nullptr || file_records_ == records_per_file_) {
      EMBER_RETURN_IF_ERROR(CloseFile());
      const std::string name = DataFileName(file_prefix_, static_cast<int64_t>(files_.size()));
      EMBER_ASSIGN_OR_RETURN(file_, DataFile::Create(Path(name), &budget_bytes_));
      files_.push_back(FileEntry{name, 0, 0, 0});
      file_records_ = 0;
    }
    std::memcpy(record_.data(), &key, 8);
    std::memcpy(record_.data() + 8, row, 4 * record_floats_);
    EMBER_RETURN_IF_ERROR(file_->Append(record_.data(), record_.size()));
    ++file_records_;
    ++rows_;
    return Status::OK();
  }

  Status AddRemovedKeys(const std::vector<Key> &keys) {
    EMBER_RETURN_IF_ERROR(CloseFile());
    EMBER_ASSIGN_OR_RETURN(file_, DataFile::Create(Path(kRemovedFile), &budget_bytes_));
    files_.push_back(FileEntry{kRemovedFile, 0, 0, 0});
    EMBER_RETURN_IF_ERROR(
        file_->Append(reinterpret_cast<const char *>(keys.data()), 8 * keys.size()));
    file_records_ = static_cast<int64_t>(keys.size());
    return CloseFile();
  }

  int64_t rows() const { return rows_; }

  // Fills in rows, record_bytes and files, writes MANIFEST, fsyncs and
  // renames. An existing directory at the final path is exchanged with the
  // new one and removed when `replace` is true.
  Status Commit(Manifest manifest, bool replace,
                const std::function<Status(const std::string &)> &before_commit) {
    EMBER_RETURN_IF_ERROR(CloseFile());
    manifest.rows = rows_;
    manifest.record_bytes = 8 + 4 * manifest.row_floats;
    manifest.files = files_;
    const std::string manifest_path = Path(kManifest);
    const std::string json = ManifestToJson(manifest);
    {
      int64_t unlimited = -1;
      EMBER_ASSIGN_OR_RETURN(auto file, DataFile::Create(manifest_path, &unlimited));
      EMBER_RETURN_IF_ERROR(file->Append(json.data(), json.size()));
      EMBER_RETURN_IF_ERROR(file->Close());
    }
    EMBER_RETURN_IF_ERROR(FsyncPath(temp_path_));
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
    return FsyncPath(parent_);
  }

 private:
  std::string Path(const std::string &name) const { return (fs::path(temp_path_) / name).string(); }

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
  const char *const file_prefix_;
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
void RemoveTemporaries(const std::string &parent, const std::string &final_name) {
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

// --- Reading a checkpoint directory
// -------------------------------------------

struct SnapshotName {
  SnapshotInfo::Kind kind;
  int64_t step;
  std::string path;
};

// Complete snapshots in `dir` by directory name, sorted by step (a full
// snapshot before a delta of the same step, which saves never produce).
Result<std::vector<SnapshotName>> ListSnapshotNames(const std::string &dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::NotFound(dir, ": no such checkpoint directory");
  std::vector<SnapshotName> names;
  fs::directory_iterator it(dir, ec);
  for (fs::directory_iterator end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    SnapshotName entry;
    std::string digits;
    if (name.rfind("full-", 0) == 0) {
      entry.kind = SnapshotInfo::Kind::kFull;
      digits = name.substr(5);
    } else if (name.rfind("delta-", 0) == 0) {
      entry.kind = SnapshotInfo::Kind::kDelta;
      digits = name.substr(6);
    } else {
      continue;
    }
    auto [p, parse_ec] = std::from_chars(digits.data(), digits.data() + digits.size(), entry.step);
    if (parse_ec != std::errc() || p != digits.data() + digits.size() || digits.size() != 20)
      continue;
    entry.path = it->path().string();
    names.push_back(std::move(entry));
  }
  if (ec) return Status::IOError(dir, ": cannot list: ", ec.message());
  std::sort(names.begin(), names.end(), [](const SnapshotName &a, const SnapshotName &b) {
    return a.step != b.step ? a.step < b.step : a.kind < b.kind;
  });
  return names;
}

// The manifest of a snapshot directory, checked against the directory's name.
Result<Manifest> ReadSnapshotManifest(const SnapshotName &name) {
  EMBER_ASSIGN_OR_RETURN(Manifest m, ReadManifest(name.path));
  const std::string path = (fs::path(name.path) / kManifest).string();
  const bool full = name.kind == SnapshotInfo::Kind::kFull;
  if (m.kind != (full ? "full" : "delta") || m.step != name.step) {
    return Status::DataLoss(path, ": describes a ", m.kind, " snapshot of step ", m.step,
                            ", not its directory");
  }
  if (full != (m.base_step == -1) || (!full && m.base_step >= m.step)) {
    return Status::DataLoss(path, ": base_step ", m.base_step, " impossible for step ", m.step);
  }
  return m;
}

SnapshotInfo ToInfo(const SnapshotName &name, const Manifest &m) {
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
Result<std::vector<ChainLink>> ReadChain(const std::string &dir,
                                         const std::vector<SnapshotName> &names,
                                         const EmbeddingTable &table,
                                         const std::string &optimizer) {
  auto newest_full = std::find_if(names.rbegin(), names.rend(), [](const SnapshotName &n) {
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
    if (m.dim != table.dim() || m.row_floats != table.row_floats()) {
      return Status::InvalidArgument(it->path, ": rows of dim ", m.dim, " and ", m.row_floats,
                                     " floats; the table has dim ", table.dim(), " and ",
                                     table.row_floats(), " floats");
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
void RemoveOldSnapshots(const std::string &dir, int keep) {
  Result<std::vector<SnapshotName>> names = ListSnapshotNames(dir);
  if (!names.ok()) {
    LOG(WARNING) << "Checkpoint: cannot list old snapshots to remove: " << names.status();
    return;
  }
  std::vector<int64_t> full_steps;
  for (const SnapshotName &name : *names) {
    if (name.kind == SnapshotInfo::Kind::kFull) full_steps.push_back(name.step);
  }
  if (static_cast<int64_t>(full_steps.size()) <= keep) return;
  const int64_t oldest_kept = full_steps[full_steps.size() - keep];
  // Oldest first: a crash part-way leaves a prefix removed, never a hole in
  // a chain that is still kept.
  for (const SnapshotName &name : *names) {
    if (name.step >= oldest_kept) break;
    std::error_code ec;
    fs::remove_all(name.path, ec);
    if (ec) LOG(WARNING) << name.path << ": cannot remove old snapshot: " << ec.message();
  }
}

// Writes the stored rows of `keys` (sorted) to `writer`; keys without a row
// go to `vanished`.
Status WriteStoredRows(EmbeddingTable &table, const std::vector<Key> &keys, SnapshotWriter &writer,
                       std::vector<Key> *vanished) {
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
Status WriteRecords(EmbeddingTable &table, const std::string &bytes, int64_t row_floats) {
  const int64_t record_bytes = 8 + 4 * row_floats;
  const int64_t records = static_cast<int64_t>(bytes.size()) / record_bytes;
  std::vector<Key> keys;
  std::vector<float> rows;
  for (int64_t begin = 0; begin < records; begin += kBatchRows) {
    const int64_t n = std::min(kBatchRows, records - begin);
    keys.resize(n);
    rows.resize(n * row_floats);
    const char *record = bytes.data() + begin * record_bytes;
    for (int64_t i = 0; i < n; ++i, record += record_bytes) {
      std::memcpy(&keys[i], record, 8);
      std::memcpy(rows.data() + i * row_floats, record + 8, 4 * row_floats);
    }
    EMBER_RETURN_IF_ERROR(table.WriteRows(keys, rows.data()));
  }
  return Status::OK();
}

Status EraseKeys(EmbeddingTable &table, const std::vector<Key> &keys) {
  for (size_t begin = 0; begin < keys.size(); begin += kBatchRows) {
    const size_t end = std::min(keys.size(), begin + kBatchRows);
    EMBER_RETURN_IF_ERROR(
        table.EraseRows(std::vector<Key>(keys.begin() + begin, keys.begin() + end)));
  }
  return Status::OK();
}

// Applies one verified snapshot (full or delta) to the table.
Status ApplySnapshot(EmbeddingTable &table, const std::string &dir, const Manifest &m) {
  for (const FileEntry &file : m.files) {
    EMBER_ASSIGN_OR_RETURN(std::string bytes, ReadVerifiedFile(dir, file));
    if (file.name == kRemovedFile) {
      std::vector<Key> keys(bytes.size() / 8);
      std::memcpy(keys.data(), bytes.data(), 8 * keys.size());
      EMBER_RETURN_IF_ERROR(EraseKeys(table, keys));
    } else {
      EMBER_RETURN_IF_ERROR(WriteRecords(table, bytes, m.row_floats));
    }
  }
  return Status::OK();
}

// `a` without the elements of `b`; both sorted.
std::vector<Key> Difference(const std::vector<Key> &a, const std::vector<Key> &b) {
  std::vector<Key> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::vector<Key> Union(const std::vector<Key> &a, const std::vector<Key> &b) {
  std::vector<Key> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace

// --- Fnv1a64Words
// -------------------------------------------------------------

namespace {
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;
}  // namespace

void Fnv1a64Words::Update(const char *data, size_t size) {
  length_ += size;
  while (size > 0 && tail_bytes_ > 0) {
    tail_ |= uint64_t{static_cast<unsigned char>(*data++)} << (8 * tail_bytes_);
    --size;
    if (++tail_bytes_ == 8) {
      state_ = (state_ ^ tail_) * kFnvPrime;
      tail_ = 0;
      tail_bytes_ = 0;
    }
  }
  for (; size >= 8; size -= 8, data += 8) {
    uint64_t word;
    std::memcpy(&word, data, 8);
    state_ = (state_ ^ word) * kFnvPrime;
  }
  for (; size > 0; --size) {
    tail_ |= uint64_t{static_cast<unsigned char>(*data++)} << (8 * tail_bytes_++);
  }
}

uint64_t Fnv1a64Words::Digest() const {
  uint64_t state = state_;
  if (tail_bytes_ > 0) state = (state ^ tail_) * kFnvPrime;
  return Mix64((state ^ length_) * kFnvPrime);
}

// --- ListCheckpoints
// ------------------------------------------------------------

Result<std::vector<SnapshotInfo>> ListCheckpoints(const std::string &dir) {
  EMBER_ASSIGN_OR_RETURN(std::vector<SnapshotName> names, ListSnapshotNames(dir));
  std::vector<SnapshotInfo> infos;
  for (const SnapshotName &name : names) {
    EMBER_ASSIGN_OR_RETURN(Manifest m, ReadSnapshotManifest(name));
    infos.push_back(ToInfo(name, m));
  }
  return infos;
}

// --- Checkpointer
// ------------------------------------------------------------------

Checkpointer::Checkpointer(EmbeddingTable &table, CheckpointOptions options)
    : table_(table), options_(std::move(options)) {}

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
  SnapshotWriter writer(options_.dir, StepName("full", step), "rows", table_.row_floats(),
                        options_.file_bytes, options_.fail_after_bytes);
  EMBER_RETURN_IF_ERROR(writer.Begin());
  EMBER_RETURN_IF_ERROR(
      table_.Scan([&](Key key, const float *row) { return writer.Add(key, row); }));
  Manifest m;
  m.kind = "full";
  m.step = step;
  m.table_step = table_.step();
  m.eviction_step = table_.eviction_step();
  m.dim = table_.dim();
  m.row_floats = table_.row_floats();
  m.optimizer = options_.optimizer;
  EMBER_RETURN_IF_ERROR(writer.Commit(std::move(m), /*replace=*/false, options_.before_commit));

  // Nothing changed the table since Scan, so what TakeChanges reports is
  // covered by the snapshot.
  std::vector<Key> changed, removed;
  table_.TakeChanges(&changed, &removed);
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
  if (!table_.tracks_changes()) {
    return Status::FailedPrecondition(
        "a delta snapshot needs a table made with EmbeddingTableOptions::track_changes");
  }
  Result<std::vector<SnapshotName>> names = ListSnapshotNames(options_.dir);
  if (!names.ok() && names.status().code() != StatusCode::kNotFound) return names.status();
  const bool has_full =
      names.ok() && std::any_of(names->begin(), names->end(), [](const SnapshotName &n) {
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
  table_.TakeChanges(&changed, &removed);
  pending_changed_ = Union(Difference(pending_changed_, removed), changed);
  pending_removed_ = Union(Difference(pending_removed_, changed), removed);

  const int64_t row_floats = table_.row_floats();
  SnapshotWriter writer(options_.dir, StepName("delta", step), "rows", row_floats,
                        options_.file_bytes, options_.fail_after_bytes);
  EMBER_RETURN_IF_ERROR(writer.Begin());
  std::vector<Key> vanished;  // Reported changed but gone: saved as removed.
  EMBER_RETURN_IF_ERROR(WriteStoredRows(table_, pending_changed_, writer, &vanished));
  const std::vector<Key> all_removed = Union(pending_removed_, vanished);
  EMBER_RETURN_IF_ERROR(writer.AddRemovedKeys(all_removed));
  Manifest m;
  m.kind = "delta";
  m.step = step;
  m.base_step = base_step_;
  m.table_step = table_.step();
  m.eviction_step = table_.eviction_step();
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
  EMBER_ASSIGN_OR_RETURN(std::vector<SnapshotName> names, ListSnapshotNames(options_.dir));
  // The whole chain is checked before the table is touched.
  EMBER_ASSIGN_OR_RETURN(std::vector<ChainLink> chain,
                         ReadChain(options_.dir, names, table_, options_.optimizer));
  std::vector<Key> existing;
  EMBER_RETURN_IF_ERROR(table_.Scan([&](Key key, const float *) {
    existing.push_back(key);
    return Status::OK();
  }));
  EMBER_RETURN_IF_ERROR(EraseKeys(table_, existing));
  for (const ChainLink &link : chain) {
    EMBER_RETURN_IF_ERROR(ApplySnapshot(table_, link.path, link.manifest));
  }
  const int64_t chain_step = chain.back().manifest.step;
  table_.set_step(chain.back().manifest.table_step);
  // Rows the saved table had expired lazily (on disk) are in the snapshots
  // (a delta never lists them as removed): expire them again.
  table_.RestoreEvictionStep(chain.back().manifest.eviction_step);
  std::vector<Key> changed, removed;
  table_.TakeChanges(&changed, &removed);
  pending_changed_.clear();
  pending_removed_.clear();
  base_step_ = chain_step;
  LOG(INFO) << "Checkpoint: restored step " << chain_step << " (" << table_.num_rows()
            << " rows) from " << chain.size() << " snapshot(s) in " << options_.dir;
  return chain_step;
}

// --- Serving export
// -----------------------------------------------------------------

Status ExportForServing(EmbeddingTable &table, const std::string &path,
                        const ServingExportOptions &options) {
  const fs::path target = fs::path(path).lexically_normal();
  const std::string name = target.filename().string();
  if (name.empty() || name == "." || name == "..") {
    return Status::InvalidArgument("serving export path ", JsonQuote(path), " names no directory");
  }
  const std::string parent = target.has_parent_path() ? target.parent_path().string() : ".";
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    return Status::InvalidArgument(path, ": directory ", parent, " does not exist");
  }
  RemoveTemporaries(parent, name);
  SnapshotWriter writer(parent, name, "vectors", table.dim(), options.file_bytes,
                        options.fail_after_bytes);
  EMBER_RETURN_IF_ERROR(writer.Begin());
  EMBER_RETURN_IF_ERROR(
      table.Scan([&](Key key, const float *row) { return writer.Add(key, row); }));
  Manifest m;
  m.kind = "serving";
  m.step = options.step;
  m.table_step = table.step();
  m.eviction_step = table.eviction_step();
  m.dim = table.dim();
  m.row_floats = table.dim();
  EMBER_RETURN_IF_ERROR(writer.Commit(std::move(m), /*replace=*/true, options.before_commit));
  LOG(INFO) << "Exported " << writer.rows() << " vectors of dim " << table.dim() << " to " << path;
  return Status::OK();
}

Result<int64_t> ReadServingExport(
    const std::string &path, const std::function<Status(Key key, const float *vector)> &visit) {
  EMBER_ASSIGN_OR_RETURN(Manifest m, ReadManifest(path));
  if (m.kind != "serving" || m.row_floats != m.dim) {
    return Status::DataLoss(path, "/", kManifest, ": a ", m.kind,
                            " snapshot, not a serving export");
  }
  EMBER_RETURN_IF_ERROR(CheckFileSizes(path, m));
  std::vector<float> vector(m.dim);
  int64_t count = 0;
  for (const FileEntry &file : m.files) {
    EMBER_ASSIGN_OR_RETURN(std::string bytes, ReadVerifiedFile(path, file));
    for (int64_t i = 0; i < file.records; ++i) {
      const char *record = bytes.data() + i * m.record_bytes;
      Key key;
      std::memcpy(&key, record, 8);
      std::memcpy(vector.data(), record + 8, 4 * m.dim);
      EMBER_RETURN_IF_ERROR(visit(key, vector.data()));
      ++count;
    }
  }
  return count;
}

}  // namespace ember::embedding
