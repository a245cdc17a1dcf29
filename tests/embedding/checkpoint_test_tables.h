#pragma once

// Tables for the checkpoint tests: a small map-backed model of the snapshot
// API, and a wrapper that fails Scan on purpose.

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/random.h"
#include "embedding/embedding_table.h"
#include "embedding/stored_rows.h"

namespace ember::embedding::test {

// A std::map table with per-element Adagrad: a row is dim weights, dim
// accumulators and one float holding the step of its last Pull. Keeps
// change tracking as the StoredRows contract describes.
// Thread safety: none (tests call it from one thread).
class FakeTable : public EmbeddingTable, public StoredRows {
 public:
  FakeTable(int dim, int64_t ttl_steps, uint64_t seed = 7)
      : dim_(dim), ttl_steps_(ttl_steps), seed_(seed) {}

  Status Pull(const std::vector<Key> &keys, float *out) override {
    for (size_t i = 0; i < keys.size(); ++i) {
      std::vector<float> &row = RowOf(keys[i]);
      row[2 * dim_] = static_cast<float>(step_);
      std::copy(row.begin(), row.begin() + dim_, out + i * dim_);
    }
    return Status::OK();
  }
  Status Push(const std::vector<Key> &keys, const float *grads) override {
    for (size_t i = 0; i < keys.size(); ++i) {
      std::vector<float> &row = RowOf(keys[i]);
      for (int d = 0; d < dim_; ++d) {
        const float g = grads[i * dim_ + d];
        row[dim_ + d] += g * g;
        row[d] -= 0.1f * g / (std::sqrt(row[dim_ + d]) + 1e-8f);
      }
      MarkChanged(keys[i]);
    }
    return Status::OK();
  }
  Status Lookup(const std::vector<Key> &keys, float *out) override {
    for (size_t i = 0; i < keys.size(); ++i) {
      auto it = rows_.find(keys[i]);
      const std::vector<float> row = it != rows_.end() ? it->second : InitialRow(keys[i]);
      std::copy(row.begin(), row.begin() + dim_, out + i * dim_);
    }
    return Status::OK();
  }
  void set_step(int64_t step) override { step_ = step; }
  int64_t step() const override { return step_; }
  int64_t EvictExpired() override { return EvictExpiredAt(step_); }
  int dim() const override { return dim_; }
  int64_t num_rows() const override { return static_cast<int64_t>(rows_.size()); }
  int64_t memory_bytes() const override { return num_rows() * row_floats() * 4; }
  TableStats stats() const override { return TableStats{.rows = num_rows()}; }
  void Prefetch(const std::vector<Key> &) override {}
  void PrepareKeys(const std::vector<Key> &) override {}
  Status Reserve(int64_t rows) override {
    if (rows < 0) return Status::InvalidArgument("Reserve: rows must be >= 0, got ", rows);
    return Status::OK();
  }
  StoredRows &stored_rows() override { return *this; }

  int64_t row_floats() const override { return 2 * dim_ + 1; }
  std::optional<RowMeta> row_meta(Key key) const override {
    auto it = rows_.find(key);
    if (it == rows_.end()) return std::nullopt;
    return RowMeta{0, static_cast<int64_t>(it->second[2 * dim_])};
  }
  Status Scan(const RowVisitor &visit) override {
    for (const auto &[key, row] : rows_) EMBER_RETURN_IF_ERROR(visit(key, row.data()));
    return Status::OK();
  }
  Status ReadRows(const std::vector<Key> &keys, float *rows,
                  std::vector<int64_t> *missing) override {
    for (size_t i = 0; i < keys.size(); ++i) {
      auto it = rows_.find(keys[i]);
      if (it == rows_.end()) {
        missing->push_back(static_cast<int64_t>(i));
      } else {
        std::copy(it->second.begin(), it->second.end(), rows + i * row_floats());
      }
    }
    return Status::OK();
  }
  Status WriteRows(const std::vector<Key> &keys, const float *rows) override {
    for (size_t i = 0; i < keys.size(); ++i) {
      rows_[keys[i]].assign(rows + i * row_floats(), rows + (i + 1) * row_floats());
      MarkChanged(keys[i]);
    }
    return Status::OK();
  }
  Status EraseRows(const std::vector<Key> &keys) override {
    for (Key key : keys) {
      if (rows_.erase(key) == 0) continue;
      changed_.erase(key);
      removed_.insert(key);
    }
    return Status::OK();
  }
  bool tracks_changes() const override { return true; }
  void TakeChanges(std::vector<Key> *changed, std::vector<Key> *removed) override {
    changed->assign(changed_.begin(), changed_.end());
    removed->assign(removed_.begin(), removed_.end());
    changed_.clear();
    removed_.clear();
  }
  // No admission: every key gets a row.
  Status SaveAdmissionState(std::string *out) override {
    out->clear();
    return Status::OK();
  }
  Status RestoreAdmissionState(std::string_view state) override {
    if (state.empty()) return Status::OK();
    return Status::InvalidArgument("FakeTable keeps no admission state, got ", state.size(),
                                   " bytes");
  }
  int64_t eviction_step() const override { return eviction_step_; }
  void RestoreEvictionStep(int64_t step) override {
    if (step >= 0) EvictExpiredAt(step);
  }

 private:
  int64_t EvictExpiredAt(int64_t step) {
    if (ttl_steps_ == 0) return 0;
    eviction_step_ = step;
    std::vector<Key> expired;
    for (const auto &[key, row] : rows_) {
      if (step - static_cast<int64_t>(row[2 * dim_]) > ttl_steps_) expired.push_back(key);
    }
    Status erased = EraseRows(expired);
    erased.IgnoreError();  // EraseRows of the map cannot fail.
    return static_cast<int64_t>(expired.size());
  }
  std::vector<float> InitialRow(Key key) const {
    std::vector<float> row(row_floats(), 0.0f);
    for (int d = 0; d < dim_; ++d) row[d] = static_cast<float>(UniformAt(seed_, key, d) - 0.5);
    row[2 * dim_] = static_cast<float>(step_);
    return row;
  }
  std::vector<float> &RowOf(Key key) {
    auto it = rows_.find(key);
    if (it == rows_.end()) {
      it = rows_.emplace(key, InitialRow(key)).first;
      MarkChanged(key);
    }
    return it->second;
  }
  void MarkChanged(Key key) {
    removed_.erase(key);
    changed_.insert(key);
  }

  const int dim_;
  const int64_t ttl_steps_;
  const uint64_t seed_;
  int64_t step_ = 0;
  int64_t eviction_step_ = -1;
  std::map<Key, std::vector<float>> rows_;
  std::set<Key> changed_;
  std::set<Key> removed_;
};

// Forwards everything to a borrowed table and its stored rows, except that
// Scan fails with IOError after visiting `fail_scan_after_rows` rows (when
// >= 0), as a disk tier that dies part-way through a snapshot would.
class FaultyScanTable : public EmbeddingTable {
 public:
  FaultyScanTable(EmbeddingTable &base, int64_t fail_scan_after_rows)
      : base_(base), rows_(base.stored_rows(), fail_scan_after_rows) {}

  Status Pull(const std::vector<Key> &keys, float *out) override { return base_.Pull(keys, out); }
  Status Push(const std::vector<Key> &keys, const float *grads) override {
    return base_.Push(keys, grads);
  }
  Status Lookup(const std::vector<Key> &keys, float *out) override {
    return base_.Lookup(keys, out);
  }
  void set_step(int64_t step) override { base_.set_step(step); }
  int64_t step() const override { return base_.step(); }
  int64_t EvictExpired() override { return base_.EvictExpired(); }
  int dim() const override { return base_.dim(); }
  int64_t num_rows() const override { return base_.num_rows(); }
  int64_t memory_bytes() const override { return base_.memory_bytes(); }
  TableStats stats() const override { return base_.stats(); }
  void Prefetch(const std::vector<Key> &keys) override { base_.Prefetch(keys); }
  void PrepareKeys(const std::vector<Key> &keys) override { base_.PrepareKeys(keys); }
  Status Reserve(int64_t rows) override { return base_.Reserve(rows); }
  StoredRows &stored_rows() override { return rows_; }

 private:
  class FaultyScanRows : public StoredRows {
   public:
    FaultyScanRows(StoredRows &base, int64_t fail_scan_after_rows)
        : base_(base), fail_scan_after_rows_(fail_scan_after_rows) {}

    int64_t row_floats() const override { return base_.row_floats(); }
    std::optional<RowMeta> row_meta(Key key) const override { return base_.row_meta(key); }
    Status Scan(const RowVisitor &visit) override {
      int64_t visited = 0;
      return base_.Scan([&](Key key, const float *row) {
        if (fail_scan_after_rows_ >= 0 && visited == fail_scan_after_rows_) {
          return Status::IOError("FaultyScanTable: injected Scan failure after ", visited, " rows");
        }
        ++visited;
        return visit(key, row);
      });
    }
    Status ReadRows(const std::vector<Key> &keys, float *rows,
                    std::vector<int64_t> *missing) override {
      return base_.ReadRows(keys, rows, missing);
    }
    Status WriteRows(const std::vector<Key> &keys, const float *rows) override {
      return base_.WriteRows(keys, rows);
    }
    Status EraseRows(const std::vector<Key> &keys) override { return base_.EraseRows(keys); }
    bool tracks_changes() const override { return base_.tracks_changes(); }
    void TakeChanges(std::vector<Key> *changed, std::vector<Key> *removed) override {
      base_.TakeChanges(changed, removed);
    }
    Status SaveAdmissionState(std::string *out) override { return base_.SaveAdmissionState(out); }
    Status RestoreAdmissionState(std::string_view state) override {
      return base_.RestoreAdmissionState(state);
    }
    int64_t eviction_step() const override { return base_.eviction_step(); }
    void RestoreEvictionStep(int64_t step) override { base_.RestoreEvictionStep(step); }

   private:
    StoredRows &base_;
    const int64_t fail_scan_after_rows_;
  };

  EmbeddingTable &base_;
  FaultyScanRows rows_;
};

}  // namespace ember::embedding::test
