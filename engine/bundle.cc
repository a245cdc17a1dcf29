#include "engine/bundle.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "core/checksum.h"
#include "core/file.h"
#include "core/json.h"
#include "core/string_collectives.h"
#include "embedding/checkpoint.h"
#include "engine/internal/bundle_manifest.h"
#include "engine/internal/bundle_write.h"
#include "engine/training_checkpoint.h"
#include "ops/precision.h"

namespace ember::engine {
namespace {

namespace fs = std::filesystem;
using internal::BundleFile;
using internal::HashFile;
using internal::HexHash;
using internal::HashText;
using internal::kDenseFile;
using internal::kEmbeddingDir;
using internal::kHashField;
using internal::Manifest;
using internal::ShardDir;

Status FsyncDirectory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path, ": cannot open for fsync: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Status::IOError(path, ": fsync failed: ", std::strerror(errno));
  return Status::OK();
}

Result<std::vector<std::string>> BundleFiles(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file()) names.push_back(fs::relative(it->path(), dir).string());
  }
  if (ec) return Status::IOError(dir, ": cannot list: ", ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

Status WriteDense(const std::string& path, const std::vector<Parameter>& parameters) {
  EMBER_ASSIGN_OR_RETURN(auto writer, AtomicFileWriter::Create(path));
  for (const Parameter& p : parameters) {
    // Little-endian float32 as the host holds them (Ember builds only for
    // little-endian hosts).
    const auto* bytes = reinterpret_cast<const char*>(p.value.data<float>());
    EMBER_RETURN_IF_ERROR(writer->Write(std::string_view(bytes, p.value.numel() * sizeof(float))));
  }
  return writer->Commit();
}

Status WriteManifest(const std::string& dir, const BundleConfig& config,
                     const std::vector<Parameter*>& parameters, int64_t rows, int shards,
                     const std::optional<internal::DeltaSection>& delta) {
  Manifest manifest;
  // A full bundle stays one that version 3 (unsharded) or 4 reads.
  manifest.version = delta ? kBundleVersion : shards > 1 ? 4 : 3;
  manifest.delta = delta;
  manifest.step = config.step;
  manifest.model = config.model;
  manifest.embedding = {config.embedding_dim, config.table_seed, config.init_scale,
                        config.missing_keys_read_zero, rows, shards};
  manifest.input = {config.input, config.columnar_input};
  manifest.dense.descriptor = DenseStateDescriptor(config.model.name, "none", parameters);
  for (const Parameter* p : parameters) manifest.dense.parameter_floats.push_back(p->value.numel());
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> names, BundleFiles(dir));
  for (const std::string& name : names) {
    int64_t bytes = 0;
    uint64_t hash = 0;
    EMBER_RETURN_IF_ERROR(HashFile(dir + "/" + name, FileChecksum::kXxh64, &bytes, &hash));
    manifest.files.push_back({name, bytes, HexHash(hash)});
  }
  std::string body;
  try {
    body = Json(manifest).dump(2);
  } catch (const nlohmann::json::exception& e) {
    // A string of the options that is not UTF-8 (a schema, a slot name).
    return Status::InvalidArgument(dir, "/", kBundleManifest, ": cannot write the options: ",
                                   e.what());
  }
  // The hash field goes last, over the text before it (see the header).
  const std::string head = body.substr(0, body.rfind("\n}"));
  const std::string text =
      head + kHashField + HexHash(HashText(FileChecksum::kXxh64, head + "\n}")) + "\"\n}\n";
  return WriteFileAtomic(dir + "/" + kBundleManifest, text);
}

// Moves the complete bundle at `temporary` to `path`: a rename, or an
// atomic exchange with an earlier bundle there (then removed).
Status Commit(const std::string& temporary, const std::string& path) {
  std::error_code ec;
  if (fs::exists(path, ec)) {
    if (FileExists(path + "/" + kBundleManifest)) {
      if (::renameat2(AT_FDCWD, temporary.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) != 0) {
        return Status::IOError(path, ": cannot swap in the new bundle: ", std::strerror(errno));
      }
      fs::remove_all(temporary, ec);  // The earlier bundle, now there.
      return Status::OK();
    }
    if (!fs::is_directory(path, ec) || !fs::is_empty(path, ec)) {
      return Status::InvalidArgument(path, ": exists and is not a serving bundle; not replacing it");
    }
    fs::remove(path, ec);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    return Status::IOError(path, ": cannot rename ", temporary, " to it: ", std::strerror(errno));
  }
  return Status::OK();
}

}  // namespace

BundleConfig BundleConfigOf(const TrainOptions& options, const io::FormatSpec& input,
                            bool columnar_input, int64_t step) {
  BundleConfig config;
  config.model = options.model;
  config.model.device = Device::Cpu();
  config.embedding_dim = options.table.dim;
  config.table_seed = options.table.seed;
  config.init_scale = options.table.init_scale;
  config.missing_keys_read_zero =
      options.table.admission.kind != embedding::AdmissionOptions::Kind::kNone;
  config.input = input;
  config.columnar_input = columnar_input;
  config.step = step;
  return config;
}

namespace internal {

Result<BundleTarget> PrepareTemporary(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("the bundle's path is empty");
  BundleTarget t;
  t.target = fs::path(path).lexically_normal();
  const std::string name = t.target.filename().string();
  t.parent = t.target.has_parent_path() ? t.target.parent_path().string() : ".";
  std::error_code ec;
  if (name.empty() || !fs::is_directory(t.parent, ec)) {
    return Status::InvalidArgument(path, ": its parent directory does not exist");
  }
  if (fs::exists(t.target, ec) && !FileExists(t.target.string() + "/" + kBundleManifest) &&
      (!fs::is_directory(t.target, ec) || !fs::is_empty(t.target, ec))) {
    return Status::InvalidArgument(path, ": exists and is not a serving bundle; not replacing it");
  }
  // Leftovers of writes of this bundle that a crash interrupted.
  const std::string prefix = ".tmp-" + name + "-";
  for (const auto& entry : fs::directory_iterator(t.parent, ec)) {
    if (entry.path().filename().string().starts_with(prefix)) fs::remove_all(entry.path(), ec);
  }
  t.temporary = t.parent + "/" + prefix + std::to_string(::getpid());
  if (!fs::create_directory(t.temporary, ec)) {
    return Status::IOError(t.temporary, ": cannot create: ", ec.message());
  }
  return t;
}

Status FinishBundle(const BundleTarget& t, const BundleConfig& config, ops::DenseModel& model,
                    int64_t rows, int shards, const BundleWriteOptions& options,
                    const std::optional<DeltaSection>& delta) {
  EMBER_ASSIGN_OR_RETURN(const std::vector<Parameter> host, model.ParametersToHost());
  EMBER_RETURN_IF_ERROR(WriteDense(t.temporary + "/" + kDenseFile, host));
  EMBER_RETURN_IF_ERROR(
      WriteManifest(t.temporary, config, model.parameters(), rows, shards, delta));
  EMBER_RETURN_IF_ERROR(FsyncDirectory(t.temporary));
  if (options.before_commit) EMBER_RETURN_IF_ERROR(options.before_commit(t.temporary));
  EMBER_RETURN_IF_ERROR(Commit(t.temporary, t.target.string()));
  return FsyncDirectory(t.parent);
}

}  // namespace internal

namespace {

using internal::BundleTarget;
using internal::FinishBundle;
using internal::PrepareTemporary;

// A status as text that StatusFromText reads back (to pass between ranks).
std::string StatusText(const Status& status) {
  return std::to_string(static_cast<int>(status.code())) + " " + status.message();
}
Status StatusFromText(const std::string& text) {
  const size_t space = text.find(' ');
  const int code = std::atoi(text.substr(0, space).c_str());
  if (code == 0) return Status::OK();
  return Status(static_cast<StatusCode>(code),
                space == std::string::npos ? "" : text.substr(space + 1));
}

}  // namespace

Status WriteBundle(const std::string& path, const BundleConfig& config, ops::DenseModel& model,
                   embedding::EmbeddingTable& table, const BundleWriteOptions& options) {
  EMBER_ASSIGN_OR_RETURN(const BundleTarget t, PrepareTemporary(path));
  const Status status = [&]() -> Status {
    embedding::ServingExportOptions serving;
    serving.step = config.step;
    EMBER_RETURN_IF_ERROR(
        embedding::ExportForServing(table, t.temporary + "/" + kEmbeddingDir, serving));
    return FinishBundle(t, config, model, table.num_rows(), 1, options, std::nullopt);
  }();
  std::error_code ec;
  if (!status.ok()) fs::remove_all(t.temporary, ec);
  return status;
}

Status WriteShardedBundle(const std::string& path, const BundleConfig& config,
                          ops::DenseModel& model, embedding::EmbeddingTable& rows,
                          Communicator& comm, const BundleWriteOptions& options) {
  const int n = comm.size(), r = comm.rank();
  // Rank 0 makes the temporary directory; every rank learns where (or why not).
  BundleTarget t;
  std::string prepared;
  if (r == 0) {
    Result<BundleTarget> made = PrepareTemporary(path);
    std::error_code ec;
    if (made.ok() && !fs::create_directory(made->temporary + "/" + kEmbeddingDir, ec)) {
      made = Status::IOError(made->temporary, "/", kEmbeddingDir, ": cannot create: ",
                             ec.message());
    }
    if (made.ok()) t = *made;
    prepared = made.ok() ? "0 " + t.temporary : StatusText(made.status());
  }
  EMBER_RETURN_IF_ERROR(BroadcastString(comm, 0, &prepared));
  const Status ready = StatusFromText(prepared);
  if (!ready.ok()) return ready;
  const std::string temporary = prepared.substr(2);
  // Every rank its rows, then every rank learns how all went.
  embedding::ServingExportOptions serving;
  serving.step = config.step;
  const Status exported = embedding::ExportForServing(
      rows, temporary + "/" + kEmbeddingDir + "/" + ShardDir(r), serving);
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> outcomes,
                         AllGatherStrings(comm, StatusText(exported)));
  std::vector<int64_t> total = {rows.num_rows()};
  EMBER_RETURN_IF_ERROR(comm.AllReduce(total, total));
  Status status;
  for (int q = 0; q < n && status.ok(); ++q) {
    const Status s = StatusFromText(outcomes[q]);
    if (!s.ok()) status = s.WithContext("rank " + std::to_string(q) + "'s rows");
  }
  // Rank 0 writes the rest, the manifest last, and commits.
  if (r == 0) {
    if (status.ok()) status = FinishBundle(t, config, model, total[0], n, options, std::nullopt);
    std::error_code ec;
    if (!status.ok()) fs::remove_all(t.temporary, ec);
  }
  std::string result = StatusText(status);
  EMBER_RETURN_IF_ERROR(BroadcastString(comm, 0, &result));
  return StatusFromText(result);
}

}  // namespace ember::engine
