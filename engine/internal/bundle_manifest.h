#pragma once

// What the writer (engine/bundle.cc) and the reader (engine/bundle_read.cc)
// of serving bundles share: the names inside a bundle, the manifest's fields
// and their JSON, the manifest's and the files' hashes. Internal to engine/.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/json.h"
#include "core/status.h"
#include "engine/bundle.h"
#include "engine/model_options.h"
#include "io/format_spec.h"

namespace ember::engine::internal {

inline constexpr char kDenseFile[] = "dense.bin";
inline constexpr char kEmbeddingDir[] = "embedding";
// A delta bundle's removed keys: uint64 little-endian, sorted.
inline constexpr char kRemovedFile[] = "removed.bin";
// The manifest's last field, over the text before it (see engine/bundle.h).
inline constexpr char kHashField[] = ",\n  \"manifest_hash\": \"";

// 16 hex digits.
std::string HexHash(uint64_t hash);
uint64_t HashText(FileChecksum checksum, const std::string& text);
// The size and hash of the file at `path`. IOError naming it if it cannot
// be read.
Status HashFile(const std::string& path, FileChecksum checksum, int64_t* bytes, uint64_t* hash);
// A job of ranks' embedding shard R under embedding/: "shard-RRRRR".
std::string ShardDir(int shard);

// One file of the bundle as the manifest lists it.
struct BundleFile {
  std::string name;
  int64_t bytes = 0;
  std::string hash;  // HexHash of its checksum (the manifest's)
};

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

// The manifest's "input": the text format's spec, its "format" "columnar"
// for columnar files (whose spec is then the default, criteo's).
struct InputSection {
  io::FormatSpec spec;
  bool columnar = false;
};

struct DenseSection {
  std::string descriptor;
  std::vector<int64_t> parameter_floats;
};

// A delta bundle's "delta" (version 5; engine/bundle_delta.h): its base
// and what changed since, as VerifiedBundle holds it.
using DeltaSection = VerifiedBundle::Delta;

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
  std::optional<DeltaSection> delta;  // A delta bundle's (version 5).
  std::string checksum = FileChecksumName(FileChecksum::kXxh64);  // From version 2.
  std::string manifest_hash;  // Read only: written by WriteManifest.
};

void to_json(Json& j, const BundleFile& value);
void from_json(const Json& j, BundleFile& value);
void to_json(Json& j, const EmbeddingSection& value);
void from_json(const Json& j, EmbeddingSection& value);
void to_json(Json& j, const InputSection& value);
void from_json(const Json& j, InputSection& value);
void to_json(Json& j, const DenseSection& value);
void from_json(const Json& j, DenseSection& value);
void to_json(Json& j, const Manifest& value);
void from_json(const Json& j, Manifest& value);

// `text`, the manifest at `path`, checked (format, version, its hash) and
// read; `*checksum` is the one its hashes were made with.
Result<Manifest> ParseManifest(const std::string& path, const std::string& text,
                               FileChecksum* checksum);
// Checks every file the manifest lists: present, of its size and hash.
Status CheckFiles(const std::string& dir, const std::string& path,
                  const std::vector<BundleFile>& files, FileChecksum checksum);

}  // namespace ember::engine::internal

namespace ember::engine {
// In VerifiedBundle's namespace, where nlohmann finds them.
void to_json(Json& j, const VerifiedBundle::Delta& value);
void from_json(const Json& j, VerifiedBundle::Delta& value);
}  // namespace ember::engine
