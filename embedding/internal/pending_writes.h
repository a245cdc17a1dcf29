#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/sorted_order.h"
#include "embedding/embedding_table.h"
#include "embedding/internal/row_store.h"

// Puts and Deletes that a disk tier has accepted but not yet written to its
// store, so that they can be written together, sorted by key.

namespace ember::embedding {

// The latest Put or Delete of each key since the last Clear: a row (Put) or
// a tombstone (Delete) per key, found by key through a KeyIndex, listed in
// key order for the write. A later Put or Delete of a key replaces the
// earlier one, as it would in the store.
// Thread safety: none; the owner serialises access.
class PendingWrites {
 public:
  explicit PendingWrites(int64_t row_bytes) : row_bytes_(row_bytes) {}

  int64_t size() const { return static_cast<int64_t>(keys_.size()); }
  bool empty() const { return keys_.empty(); }
  // Memory held: rows, keys and the index.
  int64_t bytes() const {
    return static_cast<int64_t>(rows_.capacity() + keys_.capacity() * sizeof(Key) +
                                deleted_.capacity()) +
           index_.bytes();
  }

  // Makes room for `rows` writes, so that writes up to that many allocate
  // nothing (grown by doubling, the rows would take up to twice their bytes).
  // Kept across Clear. May throw std::bad_alloc, changing nothing held.
  void Reserve(int64_t rows);

  // Records a Put of keys.size() rows of row_bytes (row i for keys[i]); of a
  // repeated key the last row wins. May throw std::bad_alloc; the rows
  // recorded before the throw stay recorded (each is a whole row).
  void Put(const std::vector<Key>& keys, const char* rows);
  // Records a Delete of `keys`. May throw std::bad_alloc like Put.
  void Delete(const std::vector<Key>& keys);

  enum class Found { kAbsent, kRow, kDeleted };
  // What the writes since Clear did to `key`: kRow copies its row to `out`
  // (row_bytes); kDeleted and kAbsent leave `out` alone.
  Found Find(Key key, char* out) const;

  // Adds to `other` the writes of keys `other` does not hold (whose writes
  // are older than other's). May throw std::bad_alloc like Put.
  void AddOlderTo(PendingWrites& other) const;

  // Calls write(key, rank(key), row) for every write in increasing order of
  // rank(key) (a uint64_t, distinct for distinct keys; computed once per
  // key); `row` (row_bytes) is null for a Delete.
  template <typename Rank, typename Write>
  void ForEachSorted(const Rank& rank, const Write& write) const {
    std::vector<uint64_t> ranks(keys_.size());
    for (size_t i = 0; i < keys_.size(); ++i) ranks[i] = rank(keys_[i]);
    std::vector<int64_t> order;
    SortedOrder(ranks, &order);
    for (int64_t entry : order) {
      write(keys_[entry], ranks[entry],
            deleted_[entry] ? nullptr : rows_.data() + entry * row_bytes_);
    }
  }

  // Exchanges the writes of the two (of rows of one size).
  void Swap(PendingWrites& other) {
    std::swap(row_bytes_, other.row_bytes_);
    std::swap(reserved_, other.reserved_);
    std::swap(index_, other.index_);
    keys_.swap(other.keys_);
    deleted_.swap(other.deleted_);
    rows_.swap(other.rows_);
  }

  // Forgets every write. The row buffer keeps its capacity for the next.
  void Clear();

 private:
  // The entry of `key`, made if absent (may throw std::bad_alloc).
  int64_t EntryOf(Key key);

  int64_t row_bytes_;
  int64_t reserved_ = 0;       // rows Reserve made room for
  KeyIndex index_;             // key -> entry
  std::vector<Key> keys_;      // per entry
  std::vector<char> deleted_;  // per entry: 1 for a Delete
  std::vector<char> rows_;     // per entry, row_bytes_ each (unused for a Delete)
};

}  // namespace ember::embedding
