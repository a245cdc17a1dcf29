#include "embedding/faulty_tier.h"

#include <glog/logging.h>

#include <memory>
#include <utility>
#include <vector>

namespace ember::embedding {

FaultyTier::FaultyTier(std::unique_ptr<Tier> base, const FaultyTierOptions& options)
    : base_(std::move(base)), options_(options) {
  CHECK(base_ != nullptr) << "FaultyTier wraps a tier";
}

Status FaultyTier::NextCall(const char* operation) {
  const int64_t call = calls_.fetch_add(1) + 1;
  // Written so that first_failing_call + failing_calls cannot overflow.
  if (call >= options_.first_failing_call &&
      call - options_.first_failing_call < options_.failing_calls) {
    injected_failures_.fetch_add(1);
    return Status::IOError("FaultyTier: injected failure of ", operation, " (call ", call, ")");
  }
  return Status::OK();
}

Status FaultyTier::Get(const std::vector<Key>& keys, char* out, std::vector<int64_t>* missing) {
  EMBER_RETURN_IF_ERROR(NextCall("Get"));
  return base_->Get(keys, out, missing);
}

Status FaultyTier::Put(const std::vector<Key>& keys, const char* rows) {
  EMBER_RETURN_IF_ERROR(NextCall("Put"));
  return base_->Put(keys, rows);
}

Status FaultyTier::Delete(const std::vector<Key>& keys) {
  EMBER_RETURN_IF_ERROR(NextCall("Delete"));
  return base_->Delete(keys);
}

Result<int64_t> FaultyTier::ApproximateCount() {
  EMBER_RETURN_IF_ERROR(NextCall("ApproximateCount"));
  return base_->ApproximateCount();
}

Status FaultyTier::Flush() {
  EMBER_RETURN_IF_ERROR(NextCall("Flush"));
  return base_->Flush();
}

Status FaultyTier::Scan(const RowVisitor& visit) {
  EMBER_RETURN_IF_ERROR(NextCall("Scan"));
  return base_->Scan(visit);
}

}  // namespace ember::embedding
