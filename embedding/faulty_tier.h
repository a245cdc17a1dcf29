#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "core/status.h"
#include "embedding/tier.h"

namespace ember::embedding {

struct FaultyTierOptions {
  // The first call that fails, counting from 1 over every call of the Tier
  // interface (Get, Put, Delete, ApproximateCount, Flush, Scan) in the order
  // they start. Default: the first.
  int64_t first_failing_call = 1;
  // Calls that fail from there on; later ones reach the wrapped tier again.
  // Default: all (a disk that died).
  int64_t failing_calls = std::numeric_limits<int64_t>::max();
};

// A test seam: wraps a real tier and forwards every call to it, except that
// the calls chosen by FaultyTierOptions return IOError without reaching it
// (so a failed Put stores nothing, like a failed Put of a real tier).
// Thread safety: as the wrapped tier; calls are numbered atomically.
class FaultyTier : public Tier {
 public:
  FaultyTier(std::unique_ptr<Tier> base, const FaultyTierOptions& options);
  FaultyTier(const FaultyTier&) = delete;
  FaultyTier& operator=(const FaultyTier&) = delete;

  // Calls made so far, failed ones included.
  int64_t calls() const { return calls_.load(); }
  // Calls that returned the injected IOError.
  int64_t injected_failures() const { return injected_failures_.load(); }

  int64_t row_bytes() const override { return base_->row_bytes(); }
  Status Get(const std::vector<Key>& keys, char* out, std::vector<int64_t>* missing) override;
  Status Put(const std::vector<Key>& keys, const char* rows) override;
  Status Delete(const std::vector<Key>& keys) override;
  Result<int64_t> ApproximateCount() override;
  Status Flush() override;
  Status Scan(const RowVisitor& visit) override;

 private:
  // Numbers this call; returns the injected error if it is one that fails.
  Status NextCall(const char* operation);

  const std::unique_ptr<Tier> base_;
  const FaultyTierOptions options_;
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> injected_failures_{0};
};

}  // namespace ember::embedding
