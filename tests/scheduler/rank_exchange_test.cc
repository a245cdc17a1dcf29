// The cost of a job of ranks (mpirun -np N ember train): the bytes each rank
// exchanges per step, the time on the links between ranks, and what the
// planner predicts from them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/in_process_communicator.h"
#include "core/random.h"
#include "embedding/embedding_table.h"
#include "embedding/sharded_table.h"
#include "scheduler/cluster_file.h"
#include "scheduler/cost_model.h"
#include "scheduler/planner.h"
#include "tests/scheduler/scheduler_test_util.h"
#include "tests/testing/forwarding_communicator.h"

namespace ember::scheduler {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// Counts the bytes this rank's all-to-alls send to the other ranks, as a
// wire would carry them.
class CountingCommunicator final : public ::ember::test::ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  Status AllToAllV(ConstCommBuffer in, const std::vector<int64_t>& send_counts, CommBuffer out,
                   const std::vector<int64_t>& recv_counts) override {
    for (int q = 0; q < size(); ++q) {
      if (q != rank()) sent_bytes_ += send_counts[q] * static_cast<int64_t>(CommDTypeSize(in.dtype));
    }
    return inner().AllToAllV(in, send_counts, out, recv_counts);
  }
  int64_t sent_bytes() const { return sent_bytes_; }

 private:
  int64_t sent_bytes_ = 0;
};

// The sparse exchanges as the cost model prices them and as key-sharded
// tables make them: N ranks each pull and push their own distinct keys, and
// the bytes each rank's pull and push all-to-alls send (counted on the
// communicators) are the model's, within the spread of the keys' owners.
TEST(RankExchangeTest, SparseBytesPerStepAreWhatShardedTablesSend) {
  constexpr int kDim = 16;
  constexpr int kKeys = 20000;
  for (const int ranks : {2, 3, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    std::vector<std::vector<std::unique_ptr<Communicator>>> groups(3);
    for (auto& group : groups) {
      auto made = NewInProcessCommunicators(ranks, {.timeout_seconds = 60});
      ASSERT_TRUE(made.ok()) << made.status();
      group = std::move(*made);
    }
    std::vector<CountingCommunicator*> pull(ranks), push(ranks);
    std::vector<std::unique_ptr<Communicator>> counted_pull, counted_push;
    for (int r = 0; r < ranks; ++r) {
      auto p = std::make_unique<CountingCommunicator>(std::move(groups[0][r]));
      auto q = std::make_unique<CountingCommunicator>(std::move(groups[1][r]));
      pull[r] = p.get();
      push[r] = q.get();
      counted_pull.push_back(std::move(p));
      counted_push.push_back(std::move(q));
    }
    std::vector<Status> status(ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        status[r] = [&]() -> Status {
          embedding::EmbeddingTableOptions options;
          options.dim = kDim;
          EMBER_ASSIGN_OR_RETURN(auto local, embedding::NewMemoryTable(options));
          EMBER_ASSIGN_OR_RETURN(
              auto table, embedding::NewShardedTable(std::move(local),
                                                     {pull[r], push[r], groups[2][r].get()}));
          RandomStream random(11, r);
          std::vector<embedding::Key> keys;
          for (int i = 0; i < kKeys; ++i) keys.push_back(random.NextU64() | 1);
          std::sort(keys.begin(), keys.end());
          keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
          std::vector<float> rows(keys.size() * kDim), grads(keys.size() * kDim, 0.5f);
          EMBER_RETURN_IF_ERROR(table->Pull(keys, rows.data()));
          return table->Push(keys, grads.data());
        }();
        if (!status[r].ok()) {
          for (auto& group : groups) {
            if (group[r]) group[r]->Abort(status[r]);
          }
          pull[r]->Abort(status[r]);
          push[r]->Abort(status[r]);
        }
      });
    }
    for (auto& t : threads) t.join();
    const RankExchangeBytes model = RankExchangePerStep(kKeys, ranks, kDim, 0);
    for (int r = 0; r < ranks; ++r) {
      ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
      EXPECT_NEAR(pull[r]->sent_bytes(), model.pull, 0.03 * model.pull) << "rank " << r;
      EXPECT_NEAR(push[r]->sent_bytes(), model.push, 0.03 * model.push) << "rank " << r;
    }
  }
}

// The dense all-reduce as the MPI backend sends it (its N - 1 foreign blocks,
// then its summed block to each peer: 2 (N - 1) / N of the gradient), and
// the experts' rows.
TEST(RankExchangeTest, DenseAndExpertBytesPerStepFollowTheirCollectives) {
  for (const int ranks : {1, 2, 3, 8}) {
    const double n = ranks;
    const RankExchangeBytes bytes = RankExchangePerStep(1000, ranks, 16, 4e6, 5000.0);
    EXPECT_DOUBLE_EQ(ranks > 1 ? 2.0 * (n - 1) / n * 4e6 : 0.0, bytes.dense) << ranks;
    EXPECT_DOUBLE_EQ(ranks > 1 ? 4.0 * 5000.0 * 2.0 * (n - 1) / n : 0.0, bytes.experts) << ranks;
    EXPECT_DOUBLE_EQ(bytes.pull + bytes.push + bytes.dense + bytes.experts, bytes.total());
  }
}

// A MoE model of 4 experts (hidden 64) for features of 100k ids and one
// rank's setup of 4 ranks on one host, batch 512.
Result<Program> MoeProgram(const SparseFeatures& f) {
  auto graph = test::MoeGraph(f.num_dense, f.num_slots, f.embedding_dim, /*experts=*/4,
                              /*hidden=*/64);
  return BuildProgram("moe", *graph, f);
}

StepSetup FourRanksOnOneHost() {
  StepSetup setup;
  setup.batch = 512;
  setup.ranks = 4;
  setup.ranks_per_host = 4;
  setup.replicas_per_host = 4;
  return setup;
}

// A MoE model's program counts what its expert layers route (experts x
// capacity rows per example, each in + out floats), and a job of ranks pays
// for moving them in its dense stage when the experts are divided.
TEST(RankExchangeTest, ExpertParallelismMovesTheRoutedRowsInTheDenseStage) {
  const SparseFeatures f = test::Features(100000, 100000);
  Result<Program> program = MoeProgram(f);
  ASSERT_TRUE(program.ok()) << program.status();
  const double in = f.num_dense + f.num_slots * f.embedding_dim;
  EXPECT_EQ(1, program->expert_chains);
  // Top-1, capacity factor 1: 4 experts x 256 rows of a batch of 1024.
  EXPECT_DOUBLE_EQ(1.0 * (in + 64), program->expert_floats_per_example);

  const ResourceGraph host = test::Host(4, 64 * kGiB);
  const CostModel cost(&host);
  StepSetup setup = FourRanksOnOneHost();
  const StepCost divided = cost.Estimate(*program, setup);
  EXPECT_DOUBLE_EQ(4.0 * (in + 64) * 512 * 2 * 3 / 4, divided.rank_bytes.experts);
  setup.expert_parallel = false;
  const StepCost replicated = cost.Estimate(*program, setup);
  EXPECT_EQ(0.0, replicated.rank_bytes.experts);
  EXPECT_GT(divided.stages[divided.stage_index[Stage::kDense]].seconds,
            replicated.stages[replicated.stage_index[Stage::kDense]].seconds);
  EXPECT_EQ(divided.stages[divided.stage_index[Stage::kPull]].seconds,
            replicated.stages[replicated.stage_index[Stage::kPull]].seconds);

  // Two expert layers are one chain: its rows cross at its ends only.
  auto deep = test::MoeGraph(f.num_dense, f.num_slots, f.embedding_dim, 4, 64, /*hidden2=*/16);
  Result<Program> mlp = BuildProgram("moe", *deep, f);
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_EQ(1, mlp->expert_chains);
  EXPECT_DOUBLE_EQ(1.0 * (in + 16), mlp->expert_floats_per_example);
}

// The dense gradients' buckets: all but the last overlap the backward, so a
// job of ranks pays less for the all-reduce than with one all-reduce after
// the backward, never less than one bucket's, and a bucket as large as the
// model is the one all-reduce.
TEST(RankExchangeTest, GradientBucketsHideTheAllReduceBehindTheBackward) {
  const SparseFeatures f = test::Features(100000, 100000);
  Result<Program> program = MoeProgram(f);
  ASSERT_TRUE(program.ok()) << program.status();
  const ResourceGraph host = test::Host(4, 64 * kGiB);
  const CostModel cost(&host);
  StepSetup setup = FourRanksOnOneHost();
  setup.dense_bucket_bytes = 0;
  const double after = cost.Estimate(*program, setup).dense_all_reduce_seconds;
  setup.dense_bucket_bytes = int64_t{1} << 40;
  EXPECT_DOUBLE_EQ(after, cost.Estimate(*program, setup).dense_all_reduce_seconds);
  const double gradient_bytes = 4.0 * program->dense_parameters;
  setup.dense_bucket_bytes = static_cast<int64_t>(gradient_bytes / 4);
  const StepCost during = cost.Estimate(*program, setup);
  EXPECT_GT(after, 0.0);
  EXPECT_LT(during.dense_all_reduce_seconds, after);
  EXPECT_GE(during.dense_all_reduce_seconds, after / 4 * 0.99);
}

TEST(RankExchangeTest, OneRankExchangesNothing) {
  const RankExchangeBytes bytes = RankExchangePerStep(1e6, 1, 64, 1e8);
  EXPECT_EQ(0.0, bytes.total());
  RankLinks links;  // One rank.
  links.loopback_gbps = links.network_gbps = 1.0;
  EXPECT_EQ(0.0, RankExchangeSeconds(1e9, 3, links));
}

TEST(RankExchangeTest, RanksOnOneHostUseTheLoopbackAndOthersTheSharedNetwork) {
  RankLinks links;
  links.loopback_gbps = 4.0;
  links.loopback_latency_us = 2.0;
  links.network_gbps = 25.0;
  links.network_latency_us = 5.0;
  // Three ranks on one host: the loopback only.
  links.ranks = 3;
  links.ranks_per_host = 3;
  EXPECT_DOUBLE_EQ(1e6 / 4e9 + 3 * 2 * 2e-6, RankExchangeSeconds(1e6, 3, links));
  // Eight hosts of one rank: the network, one message per peer and round.
  links.ranks = 8;
  links.ranks_per_host = 1;
  EXPECT_DOUBLE_EQ(1e6 / 25e9 + 2 * 7 * 5e-6, RankExchangeSeconds(1e6, 2, links));
  // 64 ranks, 8 a host: 7 of the 63 peers are near; the host's 8 ranks
  // share its link.
  links.ranks = 64;
  links.ranks_per_host = 8;
  EXPECT_DOUBLE_EQ(1e6 * 7 / 63 / 4e9 + 7 * 2e-6 + 1e6 * 56 / 63 / (25e9 / 8) + 56 * 5e-6,
                   RankExchangeSeconds(1e6, 1, links));
}

TEST(RankExchangeTest, RanksPerHostFillTheHostsEvenly) {
  EXPECT_EQ(3, RanksPerHost(3, 1));
  EXPECT_EQ(1, RanksPerHost(8, 8));
  EXPECT_EQ(8, RanksPerHost(64, 8));
  EXPECT_EQ(2, RanksPerHost(9, 8));
  EXPECT_EQ(1, RanksPerHost(1, 8));
}

// ranks = 1 is the step as before there were ranks, bit for bit.
TEST(RankExchangeTest, OneRankEstimatesTheStepAsBefore) {
  const Program program = test::MlpProgram(256);
  const ResourceGraph graph = test::Host(4, 64 * kGiB);
  const CostModel cost(&graph);
  StepSetup setup;
  setup.threads = PerStage<int>::Filled(2);
  const StepCost before = cost.Estimate(program, setup);
  setup.ranks = 1;
  setup.ranks_per_host = 1;
  const StepCost after = cost.Estimate(program, setup);
  ASSERT_EQ(before.stages.size(), after.stages.size());
  for (size_t i = 0; i < before.stages.size(); ++i) {
    EXPECT_EQ(before.stages[i].name, after.stages[i].name);
    EXPECT_EQ(before.stages[i].seconds, after.stages[i].seconds);
  }
  EXPECT_EQ(0.0, after.rank_exchange_seconds);
  EXPECT_EQ(0.0, after.rank_bytes.total());

  PlanKnobs knobs;
  knobs.threads = 2;
  Result<Plan> plan = PredictPlan(program, cost, knobs, PlacerOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(1, plan->ranks);
  EXPECT_EQ(0.0, plan->exchange_bytes_per_step);
  EXPECT_EQ(0.0, plan->exchange_share);
  // A plan of one rank is written as before.
  EXPECT_EQ(std::string::npos, plan->ToJson().find("\"ranks\""));
  EXPECT_EQ(std::string::npos, plan->ToText().find("ranks:"));
}

// The exchanges are in the pull, push and dense stages: each is slower by
// its exchange's time.
TEST(RankExchangeTest, ExchangesAreInThePullPushAndDenseStages) {
  const Program program = test::MlpProgram(256, 100000);
  const ResourceGraph graph = test::Host(4, 64 * kGiB);
  const CostModel cost(&graph);
  StepSetup setup;
  setup.early_pulls = false;
  const StepCost one = cost.Estimate(program, setup);
  setup.ranks = 2;
  setup.ranks_per_host = 2;
  setup.replicas_per_host = 2;
  const StepCost two = cost.Estimate(program, setup);
  EXPECT_DOUBLE_EQ(RankExchangePerStep(two.unique_ids, 2, program.sparse.embedding_dim,
                                       4.0 * program.dense_parameters)
                       .total(),
                   two.rank_bytes.total());
  for (Stage s : {Stage::kPull, Stage::kPush, Stage::kDense}) {
    EXPECT_GT(two.stages[two.stage_index[s]].seconds, one.stages[one.stage_index[s]].seconds)
        << StageName(s);
  }
  EXPECT_EQ(one.stages[one.stage_index[Stage::kUnique]].seconds,
            two.stages[two.stage_index[Stage::kUnique]].seconds);
  EXPECT_GT(two.rank_exchange_seconds, 0.0);
}

constexpr char kCluster[] = R"({
  "hosts": [{"name": "node", "count": 8,
             "sockets": [{"count": 2, "cores": 48, "memory_gb": 1024}]}],
  "network": {"gbps": 25, "latency_us": 5}
})";

TEST(RankExchangeTest, TheExchangesShareOfTheStepGrowsWithTheRanks) {
  Result<ResourceGraph> graph = ParseClusterFile(kCluster, "cluster.json");
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  const Program program = test::MlpProgram(256, 1000000, 10000000);
  const CostModel cost(&*graph);
  double share = 0.0, bytes = 0.0;
  for (int ranks : {2, 8, 16, 64}) {
    PlanKnobs knobs;
    knobs.threads = 4;
    knobs.batch = 1024;
    knobs.ranks = ranks;
    Result<Plan> plan = PredictPlan(program, cost, knobs, PlacerOptions{});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(ranks, plan->ranks);
    EXPECT_EQ(RanksPerHost(ranks, 8), plan->ranks_per_host);
    EXPECT_GT(plan->exchange_share, share) << ranks << " ranks";
    EXPECT_LT(plan->exchange_share, 1.0);
    EXPECT_GT(plan->exchange_bytes_per_step, bytes) << ranks << " ranks";
    share = plan->exchange_share;
    bytes = plan->exchange_bytes_per_step;
    // The job trains every rank's batch each step, on CPUs.
    EXPECT_DOUBLE_EQ(ranks * 1024 / plan->predicted_step_seconds,
                     plan->predicted_samples_per_sec);
    EXPECT_FALSE(plan->dense_device.is_cuda());
    EXPECT_NE(std::string::npos, plan->ToText().find("of the step"));
    // The plan file keeps the ranks.
    Result<Plan> read = ParsePlanJson(plan->ToJson(), "plan.json");
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_EQ(ranks, read->ranks);
  }
}

TEST(RankExchangeTest, RanksOnOneHostShareItsCores) {
  const Program program = test::MlpProgram(256, 100000);
  const ResourceGraph graph = test::Host(2, 64 * kGiB);
  const CostModel cost(&graph);
  PlannerOptions options;
  options.max_rounds = 2;
  PlanKnobs start;
  start.threads = 2;
  start.ranks = 3;
  Result<Plan> plan = MakePlan(program, cost, options, start);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  // Two cores for three ranks: one thread each.
  EXPECT_EQ(1, plan->threads);
  EXPECT_EQ(3, plan->ranks_per_host);
  EXPECT_GT(plan->exchange_share, 0.0);
}

}  // namespace
}  // namespace ember::scheduler
