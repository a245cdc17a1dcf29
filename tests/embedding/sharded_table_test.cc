// The key-sharded table (embedding/sharded_table.h) over the in-process
// communicator: N ranks pulling and pushing their own keys leave the same
// rows, bit for bit, as one table fed the ranks' keys together with each
// key's gradients summed in rank order.

#include "embedding/sharded_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/in_process_communicator.h"
#include "core/random.h"
#include "embedding/stored_rows.h"
#include "tests/testing/temp_dir.h"

namespace ember::embedding {
namespace {

using Comms = std::vector<std::unique_ptr<Communicator>>;

struct Param {
  int ranks;
  bool disk_tier;
  SparseOptimizer optimizer;
};

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return std::to_string(info.param.ranks) + "Ranks" + (info.param.disk_tier ? "Tiered" : "Memory") +
         SparseOptimizerName(info.param.optimizer);
}

// Runs body(rank) on a thread per rank and joins them.
void OnEveryRank(int ranks, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

// Every stored row of `table`, by key.
std::map<Key, std::vector<float>> RowsOf(EmbeddingTable& table) {
  std::map<Key, std::vector<float>> rows;
  StoredRows& stored = table.stored_rows();
  const int64_t floats = stored.row_floats();
  EXPECT_TRUE(stored
                  .Scan([&](Key key, const float* row) {
                    rows[key].assign(row, row + floats);
                    return Status::OK();
                  })
                  .ok());
  return rows;
}

class ShardedTableTest : public test::TempDirTest, public ::testing::WithParamInterface<Param> {
 protected:
  EmbeddingTableOptions Options(const std::string& disk_name) const {
    EmbeddingTableOptions options;
    options.dim = 8;
    options.num_shards = 4;
    options.seed = 7;
    options.optimizer.type = GetParam().optimizer;
    if (GetParam().disk_tier) {
      // A budget of a few dozen rows per shard: most rows live on disk.
      options.memory_budget_bytes = 6 << 10;
      options.disk_path = Path(disk_name);
    }
    return options;
  }

  Comms Group(int ranks) {
    auto comms = NewInProcessCommunicators(ranks, {.timeout_seconds = 30});
    EXPECT_TRUE(comms.ok()) << comms.status();
    return std::move(*comms);
  }
};

TEST_P(ShardedTableTest, RanksTrainTheRowsOneTableTrainsOnTheirKeysTogether) {
  const int ranks = GetParam().ranks;
  auto reference = NewEmbeddingTable(Options("reference"));
  ASSERT_TRUE(reference.ok()) << reference.status();
  Comms pull = Group(ranks), push = Group(ranks), lookup = Group(ranks);
  std::vector<std::unique_ptr<EmbeddingTable>> tables(ranks);
  for (int r = 0; r < ranks; ++r) {
    auto local = NewEmbeddingTable(Options("rank-" + std::to_string(r)));
    ASSERT_TRUE(local.ok()) << local.status();
    auto table = NewShardedTable(std::move(*local),
                                 {pull[r].get(), push[r].get(), lookup[r].get()});
    ASSERT_TRUE(table.ok()) << table.status();
    tables[r] = std::move(*table);
  }
  const int dim = 8;
  for (int step = 0; step < 12; ++step) {
    // Each rank's distinct keys: a shared hot range and keys of its own;
    // some steps give a rank no keys at all.
    std::vector<std::vector<Key>> keys(ranks);
    std::vector<std::vector<float>> grads(ranks);
    for (int r = 0; r < ranks; ++r) {
      RandomStream random(step, r);
      if ((step + r) % 5 == 4) continue;
      std::vector<Key> candidates;
      for (Key k = 0; k < 40; ++k) candidates.push_back(k * 1000003);
      for (Key k = 0; k < 30; ++k) candidates.push_back((r + 1) * 77777777 + k * 31 + step);
      for (Key k : candidates) {
        if (random.Bernoulli(0.4)) keys[r].push_back(k);
      }
      grads[r].resize(keys[r].size() * dim);
      for (float& g : grads[r]) g = static_cast<float>(random.Uniform(-1, 1));
    }
    // The reference: the union in rank order, pulled once; gradients
    // summed per key in rank order, pushed once.
    std::vector<Key> all;
    std::unordered_map<Key, size_t> at;
    std::vector<float> sums;
    for (int r = 0; r < ranks; ++r) {
      for (size_t i = 0; i < keys[r].size(); ++i) {
        auto [it, fresh] = at.emplace(keys[r][i], all.size());
        if (fresh) {
          all.push_back(keys[r][i]);
          sums.insert(sums.end(), &grads[r][i * dim], &grads[r][i * dim] + dim);
        } else {
          for (int d = 0; d < dim; ++d) sums[it->second * dim + d] += grads[r][i * dim + d];
        }
      }
    }
    (*reference)->set_step(step);
    std::vector<float> expected(all.size() * dim);
    ASSERT_TRUE((*reference)->Pull(all, expected.data()).ok());
    ASSERT_TRUE((*reference)->Push(all, sums.data()).ok());

    std::vector<std::vector<float>> pulled(ranks);
    std::vector<Status> status(ranks);
    OnEveryRank(ranks, [&](int r) {
      tables[r]->set_step(step);
      pulled[r].resize(keys[r].size() * dim);
      status[r] = tables[r]->Pull(keys[r], pulled[r].data());
      if (status[r].ok()) status[r] = tables[r]->Push(keys[r], grads[r].data());
    });
    for (int r = 0; r < ranks; ++r) {
      ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
      for (size_t i = 0; i < keys[r].size(); ++i) {
        ASSERT_EQ(0, std::memcmp(&pulled[r][i * dim], &expected[at[keys[r][i]] * dim],
                                 sizeof(float) * dim))
            << "step " << step << " rank " << r << " key " << keys[r][i];
      }
    }
  }
  if (GetParam().disk_tier) {
    int64_t spilled = 0;
    for (auto& table : tables) spilled += table->stats().spilled_rows;
    EXPECT_GT(spilled, 0) << "the budget should send rows to the ranks' disk tiers";
  }
  // What went over the wire: nothing for one rank; otherwise at least the
  // least possible, and not much more (keys sent again with gradients).
  for (int r = 0; r < ranks; ++r) {
    const TableStats stats = tables[r]->stats();
    if (ranks == 1) {
      EXPECT_EQ(0, stats.exchanged_bytes);
    } else {
      EXPECT_GT(stats.exchanged_bytes_minimum, 0) << "rank " << r;
      EXPECT_GE(stats.exchanged_bytes, stats.exchanged_bytes_minimum) << "rank " << r;
      EXPECT_LE(stats.exchanged_bytes, stats.exchanged_bytes_minimum * 13 / 10) << "rank " << r;
    }
  }
  // Every row, optimizer state and metadata included, is the reference's,
  // and it lives with its owner only.
  std::map<Key, std::vector<float>> expected = RowsOf(**reference), held;
  for (int r = 0; r < ranks; ++r) {
    for (auto& [key, row] : RowsOf(*tables[r])) {
      EXPECT_EQ(KeyOwner(key, ranks), r) << "key " << key;
      EXPECT_TRUE(held.emplace(key, row).second) << "key " << key << " on two ranks";
    }
  }
  ASSERT_EQ(expected.size(), held.size());
  for (auto& [key, row] : expected) {
    ASSERT_EQ(row, held[key]) << "key " << key;
  }
  // Lookup reads what Pull would, without changing a row.
  std::vector<std::vector<float>> looked(ranks);
  std::vector<Key> probe = {0, 1000003, 5, 77777777};
  OnEveryRank(ranks, [&](int r) {
    looked[r].resize(probe.size() * dim);
    EXPECT_TRUE(tables[r]->Lookup(probe, looked[r].data()).ok());
  });
  std::vector<float> want(probe.size() * dim);
  ASSERT_TRUE((*reference)->Lookup(probe, want.data()).ok());
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(want, looked[r]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, ShardedTableTest,
    ::testing::Values(Param{1, false, SparseOptimizer::kAdagrad},
                      Param{2, false, SparseOptimizer::kAdagrad},
                      Param{3, false, SparseOptimizer::kAdam},
                      Param{3, false, SparseOptimizer::kFtrl},
                      Param{2, true, SparseOptimizer::kAdagrad},
                      Param{3, true, SparseOptimizer::kRowWiseAdagrad}),
    ParamName);

TEST(KeyOwnerTest, SpreadsKeysEvenlyAndDependsOnlyOnKeyAndRanks) {
  for (int ranks : {1, 2, 3, 8}) {
    std::vector<int> count(ranks, 0);
    for (Key k = 0; k < 30000; ++k) {
      const int owner = KeyOwner(k, ranks);
      ASSERT_GE(owner, 0);
      ASSERT_LT(owner, ranks);
      ASSERT_EQ(owner, KeyOwner(k, ranks));
      ++count[owner];
    }
    for (int c : count) EXPECT_NEAR(c, 30000.0 / ranks, 30000.0 / ranks * 0.05);
  }
}

TEST(ShardedTableErrorsTest, RefusesMissingOrMismatchedCommunicators) {
  EmbeddingTableOptions options;
  auto two = NewInProcessCommunicators(2);
  auto three = NewInProcessCommunicators(3);
  ASSERT_TRUE(two.ok() && three.ok());
  auto local = NewMemoryTable(options);
  ASSERT_TRUE(local.ok());
  auto missing = NewShardedTable(std::move(*local), {(*two)[0].get(), nullptr, nullptr});
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("push"), std::string::npos) << missing.status();
  local = NewMemoryTable(options);
  auto mismatched =
      NewShardedTable(std::move(*local), {(*two)[0].get(), (*three)[0].get(), (*two)[0].get()});
  EXPECT_EQ(mismatched.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatched.status().message().find("of 3"), std::string::npos) << mismatched.status();
}

// A rank that leaves (its table destroyed with its communicators) makes its
// peers' next exchange fail naming it, not hang.
TEST(ShardedTableErrorsTest, APeerThatLeftFailsTheExchangeNamingIt) {
  EmbeddingTableOptions options;
  options.dim = 4;
  auto pull = NewInProcessCommunicators(2, {.timeout_seconds = 20});
  auto push = NewInProcessCommunicators(2, {.timeout_seconds = 20});
  ASSERT_TRUE(pull.ok() && push.ok());
  auto local = NewMemoryTable(options);
  ASSERT_TRUE(local.ok());
  auto table = NewShardedTable(std::move(*local),
                               {(*pull)[0].get(), (*push)[0].get(), (*pull)[0].get()});
  ASSERT_TRUE(table.ok());
  (*pull)[1]->Abort(Status::Internal("rank 1 crashed"));
  std::vector<float> out(4 * 3);
  Status status = (*table)->Pull({1, 2, 3}, out.data());
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("rank 1"), std::string::npos) << status;
  EXPECT_NE(status.message().find("sharded pull"), std::string::npos) << status;
}

}  // namespace
}  // namespace ember::embedding
