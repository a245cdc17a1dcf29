#pragma once

// The order in which a RocksDB tier lays out its rows (see
// RocksDbTierOptions::key_shards): a bijection from keys to the 64-bit ranks
// the tier stores as its keys (big-endian, so that RocksDB's bytewise order
// is the order of ranks).

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "embedding/embedding_table.h"

namespace ember::embedding::internal {

class TierKeyOrder {
 public:
  // Rank = key: keys in increasing order. The layout of tiers made before
  // the order was recorded.
  static TierKeyOrder Numeric() { return TierKeyOrder(0); }
  // By shard, then by hash: with h = Mix64(key), the keys of shard
  // h % shards (as the memory tier shards) take one contiguous range of
  // ranks, shard 0's first, and within it increase with h / shards.
  // REQUIRES: shards >= 1.
  static TierKeyOrder ByShard(int shards) { return TierKeyOrder(shards); }
  // The order Describe() wrote. InvalidArgument otherwise.
  static Result<TierKeyOrder> Parse(std::string_view text);

  uint64_t Rank(Key key) const;
  Key KeyOf(uint64_t rank) const;
  // 0 for Numeric.
  int shards() const { return shards_; }
  // "numeric" or "mix64 mod <shards>", as the tier records it.
  std::string Describe() const;

 private:
  explicit TierKeyOrder(int shards);

  int shards_;
  // ByShard: 2^64 = base_ * shards + long_shards_; the first long_shards_
  // shards hold base_ + 1 hashes each, the others base_ (base_ is 2^64 for
  // one shard).
  unsigned __int128 base_ = 0;
  uint64_t long_shards_ = 0;
};

}  // namespace ember::embedding::internal
