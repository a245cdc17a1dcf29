#include "engine/bundle.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "core/checksum.h"
#include "core/file.h"
#include "core/string_collectives.h"
#include "core/json.h"
#include "embedding/checkpoint.h"
#include "engine/training_checkpoint.h"
#include "ops/precision.h"

namespace ember::engine {
namespace {

namespace fs = std::filesystem;

constexpr char kDenseFile[] = "dense.bin";
constexpr char kEmbeddingDir[] = "embedding";
constexpr char kHashField[] = ",\n  \"manifest_hash\": \"";
// Keys per WriteRows call while loading the embedding vectors.
constexpr int64_t kLoadBatchRows = 16384;

std::string HexHash(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

uint64_t HashText(FileChecksum checksum, const std::string& text) {
  return FileChecksumOf(checksum, text.data(), text.size());
}

// The size and hash of the file at `path`. IOError naming it if it cannot
// be read.
Status HashFile(const std::string& path, FileChecksum checksum, int64_t* bytes, uint64_t* hash) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(path, ": cannot open: ", std::strerror(errno));
  FileHasher hasher(checksum);
  std::vector<char> buffer(size_t{1} << 20);
  *bytes = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize n = in.gcount();
    hasher.Update(buffer.data(), static_cast<size_t>(n));
    *bytes += n;
  }
  if (in.bad()) return Status::IOError(path, ": read failed");
  *hash = hasher.Digest();
  return Status::OK();
}

Status FsyncDirectory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path, ": cannot open for fsync: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Status::IOError(path, ": fsync failed: ", std::strerror(errno));
  return Status::OK();
}

// A float as the shortest decimal that reads back to it ("0.1", where the
// float's own double would print 0.10000000149011612).
double ShortestDecimal(float value) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof(text), value);
  return ec == std::errc() ? std::strtod(std::string(text, end).c_str(), nullptr) : value;
}

// One file of the bundle as the manifest lists it.
struct BundleFile {
  std::string name;
  int64_t bytes = 0;
  std::string hash;  // HexHash of its checksum (the manifest's)
};

void to_json(Json& j, const BundleFile& f) {
  j = Json{{"name", f.name}, {"bytes", f.bytes}, {"hash", f.hash}};
}
void from_json(const Json& j, BundleFile& f) {
  JsonFields fields(j);
  fields.Get("name", &f.name);
  fields.Get("bytes", &f.bytes);
  fields.Get("hash", &f.hash);
  fields.Done();
}

// The manifest's "embedding": the table's reading of keys and its rows.
struct EmbeddingSection {
  int dim = 0;
  uint64_t seed = 0;
  float init_scale = 0.0f;
  bool missing_keys_read_zero = false;
  int64_t rows = 0;
  // Version 4: embedding/ holds one export per rank, shard-RRRRR (1: the
  // export itself, as before).
  int shards = 1;
};

void to_json(Json& j, const EmbeddingSection& e) {
  j = Json{{"dim", e.dim},
           {"seed", SeedJson(e.seed)},
           {"init_scale", ShortestDecimal(e.init_scale)},
           {"missing_keys", e.missing_keys_read_zero ? "zeros" : "initial"},
           {"rows", e.rows}};
  if (e.shards > 1) j["shards"] = e.shards;
}
void from_json(const Json& j, EmbeddingSection& e) {
  JsonFields fields(j);
  fields.Get("dim", &e.dim);
  GetSeed(fields, "seed", &e.seed);
  fields.Get("init_scale", &e.init_scale);
  std::string missing;
  fields.Get("missing_keys", &missing);
  if (missing != "zeros" && missing != "initial") {
    throw JsonFieldError("missing_keys", "is not \"initial\" or \"zeros\": " + missing);
  }
  e.missing_keys_read_zero = missing == "zeros";
  fields.Get("rows", &e.rows);
  fields.Optional("shards", &e.shards);
  if (e.shards < 1) throw JsonFieldError("shards", "is below 1: " + std::to_string(e.shards));
  fields.Done();
}

// The manifest's "input": the text format's spec, its "format" "columnar"
// for columnar files (whose spec is then the default, criteo's).
struct InputSection {
  io::FormatSpec spec;
  bool columnar = false;
};

void to_json(Json& j, const InputSection& input) {
  j = input.spec;
  if (input.columnar) j["format"] = "columnar";
}
void from_json(const Json& j, InputSection& input) {
  input.spec = j.get<io::FormatSpec>();
  input.columnar = input.spec.name == "columnar";
  if (input.columnar) input.spec.name = io::FormatSpec().name;
}

struct DenseSection {
  std::string descriptor;
  std::vector<int64_t> parameter_floats;
};

void to_json(Json& j, const DenseSection& d) {
  j = Json{{"descriptor", d.descriptor}, {"parameter_floats", d.parameter_floats}};
}
void from_json(const Json& j, DenseSection& d) {
  JsonFields fields(j);
  fields.Get("descriptor", &d.descriptor);
  fields.Get("parameter_floats", &d.parameter_floats);
  fields.Done();
}

// Everything MANIFEST.json holds, in its order (see the header); the
// manifest_hash goes after these, over their text.
struct Manifest {
  std::string format = kBundleFormat;
  int version = kBundleVersion;
  int64_t step = 0;
  ModelOptions model;
  EmbeddingSection embedding;
  InputSection input;
  DenseSection dense;
  std::vector<BundleFile> files;
  std::string checksum = FileChecksumName(FileChecksum::kXxh64);  // From version 2.
  std::string manifest_hash;  // Read only: written by WriteManifest.
};

void to_json(Json& j, const Manifest& m) {
  j = Json{{"format", m.format}, {"version", m.version},     {"step", m.step},
           {"model", m.model},   {"embedding", m.embedding}, {"input", m.input},
           {"dense", m.dense},   {"files", m.files}};
  if (m.version >= 2) j["checksum"] = m.checksum;
}
void from_json(const Json& j, Manifest& m) {
  JsonFields fields(j);
  fields.Get("format", &m.format);
  fields.Get("version", &m.version);
  fields.Get("step", &m.step);
  fields.Get("model", &m.model);
  fields.Get("embedding", &m.embedding);
  fields.Get("input", &m.input);
  fields.Get("dense", &m.dense);
  fields.Get("files", &m.files);
  if (m.version >= 2) fields.Get("checksum", &m.checksum);
  fields.Get("manifest_hash", &m.manifest_hash);
  fields.Done();
}

// The manifest's text up to its hash field, closed as the object it was
// before the field was added; empty if the field is missing.
std::string TextBeforeHash(const std::string& text, std::string* stored_hash) {
  const size_t at = text.rfind(kHashField);
  if (at == std::string::npos) return "";
  const size_t hash_begin = at + std::strlen(kHashField);
  *stored_hash = text.substr(hash_begin, 16);
  return text.substr(0, at) + "\n}";
}

// The format and version of a manifest, read before anything else so that
// another file or version is named as such.
struct ManifestHead {
  std::string format;
  int64_t version = 0;
  std::string checksum = FileChecksumName(FileChecksum::kFnv1a64Words);  // Version 1's.
};

void from_json(const Json& j, ManifestHead& head) {
  JsonFields fields(j);  // Not Done: the rest is Manifest's to read.
  fields.Get("format", &head.format);
  fields.Get("version", &head.version);
  if (head.version >= 2) fields.Get("checksum", &head.checksum);
}

// DataLoss naming `path` and the field for a manifest its reader refuses.
template <typename T>
Result<T> ReadManifestJson(const std::string& path, const Json& json) {
  Result<T> read = FromJson<T>(json);
  if (!read.ok()) return Status::DataLoss(path, ": ", read.status().message());
  return read;
}

// `text`, the manifest at `path`, checked (format, version, its hash) and
// read; `*checksum` is the one its hashes were made with.
Result<Manifest> ParseManifest(const std::string& path, const std::string& text,
                               FileChecksum* checksum) {
  Result<Json> parsed = ParseJsonText(text);
  if (!parsed.ok()) return Status::DataLoss(path, ": not JSON: ", parsed.status().message());
  EMBER_ASSIGN_OR_RETURN(const ManifestHead head, ReadManifestJson<ManifestHead>(path, *parsed));
  if (head.format != kBundleFormat) {
    return Status::InvalidArgument(path, ": format \"", head.format,
                                   "\" is not a serving bundle (\"", kBundleFormat, "\")");
  }
  if (head.version < 1 || head.version > kBundleVersion) {
    return Status::InvalidArgument(path, ": bundle version ", head.version,
                                   " is not one this Ember reads (1 to ", kBundleVersion, ")");
  }
  Result<FileChecksum> named = FileChecksumNamed(head.checksum);
  if (!named.ok()) return Status::DataLoss(path, ": ", named.status().message());
  *checksum = *named;
  std::string stored_hash;
  const std::string body = TextBeforeHash(text, &stored_hash);
  if (body.empty()) return Status::DataLoss(path, ": \"manifest_hash\" is missing");
  if (stored_hash != HexHash(HashText(*checksum, body))) {
    return Status::DataLoss(path, ": manifest_hash does not match its text (edited or damaged)");
  }
  return ReadManifestJson<Manifest>(path, *parsed);
}

// Checks every file the manifest lists: present, of its size and hash.
Status CheckFiles(const std::string& dir, const std::string& path,
                  const std::vector<BundleFile>& files, FileChecksum checksum) {
  if (files.empty()) return Status::DataLoss(path, ": \"files\" is empty");
  for (const BundleFile& listed : files) {
    const std::string& name = listed.name;
    if (name.empty() || name.find("..") != std::string::npos || name[0] == '/') {
      return Status::DataLoss(path, ": file name \"", name, "\" is not inside the bundle");
    }
    const std::string file = dir + "/" + name;
    if (!FileExists(file)) return Status::DataLoss(file, ": missing (listed in ", path, ")");
    int64_t actual_bytes = 0;
    uint64_t actual_hash = 0;
    EMBER_RETURN_IF_ERROR(HashFile(file, checksum, &actual_bytes, &actual_hash));
    if (actual_bytes != listed.bytes) {
      return Status::DataLoss(file, ": ", actual_bytes, " bytes, the manifest lists ",
                              listed.bytes, " (truncated or damaged)");
    }
    if (HexHash(actual_hash) != listed.hash) {
      return Status::DataLoss(file, ": hash ", HexHash(actual_hash), " differs from the ",
                              "manifest's ", listed.hash, " (damaged)");
    }
  }
  return Status::OK();
}

// The bundle's files but the manifest, relative to `dir`, sorted.
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
                     const std::vector<Parameter*>& parameters, int64_t rows, int shards = 1) {
  Manifest manifest;
  // An unsharded bundle stays one that version 3 reads.
  manifest.version = shards > 1 ? kBundleVersion : 3;
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

namespace {

// Where a bundle at `path` is written before it is committed.
struct BundleTarget {
  fs::path target;
  std::string parent;
  std::string temporary;
};

// Checks `path` (see WriteBundle), removes what crashed writes of it left,
// and makes the temporary directory beside it.
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

// Writes dense.bin and the manifest (last) into t.temporary, whose
// embedding/ is written, then commits it.
Status FinishBundle(const BundleTarget& t, const BundleConfig& config, ops::DenseModel& model,
                    int64_t rows, int shards, const BundleWriteOptions& options) {
  EMBER_ASSIGN_OR_RETURN(const std::vector<Parameter> host, model.ParametersToHost());
  EMBER_RETURN_IF_ERROR(WriteDense(t.temporary + "/" + kDenseFile, host));
  EMBER_RETURN_IF_ERROR(WriteManifest(t.temporary, config, model.parameters(), rows, shards));
  EMBER_RETURN_IF_ERROR(FsyncDirectory(t.temporary));
  if (options.before_commit) EMBER_RETURN_IF_ERROR(options.before_commit(t.temporary));
  EMBER_RETURN_IF_ERROR(Commit(t.temporary, t.target.string()));
  return FsyncDirectory(t.parent);
}

std::string ShardDir(int shard) {
  char name[32];
  std::snprintf(name, sizeof(name), "shard-%05d", shard);
  return name;
}

// A status as text that StatusFromText reads back (to pass between ranks).
std::string StatusText(const Status& status) {
  return std::to_string(static_cast<int>(status.code())) + " " + status.message();
}
Status StatusFromText(const std::string& text) {
  const size_t space = text.find(' ');
  const int code = std::atoi(text.substr(0, space).c_str());
  if (code == 0) return Status::OK();
  return Status(static_cast<StatusCode>(code), space == std::string::npos ? "" : text.substr(space + 1));
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
    return FinishBundle(t, config, model, table.num_rows(), 1, options);
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
    if (status.ok()) status = FinishBundle(t, config, model, total[0], n, options);
    std::error_code ec;
    if (!status.ok()) fs::remove_all(t.temporary, ec);
  }
  std::string result = StatusText(status);
  EMBER_RETURN_IF_ERROR(BroadcastString(comm, 0, &result));
  return StatusFromText(result);
}

Result<VerifiedBundle> VerifyBundle(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    return Status::NotFound(path, ": no such bundle directory");
  }
  const std::string manifest = path + "/" + kBundleManifest;
  Result<std::string> text = ReadFile(manifest);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return Status::NotFound(manifest, ": missing (not a serving bundle, or one whose write "
                                        "did not finish)");
    }
    return text.status();
  }
  FileChecksum checksum = FileChecksum::kXxh64;
  EMBER_ASSIGN_OR_RETURN(const Manifest read, ParseManifest(manifest, *text, &checksum));
  EMBER_RETURN_IF_ERROR(CheckFiles(path, manifest, read.files, checksum));
  VerifiedBundle bundle;
  bundle.path = path;
  BundleConfig& c = bundle.config;
  c.model = read.model;
  c.embedding_dim = read.embedding.dim;
  c.table_seed = read.embedding.seed;
  c.init_scale = read.embedding.init_scale;
  c.missing_keys_read_zero = read.embedding.missing_keys_read_zero;
  c.input = read.input.spec;
  c.columnar_input = read.input.columnar;
  c.step = read.step;
  bundle.dense_descriptor = read.dense.descriptor;
  bundle.parameter_floats = read.dense.parameter_floats;
  bundle.embedding_rows = read.embedding.rows;
  bundle.embedding_shards = read.embedding.shards;
  return bundle;
}

Status LoadBundleDense(const VerifiedBundle& bundle, ops::DenseModel& model) {
  const std::string path = bundle.path + "/" + kDenseFile;
  const std::vector<Parameter*> parameters = model.parameters();
  const std::string descriptor = DenseStateDescriptor(bundle.config.model.name, "none", parameters);
  if (descriptor != bundle.dense_descriptor ||
      parameters.size() != bundle.parameter_floats.size()) {
    return Status::DataLoss(path, ": holds the parameters of \"", bundle.dense_descriptor,
                            "\", the bundle's model has \"", descriptor, "\"");
  }
  EMBER_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  int64_t offset = 0;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const int64_t floats = parameters[i]->value.numel();
    const int64_t size = floats * static_cast<int64_t>(sizeof(float));
    if (floats != bundle.parameter_floats[i] ||
        offset + size > static_cast<int64_t>(bytes.size())) {
      return Status::DataLoss(path, ": parameter ", i, " does not fit the file");
    }
    std::memcpy(parameters[i]->value.data<float>(), bytes.data() + offset, size);
    offset += size;
  }
  if (offset != static_cast<int64_t>(bytes.size())) {
    return Status::DataLoss(path, ": ", bytes.size() - offset, " bytes after the parameters");
  }
  return Status::OK();
}

Status LoadBundleEmbedding(const VerifiedBundle& bundle, embedding::EmbeddingTable& table) {
  embedding::StoredRows& stored = table.stored_rows();
  const int64_t row_floats = stored.row_floats();
  const int dim = table.dim();
  std::vector<embedding::Key> keys;
  // Whole stored rows: the vector, then zeros for the optimizer state and
  // metadata a scorer never reads.
  std::vector<float> rows;
  const auto flush = [&]() -> Status {
    EMBER_RETURN_IF_ERROR(stored.WriteRows(keys, rows.data()));
    keys.clear();
    rows.clear();
    return Status::OK();
  };
  const auto add = [&](embedding::Key key, const float* vector) -> Status {
    keys.push_back(key);
    rows.insert(rows.end(), vector, vector + dim);
    rows.resize(rows.size() + (row_floats - dim), 0.0f);
    if (static_cast<int64_t>(keys.size()) == kLoadBatchRows) return flush();
    return Status::OK();
  };
  // One export, or a job of ranks' shards one after the other (their keys
  // are disjoint: each rank wrote the rows it owned).
  int64_t read = 0;
  const std::string dir = bundle.path + "/" + kEmbeddingDir;
  for (int shard = 0; shard < bundle.embedding_shards; ++shard) {
    const std::string from = bundle.embedding_shards > 1 ? dir + "/" + ShardDir(shard) : dir;
    EMBER_ASSIGN_OR_RETURN(const int64_t got, embedding::ReadServingExport(from, add));
    read += got;
  }
  EMBER_RETURN_IF_ERROR(flush());
  if (read != bundle.embedding_rows) {
    return Status::DataLoss(bundle.path, "/", kEmbeddingDir, ": ", read,
                            " vectors, the bundle's manifest lists ", bundle.embedding_rows);
  }
  return Status::OK();
}

embedding::EmbeddingTableOptions ServingTableOptions(const BundleConfig& config) {
  embedding::EmbeddingTableOptions options;
  options.dim = config.embedding_dim;
  options.seed = config.table_seed;
  options.init_scale = config.init_scale;
  // SGD keeps no per-row state: a row is its vector and its metadata.
  options.optimizer.type = embedding::SparseOptimizer::kSgd;
  if (config.missing_keys_read_zero) {
    // Lookup reads a key without a row as zeros whenever admission is on;
    // probability admission keeps no state of its own.
    options.admission.kind = embedding::AdmissionOptions::Kind::kProbability;
  }
  return options;
}

}  // namespace ember::engine
