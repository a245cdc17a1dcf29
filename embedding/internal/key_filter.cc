// KeyFilter: a growing split-block Bloom filter (see key_filter.h).

#include "embedding/internal/key_filter.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/random.h"

namespace ember::embedding::internal {
namespace {

// Odd multipliers, one per word of a block: the top 5 bits of
// (word * salt) pick a bit of that word (the salts of Parquet's
// split-block Bloom filter).
constexpr uint32_t kSalts[8] = {0x47b6137bU, 0x44974d91U, 0x8824ad5bU, 0xa2b7289dU,
                                0x705495c7U, 0x2df1424bU, 0x9efc4947U, 0x5c6bfb31U};

// The caller's hash is Mix64(key), whose low bits also pick the key's shard:
// within one shard they are nearly constant. Mixing again spreads every
// filter's keys over all 64 bits.
uint64_t FilterHash(uint64_t hash) { return Mix64(hash ^ 0x2545f4914f6cdd1dULL); }

// Block of a layer with `num_blocks` blocks: the high 32 bits, mapped onto
// [0, num_blocks) by multiplication (Lemire's fast range reduction).
uint64_t BlockOf(uint64_t h, uint64_t num_blocks) { return ((h >> 32) * num_blocks) >> 32; }

}  // namespace

void KeyFilter::Grow(int64_t capacity) {
  const int64_t bits = capacity * kBitsPerKey;
  const int64_t num_blocks = std::max<int64_t>(1, (bits + 255) / 256);
  const int64_t layer_bytes = num_blocks * static_cast<int64_t>(sizeof(Block));
  if (bytes_ + layer_bytes > max_bytes_) {
    std::vector<Layer>().swap(layers_);
    bytes_ = 0;
    saturated_ = true;
    return;
  }
  Layer layer;
  layer.blocks.assign(num_blocks, Block{});
  layer.capacity = capacity;
  layers_.push_back(std::move(layer));
  bytes_ += layer_bytes;
}

void KeyFilter::Add(uint64_t hash) {
  // A hash the filter already reports (added before, or a false positive)
  // needs no room: keys written back again do not grow the filter.
  if (MayContain(hash)) return;
  if (layers_.empty() || layers_.back().size >= layers_.back().capacity) {
    // Room for as many keys as the filter holds: the layers' capacities
    // double, and the newest is at least half full once the next is added.
    Grow(std::max(kFirstLayerKeys, size_));
    if (saturated_) return;
  }
  Layer &layer = layers_.back();
  const uint64_t h = FilterHash(hash);
  Block &block = layer.blocks[BlockOf(h, layer.blocks.size())];
  const uint32_t low = static_cast<uint32_t>(h);
  for (int i = 0; i < 8; ++i) block.words[i] |= uint32_t{1} << ((low * kSalts[i]) >> 27);
  ++layer.size;
  ++size_;
}

bool KeyFilter::MayContain(uint64_t hash) const {
  if (saturated_) return true;
  if (layers_.empty()) return false;
  const uint64_t h = FilterHash(hash);
  const uint32_t low = static_cast<uint32_t>(h);
  uint32_t bits[8];
  for (int i = 0; i < 8; ++i) bits[i] = uint32_t{1} << ((low * kSalts[i]) >> 27);
  // Newest first: it is the largest and holds the most keys.
  for (auto layer = layers_.rbegin(); layer != layers_.rend(); ++layer) {
    const Block &block = layer->blocks[BlockOf(h, layer->blocks.size())];
    bool all = true;
    for (int i = 0; i < 8; ++i) all &= (block.words[i] & bits[i]) != 0;
    if (all) return true;
  }
  return false;
}

void KeyFilter::Prefetch(uint64_t hash) const {
  const uint64_t h = FilterHash(hash);
  for (const Layer &layer : layers_) {
    __builtin_prefetch(&layer.blocks[BlockOf(h, layer.blocks.size())]);
  }
}

void KeyFilter::Clear() {
  std::vector<Layer>().swap(layers_);
  bytes_ = 0;
  size_ = 0;
  saturated_ = false;
}

}  // namespace ember::embedding::internal
