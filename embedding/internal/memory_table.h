#pragma once

// NewMemoryTable's table: a memory tier (row_cache.h) without a budget and
// with nothing behind it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "embedding/embedding_table.h"
#include "embedding/internal/row_cache.h"
#include "embedding/stored_rows.h"

namespace ember::embedding::internal {

// A table is its own StoredRows: both interfaces work on the one memory
// tier. Prefetch does nothing (there is nothing to load); a Push of the keys
// a Pull just read reuses that Pull's grouping and rows while none of them
// moved (BatchScratchPool::Kept::kResolvedPull).
// Thread safety: as EmbeddingTable and StoredRows say.
class MemoryTable final : public EmbeddingTable, public StoredRows {
 public:
  // May throw std::bad_alloc. REQUIRES: ValidateTableOptions(options) is OK
  // and options.memory_budget_bytes is 0.
  explicit MemoryTable(const EmbeddingTableOptions& options);
  MemoryTable(const MemoryTable&) = delete;
  MemoryTable& operator=(const MemoryTable&) = delete;

  // --- EmbeddingTable ---
  Status Pull(const std::vector<Key>& keys, float* out) override;
  Status Push(const std::vector<Key>& keys, const float* grads) override;
  Status Lookup(const std::vector<Key>& keys, float* out) override;
  void set_step(int64_t step) override { memory_.set_step(step); }
  int64_t step() const override { return memory_.step(); }
  int64_t EvictExpired() override { return memory_.EvictExpiredAt(memory_.step(), nullptr); }
  int dim() const override { return memory_.dim(); }
  int64_t num_rows() const override { return memory_.num_rows(); }
  int64_t memory_bytes() const override { return memory_.memory_bytes(); }
  TableStats stats() const override;
  void Prefetch(const std::vector<Key>& keys) override {}
  void PrepareKeys(const std::vector<Key>& keys) override { memory_.batches().Prepare(keys); }
  // Row chunks in the memory tier's ChunkPool, and each shard's index sized
  // for its share.
  Status Reserve(int64_t rows) override { return memory_.Reserve(rows); }
  StoredRows& stored_rows() override { return *this; }

  // --- StoredRows ---
  int64_t row_floats() const override { return memory_.stored_row_floats(); }
  std::optional<RowMeta> row_meta(Key key) const override;
  Status Scan(const RowVisitor& visit) override { return memory_.ScanResident(visit); }
  Status ReadRows(const std::vector<Key>& keys, float* rows,
                  std::vector<int64_t>* missing) override;
  Status WriteRows(const std::vector<Key>& keys, const float* rows) override;
  Status EraseRows(const std::vector<Key>& keys) override;
  void TakeChanges(std::vector<Key>* changed, std::vector<Key>* removed) override {
    memory_.TakeChanges(changed, removed, nullptr);
  }
  bool tracks_changes() const override { return memory_.options().track_changes; }
  Status SaveAdmissionState(std::string* out) override { return memory_.SaveAdmissionState(out); }
  Status RestoreAdmissionState(std::string_view state) override {
    return memory_.RestoreAdmissionState(state);
  }
  int64_t eviction_step() const override;
  void RestoreEvictionStep(int64_t step) override;

  // Bytes of the table outside its shards, counted in memory_bytes().
  static int64_t OverheadBytes(int num_shards);

 private:
  RowCache memory_;
};

}  // namespace ember::embedding::internal
