#pragma once

// A Tier that forwards every call to the tier it wraps: the base of the
// tests' tiers that watch or hold some calls (they override those).

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/status.h"
#include "embedding/tier.h"

namespace ember::test {

class ForwardingTier : public embedding::Tier {
 public:
  explicit ForwardingTier(std::unique_ptr<embedding::Tier> base) : base_(std::move(base)) {}

  int64_t row_bytes() const override { return base_->row_bytes(); }
  Status Get(const std::vector<embedding::Key>& keys, char* out,
             std::vector<int64_t>* missing) override {
    return base_->Get(keys, out, missing);
  }
  Status Put(const std::vector<embedding::Key>& keys, const char* rows) override {
    return base_->Put(keys, rows);
  }
  Status Delete(const std::vector<embedding::Key>& keys) override { return base_->Delete(keys); }
  Result<int64_t> ApproximateCount() override { return base_->ApproximateCount(); }
  Status Flush() override { return base_->Flush(); }
  Status Scan(const RowVisitor& visit) override { return base_->Scan(visit); }

 private:
  const std::unique_ptr<embedding::Tier> base_;
};

}  // namespace ember::test
