#include "engine/bundle.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "core/file.h"
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

uint64_t HashText(const std::string& text) {
  embedding::Fnv1a64Words hash;
  hash.Update(text.data(), text.size());
  return hash.Digest();
}

// The size and hash of the file at `path`. IOError naming it if it cannot
// be read.
Status HashFile(const std::string& path, int64_t* bytes, uint64_t* hash) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(path, ": cannot open: ", std::strerror(errno));
  embedding::Fnv1a64Words fnv;
  std::vector<char> buffer(size_t{1} << 20);
  *bytes = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize n = in.gcount();
    fnv.Update(buffer.data(), static_cast<size_t>(n));
    *bytes += n;
  }
  if (in.bad()) return Status::IOError(path, ": read failed");
  *hash = fnv.Digest();
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

std::string IntArray(const std::vector<int>& values) {
  return JsonNumberArray(std::vector<double>(values.begin(), values.end()));
}

JsonObject ModelJson(const ModelOptions& m) {
  JsonObject o;
  o.Add("name", m.name).Add("num_dense", m.num_dense).Add("num_slots", m.num_slots)
      .Add("num_tasks", m.num_tasks).Add("embedding_dim", m.embedding_dim)
      .AddRaw("bottom_mlp", IntArray(m.bottom_mlp)).AddRaw("top_mlp", IntArray(m.top_mlp))
      .Add("cross_layers", m.cross_layers).Add("cross_rank", m.cross_rank)
      .Add("num_experts", m.num_experts).AddRaw("expert_mlp", IntArray(m.expert_mlp))
      .Add("moe_top_k", m.moe_top_k).Add("moe_capacity_factor", m.moe_capacity_factor)
      .AddRaw("moe_expert_mlp", IntArray(m.moe_expert_mlp))
      .Add("moe_aux_loss_weight", m.moe_aux_loss_weight)
      .Add("moe_gate_input", m.moe_gate_input)
      .Add("seed", std::to_string(m.seed))
      .Add("precision", ops::ComputePrecisionName(m.precision))
      .Add("cpu_row_shards", m.cpu_row_shards);
  return o;
}

std::string OptionalNumber(const std::optional<double>& value) {
  return value ? JsonNumber(*value) : std::string("null");
}

JsonObject InputJson(const io::FormatSpec& f, bool columnar) {
  JsonObject o;
  o.Add("format", columnar ? std::string("columnar") : f.name).Add("slot_bits", f.slot_bits)
      .Add("schema", f.schema).Add("schema_file", f.schema_file).Add("delimiter", f.delimiter)
      .Add("header", f.header)
      .Add("dense_transform",
           f.dense_defaults.transform == io::DenseTransform::kRaw ? "raw" : "log1p")
      .AddRaw("dense_min", OptionalNumber(f.dense_defaults.min))
      .AddRaw("dense_max", OptionalNumber(f.dense_defaults.max))
      .Add("field_starts", f.field_starts).Add("num_fields", f.num_fields)
      .Add("require_binary_values", f.require_binary_values).Add("slots", f.slots)
      .Add("dense_slots", f.dense_slots).Add("label_slots", f.label_slots)
      .Add("feasign_first", f.feasign_first).Add("ignore_unknown_slots", f.ignore_unknown_slots);
  return o;
}

// Reads the fields of one manifest object; the first missing or mistyped
// field is the error, naming the manifest and the field.
class FieldReader {
 public:
  FieldReader(const std::string& path, const JsonValue* object, std::string where)
      : path_(path), object_(object), where_(std::move(where)) {
    if (object_ == nullptr || object_->type != JsonValue::Type::kObject) {
      Fail("", "an object");
    }
  }

  template <typename T>
  FieldReader& Int(const char* key, T* out) {
    const JsonValue* v = Get(key, JsonValue::Type::kNumber, "an integer");
    if (v == nullptr) return *this;
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(v->text.data(), v->text.data() + v->text.size(), value);
    if (ec != std::errc() || end != v->text.data() + v->text.size()) {
      Fail(key, "an integer");
    } else {
      *out = static_cast<T>(value);
    }
    return *this;
  }
  FieldReader& Float(const char* key, float* out) {
    const JsonValue* v = Get(key, JsonValue::Type::kNumber, "a number");
    if (v != nullptr) *out = std::strtof(v->text.c_str(), nullptr);
    return *this;
  }
  FieldReader& OptionalDouble(const char* key, std::optional<double>* out) {
    const JsonValue* v = object_ == nullptr ? nullptr : object_->Find(key);
    if (v != nullptr && v->type == JsonValue::Type::kNull) {
      out->reset();
      return *this;
    }
    v = Get(key, JsonValue::Type::kNumber, "a number or null");
    if (v != nullptr) *out = std::strtod(v->text.c_str(), nullptr);
    return *this;
  }
  // Absent (a bundle written before the field): `out` keeps its value.
  FieldReader& OptionalString(const char* key, std::string* out) {
    if (object_ == nullptr || object_->Find(key) == nullptr) return *this;
    return String(key, out);
  }
  FieldReader& String(const char* key, std::string* out) {
    const JsonValue* v = Get(key, JsonValue::Type::kString, "a string");
    if (v != nullptr) *out = v->text;
    return *this;
  }
  FieldReader& Bool(const char* key, bool* out) {
    const JsonValue* v = Get(key, JsonValue::Type::kBool, "true or false");
    if (v != nullptr) *out = v->boolean;
    return *this;
  }
  template <typename T>
  FieldReader& IntArray(const char* key, std::vector<T>* out) {
    const JsonValue* v = Get(key, JsonValue::Type::kArray, "an array of integers");
    if (v == nullptr) return *this;
    out->clear();
    for (const JsonValue& item : v->items) {
      int64_t value = 0;
      const auto [end, ec] =
          std::from_chars(item.text.data(), item.text.data() + item.text.size(), value);
      if (item.type != JsonValue::Type::kNumber || ec != std::errc() ||
          end != item.text.data() + item.text.size()) {
        Fail(key, "an array of integers");
        return *this;
      }
      out->push_back(static_cast<T>(value));
    }
    return *this;
  }
  const Status& status() const { return status_; }

 private:
  const JsonValue* Get(const char* key, JsonValue::Type type, const char* what) {
    if (!status_.ok()) return nullptr;
    const JsonValue* v = object_->Find(key);
    if (v == nullptr || v->type != type) {
      Fail(key, what);
      return nullptr;
    }
    return v;
  }
  void Fail(const std::string& key, const char* what) {
    if (!status_.ok()) return;
    const std::string field = key.empty() ? where_ : where_ + "." + key;
    status_ = Status::DataLoss(path_, ": \"", field, "\" is missing or not ", what);
  }

  const std::string& path_;
  const JsonValue* object_;
  std::string where_;
  Status status_;
};

Status ReadModel(const std::string& path, const JsonValue& root, ModelOptions* m) {
  std::string seed, precision;
  std::optional<double> capacity_factor, aux_loss_weight;
  FieldReader r(path, root.Find("model"), "model");
  r.String("name", &m->name).Int("num_dense", &m->num_dense).Int("num_slots", &m->num_slots)
      .Int("num_tasks", &m->num_tasks).Int("embedding_dim", &m->embedding_dim)
      .IntArray("bottom_mlp", &m->bottom_mlp).IntArray("top_mlp", &m->top_mlp)
      .Int("cross_layers", &m->cross_layers).Int("cross_rank", &m->cross_rank)
      .Int("num_experts", &m->num_experts).IntArray("expert_mlp", &m->expert_mlp)
      .Int("moe_top_k", &m->moe_top_k).OptionalDouble("moe_capacity_factor", &capacity_factor)
      .IntArray("moe_expert_mlp", &m->moe_expert_mlp)
      .OptionalDouble("moe_aux_loss_weight", &aux_loss_weight)
      .OptionalString("moe_gate_input", &m->moe_gate_input)
      .String("seed", &seed).String("precision", &precision)
      .Int("cpu_row_shards", &m->cpu_row_shards);
  EMBER_RETURN_IF_ERROR(r.status());
  if (capacity_factor) m->moe_capacity_factor = *capacity_factor;
  if (aux_loss_weight) m->moe_aux_loss_weight = *aux_loss_weight;
  const auto [end, ec] = std::from_chars(seed.data(), seed.data() + seed.size(), m->seed);
  if (ec != std::errc() || end != seed.data() + seed.size()) {
    return Status::DataLoss(path, ": \"model.seed\" is not an unsigned integer: ", seed);
  }
  Result<ops::ComputePrecision> parsed = ops::ParseComputePrecision(precision);
  if (!parsed.ok()) return Status::DataLoss(path, ": \"model.precision\": ", parsed.status());
  m->precision = *parsed;
  return Status::OK();
}

Status ReadInput(const std::string& path, const JsonValue& root, BundleConfig* config) {
  io::FormatSpec& f = config->input;
  std::string transform;
  FieldReader r(path, root.Find("input"), "input");
  r.String("format", &f.name).Int("slot_bits", &f.slot_bits).String("schema", &f.schema)
      .String("schema_file", &f.schema_file).String("delimiter", &f.delimiter)
      .Bool("header", &f.header).String("dense_transform", &transform)
      .OptionalDouble("dense_min", &f.dense_defaults.min)
      .OptionalDouble("dense_max", &f.dense_defaults.max)
      .String("field_starts", &f.field_starts).Int("num_fields", &f.num_fields)
      .Bool("require_binary_values", &f.require_binary_values).String("slots", &f.slots)
      .String("dense_slots", &f.dense_slots).String("label_slots", &f.label_slots)
      .Bool("feasign_first", &f.feasign_first)
      .Bool("ignore_unknown_slots", &f.ignore_unknown_slots);
  EMBER_RETURN_IF_ERROR(r.status());
  f.dense_defaults.transform = transform == "raw" ? io::DenseTransform::kRaw
                                                  : io::DenseTransform::kLog1p;
  config->columnar_input = f.name == "columnar";
  if (config->columnar_input) f.name = "criteo";
  return Status::OK();
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

Result<VerifiedBundle> ParseManifest(const std::string& dir, const std::string& path,
                                     const std::string& text) {
  Result<JsonValue> parsed = ParseJson(text);
  if (!parsed.ok()) return Status::DataLoss(path, ": not JSON: ", parsed.status().message());
  const JsonValue& root = *parsed;
  std::string format;
  int64_t version = 0;
  FieldReader head(path, &root, "manifest");
  head.String("format", &format).Int("version", &version);
  EMBER_RETURN_IF_ERROR(head.status());
  if (format != kBundleFormat) {
    return Status::InvalidArgument(path, ": format \"", format, "\" is not a serving bundle (\"",
                                   kBundleFormat, "\")");
  }
  if (version != kBundleVersion) {
    return Status::InvalidArgument(path, ": bundle version ", version,
                                   " is not one this Ember reads (", kBundleVersion, ")");
  }
  std::string stored_hash;
  const std::string body = TextBeforeHash(text, &stored_hash);
  if (body.empty()) return Status::DataLoss(path, ": \"manifest_hash\" is missing");
  if (stored_hash != HexHash(HashText(body))) {
    return Status::DataLoss(path, ": manifest_hash does not match its text (edited or damaged)");
  }
  VerifiedBundle bundle;
  bundle.path = dir;
  BundleConfig& c = bundle.config;
  FieldReader top(path, &root, "manifest");
  top.Int("step", &c.step);
  EMBER_RETURN_IF_ERROR(top.status());
  EMBER_RETURN_IF_ERROR(ReadModel(path, root, &c.model));
  std::string seed, missing;
  FieldReader e(path, root.Find("embedding"), "embedding");
  e.Int("dim", &c.embedding_dim).String("seed", &seed).Float("init_scale", &c.init_scale)
      .String("missing_keys", &missing).Int("rows", &bundle.embedding_rows);
  EMBER_RETURN_IF_ERROR(e.status());
  c.table_seed = std::strtoull(seed.c_str(), nullptr, 10);
  c.missing_keys_read_zero = missing == "zeros";
  EMBER_RETURN_IF_ERROR(ReadInput(path, root, &c));
  FieldReader d(path, root.Find("dense"), "dense");
  d.String("descriptor", &bundle.dense_descriptor)
      .IntArray("parameter_floats", &bundle.parameter_floats);
  EMBER_RETURN_IF_ERROR(d.status());
  return bundle;
}

// Checks every file the manifest lists: present, of its size and hash.
Status CheckFiles(const std::string& dir, const std::string& path, const JsonValue& root) {
  const JsonValue* files = root.Find("files");
  if (files == nullptr || files->type != JsonValue::Type::kArray || files->items.empty()) {
    return Status::DataLoss(path, ": \"files\" is missing or empty");
  }
  for (const JsonValue& item : files->items) {
    std::string name, hash;
    int64_t bytes = 0;
    FieldReader r(path, &item, "files[]");
    r.String("name", &name).Int("bytes", &bytes).String("hash", &hash);
    EMBER_RETURN_IF_ERROR(r.status());
    if (name.empty() || name.find("..") != std::string::npos || name[0] == '/') {
      return Status::DataLoss(path, ": file name \"", name, "\" is not inside the bundle");
    }
    const std::string file = dir + "/" + name;
    if (!FileExists(file)) return Status::DataLoss(file, ": missing (listed in ", path, ")");
    int64_t actual_bytes = 0;
    uint64_t actual_hash = 0;
    EMBER_RETURN_IF_ERROR(HashFile(file, &actual_bytes, &actual_hash));
    if (actual_bytes != bytes) {
      return Status::DataLoss(file, ": ", actual_bytes, " bytes, the manifest lists ", bytes,
                              " (truncated or damaged)");
    }
    if (HexHash(actual_hash) != hash) {
      return Status::DataLoss(file, ": hash ", HexHash(actual_hash), " differs from the ",
                              "manifest's ", hash, " (damaged)");
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
                     const std::vector<Parameter*>& parameters, int64_t rows) {
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> names, BundleFiles(dir));
  std::string files = "[";
  for (const std::string& name : names) {
    int64_t bytes = 0;
    uint64_t hash = 0;
    EMBER_RETURN_IF_ERROR(HashFile(dir + "/" + name, &bytes, &hash));
    JsonObject file;
    file.Add("name", name).Add("bytes", bytes).Add("hash", HexHash(hash));
    files += (files.size() > 1 ? ", " : "") + file.ToString(-1);
  }
  files += "]";
  std::vector<double> floats;
  for (const Parameter* p : parameters) floats.push_back(static_cast<double>(p->value.numel()));
  JsonObject dense;
  dense.Add("descriptor", DenseStateDescriptor(config.model.name, "none", parameters))
      .AddRaw("parameter_floats", JsonNumberArray(floats));
  JsonObject embedding;
  embedding.Add("dim", config.embedding_dim).Add("seed", std::to_string(config.table_seed))
      .AddRaw("init_scale", JsonNumber(config.init_scale))
      .Add("missing_keys", config.missing_keys_read_zero ? "zeros" : "initial")
      .Add("rows", rows);
  JsonObject root;
  root.Add("format", kBundleFormat).Add("version", kBundleVersion).Add("step", config.step)
      .Add("model", ModelJson(config.model)).Add("embedding", embedding)
      .Add("input", InputJson(config.input, config.columnar_input)).Add("dense", dense)
      .AddRaw("files", files);
  const std::string body = root.ToString();
  // The hash field goes last, over the text before it (see the header).
  const std::string head = body.substr(0, body.rfind("\n}"));
  const std::string text =
      head + kHashField + HexHash(HashText(head + "\n}")) + "\"\n}\n";
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

Status WriteBundle(const std::string& path, const BundleConfig& config, ops::DenseModel& model,
                   embedding::EmbeddingTable& table, const BundleWriteOptions& options) {
  if (path.empty()) return Status::InvalidArgument("the bundle's path is empty");
  const fs::path target = fs::path(path).lexically_normal();
  const std::string name = target.filename().string();
  const std::string parent = target.has_parent_path() ? target.parent_path().string() : ".";
  std::error_code ec;
  if (name.empty() || !fs::is_directory(parent, ec)) {
    return Status::InvalidArgument(path, ": its parent directory does not exist");
  }
  if (fs::exists(target, ec) && !FileExists(target.string() + "/" + kBundleManifest) &&
      (!fs::is_directory(target, ec) || !fs::is_empty(target, ec))) {
    return Status::InvalidArgument(path, ": exists and is not a serving bundle; not replacing it");
  }
  // Leftovers of writes of this bundle that a crash interrupted.
  const std::string prefix = ".tmp-" + name + "-";
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    if (entry.path().filename().string().starts_with(prefix)) fs::remove_all(entry.path(), ec);
  }
  const std::string temporary = parent + "/" + prefix + std::to_string(::getpid());
  if (!fs::create_directory(temporary, ec)) {
    return Status::IOError(temporary, ": cannot create: ", ec.message());
  }
  const Status status = [&]() -> Status {
    EMBER_ASSIGN_OR_RETURN(const std::vector<Parameter> host, model.ParametersToHost());
    EMBER_RETURN_IF_ERROR(WriteDense(temporary + "/" + kDenseFile, host));
    embedding::ServingExportOptions serving;
    serving.step = config.step;
    EMBER_RETURN_IF_ERROR(
        embedding::ExportForServing(table, temporary + "/" + kEmbeddingDir, serving));
    EMBER_RETURN_IF_ERROR(WriteManifest(temporary, config, model.parameters(), table.num_rows()));
    EMBER_RETURN_IF_ERROR(FsyncDirectory(temporary));
    if (options.before_commit) EMBER_RETURN_IF_ERROR(options.before_commit(temporary));
    EMBER_RETURN_IF_ERROR(Commit(temporary, target.string()));
    return FsyncDirectory(parent);
  }();
  if (!status.ok()) fs::remove_all(temporary, ec);
  return status;
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
  EMBER_ASSIGN_OR_RETURN(VerifiedBundle bundle, ParseManifest(path, manifest, *text));
  EMBER_ASSIGN_OR_RETURN(const JsonValue root, ParseJson(*text));
  EMBER_RETURN_IF_ERROR(CheckFiles(path, manifest, root));
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
  EMBER_ASSIGN_OR_RETURN(
      const int64_t read,
      embedding::ReadServingExport(bundle.path + "/" + kEmbeddingDir,
                                   [&](embedding::Key key, const float* vector) -> Status {
                                     keys.push_back(key);
                                     rows.insert(rows.end(), vector, vector + dim);
                                     rows.resize(rows.size() + (row_floats - dim), 0.0f);
                                     if (static_cast<int64_t>(keys.size()) == kLoadBatchRows) {
                                       return flush();
                                     }
                                     return Status::OK();
                                   }));
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
