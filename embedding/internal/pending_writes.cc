#include "embedding/internal/pending_writes.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "core/random.h"
#include "core/sorted_order.h"

namespace ember::embedding {
namespace {

// Makes room for `more` elements, doubling the capacity when it must grow
// (reserve of the exact size would copy the whole vector every time).
template <typename T>
void Grow(std::vector<T>& v, size_t more) {
  if (v.size() + more > v.capacity()) v.reserve(std::max(v.capacity() * 2, v.size() + more));
}

}  // namespace

int64_t PendingWrites::EntryOf(Key key) {
  const uint64_t hash = Mix64(key);
  const int64_t found = index_.Find(key, hash);
  if (found >= 0) return found;
  // Grow everything first, so that a bad_alloc leaves the writes as they were.
  index_.ReserveOneMore();
  const int64_t entry = size();
  Grow(keys_, 1);
  Grow(deleted_, 1);
  Grow(rows_, row_bytes_);
  keys_.push_back(key);
  deleted_.push_back(0);
  rows_.resize(rows_.size() + row_bytes_);
  index_.Insert(key, hash, entry);
  return entry;
}

void PendingWrites::Reserve(int64_t rows) {
  keys_.reserve(rows);
  deleted_.reserve(rows);
  rows_.reserve(rows * row_bytes_);
  index_.Reserve(rows);
  reserved_ = std::max(reserved_, rows);
}

void PendingWrites::Put(const std::vector<Key>& keys, const char* rows) {
  for (size_t i = 0; i < keys.size(); ++i) {
    const int64_t entry = EntryOf(keys[i]);
    std::memcpy(rows_.data() + entry * row_bytes_, rows + i * row_bytes_, row_bytes_);
    deleted_[entry] = 0;
  }
}

void PendingWrites::Delete(const std::vector<Key>& keys) {
  for (Key key : keys) deleted_[EntryOf(key)] = 1;
}

PendingWrites::Found PendingWrites::Find(Key key, char* out) const {
  if (keys_.empty()) return Found::kAbsent;
  const int64_t entry = index_.Find(key, Mix64(key));
  if (entry < 0) return Found::kAbsent;
  if (deleted_[entry]) return Found::kDeleted;
  std::memcpy(out, rows_.data() + entry * row_bytes_, row_bytes_);
  return Found::kRow;
}

void PendingWrites::AddOlderTo(PendingWrites& other) const {
  for (int64_t entry = 0; entry < size(); ++entry) {
    const Key key = keys_[entry];
    if (other.index_.Find(key, Mix64(key)) >= 0) continue;
    const int64_t at = other.EntryOf(key);
    other.deleted_[at] = deleted_[entry];
    std::memcpy(other.rows_.data() + at * row_bytes_, rows_.data() + entry * row_bytes_,
                row_bytes_);
  }
}

void PendingWrites::Clear() {
  index_ = KeyIndex();
  try {
    index_.Reserve(reserved_);
  } catch (const std::bad_alloc&) {
    // The index grows again as writes come.
  }
  keys_.clear();
  deleted_.clear();
  rows_.clear();
}

}  // namespace ember::embedding
