#include "scheduler/program.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tests/scheduler/scheduler_test_util.h"

namespace ember::scheduler {
namespace {

// sum_k 1 - (1 - p_k)^n over every rank, term by term.
double DirectExpectedDistinct(int64_t v, double s, double n) {
  double h = 0;
  for (int64_t k = 1; k <= v; ++k) h += std::pow(k, -s);
  double sum = 0;
  for (int64_t k = 1; k <= v; ++k) sum += 1 - std::pow(1 - std::pow(k, -s) / h, n);
  return sum;
}

TEST(ExpectedDistinctTest, MatchesTheDirectSumSmallAndLarge) {
  for (int64_t v : {1, 50, 4096, 300000}) {
    for (double n : {1.0, 256.0, 1e5}) {
      const double direct = DirectExpectedDistinct(v, 1.05, n);
      EXPECT_NEAR(direct, ExpectedDistinct(v, 1.05, n), 1e-3 * direct + 1e-9) << v << " " << n;
    }
  }
  EXPECT_NEAR(1.0, ExpectedDistinct(1000, 1.05, 1.0), 1e-12);  // One draw, one value.
  EXPECT_EQ(0.0, ExpectedDistinct(1000, 1.05, 0.0));
}

TEST(ProgramTest, DenseOpsCarryTheGraphsCostsPerExample) {
  const SparseFeatures f = test::Features(1000, 100000);
  auto graph = test::MlpGraph(f.num_dense, f.num_slots, f.embedding_dim, 64);
  Result<Program> program = BuildProgram("mlp", *graph, f);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  // Every graph node is an op of the dense stage with its FLOPs per example.
  const ops::OpCost graph_cost = graph->TotalCost(1000);
  double flops = 0;
  for (const ProgramOp& op : program->ops) {
    if (op.op == "fully_connected" || op.op == "concat")
      flops += op.forward.flops + op.backward.flops;
  }
  EXPECT_NEAR(graph_cost.flops / 1000, flops, 1e-6 * flops);
  EXPECT_EQ(graph->parameter_count(), program->dense_parameters);
  // Sparse ops: read, unique, pull, push on their stages.
  std::vector<std::string> sparse;
  for (const ProgramOp& op : program->ops) {
    if (op.sparse) sparse.push_back(std::string(StageName(op.stage)) + ":" + op.op);
  }
  EXPECT_THAT(sparse, ::testing::ElementsAre("read:read", "unique:unique", "pull:embedding_pull",
                                             "push:embedding_push"));
  // Tensors flow forward: every op input was produced by an earlier op.
  for (size_t i = 0; i < program->ops.size(); ++i) {
    for (int t : program->ops[i].inputs)
      EXPECT_LT(program->tensors[t].producer, static_cast<int>(i));
  }
}

TEST(ProgramTest, ASavedIntermediateIsATensorWithoutGradientThatNoOtherOpReads) {
  const SparseFeatures f = test::Features(1000, 100000);
  auto graph = test::CrossGraph(f.num_dense, f.num_slots, f.embedding_dim);
  Result<Program> program = BuildProgram("dcn", *graph, f);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const double d = f.num_dense + f.num_slots * f.embedding_dim;
  int saved = -1;
  for (size_t t = 0; t < program->tensors.size(); ++t) {
    if (program->tensors[t].name == "cross:saved0") {
      saved = static_cast<int>(t);
    } else {
      EXPECT_TRUE(program->tensors[t].has_gradient) << program->tensors[t].name;
    }
  }
  ASSERT_GE(saved, 0);
  const ProgramTensor& z = program->tensors[saved];
  EXPECT_FALSE(z.has_gradient);
  EXPECT_EQ(4.0 * d, z.bytes_per_example);
  ASSERT_GE(z.producer, 0);
  const ProgramOp& cross = program->ops[z.producer];
  EXPECT_EQ("cross", cross.name);
  ASSERT_EQ(2u, cross.outputs.size());
  EXPECT_EQ(saved, cross.outputs[1]);
  for (const ProgramOp& op : program->ops) {
    EXPECT_THAT(op.inputs, ::testing::Not(::testing::Contains(saved))) << op.name;
  }
  // The layer's output (not the saved z) feeds the next op.
  bool feeds_fc = false;
  for (const ProgramOp& op : program->ops) {
    if (op.name == "fc") feeds_fc = op.inputs == std::vector<int>{cross.outputs[0]};
  }
  EXPECT_TRUE(feeds_fc);
}

TEST(ProgramTest, UniqueIdsTableRowsAndHitRateFollowTheZipfSlots) {
  const Program p = test::MlpProgram(16, /*vocabulary=*/1000, /*examples=*/100000);
  EXPECT_NEAR(26 * ExpectedDistinct(1000, 1.05, 256), p.UniqueIdsPerBatch(256), 1e-6);
  EXPECT_NEAR(26 * ExpectedDistinct(1000, 1.05, 100000), p.TableRows(), 1e-6);
  EXPECT_LT(p.UniqueIdsPerBatch(256), 26 * 256);
  EXPECT_EQ(1.0, p.HitRate(26 * 1000));
  EXPECT_EQ(0.0, p.HitRate(0));
  // The 10% most frequent ids of each slot hold more than 10% of the mass.
  EXPECT_GT(p.HitRate(2600), 0.5);
  EXPECT_LT(p.HitRate(2600), 1.0);
}

TEST(ProgramTest, LateFractionIsTheChanceThatMoreThanKBatchesInFlightHoldARow) {
  const Program p = test::MlpProgram(16, /*vocabulary=*/500, /*examples=*/100000);
  // Directly: q_k = 1 - (1 - p_k)^n per id; late = sum q P(Bin(m, q) > k) / sum q.
  double h = 0;
  for (int k = 1; k <= 500; ++k) h += std::pow(k, -1.05);
  for (auto [m, stale] : {std::pair{1, 0}, std::pair{3, 0}, std::pair{3, 1}, std::pair{4, 2}}) {
    double late = 0, total = 0;
    for (int k = 1; k <= 500; ++k) {
      const double q = 1 - std::pow(1 - std::pow(k, -1.05) / h, 256.0);
      double at_most = 0;
      for (int j = 0; j <= stale; ++j) {
        at_most += std::tgamma(m + 1) / (std::tgamma(j + 1) * std::tgamma(m - j + 1)) *
                   std::pow(q, j) * std::pow(1 - q, m - j);
      }
      late += q * (1 - at_most);
      total += q;
    }
    EXPECT_NEAR(late / total, p.LateFraction(256, m, stale), 1e-9) << m << " " << stale;
  }
  EXPECT_LT(p.LateFraction(256, 1, 0), p.LateFraction(256, 3, 0));  // More in flight.
  EXPECT_GT(p.LateFraction(256, 3, 0), p.LateFraction(256, 3, 1));  // More staleness allowed.
  EXPECT_EQ(0.0, p.LateFraction(256, 2, 2));
}

TEST(ProgramTest, APooledWidthThatIsNotSlotsTimesDimIsInvalid) {
  SparseFeatures f = test::Features(1000, 1000);
  auto graph = test::MlpGraph(f.num_dense, f.num_slots, 8, 16);  // dim 8, features say 16
  Result<Program> program = BuildProgram("mlp", *graph, f);
  EXPECT_EQ(StatusCode::kInvalidArgument, program.status().code());
}

}  // namespace
}  // namespace ember::scheduler
