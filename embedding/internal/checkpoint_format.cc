#include "embedding/internal/checkpoint_format.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "core/file.h"
#include "core/json.h"
#include "core/random.h"

namespace ember::embedding {

namespace {
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;
}  // namespace

void Fnv1a64Words::Update(const char* data, size_t size) {
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

namespace internal {
namespace {

namespace fs = std::filesystem;

constexpr char kFormat[] = "ember-embedding-snapshot";
// Version 2 adds manifest_hash; version 1 manifests (without it) are read too.
constexpr int64_t kVersion = 2;

}  // namespace

// One entry of "files". A file name must stay inside its snapshot directory.
void from_json(const Json& j, FileEntry& file) {
  JsonFields f(j);
  std::string hash;
  f.Get("name", &file.name);
  f.Get("records", &file.records);
  f.Get("bytes", &file.bytes);
  f.Get("hash", &hash);
  auto [end, ec] = std::from_chars(hash.data(), hash.data() + hash.size(), file.hash, 16);
  if (hash.size() != 16 || ec != std::errc() || end != hash.data() + hash.size()) {
    throw JsonFieldError("hash", "is not 16 hex digits");
  }
  if (file.name.empty() || file.name.find('/') != std::string::npos || file.name[0] == '.') {
    throw JsonFieldError("name", "is not a file name inside the snapshot: " + JsonText(file.name));
  }
  if (file.records < 0) throw JsonFieldError("records", "is negative");
  if (file.bytes < 0) throw JsonFieldError("bytes", "is negative");
}

void to_json(Json& j, const FileEntry& file) {
  j = Json{{"name", file.name},
           {"records", file.records},
           {"bytes", file.bytes},
           {"hash", HexHash(file.hash)}};
}

std::string SnapshotDirName(const char* kind, int64_t step) {
  char name[48];
  std::snprintf(name, sizeof(name), "%s-%020lld", kind, static_cast<long long>(step));
  return name;
}

std::string DataFileName(const char* prefix, int64_t index) {
  char name[48];
  std::snprintf(name, sizeof(name), "%s-%05lld.bin", prefix, static_cast<long long>(index));
  return name;
}

std::string HexHash(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

namespace {

// Every field but manifest_hash, as `version` writes them.
Json ManifestObject(const Manifest& m, int64_t version) {
  return Json{{"format", kFormat},
              {"version", version},
              {"kind", m.kind},
              {"step", m.step},
              {"base_step", m.base_step},
              {"table_step", m.table_step},
              {"eviction_step", m.eviction_step},
              {"dim", m.dim},
              {"row_floats", m.row_floats},
              {"record_bytes", m.record_bytes},
              {"optimizer", m.optimizer},
              {"rows", m.rows},
              {"removed", m.removed},
              {"files", m.files}};
}

// The manifest's layout: one field a line, indented two spaces, and each
// entry of "files" compact on a line of its own. The manifest hash is of
// this text, so it must not change.
std::string ManifestText(const Json& manifest) {
  std::string out = "{";
  const char* separator = "\n";
  for (const auto& [key, value] : manifest.items()) {
    out += separator;
    separator = ",\n";
    out += "  " + JsonText(key) + ": ";
    if (!value.is_array()) {
      out += JsonText(value);
      continue;
    }
    out += "[";
    for (size_t i = 0; i < value.size(); ++i) {
      out += (i > 0 ? ",\n    " : "\n    ") + JsonText(value[i]);
    }
    out += value.empty() ? "]" : "\n  ]";
  }
  return out + "\n}\n";
}

// The manifest's own checksum: of its text without the checksum, which a
// reader rebuilds from the fields it parsed, so that an edit of any field
// (a step, the table's step, a file's size) is caught, not only damage to
// the data files.
uint64_t ManifestHash(const Manifest& m) {
  const std::string text = ManifestText(ManifestObject(m, kVersion));
  Fnv1a64Words hash;
  hash.Update(text.data(), text.size());
  return hash.Digest();
}

// The fields of a manifest after format and version: DataLoss-worthy
// problems throw JsonFieldError naming the field.
void ReadManifestFields(JsonFields& f, Manifest& m) {
  f.Get("kind", &m.kind);
  f.Get("step", &m.step);
  f.Get("base_step", &m.base_step);
  f.Get("table_step", &m.table_step);
  f.Optional("eviction_step", &m.eviction_step);
  f.Get("dim", &m.dim);
  f.Get("row_floats", &m.row_floats);
  f.Get("record_bytes", &m.record_bytes);
  f.Get("optimizer", &m.optimizer);
  f.Get("rows", &m.rows);
  f.Get("removed", &m.removed);
  f.Get("files", &m.files);
}

}  // namespace

std::string ManifestToJson(const Manifest& m) {
  Json o = ManifestObject(m, kVersion);
  o["manifest_hash"] = HexHash(ManifestHash(m));
  return ManifestText(o);
}

Result<Manifest> ReadManifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kManifestFile).string();
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return Status::DataLoss(path, ": missing");
    return text.status();
  }
  Result<Json> parsed = ParseJsonText(*text);
  if (!parsed.ok() || !parsed->is_object()) {
    return Status::DataLoss(path, ": not a JSON object (truncated?)");
  }
  const Json& root = *parsed;
  const auto format = root.find("format");
  const auto version_field = root.find("version");
  if (format == root.end() || *format != kFormat || version_field == root.end() ||
      !version_field->is_number_integer()) {
    return Status::DataLoss(path, ": not an ", kFormat, " manifest");
  }
  const int64_t version = version_field->get<int64_t>();
  if (version != 1 && version != kVersion) {
    return Status::DataLoss(path, ": format version ", version, ", this build reads 1 to ",
                            kVersion);
  }
  Manifest m;
  std::string stored_hash;
  try {
    // Fields this build does not know are ignored, as they always were.
    JsonFields f(root);
    ReadManifestFields(f, m);
    if (version >= 2) f.Get("manifest_hash", &stored_hash);
  } catch (const JsonFieldError& e) {
    return Status::DataLoss(path, ": field \"", e.field(), "\" ", e.what());
  }
  if ((m.kind != "full" && m.kind != "delta" && m.kind != "serving") || m.dim < 1 ||
      m.row_floats < m.dim || m.record_bytes != RecordBytes(m.row_floats) || m.rows < 0 ||
      m.removed < 0) {
    return Status::DataLoss(path, ": inconsistent fields");
  }
  int64_t records = 0;
  int64_t removed = 0;
  for (const FileEntry& file : m.files) {
    const bool is_removed = file.name == kRemovedFile;
    const int64_t size = is_removed ? 8 : m.record_bytes;
    if (file.bytes != file.records * size) {
      return Status::DataLoss(path, ": ", file.name, " has ", file.records, " records but ",
                              file.bytes, " bytes");
    }
    (is_removed ? removed : records) += file.records;
  }
  if (records != m.rows || removed != m.removed) {
    return Status::DataLoss(path, ": files hold ", records, " rows and ", removed,
                            " removed keys, manifest says ", m.rows, " and ", m.removed);
  }
  if (version >= 2 && stored_hash != HexHash(ManifestHash(m))) {
    return Status::DataLoss(path, ": manifest_hash does not match its fields (edited or "
                            "damaged manifest)");
  }
  return m;
}

Result<std::string> ReadVerifiedFile(const std::string& dir, const FileEntry& file) {
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

Status CheckFileSizes(const std::string& dir, const Manifest& m) {
  for (const FileEntry& file : m.files) {
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

std::vector<Key> DecodeKeys(const std::string& bytes) {
  std::vector<Key> keys(bytes.size() / 8);
  if (!keys.empty()) std::memcpy(keys.data(), bytes.data(), 8 * keys.size());  // data() may be null.
  return keys;
}

Result<std::vector<SnapshotName>> ListSnapshotNames(const std::string& dir) {
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
  std::sort(names.begin(), names.end(), [](const SnapshotName& a, const SnapshotName& b) {
    return a.step != b.step ? a.step < b.step : a.kind < b.kind;
  });
  return names;
}

Result<Manifest> ReadSnapshotManifest(const SnapshotName& name) {
  EMBER_ASSIGN_OR_RETURN(Manifest m, ReadManifest(name.path));
  const std::string path = (fs::path(name.path) / kManifestFile).string();
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

}  // namespace internal
}  // namespace ember::embedding
