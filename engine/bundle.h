#pragma once

// Serving bundles: a trained model as a scorer needs it, with nothing of the
// training (no optimizer state, no row metadata) and nothing to repeat by
// hand (the model's configuration, how keys were hashed and how input was
// read travel with it).
//
// A bundle is a directory:
//
//   MANIFEST.json      what the bundle is (below); written last
//   dense.bin          the dense weights: every parameter's values, in the
//                      model's parameters() order, as little-endian float32
//   embedding/         the embedding vectors as ExportForServing writes them
//                      (embedding/checkpoint.h): its own MANIFEST and
//                      vectors-NNNNN.bin files; in a job of ranks' bundle
//                      one such export per rank, shard-RRRRR/
//
// MANIFEST.json fields: format ("ember-serving-bundle"), version
// (kBundleVersion), step (training steps behind the model), model (the
// ModelOptions the zoo builds the dense graph from: name, num_dense,
// num_slots, num_tasks, embedding_dim, top_mlp, the model's own parameters
// (bottom_mlp for dlrm, ...), seed, precision, cpu_row_shards),
// embedding (dim, seed, init_scale, missing_keys: "initial" when a key
// without a row reads as its (seed, key) initial row, "zeros" when admission
// was on, rows), input (how training read its input: the io::FormatSpec
// fields, format "columnar" for columnar files, and slot_bits, with which
// raw values are hashed into keys), dense (descriptor and parameter_floats,
// the float count of each parameter), files ([{name, bytes, hash}] for every
// file of the bundle but MANIFEST.json, the hash the 16-hex-digit checksum
// of its bytes), checksum (core/checksum.h: "xxh64"; absent in version 1,
// whose hashes are "fnv1a64-words") and last manifest_hash, the checksum of
// the manifest's text up to that field (that text closed with "\n}").
//
// Atomicity: a bundle is written into a temporary directory beside it
// (<parent>/.tmp-<name>-<pid>), every file fsynced, MANIFEST.json last, then
// renamed to its name (an earlier bundle there is swapped out atomically and
// removed): the bundle appears whole or not at all. A crash leaves the
// temporary directory, which the next write of that bundle removes.
//
// Loading checks the manifest (format, version, hash) and every listed
// file's size and hash before anything is used: a corrupted, truncated or
// partly written bundle is refused with DataLoss naming the file.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/status.h"
#include "embedding/embedding_table.h"
#include "engine/model_options.h"
#include "engine/train_options.h"
#include "io/format_spec.h"
#include "ops/dense_model.h"

namespace ember::engine {

inline constexpr char kBundleFormat[] = "ember-serving-bundle";
// 2: "checksum" names the hash of the files and the manifest (xxh64); a
// bundle of version 1 has none and hashes with fnv1a64-words, and is read
// too. (A reader of version 1 would take xxh64 hashes for damage.)
// 3: the model's options hold only its own parameters (ModelSpec::params),
// where versions 1 and 2 held every model's; both are read too. (A reader
// of version 2 would miss the other models' fields.)
// 4: a job of ranks' bundle, embedding/ holding one export per rank
// (embedding.shards; WriteShardedBundle). An unsharded bundle is still
// written as version 3.
// 5: a delta bundle (engine/bundle_delta.h), with "delta" naming its base.
// Full bundles are still written as versions 3 and 4. (A reader of version
// 4 would take a delta's few rows for the whole table.)
inline constexpr int kBundleVersion = 5;
inline constexpr char kBundleManifest[] = "MANIFEST.json";

// What a bundle says about its model: everything needed to rebuild the
// dense graph, read embedding rows as training did, and read input as
// training did.
struct BundleConfig {
  // The dense model's options; `device` is not recorded (a bundle scores on
  // the CPU).
  ModelOptions model;
  // The embedding table's dim, and what a key without a row reads as: its
  // (table_seed, key) initial row, drawn from [-init_scale, init_scale]
  // (<= 0: 1/sqrt(dim)), or zeros when training admitted keys
  // (AdmissionOptions), as EmbeddingTable::Lookup reads them.
  int embedding_dim = 16;
  uint64_t table_seed = 0;
  float init_scale = 0.0f;
  bool missing_keys_read_zero = false;
  // How training read its input: the text format (its slot_bits hashes raw
  // values into keys), or columnar files (already keys; columnar_input).
  io::FormatSpec input;
  bool columnar_input = false;
  // Training steps behind the model.
  int64_t step = 0;
};

// The BundleConfig of a model trained with `options` (as Trainer::Create
// filled them in) on input read with `input` (or columnar files).
BundleConfig BundleConfigOf(const TrainOptions& options, const io::FormatSpec& input,
                            bool columnar_input, int64_t step);

struct BundleWriteOptions {
  // Test seam: called with the temporary directory once everything is
  // written and fsynced, just before the rename that commits the bundle; an
  // error stops the write there (a crash at the last moment).
  std::function<Status(const std::string& temporary_dir)> before_commit;
};

// Writes the bundle of `model` (its parameter values) and `table` (its
// vectors) at the directory `path` (see the top of this file). InvalidArgument
// if `path` is empty, its parent directory does not exist, or it names an
// existing directory that is neither empty nor a bundle; IOError naming the
// file on a write failure; the model's and the table's errors. On failure
// nothing at `path` changes. REQUIRES: the table is quiescent (no Pull, Push
// or Lookup meanwhile), as for a checkpoint.
Status WriteBundle(const std::string& path, const BundleConfig& config, ops::DenseModel& model,
                   embedding::EmbeddingTable& table, const BundleWriteOptions& options = {});

// The bundle of a job of ranks, each rank writing the rows it holds, with no
// gather: embedding/ holds shard-RRRRR (ExportForServing of rank R's `rows`,
// its local rows of the sharded table), rank 0 writes dense.bin (every
// rank's model is the same) and the manifest, which lists every shard's files
// with their hashes and "embedding": {"shards": N}, last, then commits as
// WriteBundle does. Loaded, it scores the bits of the gathered table's
// bundle. A collective over `comm` (every rank calls it with the same path);
// the temporary directory beside `path` must be one that every rank sees
// (one host, or a shared file system). Every rank returns the same status
// (a rank's failure names it); on failure nothing at `path` changes.
Status WriteShardedBundle(const std::string& path, const BundleConfig& config,
                          ops::DenseModel& model, embedding::EmbeddingTable& rows,
                          Communicator& comm, const BundleWriteOptions& options = {});

// A bundle's manifest, once every file it lists has been checked.
struct VerifiedBundle {
  std::string path;
  BundleConfig config;
  // The dense state descriptor and the float count of every parameter.
  std::string dense_descriptor;
  std::vector<int64_t> parameter_floats;
  int64_t embedding_rows = 0;
  // 1, or the ranks of the job whose bundle it is (embedding/shard-RRRRR).
  int embedding_shards = 1;
  // The manifest's hash: what a delta bundle names its base by.
  std::string manifest_hash;
  // A delta bundle's base (engine/bundle_delta.h): its manifest_hash, step
  // and where it was; empty base_hash for a full bundle. embedding/ then
  // holds the rows changed since the base, removed.bin the keys removed,
  // and embedding_rows counts the rows of base + delta.
  struct Delta {
    std::string base_hash;
    int64_t base_step = 0;
    std::string base_path;
    int64_t changed_rows = 0;
    int64_t removed_rows = 0;
  };
  Delta delta;
  bool is_delta() const { return !delta.base_hash.empty(); }
};

// Reads `path`/MANIFEST.json and checks the format, the version, the
// manifest's hash and every listed file's size and hash. NotFound if `path`
// or its manifest does not exist (naming it: a partly written bundle has
// none); DataLoss naming the file for a malformed or edited manifest, a
// missing, short or altered file; InvalidArgument for another format or a
// version this Ember does not read.
Result<VerifiedBundle> VerifyBundle(const std::string& path);

// Loads the dense weights of `bundle` into `model` (on the CPU), checking
// the parameters' count and sizes against the manifest. DataLoss naming
// dense.bin when they differ or the file cannot be read as listed.
Status LoadBundleDense(const VerifiedBundle& bundle, ops::DenseModel& model);
// The same from dense.bin's bytes, read earlier (ReadBundleDense).
Result<std::string> ReadBundleDense(const VerifiedBundle& bundle);
Status LoadBundleDenseBytes(const VerifiedBundle& bundle, const std::string& bytes,
                            ops::DenseModel& model);

// Writes the embedding vectors of `bundle` into `table` (of the bundle's
// dim). Errors of ReadServingExport (DataLoss naming the file) and of the
// table; InvalidArgument for a delta bundle (engine/bundle_delta.h: apply
// it to its base).
Status LoadBundleEmbedding(const VerifiedBundle& bundle, embedding::EmbeddingTable& table);

// Calls `visit` with every vector of `bundle`'s embedding/ (a full bundle's
// every row, shard after shard; a delta's changed rows) and returns their
// count. ReadServingExport's errors.
Result<int64_t> VisitBundleVectors(
    const VerifiedBundle& bundle,
    const std::function<Status(embedding::Key key, const float* vector)>& visit);

// Writes whole rows of `keys` into `table` from their dim-float `vectors`
// (keys.size() x dim), as a scorer's table stores them (the vector, then
// zeros for the optimizer state and metadata a scorer never reads).
Status WriteVectorRows(embedding::EmbeddingTable& table, const std::vector<embedding::Key>& keys,
                       const float* vectors);

// The options of an in-memory table that reads keys as the bundle's
// training table did (Lookup): the bundle's dim, seed and init_scale, and
// admission on when missing keys read as zeros.
embedding::EmbeddingTableOptions ServingTableOptions(const BundleConfig& config);

}  // namespace ember::engine
