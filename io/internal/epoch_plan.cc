#include "io/internal/epoch_plan.h"

#include <glog/logging.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

#include "core/random.h"

namespace ember::io::internal {
namespace {

// Tags that keep the random streams of file and piece order apart.
constexpr uint64_t kFileOrderStream = 0x66696c65'6f726465ULL;
constexpr uint64_t kPieceOrderStream = 0x70696563'65736f72ULL;

template <typename T>
void Shuffle(std::vector<T>* items, RandomStream* random) {
  for (size_t i = items->size(); i > 1; --i) {
    std::swap((*items)[i - 1], (*items)[random->NextBelow(i)]);
  }
}

int64_t ShardBegin(int64_t pieces, int num_shards, int shard) {
  // floor(shard * pieces / num_shards) without overflow for any realistic count.
  return static_cast<int64_t>(static_cast<__int128>(pieces) * shard / num_shards);
}

}  // namespace

int64_t PiecesPerShard(int64_t pieces, int num_shards, int shard_index) {
  return ShardBegin(pieces, num_shards, shard_index + 1) -
         ShardBegin(pieces, num_shards, shard_index);
}

EpochPlan PlanEpoch(const InputIndex& index, const PlanOptions& options, int64_t epoch) {
  CHECK(options.shard_index >= 0 && options.shard_index < options.num_shards)
      << "the shard index is validated when the reader opens";
  std::vector<int32_t> files(index.files.size());
  std::iota(files.begin(), files.end(), 0);
  if (options.shuffle_files) {
    RandomStream random(HashCombine(options.seed, kFileOrderStream), epoch);
    Shuffle(&files, &random);
  }
  std::vector<int64_t> order;
  order.reserve(index.pieces.size());
  for (const int32_t f : files) {
    const IndexedFile& file = index.files[f];
    const size_t first = order.size();
    for (int64_t p = 0; p < file.num_pieces; ++p) order.push_back(file.first_piece + p);
    if (options.shuffle_pieces && !file.gzip) {
      std::vector<int64_t> pieces(order.begin() + first, order.end());
      RandomStream random(HashCombine(HashCombine(options.seed, kPieceOrderStream), f), epoch);
      Shuffle(&pieces, &random);
      std::copy(pieces.begin(), pieces.end(), order.begin() + first);
    }
  }
  const int64_t total = static_cast<int64_t>(order.size());
  EpochPlan plan;
  plan.epoch = epoch;
  plan.min_shard_lines = std::numeric_limits<int64_t>::max();
  for (int shard = 0; shard < options.num_shards; ++shard) {
    const int64_t begin = ShardBegin(total, options.num_shards, shard);
    const int64_t end = ShardBegin(total, options.num_shards, shard + 1);
    int64_t lines = 0;
    for (int64_t i = begin; i < end; ++i) lines += index.pieces[order[i]].lines;
    plan.min_shard_lines = std::min(plan.min_shard_lines, lines);
    if (shard == options.shard_index) {
      plan.pieces.assign(order.begin() + begin, order.begin() + end);
      plan.lines = lines;
    }
  }
  return plan;
}

}  // namespace ember::io::internal
