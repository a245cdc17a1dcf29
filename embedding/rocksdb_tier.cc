// NewRocksDbTier: the disk tier, a RocksDB database of fixed-size rows.
//
// Layout: rows live in the default column family under their key's rank in
// the tier's key order (internal::TierKeyOrder, RocksDbTierOptions::
// key_shards) encoded as 8 big-endian bytes (EncodeTierKey), so that
// RocksDB's bytewise order is the order of ranks (MultiGet takes sorted
// input, Scan visits ranks in increasing order). A second column family,
// "ember_meta", records the row size under "row_bytes" (decimal), so that
// reopening with another row size is refused rather than read as garbage,
// and the key order under "key_order" (TierKeyOrder::Describe); a tier that
// holds rows but records no order was made before the order was recorded and
// keeps its keys in numeric order.
//
// Tuning: embedding/rocksdb_tier_options.cc. Writes are gathered into sorted
// batches (RocksDbTierOptions::gather_bytes, embedding/internal/
// pending_writes.h).

#include "embedding/rocksdb_tier.h"

#include <glog/logging.h>
#include <rocksdb/comparator.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/snapshot.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/crash_point.h"
#include "core/file.h"
#include "core/mutex.h"
#include "core/sorted_order.h"
#include "embedding/internal/pending_writes.h"
#include "embedding/internal/rocksdb_tier_options.h"
#include "embedding/internal/tier_key_order.h"

namespace ember::embedding {
namespace {

using internal::DecodeTierKey;
using internal::EncodeTierKey;
using internal::MakeDbOptions;
using internal::MakeMetaOptions;
using internal::MakeRowOptions;
using internal::TierKeyOrder;
using internal::ValidateOptions;

constexpr char kMetaColumnFamily[] = "ember_meta";
constexpr char kRowBytesKey[] = "row_bytes";
constexpr char kKeyOrderKey[] = "key_order";
// Present in a tier's directory while its database is being created; see
// CreateTierDatabase.
constexpr char kCreatingMarker[] = "EMBER_TIER_CREATING";
constexpr int kKeyBytes = internal::kTierKeyBytes;
// Keys per MultiGet call. Each value pins its data block in the cache until
// it is copied out, so a bounded chunk bounds the memory a huge Get pins
// (4096 x 4 KiB blocks at most) while keeping RocksDB's batching benefits.
constexpr size_t kMultiGetChunkKeys = 4096;

// The order RocksDbTierOptions::key_shards asks for.
TierKeyOrder KeyOrderOf(int key_shards) {
  return key_shards == 0 ? TierKeyOrder::Numeric() : TierKeyOrder::ByShard(key_shards);
}

// Every RocksDB failure, named by the database and the operation. Corruption
// is DataLoss (the data is gone, retrying will not help); the rest IOError.
Status FromRocksDb(const rocksdb::Status& status, const std::string& path, const char* operation) {
  if (status.IsCorruption()) {
    return Status::DataLoss(path, ": RocksDB ", operation, ": ", status.ToString());
  }
  return Status::IOError(path, ": RocksDB ", operation, ": ", status.ToString());
}

// Thread safety: all public methods may be called concurrently; rocksdb::DB
// is thread-safe and the tier keeps no other mutable state.
class RocksDbTier : public Tier {
 public:
  // Takes ownership of `db` and of the handles of the row and meta column
  // families.
  // `gather_rows`: Puts and Deletes gather in memory up to this many rows
  // before they are written (0: each is written at once).
  RocksDbTier(std::string path, int64_t row_bytes, bool use_write_ahead_log, int64_t gather_rows,
              rocksdb::DB* db, rocksdb::ColumnFamilyHandle* rows_cf,
              rocksdb::ColumnFamilyHandle* meta_cf)
      : path_(std::move(path)),
        row_bytes_(row_bytes),
        gather_rows_(gather_rows),
        db_(db),
        rows_cf_(rows_cf),
        meta_cf_(meta_cf),
        gathering_(row_bytes),
        writing_(row_bytes) {
    write_options_.disableWAL = !use_write_ahead_log;
    // Room for a full gathering and a Put beyond it (of up to a quarter
    // more), so that gathering allocates nothing once under way.
    try {
      gathering_.Reserve(gather_rows + gather_rows / 4);
      writing_.Reserve(gather_rows + gather_rows / 4);
    } catch (const std::bad_alloc&) {
      // They grow as rows come.
    }
  }
  RocksDbTier(const RocksDbTier&) = delete;
  RocksDbTier& operator=(const RocksDbTier&) = delete;

  ~RocksDbTier() override {
    Status written = WriteGathered();
    LOG_IF(ERROR, !written.ok()) << written << "; the rows gathered for it are lost";
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
  // Reads the key order the database records; a new database (no rows)
  // records `order`, one with rows and no record is in numeric order.
  Status ReadOrRecordKeyOrder(const TierKeyOrder& order);

  Status Get(const std::vector<Key>& keys, char* out, std::vector<int64_t>* missing) override;
  Status Put(const std::vector<Key>& keys, const char* rows) override;
  Status Delete(const std::vector<Key>& keys) override;
  Result<int64_t> ApproximateCount() override;
  Status Flush() override;
  Status Scan(const RowVisitor& visit) override;

 private:
  Status WrongRowSize(const rocksdb::Slice& key, size_t size) const {
    return Status::DataLoss(path_, ": row of key ", order_.KeyOf(DecodeTierKey(key.data())),
                            " has ", size, " bytes, expected ", row_bytes_);
  }

  // Get, Put and Delete straight on the database. Read puts the row of
  // keys[i] in slot slots[i] of `out` (slot i when `slots` is null), adds
  // the slots of the keys the database lacks to `*missing` and sorts it, and
  // reads at `snapshot` (null: one of its own when it reads in several
  // MultiGets).
  Status Read(const std::vector<Key>& keys, const std::vector<int64_t>* slots, char* out,
              std::vector<int64_t>* missing, const rocksdb::Snapshot* snapshot);
  // Put and Delete when gathering: `gather` records the call in gathering_;
  // `write_through` writes it straight to the database.
  template <typename GatherFn, typename WriteFn>
  Status Gather(const GatherFn& gather, const WriteFn& write_through);
  Status Write(const std::vector<Key>& keys, const char* rows);
  Status Erase(const std::vector<Key>& keys);
  // Writes what Puts and Deletes gathered, as one sorted WriteBatch. On error
  // the writes stay gathered (and readable) for the next try.
  Status WriteGathered() EXCLUDES(mu_, write_mu_);

  const std::string path_;
  const int64_t row_bytes_;
  const int64_t gather_rows_;
  // The order of the stored keys, read or recorded when the tier opens.
  TierKeyOrder order_ = TierKeyOrder::Numeric();
  rocksdb::WriteOptions write_options_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* const rows_cf_;  // owned; destroyed before db_
  rocksdb::ColumnFamilyHandle* const meta_cf_;  // owned; destroyed before db_

  // Gathered writes (gather_rows_ > 0). A key's newest row is in gathering_
  // if there, else in writing_ if there, else in the database; Get looks in
  // that order, under mu_ and with a snapshot of the database taken under
  // it, so that it reads one view. writing_ is what WriteGathered is writing
  // (empty otherwise); it is emptied only once the database holds it.
  // write_mu_ lets one WriteGathered run at a time, so writes of a key reach
  // the database in the order they were made.
  Mutex write_mu_;  // taken before mu_
  Mutex mu_;
  PendingWrites gathering_ GUARDED_BY(mu_);
  PendingWrites writing_ GUARDED_BY(mu_);
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

Status RocksDbTier::ReadOrRecordKeyOrder(const TierKeyOrder& order) {
  std::string value;
  rocksdb::Status status = db_->Get(rocksdb::ReadOptions(), meta_cf_, kKeyOrderKey, &value);
  if (status.ok()) {
    Result<TierKeyOrder> recorded = TierKeyOrder::Parse(value);
    if (!recorded.ok()) return Status::DataLoss(path_, ": ", recorded.status().message());
    order_ = *recorded;
    return Status::OK();
  }
  if (!status.IsNotFound()) return FromRocksDb(status, path_, "reading the key order");
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), rows_cf_));
  it->SeekToFirst();
  if (!it->status().ok()) return FromRocksDb(it->status(), path_, "looking for rows");
  if (it->Valid()) {
    order_ = TierKeyOrder::Numeric();  // rows stored before orders were recorded
    return Status::OK();
  }
  // Numeric is the order of a tier that records none: recording it is not
  // needed (and key_shards = 0 makes such a tier).
  order_ = order;
  if (order.shards() == 0) return Status::OK();
  status = db_->Put(write_options_, meta_cf_, kKeyOrderKey, order.Describe());
  if (!status.ok()) return FromRocksDb(status, path_, "recording the key order");
  status = db_->Flush(rocksdb::FlushOptions(), meta_cf_);
  if (!status.ok()) return FromRocksDb(status, path_, "flushing the key order");
  return Status::OK();
}

Status RocksDbTier::Get(const std::vector<Key>& keys, char* out, std::vector<int64_t>* missing) {
  missing->clear();
  if (keys.empty()) return Status::OK();
  if (gather_rows_ == 0) return Read(keys, nullptr, out, missing, nullptr);
  // The gathered writes first, then the database for the keys they lack,
  // read at the snapshot taken with them straight into their rows of `out`.
  std::vector<Key> rest_keys;
  std::vector<int64_t> rest;  // index into `keys` of each of rest_keys
  const rocksdb::Snapshot* snapshot = nullptr;
  {
    MutexLock lock(mu_);
    snapshot = db_->GetSnapshot();
    for (size_t i = 0; i < keys.size(); ++i) {
      char* row = out + i * row_bytes_;
      PendingWrites::Found found = gathering_.Find(keys[i], row);
      if (found == PendingWrites::Found::kAbsent) found = writing_.Find(keys[i], row);
      if (found == PendingWrites::Found::kDeleted) missing->push_back(static_cast<int64_t>(i));
      if (found != PendingWrites::Found::kAbsent) continue;
      rest_keys.push_back(keys[i]);
      rest.push_back(static_cast<int64_t>(i));
    }
  }
  Status read = Read(rest_keys, &rest, out, missing, snapshot);
  db_->ReleaseSnapshot(snapshot);
  return read;
}

Status RocksDbTier::Read(const std::vector<Key>& keys, const std::vector<int64_t>* slots,
                         char* out, std::vector<int64_t>* missing,
                         const rocksdb::Snapshot* snapshot) {
  if (keys.empty()) return Status::OK();
  // MultiGet is fastest on sorted keys (one pass down each level's files);
  // `order` maps sorted position -> index into `keys`.
  std::vector<uint64_t> ranks(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) ranks[i] = order_.Rank(keys[i]);
  std::vector<int64_t> order;
  SortedOrder(ranks, &order);
  std::vector<char> encoded(keys.size() * kKeyBytes);
  for (size_t i = 0; i < keys.size(); ++i) EncodeTierKey(ranks[order[i]], &encoded[i * kKeyBytes]);

  rocksdb::ReadOptions read;
  // Rows are read back often and blocks come from the OS page cache; block
  // checksums are verified by compaction, which reads every block anyway.
  read.verify_checksums = false;
  // Chunks must read one view of the database (Get is atomic w.r.t. Put).
  std::optional<rocksdb::ManagedSnapshot> own_snapshot;
  if (snapshot != nullptr) {
    read.snapshot = snapshot;
  } else if (keys.size() > kMultiGetChunkKeys) {
    own_snapshot.emplace(db_.get());
    read.snapshot = own_snapshot->snapshot();
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
      const int64_t index = slots == nullptr ? order[begin + j] : (*slots)[order[begin + j]];
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

template <typename GatherFn, typename WriteFn>
Status RocksDbTier::Gather(const GatherFn& gather, const WriteFn& write_through) {
  bool gathered = true;
  bool full = false;
  {
    MutexLock lock(mu_);
    try {
      gather();
    } catch (const std::bad_alloc&) {
      gathered = false;
    }
    full = gathering_.size() >= gather_rows_;
  }
  if (!gathered) {
    // What was gathered is newer than the database: write it first, then
    // this call straight through.
    EMBER_RETURN_IF_ERROR(WriteGathered());
    return write_through();
  }
  return full ? WriteGathered() : Status::OK();
}

Status RocksDbTier::Put(const std::vector<Key>& keys, const char* rows) {
  if (keys.empty()) return Status::OK();
  if (gather_rows_ == 0) return Write(keys, rows);
  return Gather([&] { gathering_.Put(keys, rows); }, [&] { return Write(keys, rows); });
}

Status RocksDbTier::Write(const std::vector<Key>& keys, const char* rows) {
  // One WriteBatch per call: RocksDB applies it atomically.
  rocksdb::WriteBatch batch(keys.size() * (kKeyBytes + row_bytes_ + 16));
  // In rank order: the memtable's skip list then inserts each key next to the
  // one before (its splice hint) instead of searching from the top. Stable,
  // so that a repeated key's last row still comes last and wins.
  std::vector<uint64_t> ranks(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) ranks[i] = order_.Rank(keys[i]);
  std::vector<int64_t> order;
  SortedOrder(ranks, &order);
  char encoded[kKeyBytes];
  for (int64_t i : order) {
    EncodeTierKey(ranks[i], encoded);
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
  if (gather_rows_ == 0) return Erase(keys);
  return Gather([&] { gathering_.Delete(keys); }, [&] { return Erase(keys); });
}

Status RocksDbTier::Erase(const std::vector<Key>& keys) {
  rocksdb::WriteBatch batch(keys.size() * (kKeyBytes + 16));
  char encoded[kKeyBytes];
  for (Key key : keys) {
    EncodeTierKey(order_.Rank(key), encoded);
    rocksdb::Status status = batch.Delete(rows_cf_, rocksdb::Slice(encoded, kKeyBytes));
    if (!status.ok()) return FromRocksDb(status, path_, "WriteBatch::Delete");
  }
  rocksdb::Status status = db_->Write(write_options_, &batch);
  if (!status.ok()) return FromRocksDb(status, path_, "write of deletions");
  return Status::OK();
}

Status RocksDbTier::WriteGathered() {
  if (gather_rows_ == 0) return Status::OK();
  MutexLock write_lock(write_mu_);
  size_t batch_bytes = 0;
  {
    MutexLock lock(mu_);
    if (gathering_.empty()) return Status::OK();
    gathering_.Swap(writing_);  // writing_ was empty
    batch_bytes = static_cast<size_t>(writing_.size()) * (kKeyBytes + row_bytes_ + 16);
  }
  // Reserved whole: grown by doubling, the batch would take up to twice it.
  rocksdb::WriteBatch batch(batch_bytes);
  rocksdb::Status status;
  {
    // Built under mu_ (a copy of the rows, quick next to the write), written
    // without it: Gets read writing_ meanwhile.
    MutexLock lock(mu_);
    char encoded[kKeyBytes];
    const auto rank = [&](Key key) { return order_.Rank(key); };
    writing_.ForEachSorted(rank, [&](Key, uint64_t key_rank, const char* row) {
      if (!status.ok()) return;
      EncodeTierKey(key_rank, encoded);
      const rocksdb::Slice slice(encoded, kKeyBytes);
      status = row == nullptr ? batch.Delete(rows_cf_, slice)
                              : batch.Put(rows_cf_, slice,
                                          rocksdb::Slice(row, static_cast<size_t>(row_bytes_)));
    });
  }
  if (status.ok()) status = db_->Write(write_options_, &batch);
  MutexLock lock(mu_);
  if (!status.ok()) {
    // Keep the writes: those of keys written again since are older.
    try {
      writing_.AddOlderTo(gathering_);
    } catch (const std::bad_alloc&) {
      writing_.Clear();
      return Status::ResourceExhausted(path_, ": the rows of a failed write cannot be kept (",
                                       FromRocksDb(status, path_, "write of gathered rows")
                                           .message(),
                                       ")");
    }
    writing_.Clear();
    return FromRocksDb(status, path_, "write of gathered rows");
  }
  writing_.Clear();
  return Status::OK();
}

Result<int64_t> RocksDbTier::ApproximateCount() {
  EMBER_RETURN_IF_ERROR(WriteGathered());
  uint64_t count = 0;
  if (!db_->GetIntProperty(rows_cf_, rocksdb::DB::Properties::kEstimateNumKeys, &count)) {
    return Status::IOError(path_, ": RocksDB property ", rocksdb::DB::Properties::kEstimateNumKeys,
                           " is unavailable");
  }
  return static_cast<int64_t>(count);
}

Status RocksDbTier::Flush() {
  EMBER_RETURN_IF_ERROR(WriteGathered());
  rocksdb::Status status = db_->Flush(rocksdb::FlushOptions(), rows_cf_);
  if (!status.ok()) return FromRocksDb(status, path_, "flush");
  return Status::OK();
}

Status RocksDbTier::Scan(const RowVisitor& visit) {
  EMBER_RETURN_IF_ERROR(WriteGathered());
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
    EMBER_RETURN_IF_ERROR(visit(order_.KeyOf(DecodeTierKey(key.data())), value.data()));
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
  rocksdb::Status status = rocksdb::DB::Open(
      rocksdb::Options(db_options, MakeRowOptions(options, internal::FixedKeyComparator())),
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

// Removes RocksDB's files at `path`, whether or not they still make a
// database (DestroyDB goes by the files' names; the families only say where
// else files may live, and a tier keeps all of them at `path`); `what` names
// the operation in an error. The directory goes too if that empties it.
Status DestroyTierFiles(const std::string& path, const char* what) {
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {kMetaColumnFamily, rocksdb::ColumnFamilyOptions()}};
  rocksdb::Status status = rocksdb::DestroyDB(path, rocksdb::Options(), families);
  if (!status.ok()) return FromRocksDb(status, path, what);
  return Status::OK();
}

// Destroys what an interrupted CreateTierDatabase or DestroyRocksDbTier left
// at `path`: an interrupted destroy may have removed CURRENT and left
// write-ahead logs, in whose presence RocksDB refuses to create a database.
Status DestroyUnfinishedTier(const std::string& path) {
  LOG(WARNING) << path << ": the creation or removal of this tier was interrupted; creating it "
               << "again";
  EMBER_RETURN_IF_ERROR(DestroyTierFiles(path, "destroying an unfinished tier"));
  EMBER_RETURN_IF_ERROR(MakeDirectories(path));  // DestroyDB removes an emptied directory.
  return Status::OK();
}

rocksdb::Status OpenTierDatabase(const RocksDbTierOptions& options,
                                 const rocksdb::DBOptions& db_options,
                                 const rocksdb::Comparator* comparator,
                                 std::vector<rocksdb::ColumnFamilyHandle*>* handles,
                                 rocksdb::DB** db) {
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, MakeRowOptions(options, comparator)},
      {kMetaColumnFamily, MakeMetaOptions()}};
  return rocksdb::DB::Open(db_options, options.path, families, handles, db);
}

// RocksDB refuses a comparator other than the one the database records with
// InvalidArgument("<name> does not match existing comparator <name>").
bool IsComparatorMismatch(const rocksdb::Status& status) {
  return status.ToString().find("does not match existing comparator") != std::string::npos;
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
    EMBER_RETURN_IF_ERROR(DestroyUnfinishedTier(options.path));
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
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status status =
      OpenTierDatabase(options, db_options, internal::FixedKeyComparator(), &handles, &db);
  if (status.IsInvalidArgument() && IsComparatorMismatch(status)) {
    // Made before the tier had its own comparator, whose order is the same.
    status = OpenTierDatabase(options, db_options, rocksdb::BytewiseComparator(), &handles, &db);
  }
  if (!status.ok()) return FromRocksDb(status, options.path, "open");
  CHECK_EQ(handles.size(), 2u) << "DB::Open returns one handle per column family";
  const int64_t gather_bytes =
      options.gather_bytes < 0 ? options.write_buffer_bytes / 8 : options.gather_bytes;
  const int64_t gather_rows =
      gather_bytes == 0 ? 0 : std::max<int64_t>(1, gather_bytes / options.row_bytes);
  auto tier = std::make_unique<RocksDbTier>(options.path, options.row_bytes,
                                            options.use_write_ahead_log, gather_rows, db,
                                            handles[0], handles[1]);
  EMBER_RETURN_IF_ERROR(tier->CheckOrRecordRowBytes());
  EMBER_RETURN_IF_ERROR(tier->ReadOrRecordKeyOrder(KeyOrderOf(options.key_shards)));
  return std::unique_ptr<Tier>(std::move(tier));
}

uint64_t RocksDbTierRank(Key key, int key_shards) {
  return KeyOrderOf(key_shards).Rank(key);
}

Status DestroyRocksDbTier(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    if (error) return Status::IOError(path, ": cannot check for a tier: ", error.message());
    return Status::OK();
  }
  // DestroyDB removes file after file; killed halfway, it may leave a
  // directory without CURRENT but with write-ahead logs, where RocksDB will
  // create no database. The marker makes the next open clean up whatever is
  // left and create the tier afresh (it holds nothing worth keeping).
  const std::string marker = path + "/" + kCreatingMarker;
  EMBER_RETURN_IF_ERROR(WriteFileAtomic(marker, "an Ember tier is being removed here\n"));
  EMBER_RETURN_IF_ERROR(DestroyTierFiles(path, "destroy"));
  EMBER_RETURN_IF_ERROR(RemoveFileDurably(marker));
  // DestroyDB removed the directory only if it was empty, which the marker
  // prevented.
  std::filesystem::remove(path, error);
  return Status::OK();
}

}  // namespace ember::embedding
