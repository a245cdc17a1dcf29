// ValidateTierRowBytes and NewInMemoryTier: the reference Tier, one mutex over
// one hash map from key to row. Simple on purpose: the contract test compares
// every other tier with it.

#include "embedding/tier.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/mutex.h"

namespace ember::embedding {
namespace {

using Row = std::vector<char>;
using RowMap = std::unordered_map<Key, Row>;

// Thread safety: all public methods may be called concurrently; one mutex
// serialises them, which also makes each call atomic.
class InMemoryTier : public Tier {
 public:
  explicit InMemoryTier(int64_t row_bytes) : row_bytes_(row_bytes) {}
  InMemoryTier(const InMemoryTier&) = delete;
  InMemoryTier& operator=(const InMemoryTier&) = delete;

  int64_t row_bytes() const override { return row_bytes_; }

  Status Get(const std::vector<Key>& keys, char* out, std::vector<int64_t>* missing) override {
    missing->clear();
    MutexLock lock(mu_);
    for (size_t i = 0; i < keys.size(); ++i) {
      auto found = rows_.find(keys[i]);
      if (found == rows_.end()) {
        missing->push_back(static_cast<int64_t>(i));
      } else {
        std::memcpy(out + i * row_bytes_, found->second.data(), row_bytes_);
      }
    }
    return Status::OK();
  }

  Status Put(const std::vector<Key>& keys, const char* rows) override {
    // Rows are copied before the lock and moved in with operations that cannot
    // throw, so running out of memory leaves the map as it was (Put is atomic).
    try {
      RowMap staged;
      staged.reserve(keys.size());
      for (size_t i = 0; i < keys.size(); ++i) {
        const char* row = rows + i * row_bytes_;
        staged.insert_or_assign(keys[i], Row(row, row + row_bytes_));
      }
      MutexLock lock(mu_);
      rows_.reserve(rows_.size() + staged.size());  // merge below never rehashes
      for (auto it = staged.begin(); it != staged.end();) {
        auto found = rows_.find(it->first);
        if (found == rows_.end()) {
          ++it;
        } else {
          found->second.swap(it->second);
          it = staged.erase(it);
        }
      }
      rows_.merge(staged);
    } catch (const std::bad_alloc&) {
      return Status::ResourceExhausted("in-memory tier: out of memory storing ", keys.size(),
                                       " rows of ", row_bytes_, " bytes");
    }
    return Status::OK();
  }

  Status Delete(const std::vector<Key>& keys) override {
    MutexLock lock(mu_);
    for (Key key : keys) rows_.erase(key);
    return Status::OK();
  }

  Result<int64_t> ApproximateCount() override {
    MutexLock lock(mu_);
    return static_cast<int64_t>(rows_.size());
  }

  Status Flush() override { return Status::OK(); }

  Status Scan(const RowVisitor& visit) override {
    // The snapshot is a sorted copy, so `visit` runs without the lock and may
    // call back into the tier.
    std::vector<std::pair<Key, Row>> snapshot;
    try {
      MutexLock lock(mu_);
      snapshot.assign(rows_.begin(), rows_.end());
    } catch (const std::bad_alloc&) {
      return Status::ResourceExhausted("in-memory tier: out of memory copying rows for a scan");
    }
    std::sort(snapshot.begin(), snapshot.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [key, row] : snapshot) {
      EMBER_RETURN_IF_ERROR(visit(key, row.data()));
    }
    return Status::OK();
  }

 private:
  const int64_t row_bytes_;
  Mutex mu_;
  RowMap rows_ GUARDED_BY(mu_);
};

}  // namespace

Status ValidateTierRowBytes(int64_t row_bytes) {
  if (row_bytes < 1 || row_bytes > kMaxTierRowBytes) {
    return Status::InvalidArgument("row_bytes must be in [1, ", kMaxTierRowBytes, "], got ",
                                   row_bytes);
  }
  return Status::OK();
}

Result<std::unique_ptr<Tier>> NewInMemoryTier(int64_t row_bytes) {
  EMBER_RETURN_IF_ERROR(ValidateTierRowBytes(row_bytes));
  return std::unique_ptr<Tier>(std::make_unique<InMemoryTier>(row_bytes));
}

}  // namespace ember::embedding
