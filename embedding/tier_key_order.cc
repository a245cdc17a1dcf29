#include "embedding/internal/tier_key_order.h"

#include <charconv>
#include <string>
#include <string_view>

#include "core/random.h"

namespace ember::embedding::internal {
namespace {

using u128 = unsigned __int128;

constexpr std::string_view kNumeric = "numeric";
constexpr std::string_view kByShard = "mix64 mod ";
constexpr u128 kTwoTo64 = u128{1} << 64;

}  // namespace

TierKeyOrder::TierKeyOrder(int shards) : shards_(shards) {
  if (shards_ <= 0) return;
  base_ = kTwoTo64 / static_cast<uint64_t>(shards_);
  long_shards_ = static_cast<uint64_t>(kTwoTo64 - base_ * static_cast<uint64_t>(shards_));
}

Result<TierKeyOrder> TierKeyOrder::Parse(std::string_view text) {
  if (text == kNumeric) return Numeric();
  if (text.substr(0, kByShard.size()) == kByShard) {
    const std::string_view digits = text.substr(kByShard.size());
    int shards = 0;
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), shards);
    if (error == std::errc() && end == digits.data() + digits.size() && shards >= 1) {
      return ByShard(shards);
    }
  }
  return Status::InvalidArgument("unknown tier key order '", text, "'");
}

uint64_t TierKeyOrder::Rank(Key key) const {
  if (shards_ == 0) return key;
  const uint64_t hash = Mix64(key);
  const uint64_t n = static_cast<uint64_t>(shards_);
  const uint64_t shard = hash % n;
  const uint64_t within = hash / n;
  // Shards before `shard`: `shard` of them hold base_ hashes, and the long
  // ones among them one more each.
  const u128 first = u128{shard} * base_ + (shard < long_shards_ ? shard : long_shards_);
  return static_cast<uint64_t>(first + within);
}

Key TierKeyOrder::KeyOf(uint64_t rank) const {
  if (shards_ == 0) return rank;
  const uint64_t n = static_cast<uint64_t>(shards_);
  const u128 long_ranks = u128{long_shards_} * (base_ + 1);
  uint64_t shard = 0;
  uint64_t within = 0;
  if (rank < long_ranks) {
    shard = static_cast<uint64_t>(rank / (base_ + 1));
    within = static_cast<uint64_t>(rank % (base_ + 1));
  } else {
    const u128 rest = rank - long_ranks;
    shard = long_shards_ + static_cast<uint64_t>(rest / base_);
    within = static_cast<uint64_t>(rest % base_);
  }
  return UnMix64(within * n + shard);
}

std::string TierKeyOrder::Describe() const {
  if (shards_ == 0) return std::string(kNumeric);
  return std::string(kByShard) + std::to_string(shards_);
}

}  // namespace ember::embedding::internal
