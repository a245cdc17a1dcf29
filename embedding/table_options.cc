// ValidateTableOptions (see embedding/internal/table_options.h) and
// ParseEvictionPolicy and ParseWeightStorage (embedding/embedding_table.h).

#include "embedding/internal/table_options.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "embedding/sparse_optimizer.h"

namespace ember::embedding::internal {
namespace {

// Upper bound on num_shards: beyond it a shard holds too little to be worth a
// mutex, and a typo (1e9) would otherwise allocate gigabytes of empty shards.
constexpr int kMaxShards = 1 << 16;
// Upper bound on dim, so that row sizes stay far from integer overflow.
constexpr int kMaxDim = 1 << 20;

Status ValidateAdmissionOptions(const AdmissionOptions& admission) {
  switch (admission.kind) {
    case AdmissionOptions::Kind::kNone:
      return Status::OK();
    case AdmissionOptions::Kind::kFrequency:
      if (admission.min_count < 1 || admission.min_count > std::numeric_limits<uint32_t>::max()) {
        return Status::InvalidArgument("admission.min_count must be in [1, 2^32 - 1], got ",
                                       admission.min_count);
      }
      if (admission.sketch_width < 1 || admission.sketch_width > (int64_t{1} << 32)) {
        return Status::InvalidArgument("admission.sketch_width must be in [1, 2^32], got ",
                                       admission.sketch_width);
      }
      if (admission.sketch_depth < 1 || admission.sketch_depth > 16) {
        return Status::InvalidArgument("admission.sketch_depth must be in [1, 16], got ",
                                       admission.sketch_depth);
      }
      return Status::OK();
    case AdmissionOptions::Kind::kProbability:
      // Written as !(p > 0) so that NaN is rejected too.
      if (!(admission.probability > 0.0) || !(admission.probability <= 1.0)) {
        return Status::InvalidArgument("admission.probability must be in (0, 1], got ",
                                       admission.probability);
      }
      return Status::OK();
  }
  return Status::InvalidArgument("admission.kind: unknown kind ", static_cast<int>(admission.kind));
}

}  // namespace

Status ValidateTableOptions(const EmbeddingTableOptions& options) {
  if (options.dim < 1 || options.dim > kMaxDim) {
    return Status::InvalidArgument("dim must be in [1, ", kMaxDim, "], got ", options.dim);
  }
  if (options.num_shards < 1 || options.num_shards > kMaxShards) {
    return Status::InvalidArgument("num_shards must be in [1, ", kMaxShards, "], got ",
                                   options.num_shards);
  }
  if (!std::isfinite(options.init_scale)) {
    return Status::InvalidArgument("init_scale must be finite, got ", options.init_scale);
  }
  if (options.ttl_steps < 0) {
    return Status::InvalidArgument("ttl_steps must be >= 0, got ", options.ttl_steps);
  }
  if (options.prefetch_threads < 1 || options.prefetch_threads > 64) {
    return Status::InvalidArgument("prefetch_threads must be in [1, 64], got ",
                                   options.prefetch_threads);
  }
  if (options.memory_budget_bytes < 0) {
    return Status::InvalidArgument("memory_budget_bytes must be >= 0, got ",
                                   options.memory_budget_bytes);
  }
  if (options.weight_storage != WeightStorage::kFloat32 &&
      options.weight_storage != WeightStorage::kBFloat16) {
    return Status::InvalidArgument("weight_storage: unknown kind ",
                                   static_cast<int>(options.weight_storage));
  }
  EMBER_RETURN_IF_ERROR(ValidateAdmissionOptions(options.admission));
  return ValidateSparseOptimizerOptions(options.optimizer);
}

}  // namespace ember::embedding::internal

namespace ember::embedding {

Result<EmbeddingTableOptions::EvictionPolicy> ParseEvictionPolicy(const std::string& name) {
  if (name == "lru") return EmbeddingTableOptions::EvictionPolicy::kLru;
  if (name == "lfu") return EmbeddingTableOptions::EvictionPolicy::kLfu;
  return Status::InvalidArgument("eviction policy \"", name, "\" is not known; use lru or lfu");
}

Result<WeightStorage> ParseWeightStorage(const std::string& name) {
  if (name == "f32") return WeightStorage::kFloat32;
  if (name == "bf16") return WeightStorage::kBFloat16;
  return Status::InvalidArgument("weight storage \"", name, "\" is not known; use f32 or bf16");
}

}  // namespace ember::embedding
