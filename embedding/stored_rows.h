#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "embedding/embedding_table.h"

namespace ember::embedding {

// Receives one stored row: its key and row_floats() floats (weights, then
// optimizer state, then metadata), valid only during the call.
using RowVisitor = std::function<Status(Key key, const float* row)>;

// The stored rows of one table, whole: what checkpoints save and restore,
// serving exports and model hashes read, and tests inspect. A training step
// never calls it; it uses EmbeddingTable. Reached with
// EmbeddingTable::stored_rows(): a table that wraps another (a key-sharded
// table over ranks) hands out the stored rows of the table it wraps, which
// are the rows this process holds.
//
// A stored row is row_floats() floats: dim weights, the optimizer's state,
// and the row's metadata (RowMeta, bit-copied integers). A row written with
// WriteRows reads back bit for bit with Scan and ReadRows, whichever tier
// holds it.
//
// Thread safety: REQUIRES for every method but row_meta(): nothing else uses
// the table meanwhile (no Pull, Push, Prefetch, set_step or EvictExpired, and
// no other method of this interface). Checkpoints run between training steps.
class StoredRows {
 public:
  virtual ~StoredRows() = default;

  // Floats of one stored row: dim weights, the optimizer state, metadata.
  virtual int64_t row_floats() const = 0;

  // The bookkeeping of `key`'s row, or nullopt if it has no row. Unlike the
  // other methods it may run concurrently with the table's hot path (it
  // reads one row under its shard's lock).
  virtual std::optional<RowMeta> row_meta(Key key) const = 0;

  // Visits every row of every tier once, in no particular order. Returns the
  // first error of `visit` (which stops the scan), or the table's own.
  virtual Status Scan(const RowVisitor& visit) = 0;

  // Copies the stored rows of `keys` into `rows` (keys.size() x
  // row_floats()); `*missing` is cleared, then receives the indices of keys
  // without a row in increasing order (their rows are left untouched).
  // InvalidArgument if `rows` is null for a non-empty `keys`.
  virtual Status ReadRows(const std::vector<Key>& keys, float* rows,
                          std::vector<int64_t>* missing) = 0;

  // Inserts or overwrites whole rows as Scan/ReadRows give them; the key in
  // a row's metadata becomes the key it is written under. Counts as a change
  // for TakeChanges.
  virtual Status WriteRows(const std::vector<Key>& keys, const float* rows) = 0;

  // Removes the rows of `keys` from every tier (absent keys are ignored).
  virtual Status EraseRows(const std::vector<Key>& keys) = 0;

  // Keys whose row was created or changed (by Push, WriteRows, or a Pull
  // that created it), and keys whose row was removed (TTL, EraseRows), since
  // the previous call; clears both sets. Both are sorted and disjoint. Both
  // stay empty unless tracks_changes().
  virtual void TakeChanges(std::vector<Key>* changed, std::vector<Key>* removed) = 0;
  // Whether changes are tracked (EmbeddingTableOptions::track_changes).
  virtual bool tracks_changes() const = 0;

  // The admission state of keys without a row (frequency admission's
  // sketches), as bytes for a checkpoint; empty when there is none.
  virtual Status SaveAdmissionState(std::string* out) = 0;
  // Loads what SaveAdmissionState wrote, from a table with the same options
  // (empty bytes for a table without admission state). InvalidArgument when
  // the bytes do not fit this table's admission state.
  virtual Status RestoreAdmissionState(std::string_view state) = 0;

  // The table's step() at its last EvictExpired, or -1 if there was none
  // (or the table has no TTL). Rows a disk tier holds are expired lazily,
  // when next read, against this step; checkpoints save it.
  virtual int64_t eviction_step() const = 0;
  // After a restore of rows: what an EvictExpired at `step` (>= 0; -1: none)
  // would have removed is removed, and eviction_step() becomes `step`, so
  // that a restored table holds and expires the same rows as the table that
  // was saved. Does nothing without TTL.
  virtual void RestoreEvictionStep(int64_t step) = 0;
};

}  // namespace ember::embedding
