#include "scheduler/pipeline_partition.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#include "ops/graph.h"
#include "ops/op_registry.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace ember::scheduler {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMicroBatch = 64;

// A chain of fully connected layers of very uneven widths: 32 -> widths.
std::unique_ptr<ops::Graph> UnevenChain(const std::vector<int64_t> &widths) {
  auto g = std::make_unique<ops::Graph>(&ops::DefaultOpRegistry());
  int x = *g->AddInput("x", {32});
  int64_t in = 32;
  for (size_t l = 0; l < widths.size(); ++l) {
    const std::string name = "fc" + std::to_string(l);
    const int w = *g->AddParameter(name + ".w", {widths[l], in},
                                   ops::Initializer::kHeUniform, in);
    const int b =
        *g->AddParameter(name + ".b", {widths[l]}, ops::Initializer::kZeros);
    x = (*g->AddNode(name, "fully_connected", {x, w, b},
                     ops::OpAttrs().Set("activation", 1)))[0];
    in = widths[l];
  }
  CHECK(g->MarkOutput(x).ok());
  return g;
}

const std::vector<int64_t> kWidths = {512,  16, 256, 256, 8,
                                      1024, 64, 32,  128, 1};

// Each node's forward + backward seconds, as the partition costs them.
std::vector<double> NodeSeconds(const ops::Graph &g, const CostModel &cost) {
  std::vector<double> seconds;
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    ProgramOp op;
    // Per example at the micro-batch size (a layer reads its weights once
    // per call).
    for (const bool backward : {false, true}) {
      ops::OpCost c = g.NodeCost(static_cast<int>(n), kMicroBatch, backward);
      c.flops /= kMicroBatch;
      c.bytes /= kMicroBatch;
      (backward ? op.backward : op.forward) = c;
    }
    seconds.push_back(cost.DenseOpSeconds(op, kMicroBatch, 0, 1));
  }
  return seconds;
}

// The smallest bottleneck of any split of `seconds` into k consecutive
// non-empty chunks, by trying them all.
double BruteForceBottleneck(const std::vector<double> &seconds, int k) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> ends;
  std::function<void(int, double)> go = [&](int begin, double worst) {
    const int n = static_cast<int>(seconds.size());
    if (static_cast<int>(ends.size()) == k - 1) {
      const double last =
          std::accumulate(seconds.begin() + begin, seconds.end(), 0.0);
      best = std::min(best, std::max(worst, last));
      return;
    }
    double s = 0;
    for (int end = begin + 1;
         end <= n - (k - 1 - static_cast<int>(ends.size())); ++end) {
      s += seconds[end - 1];
      ends.push_back(end);
      go(end, std::max(worst, s));
      ends.pop_back();
    }
  };
  go(0, 0);
  return best;
}

void ExpectConsecutiveCover(const ops::Graph &g,
                            const PipelinePartition &partition, int chunks) {
  ASSERT_EQ(chunks, static_cast<int>(partition.chunks.size()));
  EXPECT_EQ(0, partition.chunks.front().first_node);
  EXPECT_EQ(static_cast<int>(g.nodes().size()),
            partition.chunks.back().end_node);
  for (size_t c = 0; c < partition.chunks.size(); ++c) {
    EXPECT_LT(partition.chunks[c].first_node, partition.chunks[c].end_node)
        << "chunk " << c;
    if (c > 0) {
      EXPECT_EQ(partition.chunks[c - 1].end_node,
                partition.chunks[c].first_node);
    }
  }
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    const int chunk = partition.ChunkOf(static_cast<int>(n));
    EXPECT_GE(chunk, 0) << "node " << n;
    // Topological: whatever a node reads was made in its chunk or an earlier
    // one.
    for (int v : g.nodes()[n].inputs) {
      const int producer = g.values()[v].producer;
      if (producer >= 0) {
        EXPECT_LE(partition.ChunkOf(producer), chunk) << "node " << n;
      }
    }
  }
}

class PipelinePartitionTest : public ::testing::Test {
protected:
  PipelinePartitionTest()
      : resources_(test::Host(8, int64_t{64} << 30)), cost_(&resources_) {}
  ResourceGraph resources_;
  CostModel cost_;
};

TEST_F(PipelinePartitionTest, MatchesTheBestSplitOfUnevenOps) {
  const auto g = UnevenChain(kWidths);
  const std::vector<double> seconds = NodeSeconds(*g, cost_);
  for (const auto &[p, v] : {std::pair{2, 1}, {2, 2}, {3, 1}, {4, 1}, {3, 2}}) {
    PipelinePartitionOptions options;
    options.ranks = p;
    options.virtual_stages = v;
    options.micro_batch_size = kMicroBatch;
    Result<PipelinePartition> partition =
        PartitionDenseGraph(*g, cost_, options);
    ASSERT_TRUE(partition.ok()) << partition.status();
    ExpectConsecutiveCover(*g, *partition, p * v);
    const double best = BruteForceBottleneck(seconds, p * v);
    EXPECT_NEAR(best, partition->bottleneck_seconds, 1e-12 * best)
        << "p=" << p << " v=" << v << "\n"
        << ToText(*g, *partition);
    double total = 0;
    for (const PipelineChunk &chunk : partition->chunks)
      total += chunk.seconds;
    EXPECT_NEAR(std::accumulate(seconds.begin(), seconds.end(), 0.0), total,
                1e-12);
  }
}

TEST_F(PipelinePartitionTest, BalancesBetterThanEqualNodeCounts) {
  const auto g = UnevenChain(kWidths);
  const std::vector<double> seconds = NodeSeconds(*g, cost_);
  PipelinePartitionOptions options;
  options.ranks = 2;
  options.micro_batch_size = kMicroBatch;
  Result<PipelinePartition> partition = PartitionDenseGraph(*g, cost_, options);
  ASSERT_TRUE(partition.ok()) << partition.status();
  const double first_half =
      std::accumulate(seconds.begin(), seconds.begin() + 5, 0.0);
  const double second_half =
      std::accumulate(seconds.begin() + 5, seconds.end(), 0.0);
  EXPECT_LT(partition->bottleneck_seconds, std::max(first_half, second_half));
}

// The smallest bottleneck of any split of the chain UnevenChain(kWidths)
// into k chunks on k ranks (v = 1) whose chunks each hold at most `limit`
// bytes for `in_flight` micro-batches; infinity when none does.
double BruteForceBottleneckWithin(const std::vector<double> &seconds, int k,
                                  int64_t limit, int in_flight) {
  const int n = static_cast<int>(seconds.size());
  const auto chunk_bytes = [&](int first, int end) {
    int64_t floats = first > 0 ? kWidths[first - 1] : 0;
    for (int i = first; i < end; ++i)
      floats += kWidths[i];
    return floats * 4 * kMicroBatch * in_flight;
  };
  double best = std::numeric_limits<double>::infinity();
  std::function<void(int, int, double)> go = [&](int begin, int left,
                                                 double worst) {
    if (left == 1) {
      if (chunk_bytes(begin, n) > limit)
        return;
      const double last =
          std::accumulate(seconds.begin() + begin, seconds.end(), 0.0);
      best = std::min(best, std::max(worst, last));
      return;
    }
    double s = 0;
    for (int end = begin + 1; end <= n - (left - 1); ++end) {
      s += seconds[end - 1];
      if (chunk_bytes(begin, end) <= limit)
        go(end, left - 1, std::max(worst, s));
    }
  };
  go(0, k, 0);
  return best;
}

TEST_F(PipelinePartitionTest, FindsTheFastestSplitWithinTheActivationLimit) {
  const auto g = UnevenChain(kWidths);
  const std::vector<double> seconds = NodeSeconds(*g, cost_);
  PipelinePartitionOptions options;
  options.ranks = 3;
  options.micro_batch_size = kMicroBatch;
  options.micro_batches_in_flight = 3;
  Result<PipelinePartition> free = PartitionDenseGraph(*g, cost_, options);
  ASSERT_TRUE(free.ok()) << free.status();
  const int64_t free_max = *std::max_element(
      free->rank_activation_bytes.begin(), free->rank_activation_bytes.end());
  // Under what the fastest split needs: the split must change.
  for (const int64_t limit : {free_max - 1, free_max * 3 / 4}) {
    options.rank_activation_limit_bytes = limit;
    const double best = BruteForceBottleneckWithin(seconds, 3, limit, 3);
    ASSERT_LT(best, std::numeric_limits<double>::infinity())
        << "a split fits " << limit;
    Result<PipelinePartition> limited = PartitionDenseGraph(*g, cost_, options);
    ASSERT_TRUE(limited.ok()) << limited.status();
    ExpectConsecutiveCover(*g, *limited, 3);
    for (size_t r = 0; r < 3; ++r) {
      EXPECT_EQ(limited->chunks[r].activation_bytes * 3,
                limited->rank_activation_bytes[r]);
      EXPECT_LE(limited->rank_activation_bytes[r], limit) << "rank " << r;
    }
    EXPECT_NEAR(best, limited->bottleneck_seconds, 1e-12 * best)
        << ToText(*g, *limited);
    EXPECT_GT(limited->bottleneck_seconds, free->bottleneck_seconds);
  }
}

TEST_F(PipelinePartitionTest, KeepsEveryRankOfInterleavedChunksWithinTheLimit) {
  const std::vector<int64_t> widths = {256, 32,  256, 32,  512,
                                       32,  256, 32,  256, 1};
  const auto g = UnevenChain(widths);
  PipelinePartitionOptions options;
  options.ranks = 2;
  options.virtual_stages = 2;
  options.micro_batch_size = kMicroBatch;
  options.micro_batches_in_flight = 2;
  Result<PipelinePartition> free = PartitionDenseGraph(*g, cost_, options);
  ASSERT_TRUE(free.ok()) << free.status();
  const int64_t free_max = *std::max_element(
      free->rank_activation_bytes.begin(), free->rank_activation_bytes.end());
  // The least any 4-chunk split can hold in its largest chunk: a limit of
  // twice that per rank (for 2 micro-batches, each rank's 2 chunks) fits
  // some split, and the search never misses a split of equal shares.
  int64_t least_max_chunk = std::numeric_limits<int64_t>::max();
  const int n = static_cast<int>(widths.size());
  const auto chunk_floats = [&](int first, int end) {
    int64_t floats = first > 0 ? widths[first - 1] : 0;
    for (int i = first; i < end; ++i)
      floats += widths[i];
    return floats;
  };
  for (int a = 1; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      for (int c = b + 1; c < n; ++c) {
        least_max_chunk =
            std::min(least_max_chunk,
                     std::max({chunk_floats(0, a), chunk_floats(a, b),
                               chunk_floats(b, c), chunk_floats(c, n)}));
      }
    }
  }
  options.rank_activation_limit_bytes =
      least_max_chunk * 4 * kMicroBatch * 2 * 2;
  ASSERT_LT(options.rank_activation_limit_bytes, free_max) << "the limit binds";
  Result<PipelinePartition> limited = PartitionDenseGraph(*g, cost_, options);
  ASSERT_TRUE(limited.ok()) << limited.status();
  ExpectConsecutiveCover(*g, *limited, 4);
  std::vector<int64_t> rank_bytes(2, 0);
  for (size_t c = 0; c < limited->chunks.size(); ++c) {
    rank_bytes[c % 2] += limited->chunks[c].activation_bytes * 2;
  }
  EXPECT_EQ(rank_bytes, limited->rank_activation_bytes);
  for (int64_t bytes : rank_bytes)
    EXPECT_LE(bytes, options.rank_activation_limit_bytes);
}

TEST_F(PipelinePartitionTest, CountsTheActivationsAChunkMakesAndReceives) {
  const auto g = UnevenChain({8, 16, 4});
  PipelinePartitionOptions options;
  options.ranks = 3;
  options.micro_batch_size = 10;
  Result<PipelinePartition> partition = PartitionDenseGraph(*g, cost_, options);
  ASSERT_TRUE(partition.ok()) << partition.status();
  EXPECT_EQ(8 * 4 * 10, partition->chunks[0].activation_bytes);
  EXPECT_EQ((8 + 16) * 4 * 10, partition->chunks[1].activation_bytes);
  EXPECT_EQ((16 + 4) * 4 * 10, partition->chunks[2].activation_bytes);
}

TEST_F(PipelinePartitionTest, FailsNamingTheNodeOverTheLimit) {
  const auto g = UnevenChain(kWidths);
  PipelinePartitionOptions options;
  options.ranks = 2;
  options.micro_batch_size = kMicroBatch;
  options.rank_activation_limit_bytes =
      1024 * 4 * kMicroBatch; // fc5 needs more
  Result<PipelinePartition> partition = PartitionDenseGraph(*g, cost_, options);
  EXPECT_EQ(StatusCode::kResourceExhausted, partition.status().code());
  EXPECT_THAT(partition.status().message(),
              HasSubstr("node \"fc5\" alone holds"));
}

TEST_F(PipelinePartitionTest, FailsWhenNoSplitFitsTheLimit) {
  const auto g = UnevenChain(kWidths);
  PipelinePartitionOptions options;
  options.ranks = 2;
  options.micro_batch_size = kMicroBatch;
  // Every node fits alone, but the ten nodes' activations cannot share two
  // ranks.
  options.rank_activation_limit_bytes = (1024 + 200) * 4 * kMicroBatch;
  Result<PipelinePartition> partition = PartitionDenseGraph(*g, cost_, options);
  EXPECT_EQ(StatusCode::kResourceExhausted, partition.status().code())
      << partition.status();
  EXPECT_THAT(partition.status().message(),
              HasSubstr("no split of 10 nodes into 2 chunks"));
}

TEST_F(PipelinePartitionTest, RejectsMoreChunksThanNodesAndBadOptions) {
  const auto g = UnevenChain({8, 4});
  PipelinePartitionOptions options;
  options.ranks = 3;
  EXPECT_THAT(
      PartitionDenseGraph(*g, cost_, options).status().message(),
      HasSubstr("the graph has 2 nodes, fewer than the p*v = 3 chunks"));
  options.ranks = 1;
  options.micro_batches_in_flight = 0;
  EXPECT_THAT(PartitionDenseGraph(*g, cost_, options).status().message(),
              HasSubstr("micro_batches_in_flight 0 < 1"));
  options.micro_batches_in_flight = 1;
  options.device = 7;
  EXPECT_EQ(StatusCode::kInvalidArgument,
            PartitionDenseGraph(*g, cost_, options).status().code());
}

} // namespace
} // namespace ember::scheduler
