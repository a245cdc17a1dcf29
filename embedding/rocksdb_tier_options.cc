// The tuning of the disk tier's RocksDB database. The tier serves batched
// point lookups of rows of a few hundred bytes, nearly all of keys it holds
// (the tiered table's own filter keeps keys seen for the first time away),
// and absorbs write-back of evicted rows in large sorted batches.
// MakeRowOptions and MakeDbOptions say, option by option, why each value is
// chosen.

#include "embedding/internal/rocksdb_tier_options.h"

#include <rocksdb/cache.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace ember::embedding::internal {
namespace {

constexpr int64_t kMinBlockCacheBytes = int64_t{1} << 20;
constexpr int64_t kMinWriteBufferBytes = int64_t{1} << 20;
class FixedKeyComparatorImpl final : public rocksdb::Comparator {
 public:
  // Stable: RocksDB records it in the database.
  const char* Name() const override { return "ember.FixedKey64"; }

  int Compare(const rocksdb::Slice& a, const rocksdb::Slice& b) const override {
    if (a.size() == kTierKeyBytes && b.size() == kTierKeyBytes) [[likely]] {
      const uint64_t x = DecodeTierKey(a.data());
      const uint64_t y = DecodeTierKey(b.data());
      return (x > y) - (x < y);
    }
    return a.compare(b);  // bytewise
  }

  bool Equal(const rocksdb::Slice& a, const rocksdb::Slice& b) const override {
    if (a.size() != b.size()) return false;
    if (a.size() == kTierKeyBytes) [[likely]] {
      uint64_t x, y;
      std::memcpy(&x, a.data(), kTierKeyBytes);
      std::memcpy(&y, b.data(), kTierKeyBytes);
      return x == y;
    }
    return std::memcmp(a.data(), b.data(), a.size()) == 0;
  }

  // Correct as no-ops (the interface's contract); the keys are short anyway.
  void FindShortestSeparator(std::string* /*start*/,
                             const rocksdb::Slice& /*limit*/) const override {}
  void FindShortSuccessor(std::string* /*key*/) const override {}

  // Different bytes are different keys: lets the data blocks' hash index
  // (kDataBlockBinaryAndHash) serve lookups, as it does under the bytewise
  // comparator.
  bool CanKeysWithDifferentByteContentsBeEqual() const override { return false; }
};

}  // namespace

const rocksdb::Comparator* FixedKeyComparator() {
  static const FixedKeyComparatorImpl* const comparator = new FixedKeyComparatorImpl();
  return comparator;
}

rocksdb::ColumnFamilyOptions MakeRowOptions(const RocksDbTierOptions& options,
                                            const rocksdb::Comparator* comparator) {
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
  // Whole-file filters with partitioned indexes were measured too (issue
  // 38): a lookup then skips, in each of the ~16 L0 files it probes, the
  // seek for its filter partition, and a table of ~1 GiB on disk ran faster
  // (embedding_bench dim 16, Zipf, 10%: 406k/415k against 330k/361k keys/s;
  // DLRM at a 10% budget: 17.2k/17.6k against 16.3k/16.8k samples/s, 6% less
  // CPU). Not kept: the levels between L0 and the last hold ~10% of the
  // rows in files of 64 MiB, whose whole filters (~300 KiB each, ~0.13 bytes
  // per disk row in all) outgrow the default 8 MiB cache at ~10 GiB on disk,
  // and past that a lookup would read a whole filter per level again.
  table.index_type = rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch;
  table.partition_filters = true;
  table.metadata_block_size = 4 << 10;
  table.pin_top_level_index_and_filter = true;

  rocksdb::ColumnFamilyOptions rows;
  rows.comparator = comparator;
  rows.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  // Rows are float weights and optimizer state, whose mantissas are close to
  // random bytes: compression saves little space and costs CPU on every block
  // read that misses the cache, so no level is compressed.
  rows.compression = rocksdb::kNoCompression;
  rows.bottommost_compression = rocksdb::kNoCompression;
  // No Bloom filters on the last level, which holds ~90% of the rows: a
  // lookup that reaches it finds its key there, since the tiered table
  // asks the disk only about keys its own filter says the disk holds
  // (CachedTable::MayBeOnDisk); only that filter's false positives pay an
  // index and a data block read on the last level. Without those filters
  // the block cache holds more index and data blocks, and a lookup skips a
  // filter probe. Measured (embedding_bench, dim 16, Zipf, 10% budget, two
  // alternating pairs): 384k/413k and 399k/412k keys/s without prefetch,
  // 279k/392k and 314k/411k with it; DLRM at a 10% budget trained at the
  // same speed (16.0k/16.1k, 16.4k/16.1k samples/s).
  rows.optimize_filters_for_hits = true;
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
  // Leveled, not universal: universal compaction (triggers 8 and 16) trained
  // DLRM at a 10% budget no faster (16.2k, 14.9k and 16.6k samples/s against
  // leveled's 15.3k, 15.2k and 16.6k, alternating; CPU within 5%) and kept
  // 5-10% more on disk.
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
  if (options.gather_bytes < -1) {
    return Status::InvalidArgument("RocksDB tier ", options.path,
                                   ": gather_bytes must be -1 (a share of the write buffer), 0 "
                                   "(off) or a size, got ",
                                   options.gather_bytes);
  }
  if (options.max_background_jobs < 1) {
    return Status::InvalidArgument("RocksDB tier ", options.path,
                                   ": max_background_jobs must be >= 1, got ",
                                   options.max_background_jobs);
  }
  if (options.key_shards < 0) {
    return Status::InvalidArgument("RocksDB tier ", options.path,
                                   ": key_shards must be >= 0 (0: numeric key order), got ",
                                   options.key_shards);
  }
  return Status::OK();
}

}  // namespace ember::embedding::internal
