#include "engine/bundle.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/file.h"
#include "engine/internal/bundle_manifest.h"
#include "engine/training_checkpoint.h"
#include "embedding/checkpoint.h"

namespace ember::engine {
namespace {

namespace fs = std::filesystem;
using internal::CheckFiles;
using internal::kDenseFile;
using internal::kEmbeddingDir;
using internal::Manifest;
using internal::ParseManifest;
using internal::ShardDir;

// Keys per WriteRows call while loading the embedding vectors.
constexpr int64_t kLoadBatchRows = 16384;

}  // namespace

Result<VerifiedBundle> VerifyBundle(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    return Status::NotFound(path, ": no such bundle directory");
  }
  const std::string manifest = path + "/" + kBundleManifest;
  Result<std::string> text = ReadFile(manifest);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return Status::NotFound(manifest, ": missing (not a serving bundle, or one whose write "
                                        "did not finish)");
    }
    return text.status();
  }
  FileChecksum checksum = FileChecksum::kXxh64;
  EMBER_ASSIGN_OR_RETURN(const Manifest read, ParseManifest(manifest, *text, &checksum));
  EMBER_RETURN_IF_ERROR(CheckFiles(path, manifest, read.files, checksum));
  VerifiedBundle bundle;
  bundle.path = path;
  BundleConfig& c = bundle.config;
  c.model = read.model;
  c.embedding_dim = read.embedding.dim;
  c.table_seed = read.embedding.seed;
  c.init_scale = read.embedding.init_scale;
  c.missing_keys_read_zero = read.embedding.missing_keys_read_zero;
  c.input = read.input.spec;
  c.columnar_input = read.input.columnar;
  c.step = read.step;
  bundle.dense_descriptor = read.dense.descriptor;
  bundle.parameter_floats = read.dense.parameter_floats;
  bundle.embedding_rows = read.embedding.rows;
  bundle.embedding_shards = read.embedding.shards;
  bundle.manifest_hash = read.manifest_hash;
  if (read.delta) {
    if (read.delta->base_hash.empty()) {
      return Status::DataLoss(manifest, ": delta.base_hash is empty");
    }
    bundle.delta = *read.delta;
  }
  return bundle;
}

Result<std::string> ReadBundleDense(const VerifiedBundle& bundle) {
  return ReadFile(bundle.path + "/" + kDenseFile);
}

Status LoadBundleDenseBytes(const VerifiedBundle& bundle, const std::string& bytes,
                            ops::DenseModel& model) {
  const std::string path = bundle.path + "/" + kDenseFile;
  const std::vector<Parameter*> parameters = model.parameters();
  const std::string descriptor = DenseStateDescriptor(bundle.config.model.name, "none", parameters);
  if (descriptor != bundle.dense_descriptor ||
      parameters.size() != bundle.parameter_floats.size()) {
    return Status::DataLoss(path, ": holds the parameters of \"", bundle.dense_descriptor,
                            "\", the bundle's model has \"", descriptor, "\"");
  }
  int64_t offset = 0;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const int64_t floats = parameters[i]->value.numel();
    const int64_t size = floats * static_cast<int64_t>(sizeof(float));
    if (floats != bundle.parameter_floats[i] ||
        offset + size > static_cast<int64_t>(bytes.size())) {
      return Status::DataLoss(path, ": parameter ", i, " does not fit the file");
    }
    std::memcpy(parameters[i]->value.data<float>(), bytes.data() + offset, size);
    offset += size;
  }
  if (offset != static_cast<int64_t>(bytes.size())) {
    return Status::DataLoss(path, ": ", bytes.size() - offset, " bytes after the parameters");
  }
  return Status::OK();
}

Status LoadBundleDense(const VerifiedBundle& bundle, ops::DenseModel& model) {
  EMBER_ASSIGN_OR_RETURN(const std::string bytes, ReadBundleDense(bundle));
  return LoadBundleDenseBytes(bundle, bytes, model);
}

Status WriteVectorRows(embedding::EmbeddingTable& table, const std::vector<embedding::Key>& keys,
                       const float* vectors) {
  embedding::StoredRows& stored = table.stored_rows();
  const int64_t row_floats = stored.row_floats();
  const int dim = table.dim();
  std::vector<float> rows(std::min<size_t>(keys.size(), kLoadBatchRows) * row_floats, 0.0f);
  std::vector<embedding::Key> batch;
  for (size_t begin = 0; begin < keys.size(); begin += kLoadBatchRows) {
    const size_t end = std::min<size_t>(keys.size(), begin + kLoadBatchRows);
    batch.assign(keys.begin() + begin, keys.begin() + end);
    for (size_t i = begin; i < end; ++i) {
      std::memcpy(&rows[(i - begin) * row_floats], vectors + i * dim, dim * sizeof(float));
    }
    EMBER_RETURN_IF_ERROR(stored.WriteRows(batch, rows.data()));
  }
  return Status::OK();
}

Result<int64_t> VisitBundleVectors(
    const VerifiedBundle& bundle,
    const std::function<Status(embedding::Key key, const float* vector)>& visit) {
  // One export, or a job of ranks' shards one after the other (their keys
  // are disjoint: each rank wrote the rows it owned).
  int64_t read = 0;
  const std::string dir = bundle.path + "/" + kEmbeddingDir;
  for (int shard = 0; shard < bundle.embedding_shards; ++shard) {
    const std::string from = bundle.embedding_shards > 1 ? dir + "/" + ShardDir(shard) : dir;
    EMBER_ASSIGN_OR_RETURN(const int64_t got, embedding::ReadServingExport(from, visit));
    read += got;
  }
  return read;
}

Status LoadBundleEmbedding(const VerifiedBundle& bundle, embedding::EmbeddingTable& table) {
  if (bundle.is_delta()) {
    return Status::InvalidArgument(bundle.path, ": a delta bundle (of the bundle of step ",
                                   bundle.delta.base_step, " at ", bundle.delta.base_path,
                                   "): open its base, then apply it (Scorer::ApplyDelta)");
  }
  const int dim = table.dim();
  std::vector<embedding::Key> keys;
  std::vector<float> vectors;
  const auto flush = [&]() -> Status {
    EMBER_RETURN_IF_ERROR(WriteVectorRows(table, keys, vectors.data()));
    keys.clear();
    vectors.clear();
    return Status::OK();
  };
  EMBER_ASSIGN_OR_RETURN(
      const int64_t read,
      VisitBundleVectors(bundle, [&](embedding::Key key, const float* vector) -> Status {
        keys.push_back(key);
        vectors.insert(vectors.end(), vector, vector + dim);
        if (static_cast<int64_t>(keys.size()) == kLoadBatchRows) return flush();
        return Status::OK();
      }));
  EMBER_RETURN_IF_ERROR(flush());
  if (read != bundle.embedding_rows) {
    return Status::DataLoss(bundle.path, "/", kEmbeddingDir, ": ", read,
                            " vectors, the bundle's manifest lists ", bundle.embedding_rows);
  }
  return Status::OK();
}

embedding::EmbeddingTableOptions ServingTableOptions(const BundleConfig& config) {
  embedding::EmbeddingTableOptions options;
  options.dim = config.embedding_dim;
  options.seed = config.table_seed;
  options.init_scale = config.init_scale;
  // SGD keeps no per-row state: a row is its vector and its metadata.
  options.optimizer.type = embedding::SparseOptimizer::kSgd;
  if (config.missing_keys_read_zero) {
    // Lookup reads a key without a row as zeros whenever admission is on;
    // probability admission keeps no state of its own.
    options.admission.kind = embedding::AdmissionOptions::Kind::kProbability;
  }
  return options;
}

}  // namespace ember::engine
