#pragma once

// Delta bundles: what changed in a model since a bundle a ranking service
// already holds, so that the service reloads a few rows instead of the
// whole table.
//
// A delta bundle is a serving bundle directory (engine/bundle.h) of version
// 5 whose manifest has "delta": {base_hash, base_step, base_path,
// changed_rows, removed_rows}. Its dense.bin holds every dense weight (the
// dense half is small and changes everywhere each step), embedding/ the
// vectors of the rows created or changed since the base, removed.bin the
// keys removed since the base (TTL eviction), and embedding.rows the rows of
// base + delta. Every file is checksummed in the manifest as in a full
// bundle, and the write is as atomic.
//
// A delta names its base by the base's manifest_hash (a hash over the
// base's every file hash, so over its content), which may itself be a delta:
// deltas chain, base -> d1 -> d2, each applied to the model the one before it
// left. Applying base + d1 + ... + dk gives the model of dk's step, which
// scores the bits of the full bundle of that step.
//
// Which rows changed: the writer compares each row's vector with the base's
// by an xxh64 fingerprint of its bits (BundleRowPrints), so a row the
// training wrote back unchanged is not sent. Two different vectors with one
// fingerprint (odds about 2^-64 per row) would be taken as unchanged.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "embedding/embedding_table.h"
#include "engine/bundle.h"
#include "ops/dense_model.h"

namespace ember::engine {

// The model a bundle (or a base and its deltas) leaves a service with, as a
// delta's writer compares against it: its identity and a fingerprint of
// every row.
struct BundleRowPrints {
  // The newest bundle of the chain, verified: its manifest_hash is what a
  // delta on top names as its base; its config is the model's.
  VerifiedBundle bundle;
  // key -> xxh64 of the row's dim float32 bits.
  std::unordered_map<embedding::Key, uint64_t> rows;
};

// The fingerprint of one row's vector (dim floats).
uint64_t RowPrint(const float* vector, int dim);

// The prints of the bundle at `path`: a full bundle's rows, or a delta's
// base (at its base_path, read the same way) with the delta applied.
// VerifyBundle's errors; FailedPrecondition when a delta's base_path holds
// another bundle than the one it names (naming both hashes), or the chain is
// longer than 10000; DataLoss when the rows do not add up to the manifest's.
Result<BundleRowPrints> ReadBundleRowPrints(const std::string& path);

// The prints of `table`'s rows now, as the bundle `identity` would hold them
// (a trainer that has just written the bundle `identity` of its table).
Result<BundleRowPrints> RowPrintsOf(embedding::EmbeddingTable& table,
                                    const VerifiedBundle& identity);

// OK when `delta`'s model (the options the dense graph is built from, the
// embedding's dim, seed, init_scale and missing keys, and the input format)
// is `base`'s; InvalidArgument naming the field otherwise: a delta cannot
// change the model, only its weights.
Status CheckSameModel(const BundleConfig& base, const BundleConfig& delta);

// Writes at `path` the delta bundle of `model` and `table` against `base`
// (see the top of this file): the rows whose prints differ from or are
// missing in the base's, the base's keys `table` no longer holds, and every
// dense weight. `base.bundle.path` is recorded as base_path. Errors as
// WriteBundle's, and CheckSameModel's for a model that is not the base's.
// REQUIRES: the table is quiescent, as for WriteBundle.
Status WriteDeltaBundle(const std::string& path, const BundleConfig& config,
                        ops::DenseModel& model, embedding::EmbeddingTable& table,
                        const BundleRowPrints& base, const BundleWriteOptions& options = {});

// A delta bundle's rows, read and checked, ready to apply.
struct BundleDeltaRows {
  std::vector<embedding::Key> changed;
  std::vector<float> vectors;  // changed.size() x dim
  std::vector<embedding::Key> removed;
};

// Reads the rows of the delta bundle `delta` (verified). InvalidArgument for
// a full bundle; DataLoss naming the file when the counts differ from the
// manifest's or removed.bin is not whole keys.
Result<BundleDeltaRows> ReadBundleDeltaRows(const VerifiedBundle& delta);

// Writes the changed rows into `table` and erases the removed keys. The
// table's errors.
Status ApplyBundleDeltaRows(const BundleDeltaRows& rows, embedding::EmbeddingTable& table);

}  // namespace ember::engine
