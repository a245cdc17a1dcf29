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

namespace ember::embedding {

namespace internal {
namespace {

namespace fs = std::filesystem;

constexpr char kFormat[] = "ember-embedding-snapshot";
// Version 2 adds manifest_hash; version 3 "checksum", the name of the hash
// of the files and the manifest (xxh64; before, always fnv1a64-words).
// Manifests of versions 1 and 2 are read too. A version 2 reader would take
// a version 3 manifest's xxh64 for damage, hence the new version.
constexpr int64_t kVersion = 3;

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
  Json j{{"format", kFormat},
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
              {"removed", m.removed}};
  if (version >= 3) j["checksum"] = FileChecksumName(m.checksum);
  j["files"] = m.files;
  return j;
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
uint64_t ManifestHash(const Manifest& m, int64_t version) {
  const std::string text = ManifestText(ManifestObject(m, version));
  return FileChecksumOf(m.checksum, text.data(), text.size());
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
  o["manifest_hash"] = HexHash(ManifestHash(m, kVersion));
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
  if (version < 1 || version > kVersion) {
    return Status::DataLoss(path, ": format version ", version, ", this build reads 1 to ",
                            kVersion);
  }
  Manifest m;
  m.checksum = FileChecksum::kFnv1a64Words;
  std::string stored_hash;
  std::string checksum;
  try {
    // Fields this build does not know are ignored, as they always were.
    JsonFields f(root);
    ReadManifestFields(f, m);
    if (version >= 2) f.Get("manifest_hash", &stored_hash);
    if (version >= 3) f.Get("checksum", &checksum);
  } catch (const JsonFieldError& e) {
    return Status::DataLoss(path, ": field \"", e.field(), "\" ", e.what());
  }
  if (version >= 3) {
    Result<FileChecksum> named = FileChecksumNamed(checksum);
    if (!named.ok()) return Status::DataLoss(path, ": ", named.status().message());
    m.checksum = *named;
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
  if (version >= 2 && stored_hash != HexHash(ManifestHash(m, version))) {
    return Status::DataLoss(path, ": manifest_hash does not match its fields (edited or "
                            "damaged manifest)");
  }
  return m;
}

Result<std::string> ReadVerifiedFile(const std::string& dir, const FileEntry& file,
                                     FileChecksum checksum) {
  const std::string path = (fs::path(dir) / file.name).string();
  Result<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound) return Status::DataLoss(path, ": missing");
    return bytes.status();
  }
  if (static_cast<int64_t>(bytes->size()) != file.bytes) {
    return Status::DataLoss(path, ": ", bytes->size(), " bytes, manifest says ", file.bytes);
  }
  const uint64_t hash = FileChecksumOf(checksum, bytes->data(), bytes->size());
  if (hash != file.hash) {
    return Status::DataLoss(path, ": ", FileChecksumName(checksum), " hash ", HexHash(hash),
                            ", manifest says ", HexHash(file.hash));
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
