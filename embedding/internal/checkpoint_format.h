#pragma once

// The on-disk format of embedding snapshots (documented in
// embedding/checkpoint.h): the names of snapshot directories and data files,
// the MANIFEST and its JSON, the fixed-size records of the data files, and
// reading files back with their sizes and hashes checked. How snapshots are
// written atomically, chained and applied to a table is embedding/checkpoint.cc.

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/json_fwd.h"
#include "core/status.h"
#include "embedding/checkpoint.h"
#include "embedding/embedding_table.h"

namespace ember::embedding::internal {

// Records are the in-memory bytes of keys and floats.
static_assert(std::endian::native == std::endian::little,
              "checkpoint files are little-endian; a big-endian host needs byte swaps");

inline constexpr char kManifestFile[] = "MANIFEST";
// The keys a delta removes: uint64 little-endian each.
inline constexpr char kRemovedFile[] = "removed.bin";

// The bytes of a record of a key and `floats` floats.
inline int64_t RecordBytes(int64_t floats) { return 8 + 4 * floats; }

// Writes `key` and the first `floats` floats of `row` as one record at `record`.
inline void EncodeRecord(Key key, const float* row, int64_t floats, char* record) {
  std::memcpy(record, &key, 8);
  std::memcpy(record + 8, row, 4 * floats);
}

// Reads the record at `record` into `*key` and `floats` floats at `row`.
inline void DecodeRecord(const char* record, int64_t floats, Key* key, float* row) {
  std::memcpy(key, record, 8);
  std::memcpy(row, record + 8, 4 * floats);
}

// The directory name of the snapshot of `kind` ("full" or "delta") at
// `step`: <kind>-<step with 20 digits>, so that names sort by step.
std::string SnapshotDirName(const char* kind, int64_t step);
// The name of data file `index` of a snapshot: <prefix>-NNNNN.bin.
std::string DataFileName(const char* prefix, int64_t index);
// A hash as the manifest writes it: 16 hex digits.
std::string HexHash(uint64_t hash);

// One file of a snapshot as its manifest lists it.
struct FileEntry {
  std::string name;
  int64_t records = 0;
  int64_t bytes = 0;
  uint64_t hash = 0;  // The manifest's checksum of the file's bytes.
};
// An entry of the manifest's "files": {name, records, bytes, hash}; read
// strictly, the name one inside the snapshot directory.
void to_json(Json& j, const FileEntry& file);
void from_json(const Json& j, FileEntry& file);

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
  // What `hash` and the manifest_hash are: xxh64 for what this build
  // writes, fnv1a64-words for manifests of version 1 and 2.
  FileChecksum checksum = FileChecksum::kXxh64;
};

// The text of the MANIFEST file describing `manifest`.
std::string ManifestToJson(const Manifest& manifest);

// Reads and validates dir/MANIFEST (fields, their consistency, and that the
// files it lists add up to its rows and removed keys); DataLoss naming it on
// any defect, the read's error if it cannot be read.
Result<Manifest> ReadManifest(const std::string& dir);

// dir/file's bytes after checking its size and its hash by `checksum` (the
// manifest's) against the manifest; DataLoss naming the file if it is
// missing or they differ.
Result<std::string> ReadVerifiedFile(const std::string& dir, const FileEntry& file,
                                     FileChecksum checksum);

// Checks, without reading them, that the files of `manifest` are in `dir`
// with their sizes; DataLoss naming the first that is not.
Status CheckFileSizes(const std::string& dir, const Manifest& manifest);

// The keys of a removed.bin file's bytes.
std::vector<Key> DecodeKeys(const std::string& bytes);

// A complete snapshot in a checkpoint directory, by its directory name.
struct SnapshotName {
  SnapshotInfo::Kind kind;
  int64_t step;
  std::string path;
};

// Complete snapshots in `dir` by directory name, sorted by step (a full
// snapshot before a delta of the same step, which saves never produce).
// NotFound if `dir` is not a directory, IOError if it cannot be listed.
Result<std::vector<SnapshotName>> ListSnapshotNames(const std::string& dir);

// The manifest of a snapshot directory, checked against the directory's name:
// DataLoss if it describes another kind or step, or an impossible base_step.
Result<Manifest> ReadSnapshotManifest(const SnapshotName& name);

}  // namespace ember::embedding::internal
