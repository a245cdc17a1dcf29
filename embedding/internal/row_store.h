#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/mutex.h"
#include "embedding/embedding_table.h"

// The storage of one shard of the in-memory table: an index from key to slot
// and an arena of fixed-size rows addressed by slot.

namespace ember::embedding {

// key -> slot, open addressing with linear probing. An entry is empty when its
// slot is negative, so every 64-bit key (0 and ~0 included) can be stored.
// `hash` is always Mix64(key); the bucket of a key is the top bits of it (the
// shard was chosen by hash % num_shards, whose low bits are the same for every
// key of a shard). Deletion is by backward shift (Knuth, TAOCP vol. 3,
// 6.4 Algorithm R): no tombstones, so probe lengths after many deletions are
// those of a table that never held the deleted keys.
// Thread safety: none; the owner serialises access.
class KeyIndex {
 public:
  KeyIndex();

  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }
  int64_t bytes() const { return capacity_ * static_cast<int64_t>(sizeof(Entry)); }

  void Prefetch(uint64_t hash) const { __builtin_prefetch(&entries_[Bucket(hash)]); }

  // Returns the slot of `key`, or -1 if it is absent.
  int64_t Find(Key key, uint64_t hash) const {
    for (uint64_t i = Bucket(hash);; i = (i + 1) & mask_) {
      const Entry& entry = entries_[i];
      if (entry.slot < 0) return -1;
      if (entry.key == key) return entry.slot;
    }
  }

  // Grows (rehashes) if one more key would pass the load limit. May throw
  // std::bad_alloc, leaving the index as it was.
  void ReserveOneMore() {
    if (size_ + 1 > grow_at_) Rehash(capacity_ * 2);
  }

  // Adds `key` -> `slot`. Never allocates.
  // REQUIRES: key is absent; ReserveOneMore() was called since the last Insert.
  void Insert(Key key, uint64_t hash, int64_t slot);

  // Points the present `key` at `slot`. REQUIRES: key is present.
  void SetSlot(Key key, uint64_t hash, int64_t slot);

  // Removes `key`; returns its slot, or -1 if it was absent. Never allocates.
  int64_t Erase(Key key, uint64_t hash);

  // Grows (rehashes) now, if needed, so that `keys` keys in all fit without
  // growing again. May throw std::bad_alloc, leaving the index as it was.
  void Reserve(int64_t keys);

  // Rehashes into a smaller array when under 1/8 full, so that memory follows
  // the number of keys down after evictions. Keeps the index as it is if the
  // smaller array cannot be allocated.
  void ShrinkIfSparse();

 private:
  struct Entry {
    Key key;
    int64_t slot;  // < 0: empty
  };

  uint64_t Bucket(uint64_t hash) const { return hash >> shift_; }
  // The position of `key`'s entry, or -1.
  int64_t Position(Key key, uint64_t hash) const;
  void Allocate(int64_t capacity);
  void Rehash(int64_t capacity);

  std::unique_ptr<Entry[]> entries_;
  int64_t capacity_ = 0;
  uint64_t mask_ = 0;
  int shift_ = 64;
  int64_t size_ = 0;
  int64_t grow_at_ = 0;
};

// Row chunks of one size reserved ahead of need for the RowArenas of a
// table's shards (EmbeddingTable::Reserve): one region per Reserve, on
// transparent huge pages (AdviseHugePages) and faulted in when reserved.
// Rows are read and written at random: on 4 KiB pages nearly every access
// misses the TLB (two page walks in a virtual machine), and every 4 KiB of
// new rows is a page fault inside the training step. A chunk given back is
// handed out again; the regions are freed with the pool. Arenas take their
// chunks from the heap once the pool is empty.
// Thread safety: all methods may be called concurrently.
class ChunkPool {
 public:
  // REQUIRES: chunk_bytes > 0, a multiple of 4.
  explicit ChunkPool(int64_t chunk_bytes);
  ~ChunkPool();
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  int64_t chunk_bytes() const { return chunk_bytes_; }
  // Adds `chunks` chunks in a new region and faults it in. Returns false,
  // the pool unchanged, when the memory cannot be allocated.
  bool Reserve(int64_t chunks);
  // A reserved chunk (uninitialised), or null when none is left.
  float* Take();
  // Whether `chunk` came from Take.
  bool Owns(const float* chunk) const;
  // Takes back a chunk from Take. REQUIRES: Owns(chunk).
  void Give(float* chunk);
  // Bytes of the chunks not handed out (reserved, or given back).
  int64_t idle_bytes() const;

 private:
  struct Region {
    char* begin;
    char* end;
  };
  const int64_t chunk_bytes_;
  mutable Mutex mu_;
  std::vector<Region> regions_ GUARDED_BY(mu_);
  // Chunks not handed out; the back one goes first.
  std::vector<float*> free_ GUARDED_BY(mu_);
  // Chunks in all regions.
  int64_t total_chunks_ GUARDED_BY(mu_) = 0;
};

// Rows of row_floats floats, addressed by slot in [0, size()), in chunks that
// never move. Rows are removed by moving the last row into the hole, so slots
// stay dense and emptied chunks are freed (or given back to the pool): a row's address stays valid
// until the next removal, which removals() counts. Thread safety: none; the owner serialises
// access.
class RowArena {
 public:
  // `chunk_bytes`: target bytes per chunk (at least one row per chunk). With
  // a `pool`, chunks come from it while it has any (and go back to it); its
  // chunks must be ChunkBytesFor(row_floats, chunk_bytes) and it must
  // outlive the arena.
  RowArena(int64_t row_floats, int64_t chunk_bytes, ChunkPool* pool = nullptr);
  ~RowArena();
  RowArena(const RowArena&) = delete;
  RowArena& operator=(const RowArena&) = delete;
  // The bytes of each chunk of an arena made with these arguments.
  static int64_t ChunkBytesFor(int64_t row_floats, int64_t chunk_bytes);

  int64_t size() const { return size_; }
  // RemoveLast calls so far: while it is unchanged, every row is where it was.
  int64_t removals() const { return removals_; }
  int64_t num_chunks() const { return static_cast<int64_t>(chunks_.size()); }
  int64_t rows_per_chunk() const { return int64_t{1} << chunk_shift_; }
  int64_t chunk_bytes() const { return ChunkFloats() * 4; }
  int64_t bytes() const {
    return static_cast<int64_t>(chunks_.size()) * ChunkFloats() * 4 +
           static_cast<int64_t>(chunks_.capacity() * sizeof(chunks_[0]));
  }

  float* row(int64_t slot) const {
    return chunks_[slot >> chunk_shift_] + (slot & chunk_mask_) * row_floats_;
  }

  // Makes room for one more row. May throw std::bad_alloc, leaving the arena
  // as it was.
  void ReserveOneMore() {
    if (size_ < static_cast<int64_t>(chunks_.size()) << chunk_shift_) return;
    AddChunk();
  }

  // Sizes the list of chunks for `rows` rows in all, so that it does not
  // grow (nor bytes() change) while rows are appended up to that many. May
  // throw std::bad_alloc, leaving the arena as it was.
  void ReserveChunkList(int64_t rows) {
    chunks_.reserve(static_cast<size_t>((rows + chunk_mask_) >> chunk_shift_));
  }

  // Returns the slot of a new, uninitialised row. REQUIRES: ReserveOneMore()
  // was called since the last Append.
  int64_t Append() { return size_++; }

  // Removes the last row; frees chunks left empty, keeping one spare so that
  // a row added and removed at a chunk boundary does not allocate each time.
  // REQUIRES: size() > 0.
  void RemoveLast();

 private:
  int64_t ChunkFloats() const { return (int64_t{1} << chunk_shift_) * row_floats_; }
  void AddChunk();
  void FreeChunk(float* chunk);

  ChunkPool* pool_;
  // 32 bits, beside chunk_shift_: the arena is part of every shard's bytes,
  // which small budgets count.
  int32_t row_floats_;
  int chunk_shift_ = 0;
  int64_t chunk_mask_ = 0;
  std::vector<float*> chunks_;  // Owned: from pool_ if it Owns them, else new[].
  int64_t size_ = 0;
  int64_t removals_ = 0;
};

}  // namespace ember::embedding
