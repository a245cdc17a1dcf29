#include "engine/bundle_delta.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/checksum.h"
#include "core/file.h"
#include "core/json.h"
#include "embedding/checkpoint.h"
#include "embedding/stored_rows.h"
#include "engine/internal/bundle_manifest.h"
#include "engine/internal/bundle_write.h"
#include "engine/training_checkpoint.h"

namespace ember::engine {
namespace {

namespace fs = std::filesystem;
using embedding::Key;
using internal::kEmbeddingDir;
using internal::kRemovedFile;

// Deltas a chain may hold before its full base (a loop of bundles naming
// each other cannot be written, but a hand-edited base_path could).
constexpr int kMaxChain = 10000;

// The first field where two JSON objects differ ("" when equal).
std::string FirstDifference(const Json& a, const Json& b) {
  if (!a.is_object() || !b.is_object()) return a == b ? "" : "(value)";
  for (const auto& [key, value] : a.items()) {
    if (!b.contains(key) || b.at(key) != value) return key;
  }
  for (const auto& [key, value] : b.items()) {
    if (!a.contains(key)) return key;
  }
  return "";
}

Status ReadRemovedKeys(const VerifiedBundle& delta, std::vector<Key>* removed) {
  const std::string path = delta.path + "/" + kRemovedFile;
  EMBER_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  if (bytes.size() % sizeof(Key) != 0) {
    return Status::DataLoss(path, ": ", bytes.size(), " bytes, not a whole number of keys");
  }
  removed->resize(bytes.size() / sizeof(Key));
  std::memcpy(removed->data(), bytes.data(), bytes.size());
  if (static_cast<int64_t>(removed->size()) != delta.delta.removed_rows) {
    return Status::DataLoss(path, ": ", removed->size(), " keys, the manifest lists ",
                            delta.delta.removed_rows);
  }
  return Status::OK();
}

}  // namespace

uint64_t RowPrint(const float* vector, int dim) {
  return FileChecksumOf(FileChecksum::kXxh64, reinterpret_cast<const char*>(vector),
                        static_cast<size_t>(dim) * sizeof(float));
}

Status CheckSameModel(const BundleConfig& base, const BundleConfig& delta) {
  const std::string model = FirstDifference(Json(base.model), Json(delta.model));
  if (!model.empty()) {
    return Status::InvalidArgument("the model's option \"", model, "\" differs from the base's: ",
                                   "a delta changes weights, not the model (write a full bundle)");
  }
  if (base.embedding_dim != delta.embedding_dim || base.table_seed != delta.table_seed ||
      base.init_scale != delta.init_scale ||
      base.missing_keys_read_zero != delta.missing_keys_read_zero) {
    return Status::InvalidArgument("the embedding table (dim, seed, init_scale or admission) ",
                                   "differs from the base's (write a full bundle)");
  }
  if (base.columnar_input != delta.columnar_input ||
      !FirstDifference(Json(base.input), Json(delta.input)).empty()) {
    return Status::InvalidArgument("the input format differs from the base's (write a full "
                                   "bundle)");
  }
  return Status::OK();
}

Result<BundleDeltaRows> ReadBundleDeltaRows(const VerifiedBundle& delta) {
  if (!delta.is_delta()) {
    return Status::InvalidArgument(delta.path, ": a full bundle, not a delta");
  }
  BundleDeltaRows rows;
  const int dim = delta.config.embedding_dim;
  EMBER_ASSIGN_OR_RETURN(const int64_t read,
                         VisitBundleVectors(delta, [&](Key key, const float* vector) {
                           rows.changed.push_back(key);
                           rows.vectors.insert(rows.vectors.end(), vector, vector + dim);
                           return Status::OK();
                         }));
  if (read != delta.delta.changed_rows) {
    return Status::DataLoss(delta.path, "/", kEmbeddingDir, ": ", read,
                            " vectors, the manifest lists ", delta.delta.changed_rows);
  }
  EMBER_RETURN_IF_ERROR(ReadRemovedKeys(delta, &rows.removed));
  return rows;
}

Status ApplyBundleDeltaRows(const BundleDeltaRows& rows, embedding::EmbeddingTable& table) {
  EMBER_RETURN_IF_ERROR(WriteVectorRows(table, rows.changed, rows.vectors.data()));
  return table.stored_rows().EraseRows(rows.removed);
}

Result<BundleRowPrints> ReadBundleRowPrints(const std::string& path) {
  // The chain from `path` down to its full base.
  std::vector<VerifiedBundle> chain;
  EMBER_ASSIGN_OR_RETURN(VerifiedBundle bundle, VerifyBundle(path));
  while (bundle.is_delta()) {
    if (static_cast<int>(chain.size()) == kMaxChain) {
      return Status::FailedPrecondition(path, ": more than ", kMaxChain,
                                        " deltas before a full bundle");
    }
    const VerifiedBundle::Delta named = bundle.delta;
    chain.push_back(std::move(bundle));
    Result<VerifiedBundle> base = VerifyBundle(named.base_path);
    if (!base.ok()) {
      return base.status().WithContext("the base of the delta bundle " + chain.back().path);
    }
    if (base->manifest_hash != named.base_hash) {
      return Status::FailedPrecondition(
          chain.back().path, ": a delta of the bundle ", named.base_hash, " (step ",
          named.base_step, "), but ", named.base_path, " now holds the bundle ",
          base->manifest_hash, " (step ", base->config.step, ")");
    }
    bundle = *std::move(base);
  }
  BundleRowPrints prints;
  const int dim = bundle.config.embedding_dim;
  EMBER_RETURN_IF_ERROR(VisitBundleVectors(bundle, [&](Key key, const float* vector) {
                          prints.rows[key] = RowPrint(vector, dim);
                          return Status::OK();
                        }).status());
  prints.bundle = std::move(bundle);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    EMBER_ASSIGN_OR_RETURN(const BundleDeltaRows rows, ReadBundleDeltaRows(*it));
    for (size_t i = 0; i < rows.changed.size(); ++i) {
      prints.rows[rows.changed[i]] = RowPrint(&rows.vectors[i * dim], dim);
    }
    for (const Key key : rows.removed) prints.rows.erase(key);
    prints.bundle = std::move(*it);
  }
  if (static_cast<int64_t>(prints.rows.size()) != prints.bundle.embedding_rows) {
    return Status::DataLoss(prints.bundle.path, ": its base and deltas hold ", prints.rows.size(),
                            " rows, the manifest lists ", prints.bundle.embedding_rows);
  }
  return prints;
}

Result<BundleRowPrints> RowPrintsOf(embedding::EmbeddingTable& table,
                                    const VerifiedBundle& identity) {
  BundleRowPrints prints;
  prints.bundle = identity;
  const int dim = table.dim();
  EMBER_RETURN_IF_ERROR(table.stored_rows().Scan([&](Key key, const float* row) {
    prints.rows[key] = RowPrint(row, dim);
    return Status::OK();
  }));
  return prints;
}

Status WriteDeltaBundle(const std::string& path, const BundleConfig& config,
                        ops::DenseModel& model, embedding::EmbeddingTable& table,
                        const BundleRowPrints& base, const BundleWriteOptions& options) {
  EMBER_RETURN_IF_ERROR(CheckSameModel(base.bundle.config, config)
                            .WithContext("a delta against " + base.bundle.path));
  const std::string descriptor = DenseStateDescriptor(config.model.name, "none", model.parameters());
  if (descriptor != base.bundle.dense_descriptor) {
    return Status::InvalidArgument("a delta against ", base.bundle.path, ": the dense model's ",
                                   "parameters \"", descriptor, "\" are not the base's \"",
                                   base.bundle.dense_descriptor, "\"");
  }
  EMBER_ASSIGN_OR_RETURN(const internal::BundleTarget t, internal::PrepareTemporary(path));
  const Status status = [&]() -> Status {
    const int dim = table.dim();
    int64_t changed = 0;
    embedding::ServingExportOptions serving;
    serving.step = config.step;
    serving.keep = [&](Key key, const float* vector) {
      const auto it = base.rows.find(key);
      const bool keep = it == base.rows.end() || it->second != RowPrint(vector, dim);
      changed += keep;
      return keep;
    };
    EMBER_RETURN_IF_ERROR(
        embedding::ExportForServing(table, t.temporary + "/" + kEmbeddingDir, serving));
    std::vector<Key> removed;
    const embedding::StoredRows& stored = table.stored_rows();
    for (const auto& [key, print] : base.rows) {
      if (!stored.row_meta(key)) removed.push_back(key);
    }
    std::sort(removed.begin(), removed.end());
    EMBER_RETURN_IF_ERROR(WriteFileAtomic(
        t.temporary + "/" + kRemovedFile,
        std::string(reinterpret_cast<const char*>(removed.data()), removed.size() * sizeof(Key))));
    std::error_code ec;
    const fs::path base_path = fs::absolute(base.bundle.path, ec).lexically_normal();
    internal::DeltaSection delta;
    delta.base_hash = base.bundle.manifest_hash;
    delta.base_step = base.bundle.config.step;
    delta.base_path = ec ? base.bundle.path : base_path.string();
    delta.changed_rows = changed;
    delta.removed_rows = static_cast<int64_t>(removed.size());
    return internal::FinishBundle(t, config, model, table.num_rows(), 1, options, delta);
  }();
  std::error_code ec;
  if (!status.ok()) fs::remove_all(t.temporary, ec);
  return status;
}

}  // namespace ember::engine
