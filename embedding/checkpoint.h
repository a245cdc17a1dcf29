#pragma once

// Checkpoints of embedding tables: full snapshots, delta snapshots of the rows
// changed since the previous snapshot, restore from a full snapshot plus the
// deltas after it, and vector-only exports for serving.
//
// Layout of a checkpoint directory `dir`:
//
//   dir/full-<step>/     a full snapshot: every row of the table
//   dir/delta-<step>/    rows changed and keys removed since the snapshot
//                        at its base step (the full or delta before it)
//   dir/.tmp-*/          a save in progress, or one a crash interrupted;
//                        readers ignore it and the next save removes it
//
// <step> is written with 20 digits, so names sort by step. Each snapshot
// directory holds a MANIFEST (JSON, see below) and data files:
//
//   rows-NNNNN.bin   fixed-size records: key (uint64, little-endian), then
//                    row_floats float32 (little-endian) exactly as
//                    StoredRows::Scan gives them (weights, optimizer
//                    state, metadata). A file holds at most
//                    max(1, file_bytes / record_bytes) records.
//   removed.bin      (deltas only) removed keys, uint64 little-endian.
//
// MANIFEST fields: format ("ember-embedding-snapshot"), version (3; versions
// 1, without manifest_hash, and 2, without checksum, are read too), kind ("full", "delta" or
// "serving"), step, base_step (deltas: the step of the snapshot they apply
// to; -1 otherwise), table_step (the table's step() when saved),
// eviction_step (its StoredRows::eviction_step(): a restore expires again
// what the saved table had expired lazily on disk; optional, -1 when
// absent), dim, row_floats, record_bytes, optimizer, rows, removed,
// checksum (core/checksum.h: "xxh64"; absent before version 3, whose
// hashes are "fnv1a64-words"), files: [{name, records, bytes, hash}], where
// hash is the 16-hex-digit checksum of the file's bytes, and manifest_hash,
// the checksum of the manifest's text without it (an edited field is refused as DataLoss).
// The manifest is what makes a directory a snapshot: a reader trusts nothing
// in it that the manifest does not list, and checks every file's size and
// hash before using it.
//
// Which snapshots a restore reads: the newest full snapshot (by step), then
// every delta with a larger step, in step order; each delta's base_step must
// be the step of the snapshot before it in that chain (a gap is DataLoss).
// There is no LATEST pointer: a snapshot's final directory name exists only
// once it is complete, so listing the directory is the pointer.
//
// Atomicity of a save (SaveFull, SaveDelta, ExportForServing):
//   1. remove leftover dir/.tmp-* directories of earlier, interrupted saves;
//   2. write every data file into dir/.tmp-<kind>-<step>-<pid>/, fsync each;
//   3. write MANIFEST there, fsync it, fsync the temporary directory;
//   4. rename the temporary directory to its final name, fsync `dir`.
// The rename is the commit point: before it, nothing a reader looks at has
// changed; a failed save removes its temporary directory (a crash leaves it
// for the next save to remove). So a failed or interrupted save leaves the
// previous snapshots restorable and adds no visible snapshot.
//
// Consistency: saves and restores read or write the table's stored rows
// (embedding/stored_rows.h) with Scan, ReadRows, WriteRows, EraseRows and
// TakeChanges, which REQUIRE that nothing else uses the table meanwhile (no
// Pull, Push, Prefetch, set_step or EvictExpired). The trainer calls them
// between steps, so every row's weights, optimizer state and metadata in a
// snapshot come from the same step.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "embedding/embedding_table.h"
#include "embedding/stored_rows.h"

namespace ember::embedding {

struct CheckpointOptions {
  // The checkpoint directory; created if missing. Required.
  std::string dir;
  // Upper bound on the size of one data file; records never straddle files.
  // Default: 64 MiB.
  int64_t file_bytes = int64_t{64} << 20;
  // Name of the table's sparse optimizer (SparseOptimizerName), written in
  // every manifest. A restore fails with InvalidArgument when both the
  // snapshot's and this name are non-empty and differ. Default: empty.
  std::string optimizer;
  // Full snapshots to keep after a successful SaveFull: older full snapshots
  // and the deltas before the oldest kept one are removed. 0 keeps all.
  // Default: 2.
  int keep_full_snapshots = 2;

  // --- Test seams (leave unset in production) --------------------------------
  // When >= 0, a save fails with IOError once it has written this many bytes
  // of data files, as a full disk part-way through would. Default: -1 (off).
  int64_t fail_after_bytes = -1;
  // Called with the temporary directory once every file of a save is written
  // and fsynced, just before the rename that commits it; an error stops the
  // save there (a crash at the last moment). Default: none.
  std::function<Status(const std::string &temporary_dir)> before_commit;
};

// One snapshot in a checkpoint directory, as its manifest describes it.
struct SnapshotInfo {
  enum class Kind { kFull, kDelta };
  Kind kind = Kind::kFull;
  int64_t step = 0;
  // Deltas: the step of the snapshot they apply to; -1 for full snapshots.
  int64_t base_step = -1;
  int64_t table_step = 0;
  int dim = 0;
  int64_t row_floats = 0;
  std::string optimizer;
  // Rows stored (full: all rows; delta: rows created or changed).
  int64_t rows = 0;
  // Deltas: keys removed since the base snapshot.
  int64_t removed = 0;
  // The snapshot's directory.
  std::string path;
};

// Every complete snapshot in `dir` (temporary directories excluded), sorted
// by step. Reads each manifest but not the data files. Returns NotFound if
// `dir` does not exist, DataLoss naming the manifest if one is missing or
// malformed, IOError if the directory cannot be read.
Result<std::vector<SnapshotInfo>> ListCheckpoints(const std::string &dir);

// The steps of the snapshot directories in `dir` (full and delta), in
// increasing order, by their names alone: no manifest is read, so a damaged
// snapshot is listed too. NotFound if `dir` does not exist, IOError if it
// cannot be read.
Result<std::vector<int64_t>> SnapshotSteps(const std::string &dir);

// Saves and restores one table in one checkpoint directory. Between saves it
// keeps the changes that a failed SaveDelta took from the table (TakeChanges
// clears them there), so the next delta still covers everything since the
// last snapshot that was committed.
//
// Thread safety: none; one Checkpointer per directory (saves from two
// processes into one directory are not supported). It borrows `table`, which
// must outlive it, and its stored_rows(); see the consistency rule at the top
// of this file.
class Checkpointer {
 public:
  Checkpointer(EmbeddingTable &table, CheckpointOptions options);
  Checkpointer(const Checkpointer &) = delete;
  Checkpointer &operator=(const Checkpointer &) = delete;

  // Writes every row of the table (Scan) as dir/full-<step>/, then resets the
  // table's change tracking, so that the next SaveDelta is relative to it;
  // then removes snapshots beyond keep_full_snapshots. Returns
  // InvalidArgument if `step` is negative or not larger than the step of
  // every snapshot in dir, IOError if a file cannot be written, and the
  // table's error if Scan fails. On failure nothing visible changes in dir
  // and the table's change tracking is left as it was.
  Status SaveFull(int64_t step);

  // Writes the rows created or changed and the keys removed since the last
  // snapshot (the newest in dir) as dir/delta-<step>/. Returns
  // FailedPrecondition if dir holds no full snapshot, or if this
  // Checkpointer has neither saved nor restored the newest snapshot in dir
  // (the table's change tracking would not be relative to it); then save a
  // full snapshot. Other errors as SaveFull; on failure the changes are kept
  // for the next SaveDelta.
  Status SaveDelta(int64_t step);

  // Replaces the table's rows with those of the newest full snapshot in dir
  // and the deltas after it (see the top of this file), sets the table's
  // step() to the step it had when the last of them was saved, resets change
  // tracking, and returns the step of that last snapshot. Checks the chain's
  // manifests before touching the table, and each data file's size and hash
  // before applying it. Returns NotFound if dir holds no full snapshot,
  // DataLoss naming the file if a manifest is malformed or a data file is
  // missing, short or fails its hash, InvalidArgument if the snapshot's dim,
  // row_floats or optimizer differ from the table's, and the table's errors.
  // On error the table's contents are unspecified (restore again or start
  // afresh); the checkpoint directory is never modified.
  Result<int64_t> RestoreLatest();
  // As RestoreLatest, from the newest snapshot of step <= `step` (the newest
  // full snapshot up to it and the deltas after that one up to it): an
  // older checkpoint, when a newer one is damaged. NotFound if there is none.
  Result<int64_t> RestoreAt(int64_t step);
  // Renames the snapshots of steps after `step` to "damaged-<name>" (kept
  // for inspection; nothing reads them), so that saves go on from the
  // snapshot of `step` that was restored instead of a damaged newer one.
  // IOError naming the snapshot if a rename fails.
  Status SetAsideSnapshotsAfter(int64_t step);

 private:
  // Newest snapshot step in dir, or -1.
  Result<int64_t> NewestStep() const;

  EmbeddingTable &table_;
  StoredRows &rows_;  // table_.stored_rows()
  const CheckpointOptions options_;
  // Step of the snapshot that the table's change tracking (plus the pending
  // changes below) is relative to; -1 if none is known.
  int64_t base_step_ = -1;
  // Changes taken from the table by failed SaveDelta calls; sorted, disjoint.
  std::vector<Key> pending_changed_;
  std::vector<Key> pending_removed_;
};

struct ServingExportOptions {
  // Upper bound on the size of one data file. Default: 64 MiB.
  int64_t file_bytes = int64_t{64} << 20;
  // Recorded in the manifest's "step" field (e.g. the training step).
  int64_t step = 0;
  // Which rows to write, asked with each row's key and its dim weights (a
  // delta bundle's changed rows, engine/bundle_delta.h). Null: every row.
  std::function<bool(Key key, const float *vector)> keep;
  // Test seams, as in CheckpointOptions.
  int64_t fail_after_bytes = -1;
  std::function<Status(const std::string &temporary_dir)> before_commit;
};

// Writes the weights of every row (no optimizer state, no metadata) to the
// directory `path`: MANIFEST (kind "serving", row_floats = dim) and
// vectors-NNNNN.bin files of records key (uint64 LE) + dim float32 (LE).
// Atomic as a save (temporary directory path's parent/.tmp-<name>-<pid>,
// fsync, rename); an existing export at `path` is swapped out atomically
// (renameat2 RENAME_EXCHANGE) and then removed. Returns InvalidArgument if
// `path` is empty or its parent directory does not exist, IOError if a file
// cannot be written, and the table's error if Scan fails. Same consistency
// rule as the saves.
Status ExportForServing(EmbeddingTable &table, const std::string &path,
                        const ServingExportOptions &options);

// Reads an export written by ExportForServing, calling `visit` with each key
// and its dim weights (valid only during the call), in file order; returns the
// number of vectors. Checks the manifest and every file's size before the
// first visit, and each file's hash before visiting its vectors: DataLoss
// naming the file otherwise. An error from `visit` is returned.
Result<int64_t> ReadServingExport(const std::string &path,
                                  const std::function<Status(Key key, const float *vector)> &visit);

}  // namespace ember::embedding
