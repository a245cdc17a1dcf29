#pragma once

// The steps every writer of a bundle shares (engine/bundle.cc: full and
// sharded bundles; engine/bundle_delta.cc: delta bundles). Internal to
// engine/.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "core/status.h"
#include "engine/bundle.h"
#include "engine/internal/bundle_manifest.h"
#include "ops/dense_model.h"

namespace ember::engine::internal {

// Where a bundle at `path` is written before it is committed.
struct BundleTarget {
  std::filesystem::path target;
  std::string parent;
  std::string temporary;
};

// Checks `path` (see WriteBundle), removes what crashed writes of it left,
// and makes the temporary directory beside it.
Result<BundleTarget> PrepareTemporary(const std::string& path);

// Writes dense.bin and the manifest (last; version 5 with `delta`) into
// t.temporary, whose embedding/ (and a delta's removed.bin) is written,
// then commits it at t.target (see the top of engine/bundle.h).
Status FinishBundle(const BundleTarget& t, const BundleConfig& config, ops::DenseModel& model,
                    int64_t rows, int shards, const BundleWriteOptions& options,
                    const std::optional<DeltaSection>& delta);

}  // namespace ember::engine::internal
