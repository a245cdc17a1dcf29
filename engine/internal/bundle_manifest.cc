#include "engine/internal/bundle_manifest.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/file.h"
#include "engine/training_checkpoint.h"

namespace ember::engine::internal {

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

std::string ShardDir(int shard) {
  char name[32];
  std::snprintf(name, sizeof(name), "shard-%05d", shard);
  return name;
}

namespace {

// A float as the shortest decimal that reads back to it ("0.1", where the
// float's own double would print 0.10000000149011612).
double ShortestDecimal(float value) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof(text), value);
  return ec == std::errc() ? std::strtod(std::string(text, end).c_str(), nullptr) : value;
}

}  // namespace

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


void to_json(Json& j, const InputSection& input) {
  j = input.spec;
  if (input.columnar) j["format"] = "columnar";
}
void from_json(const Json& j, InputSection& input) {
  input.spec = j.get<io::FormatSpec>();
  input.columnar = input.spec.name == "columnar";
  if (input.columnar) input.spec.name = io::FormatSpec().name;
}


void to_json(Json& j, const DenseSection& d) {
  j = Json{{"descriptor", d.descriptor}, {"parameter_floats", d.parameter_floats}};
}
void from_json(const Json& j, DenseSection& d) {
  JsonFields fields(j);
  fields.Get("descriptor", &d.descriptor);
  fields.Get("parameter_floats", &d.parameter_floats);
  fields.Done();
}


void to_json(Json& j, const Manifest& m) {
  j = Json{{"format", m.format}, {"version", m.version},     {"step", m.step},
           {"model", m.model},   {"embedding", m.embedding}, {"input", m.input},
           {"dense", m.dense},   {"files", m.files}};
  if (m.delta) j["delta"] = *m.delta;
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
  if (m.version >= 5) {
    if (fields.Has("delta")) {
      DeltaSection delta;
      fields.Get("delta", &delta);
      m.delta = delta;
    }
  }
  if (m.version >= 2) fields.Get("checksum", &m.checksum);
  fields.Get("manifest_hash", &m.manifest_hash);
  fields.Done();
}

namespace {

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

}  // namespace

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

}  // namespace ember::engine::internal

namespace ember::engine {

void to_json(Json& j, const VerifiedBundle::Delta& d) {
  j = Json{{"base_hash", d.base_hash},
           {"base_step", d.base_step},
           {"base_path", d.base_path},
           {"changed_rows", d.changed_rows},
           {"removed_rows", d.removed_rows}};
}
void from_json(const Json& j, VerifiedBundle::Delta& d) {
  JsonFields fields(j);
  fields.Get("base_hash", &d.base_hash);
  fields.Get("base_step", &d.base_step);
  fields.Get("base_path", &d.base_path);
  fields.Get("changed_rows", &d.changed_rows);
  fields.Get("removed_rows", &d.removed_rows);
  fields.Done();
  if (d.changed_rows < 0 || d.removed_rows < 0) {
    throw JsonFieldError("changed_rows", "or removed_rows is negative");
  }
}

}  // namespace ember::engine
