// NewRocksDbTier: the disk tier, a RocksDB database of fixed-size rows.
//
// Layout: rows live in the default column family under their key encoded as 8
// big-endian bytes, so that RocksDB's bytewise order is the numeric order of
// keys (MultiGet takes sorted input, Scan visits keys in increasing order).
// A second column family, "ember_meta", records the row size under
// "row_bytes" (decimal), so that reopening with another row size is refused
// rather than read as garbage.
//
// Tuning: the tier serves batched point lookups of rows of a few hundred bytes,
// many of them misses (a key seen for the first time is in no tier), and
// absorbs write-back of evicted rows in large batches. MakeRowOptions and
// MakeDbOptions say, option by option, why each value is chosen.

#include "embedding/rocksdb_tier.h"

#include <glog/logging.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/snapshot.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/crash_point.h"
#include "core/file.h"

namespace ember::embedding {
namespace {

constexpr char kMetaColumnFamily[] = "ember_meta";
constexpr char kRowBytesKey[] = "row_bytes";
// Present in a tier's directory while its database is being created; see
// CreateTierDatabase.
constexpr char kCreatingMarker[] = "EMBER_TIER_CREATING";
constexpr int kKeyBytes = 8;
constexpr int64_t kMinBlockCacheBytes = int64_t{1} << 20;
constexpr int64_t kMinWriteBufferBytes = int64_t{1} << 20;
// Keys per MultiGet call. Each value pins its data block in the cache until
// it is copied out, so a bounded chunk bounds the memory a huge Get pins
// (4096 x 4 KiB blocks at most) while keeping RocksDB's batching benefits.
constexpr size_t kMultiGetChunkKeys = 4096;

void EncodeKey(Key key, char* out) {
  for (int i = kKeyBytes - 1; i >= 0; --i) {
    out[i] = static_cast<char>(key & 0xff);
    key >>= 8;
  }
}

Key DecodeKey(const char* in) {
  Key key = 0;
  for (int i = 0; i < kKeyBytes; ++i) key = (key << 8) | static_cast<unsigned char>(in[i]);
  return key;
}

// Every RocksDB failure, named by the database and the operation. Corruption
// is DataLoss (the data is gone, retrying will not help); the rest IOError.
Status FromRocksDb(const rocksdb::Status& status, const std::string& path, const char* operation) {
  if (status.IsCorruption()) {
    return Status::DataLoss(path, ": RocksDB ", operation, ": ", status.ToString());
  }
  return Status::IOError(path, ": RocksDB ", operation, ": ", status.ToString());
}

rocksdb::ColumnFamilyOptions MakeRowOptions(const RocksDbTierOptions& options) {
  rocksdb::BlockBasedTableOptions table;
  // One LRU cache for data, index and filter blocks, sized by the caller, so
  // that the tier's memory is bounded by one number.
  table.block_cache = rocksdb::NewLRUCache(static_cast<size_t>(options.block_cache_bytes));
  table.cache_index_and_filter_blocks = true;
  // ...but index and filter blocks are evicted last (they serve every lookup
  // of their file), and those of L0, the files every lookup probes, never.
  table.cache_index_and_filter_blocks_with_high_priority = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  // Small blocks: a point lookup reads (and caches) one block, so 4 KiB reads
  // little beyond the row it needs; larger blocks only pay off for scans.
  table.block_size = 4 << 10;
  // A hash index inside each data block finds a key without binary search over
  // restart points: cheaper point lookups for ~1% more space.
  table.data_block_index_type = rocksdb::BlockBasedTableOptions::kDataBlockBinaryAndHash;
  table.data_block_hash_table_util_ratio = 0.75;
  // Full (whole-key) Bloom filters at 10 bits per key, ~1% false positives:
  // a lookup of an absent key, which is common here, skips almost every file
  // without reading a data block. Prefixes are meaningless for hashed ids.
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10, /*use_block_based_builder=*/false));
  table.whole_key_filtering = true;
  // Sizes filters to the allocator's size classes: less waste in the cache.
  table.optimize_filters_for_memory = true;
  // Partitioned index and filters: a file's index and filter are split into
  // 4 KiB partitions under a small top-level index that stays pinned. With
  // whole-file blocks, every flush and compaction output (rows are rewritten
  // all the time here) brought index and filter blocks of hundreds of KiB
  // that pushed each other out of a small cache and were read back, and
  // checksummed, whole for a single lookup: that was a large share of the
  // tier's read time. Partitions keep what a lookup reads small and the
  // cache's bound meaningful whatever the table's size.
  table.index_type = rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch;
  table.partition_filters = true;
  table.metadata_block_size = 4 << 10;
  table.pin_top_level_index_and_filter = true;

  rocksdb::ColumnFamilyOptions rows;
  rows.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  // Rows are float weights and optimizer state, whose mantissas are close to
  // random bytes: compression saves little space and costs CPU on every block
  // read that misses the cache, so no level is compressed.
  rows.compression = rocksdb::kNoCompression;
  rows.bottommost_compression = rocksdb::kNoCompression;
  // Keep the Bloom filters of the last level too (the default, said here on
  // purpose): optimize_filters_for_hits drops them to save memory, which only
  // pays when nearly every lookup finds its key. Here misses are frequent and
  // would each cost an index and a data block read on the largest level.
  rows.optimize_filters_for_hits = false;
  // A Bloom filter over the memtable, so that misses skip the skiplist search.
  rows.memtable_whole_key_filtering = true;
  rows.memtable_prefix_bloom_size_ratio = 0.02;
  // One memtable fills while the other is flushed; rows arrive in large
  // write-back batches, so a big buffer means fewer, larger L0 files.
  rows.write_buffer_size = static_cast<size_t>(options.write_buffer_bytes);
  rows.max_write_buffer_number = 2;
  // Level sizes follow the data from the last level up, which keeps space
  // amplification near 1.1x whatever the table size (rows are overwritten
  // often, so stale versions would otherwise pile up in the middle levels).
  rows.level_compaction_dynamic_level_bytes = true;
  // Hashed keys spread every memtable over the whole key range, so each L0 ->
  // base-level compaction rewrites the whole base level: compacting after 16
  // L0 files instead of 4 quarters that rewriting, for 12 more L0 files
  // whose pinned filters a lookup checks. Measured: 8 instead of 4 took about
  // a quarter less CPU per row read and written at a 10% budget; 16 instead
  // of 8 another ~14% less CPU for a whole `ember train` at a 10% budget
  // (issue 38: 38 vs 45 CPU-seconds, means of 3 and 5 runs). The lookups
  // that check every L0 filter, those of keys the disk does not hold, mostly
  // no longer reach the tier: the tiered table filters them out first. The
  // write slowdown and stop triggers stay well above it.
  rows.level0_file_num_compaction_trigger = 16;
  rows.level0_slowdown_writes_trigger = 40;
  rows.level0_stop_writes_trigger = 60;
  return rows;
}

rocksdb::ColumnFamilyOptions MakeMetaOptions() {
  rocksdb::ColumnFamilyOptions meta;
  // One tiny record: a small memtable keeps it from reserving 64 MiB.
  meta.write_buffer_size = 64 << 10;
  return meta;
}

rocksdb::DBOptions MakeDbOptions(const RocksDbTierOptions& options) {
  rocksdb::DBOptions db;
  db.create_if_missing = options.create_if_missing;
  db.create_missing_column_families = options.create_if_missing;
  db.error_if_exists = options.error_if_exists;
  // Flushes and compactions run in the background; compaction keeps up with
  // write-back only with a few threads.
  db.max_background_jobs = options.max_background_jobs;
  // Write SST files back to disk incrementally instead of in bursts that
  // stall foreground reads.
  db.bytes_per_sync = 1 << 20;
  // RocksDB's own LOG files: enough to debug, bounded on disk.
  db.keep_log_file_num = 4;
  // With the write-ahead log off, closing the database must flush the
  // memtables or rows written since the last Flush() are lost on a clean
  // shutdown too (false is the default; said here because it matters).
  db.avoid_flush_during_shutdown = false;
  return db;
}

Status ValidateOptions(const RocksDbTierOptions& options) {
  if (options.path.empty()) return Status::InvalidArgument("RocksDB tier: path is empty");
  EMBER_RETURN_IF_ERROR(
      ValidateTierRowBytes(options.row_bytes).WithContext("RocksDB tier " + options.path));
  if (options.block_cache_bytes < kMinBlockCacheBytes) {
    return Status::InvalidArgument("RocksDB tier ", options.path,
                                   ": block_cache_bytes must be >= ", kMinBlockCacheBytes, ", got ",
                                   options.block_cache_bytes);
  }
  if (options.write_buffer_bytes < kMinWriteBufferBytes) {
    return Status::InvalidArgument("RocksDB tier ", options.path,
                                   ": write_buffer_bytes must be >= ", kMinWriteBufferBytes,
                                   ", got ", options.write_buffer_bytes);
  }
  if (options.max_background_jobs < 1) {
    return Status::InvalidArgument("RocksDB tier ", options.path,
                                   ": max_background_jobs must be >= 1, got ",
                                   options.max_background_jobs);
  }
  return Status::OK();
}

// Thread safety: all public methods may be called concurrently; rocksdb::DB
// is thread-safe and the tier keeps no other mutable state.
class RocksDbTier : public Tier {
 public:
  // Takes ownership of `db` and of the handles of the row and meta column
  // families.
  RocksDbTier(std::string path, int64_t row_bytes, bool use_write_ahead_log, rocksdb::DB* db,
              rocksdb::ColumnFamilyHandle* rows_cf, rocksdb::ColumnFamilyHandle* meta_cf)
      : path_(std::move(path)),
        row_bytes_(row_bytes),
        db_(db),
        rows_cf_(rows_cf),
        meta_cf_(meta_cf) {
    write_options_.disableWAL = !use_write_ahead_log;
  }
  RocksDbTier(const RocksDbTier&) = delete;
  RocksDbTier& operator=(const RocksDbTier&) = delete;

  ~RocksDbTier() override {
    for (rocksdb::ColumnFamilyHandle* handle : {rows_cf_, meta_cf_}) {
      rocksdb::Status status = db_->DestroyColumnFamilyHandle(handle);
      LOG_IF(WARNING, !status.ok()) << FromRocksDb(status, path_, "closing a column family");
    }
    rocksdb::Status status = db_->Close();
    LOG_IF(WARNING, !status.ok()) << FromRocksDb(status, path_, "close");
  }

  int64_t row_bytes() const override { return row_bytes_; }

  // Checks the recorded row size against row_bytes_, recording it (durably)
  // if the database has none yet, i.e. was just created.
  Status CheckOrRecordRowBytes();

  Status Get(const std::vector<Key>& keys, char* out, std::vector<int64_t>* missing) override;
  Status Put(const std::vector<Key>& keys, const char* rows) override;
  Status Delete(const std::vector<Key>& keys) override;
  Result<int64_t> ApproximateCount() override;
  Status Flush() override;
  Status Scan(const RowVisitor& visit) override;

 private:
  Status WrongRowSize(const rocksdb::Slice& key, size_t size) const {
    return Status::DataLoss(path_, ": row of key ", DecodeKey(key.data()), " has ", size,
                            " bytes, expected ", row_bytes_);
  }

  const std::string path_;
  const int64_t row_bytes_;
  rocksdb::WriteOptions write_options_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* const rows_cf_;  // owned; destroyed before db_
  rocksdb::ColumnFamilyHandle* const meta_cf_;  // owned; destroyed before db_
};

Status RocksDbTier::CheckOrRecordRowBytes() {
  std::string value;
  rocksdb::Status status = db_->Get(rocksdb::ReadOptions(), meta_cf_, kRowBytesKey, &value);
  if (status.IsNotFound()) {
    status = db_->Put(write_options_, meta_cf_, kRowBytesKey, std::to_string(row_bytes_));
    if (!status.ok()) return FromRocksDb(status, path_, "recording the row size");
    // Flushed at once, with or without the log: a tier on disk always knows
    // its row size.
    status = db_->Flush(rocksdb::FlushOptions(), meta_cf_);
    if (!status.ok()) return FromRocksDb(status, path_, "flushing the row size");
    return Status::OK();
  }
  if (!status.ok()) return FromRocksDb(status, path_, "reading the row size");
  int64_t recorded = 0;
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), recorded);
  if (error != std::errc() || end != value.data() + value.size()) {
    return Status::DataLoss(path_, ": recorded row size '", value, "' is not a number");
  }
  if (recorded != row_bytes_) {
    return Status::InvalidArgument(path_, ": the tier holds rows of ", recorded,
                                   " bytes, but row_bytes is ", row_bytes_);
  }
  return Status::OK();
}

Status RocksDbTier::Get(const std::vector<Key>& keys, char* out, std::vector<int64_t>* missing) {
  missing->clear();
  if (keys.empty()) return Status::OK();
  // MultiGet is fastest on sorted keys (one pass down each level's files);
  // `order` maps sorted position -> index into `keys`.
  std::vector<int64_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  if (!std::is_sorted(keys.begin(), keys.end())) {
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  }
  std::vector<char> encoded(keys.size() * kKeyBytes);
  for (size_t i = 0; i < keys.size(); ++i) EncodeKey(keys[order[i]], &encoded[i * kKeyBytes]);

  rocksdb::ReadOptions read;
  // Rows are read back often and blocks come from the OS page cache; block
  // checksums are verified by compaction, which reads every block anyway.
  read.verify_checksums = false;
  // Chunks must read one view of the database (Get is atomic w.r.t. Put).
  std::optional<rocksdb::ManagedSnapshot> snapshot;
  if (keys.size() > kMultiGetChunkKeys) {
    snapshot.emplace(db_.get());
    read.snapshot = snapshot->snapshot();
  }
  const size_t chunk_keys = std::min(keys.size(), kMultiGetChunkKeys);
  std::vector<rocksdb::Slice> slices(chunk_keys);
  std::vector<rocksdb::PinnableSlice> values(chunk_keys);
  std::vector<rocksdb::Status> statuses(chunk_keys);
  for (size_t begin = 0; begin < keys.size(); begin += chunk_keys) {
    const size_t n = std::min(chunk_keys, keys.size() - begin);
    for (size_t j = 0; j < n; ++j)
      slices[j] = rocksdb::Slice(&encoded[(begin + j) * kKeyBytes], kKeyBytes);
    db_->MultiGet(read, rows_cf_, n, slices.data(), values.data(), statuses.data(),
                  /*sorted_input=*/true);
    for (size_t j = 0; j < n; ++j) {
      const int64_t index = order[begin + j];
      if (statuses[j].ok()) {
        if (values[j].size() != static_cast<size_t>(row_bytes_)) {
          return WrongRowSize(slices[j], values[j].size());
        }
        std::memcpy(out + index * row_bytes_, values[j].data(), row_bytes_);
      } else if (statuses[j].IsNotFound()) {
        missing->push_back(index);
      } else {
        return FromRocksDb(statuses[j], path_, "MultiGet");
      }
      values[j].Reset();  // unpins the block
    }
  }
  std::sort(missing->begin(), missing->end());
  return Status::OK();
}

Status RocksDbTier::Put(const std::vector<Key>& keys, const char* rows) {
  if (keys.empty()) return Status::OK();
  // One WriteBatch per call: RocksDB applies it atomically.
  rocksdb::WriteBatch batch(keys.size() * (kKeyBytes + row_bytes_ + 16));
  // In key order: the memtable's skip list then inserts each key next to the
  // one before (its splice hint) instead of searching from the top. Stable,
  // so that a repeated key's last row still comes last and wins.
  std::vector<size_t> order(keys.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (!std::is_sorted(keys.begin(), keys.end())) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  }
  char encoded[kKeyBytes];
  for (size_t i : order) {
    EncodeKey(keys[i], encoded);
    rocksdb::Status status =
        batch.Put(rows_cf_, rocksdb::Slice(encoded, kKeyBytes),
                  rocksdb::Slice(rows + i * row_bytes_, static_cast<size_t>(row_bytes_)));
    if (!status.ok()) return FromRocksDb(status, path_, "WriteBatch::Put");
  }
  rocksdb::Status status = db_->Write(write_options_, &batch);
  if (!status.ok()) return FromRocksDb(status, path_, "write of rows");
  return Status::OK();
}

Status RocksDbTier::Delete(const std::vector<Key>& keys) {
  if (keys.empty()) return Status::OK();
  rocksdb::WriteBatch batch(keys.size() * (kKeyBytes + 16));
  char encoded[kKeyBytes];
  for (Key key : keys) {
    EncodeKey(key, encoded);
    rocksdb::Status status = batch.Delete(rows_cf_, rocksdb::Slice(encoded, kKeyBytes));
    if (!status.ok()) return FromRocksDb(status, path_, "WriteBatch::Delete");
  }
  rocksdb::Status status = db_->Write(write_options_, &batch);
  if (!status.ok()) return FromRocksDb(status, path_, "write of deletions");
  return Status::OK();
}

Result<int64_t> RocksDbTier::ApproximateCount() {
  uint64_t count = 0;
  if (!db_->GetIntProperty(rows_cf_, rocksdb::DB::Properties::kEstimateNumKeys, &count)) {
    return Status::IOError(path_, ": RocksDB property ", rocksdb::DB::Properties::kEstimateNumKeys,
                           " is unavailable");
  }
  return static_cast<int64_t>(count);
}

Status RocksDbTier::Flush() {
  rocksdb::Status status = db_->Flush(rocksdb::FlushOptions(), rows_cf_);
  if (!status.ok()) return FromRocksDb(status, path_, "flush");
  return Status::OK();
}

Status RocksDbTier::Scan(const RowVisitor& visit) {
  rocksdb::ReadOptions read;
  // A checkpoint reads every row once: keep it from evicting the hot blocks,
  // and read ahead since the access is sequential.
  read.fill_cache = false;
  read.readahead_size = 2 << 20;
  // The iterator reads the implicit snapshot taken when it is created.
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, rows_cf_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const rocksdb::Slice key = it->key();
    const rocksdb::Slice value = it->value();
    if (key.size() != kKeyBytes) {
      return Status::DataLoss(path_, ": stored key has ", key.size(), " bytes, expected ",
                              kKeyBytes);
    }
    if (value.size() != static_cast<size_t>(row_bytes_)) return WrongRowSize(key, value.size());
    EMBER_RETURN_IF_ERROR(visit(DecodeKey(key.data()), value.data()));
  }
  if (!it->status().ok()) return FromRocksDb(it->status(), path_, "scan");
  return Status::OK();
}

// RocksDB makes the last directory of the path only, and makes it even when
// it will then refuse to create a database there; do both as the options say.
Status PrepareDirectory(const RocksDbTierOptions& options) {
  std::error_code error;
  if (options.create_if_missing) {
    std::filesystem::create_directories(options.path, error);
    if (error) {
      return Status::IOError(options.path,
                             ": cannot create the tier's directory: ", error.message());
    }
  } else if (!std::filesystem::exists(options.path, error)) {
    return Status::IOError(options.path, ": no tier to open",
                           error ? ": " + error.message() : " and create_if_missing is false");
  }
  return Status::OK();
}

// Whether `path` holds a RocksDB database (of any column families).
bool HoldsDatabase(const rocksdb::DBOptions& db_options, const std::string& path,
                   std::vector<std::string>* families) {
  families->clear();
  return rocksdb::DB::ListColumnFamilies(db_options, path, families).ok();
}

// Fails with InvalidArgument if `path` holds a RocksDB database whose column
// families are not those of a tier. OK if it holds none (Open decides then).
Status CheckIsTierOrAbsent(const rocksdb::DBOptions& db_options, const std::string& path) {
  std::vector<std::string> families;
  if (!HoldsDatabase(db_options, path, &families)) return Status::OK();
  std::sort(families.begin(), families.end());
  const std::vector<std::string> expected = {rocksdb::kDefaultColumnFamilyName, kMetaColumnFamily};
  if (families != expected) {
    std::string names;
    for (const std::string& name : families) names += (names.empty() ? "" : ", ") + name;
    return Status::InvalidArgument(path, ": holds a RocksDB database that is not an Ember tier",
                                   " (column families: ", names, ")");
  }
  return Status::OK();
}

// Creating a tier is two steps in RocksDB (the database with its default
// column family, then the meta family), so a crash between them would leave
// a database that is neither absent nor a tier. A marker file written before
// the first step and removed, durably, after the last says that whatever the
// directory holds is an unfinished creation of ours: the next open destroys
// it and creates the tier again (it held no database before the marker was
// written, so nothing else is lost).
Status CreateTierDatabase(const RocksDbTierOptions& options, rocksdb::DBOptions db_options) {
  const std::string marker = options.path + "/" + kCreatingMarker;
  EMBER_RETURN_IF_ERROR(WriteFileAtomic(marker, "an Ember tier is being created here\n"));
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = false;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status status = rocksdb::DB::Open(rocksdb::Options(db_options, MakeRowOptions(options)),
                                             options.path, &raw);
  if (!status.ok()) return FromRocksDb(status, options.path, "create");
  std::unique_ptr<rocksdb::DB> db(raw);
  CrashPoint("tier.created_database");
  rocksdb::ColumnFamilyHandle* meta = nullptr;
  status = db->CreateColumnFamily(MakeMetaOptions(), kMetaColumnFamily, &meta);
  if (!status.ok()) return FromRocksDb(status, options.path, "creating the meta column family");
  status = db->DestroyColumnFamilyHandle(meta);
  if (status.ok()) status = db->Close();
  if (!status.ok()) return FromRocksDb(status, options.path, "closing the new database");
  return RemoveFileDurably(marker);
}

// Destroys what an interrupted CreateTierDatabase left at `path`.
Status DestroyUnfinishedTier(const rocksdb::DBOptions& db_options, const std::string& path) {
  LOG(WARNING) << path << ": the creation of this tier was interrupted; creating it again";
  std::vector<std::string> names;
  if (HoldsDatabase(db_options, path, &names)) {
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const std::string& name : names) families.emplace_back(name, rocksdb::ColumnFamilyOptions());
    rocksdb::Status status = rocksdb::DestroyDB(path, rocksdb::Options(), families);
    if (!status.ok()) return FromRocksDb(status, path, "destroying an unfinished tier");
  }
  EMBER_RETURN_IF_ERROR(MakeDirectories(path));  // DestroyDB removes an emptied directory.
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Tier>> NewRocksDbTier(const RocksDbTierOptions& options) {
  EMBER_RETURN_IF_ERROR(ValidateOptions(options));
  EMBER_RETURN_IF_ERROR(PrepareDirectory(options));
  rocksdb::DBOptions db_options = MakeDbOptions(options);
  bool created = false;
  if (FileExists(options.path + "/" + kCreatingMarker)) {
    if (!options.create_if_missing) {
      return Status::IOError(options.path, ": the creation of this tier was interrupted (",
                             kCreatingMarker, " is there) and create_if_missing is false");
    }
    EMBER_RETURN_IF_ERROR(DestroyUnfinishedTier(db_options, options.path));
    created = true;
  } else {
    std::vector<std::string> families;
    created = !HoldsDatabase(db_options, options.path, &families) && options.create_if_missing;
  }
  if (created) {
    EMBER_RETURN_IF_ERROR(CreateTierDatabase(options, db_options));
    db_options.error_if_exists = false;  // It exists now because it was just made.
  }
  EMBER_RETURN_IF_ERROR(CheckIsTierOrAbsent(db_options, options.path));
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, MakeRowOptions(options)},
      {kMetaColumnFamily, MakeMetaOptions()}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status status = rocksdb::DB::Open(db_options, options.path, families, &handles, &db);
  if (!status.ok()) return FromRocksDb(status, options.path, "open");
  CHECK_EQ(handles.size(), families.size()) << "DB::Open returns one handle per column family";
  auto tier = std::make_unique<RocksDbTier>(
      options.path, options.row_bytes, options.use_write_ahead_log, db, handles[0], handles[1]);
  EMBER_RETURN_IF_ERROR(tier->CheckOrRecordRowBytes());
  return std::unique_ptr<Tier>(std::move(tier));
}

Status DestroyRocksDbTier(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    if (error) return Status::IOError(path, ": cannot check for a tier: ", error.message());
    return Status::OK();
  }
  rocksdb::Options options;
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {kMetaColumnFamily, rocksdb::ColumnFamilyOptions()}};
  rocksdb::Status status = rocksdb::DestroyDB(path, options, families);
  if (!status.ok()) return FromRocksDb(status, path, "destroy");
  return Status::OK();
}

}  // namespace ember::embedding
