#pragma once

// A filter of the keys a disk tier holds, so that a lookup of a key the disk
// cannot hold (a key seen for the first time) costs no disk work.

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

namespace ember::embedding::internal {

// A growing Bloom filter of 64-bit key hashes: MayContain is true for every
// hash added since the last Clear, and for others with a small probability
// (false positives; never false negatives). Keys cannot be removed: a key
// deleted from the disk stays in the filter as a false positive, which costs
// a disk lookup and changes no result.
//
// Layout: split-block Bloom filters (Putze, Sanders & Singler, "Cache-,
// Hash- and Space-Efficient Bloom Filters", WEA 2007; the layout of Apache
// Parquet and Impala): a key sets one bit in each of the eight 32-bit words
// of one 32-byte block, so a lookup reads one cache line. A Bloom filter
// cannot be resized, so the filter grows in layers ("Scalable Bloom
// Filters", Almeida et al., IPL 101 (2007)): when the newest layer holds its
// capacity, a new one with room for as many keys as the filter holds is
// added, so that at most half of the allocated room is unused; a lookup
// probes every layer. Each layer has kBitsPerKey bits per key of its
// capacity, ~0.2% false positives when full (key_filter_test measures the
// rates); a filter of n keys has about log2(n / kFirstLayerKeys) + 1 layers,
// and its false-positive rate is at most their sum: ~1% at 10^4 to 10^5
// keys. It takes 2 to 3.3 bytes per key.
//
// Bytes are bounded by `max_bytes`: when growing would pass it, the filter
// gives up its layers and becomes saturated, MayContain always true (every
// lookup then goes to the disk, as without a filter) until Clear.
//
// Thread safety: none; the owner serialises access.
class KeyFilter {
 public:
  // Bits per key of a layer's capacity.
  static constexpr int64_t kBitsPerKey = 16;
  // Capacity of the first layer, allocated by the first Add.
  static constexpr int64_t kFirstLayerKeys = 256;

  // An empty filter that allocates nothing until its first Add.
  // REQUIRES: max_bytes >= 0.
  explicit KeyFilter(int64_t max_bytes = std::numeric_limits<int64_t>::max())
      : max_bytes_(max_bytes) {}

  // Adds `hash` (a key's Mix64); nothing to do if MayContain(hash) already.
  // May throw std::bad_alloc, leaving the filter as it was.
  void Add(uint64_t hash);
  bool MayContain(uint64_t hash) const;
  // Starts loading the blocks MayContain(hash) and Add(hash) read, one per
  // layer, into the cache: a caller that tests many keys prefetches a few
  // keys ahead, so that their cache misses overlap. Changes nothing.
  void Prefetch(uint64_t hash) const;
  // Forgets every key and the saturation; frees the layers.
  void Clear();

  // Bytes held by the layers.
  int64_t bytes() const { return bytes_; }
  // Hashes added since the last Clear (not counting those it already
  // reported).
  int64_t size() const { return size_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  bool saturated() const { return saturated_; }

 private:
  struct alignas(32) Block {
    std::array<uint32_t, 8> words;
  };
  struct Layer {
    std::vector<Block> blocks;
    int64_t capacity = 0;
    int64_t size = 0;
  };

  // Adds a layer for `capacity` keys, or saturates if that would pass
  // max_bytes_.
  void Grow(int64_t capacity);

  int64_t max_bytes_;
  std::vector<Layer> layers_;
  int64_t bytes_ = 0;
  int64_t size_ = 0;
  bool saturated_ = false;
};

}  // namespace ember::embedding::internal
