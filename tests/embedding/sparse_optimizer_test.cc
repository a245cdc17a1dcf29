#include "embedding/sparse_optimizer.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/embedding/optimizer_reference.h"

namespace ember::embedding {
namespace {

using ::testing::HasSubstr;

TEST(SparseOptimizerTest, ParsesEveryKnownNameAndNamesItBack) {
  struct Case {
    std::string name;
    SparseOptimizer type;
  };
  for (const Case& c :
       {Case{"sgd", SparseOptimizer::kSgd}, Case{"adagrad", SparseOptimizer::kAdagrad},
        Case{"adam", SparseOptimizer::kAdam}, Case{"ftrl", SparseOptimizer::kFtrl},
        Case{"rowwise_adagrad", SparseOptimizer::kRowWiseAdagrad}}) {
    Result<SparseOptimizer> parsed = ParseSparseOptimizer(c.name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(c.type, *parsed);
    EXPECT_EQ(c.name, SparseOptimizerName(c.type));
  }
}

TEST(SparseOptimizerTest, RejectsUnknownNamesListingTheValidOnes) {
  for (const std::string name : {"", "Adam", "SGD ", "ftrl-proximal", "lazy_adam"}) {
    Result<SparseOptimizer> parsed = ParseSparseOptimizer(name);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(StatusCode::kInvalidArgument, parsed.status().code());
    EXPECT_THAT(parsed.status().message(),
                HasSubstr("sgd, adagrad, adam, ftrl, rowwise_adagrad"));
  }
}

TEST(SparseOptimizerTest, StateFloatsPerRowCountEachOptimizersAccumulators) {
  EXPECT_EQ(0, StateFloatsPerRow(SparseOptimizer::kSgd, 8));
  EXPECT_EQ(8, StateFloatsPerRow(SparseOptimizer::kAdagrad, 8));
  EXPECT_EQ(2 * 8 + 1, StateFloatsPerRow(SparseOptimizer::kAdam, 8));  // m, v, t
  EXPECT_EQ(2 * 8, StateFloatsPerRow(SparseOptimizer::kFtrl, 8));      // z, n
  EXPECT_EQ(1, StateFloatsPerRow(SparseOptimizer::kRowWiseAdagrad, 8));
}

TEST(SparseOptimizerTest, AdamStateStartsAtZeroMomentsAndZeroSteps) {
  SparseOptimizerOptions options;
  options.type = SparseOptimizer::kAdam;
  std::vector<float> state(2 * 3 + 1, -1.0f);
  InitOptimizerState(options, 3, state.data());
  EXPECT_THAT(state, ::testing::Each(0.0f));
}

TEST(SparseOptimizerTest, FtrlStateStartsAtZeroZAndTheInitialAccumulator) {
  SparseOptimizerOptions options;
  options.type = SparseOptimizer::kFtrl;
  options.initial_accumulator = 0.5f;
  std::vector<float> state(4, -1.0f);
  InitOptimizerState(options, 2, state.data());
  EXPECT_THAT(state, ::testing::ElementsAre(0.0f, 0.0f, 0.5f, 0.5f));
}

// Gradient of step `step` for row `row`, element e: varied signs and sizes.
std::vector<float> TestGradient(int row, int step, int dim) {
  std::vector<float> g(dim);
  for (int e = 0; e < dim; ++e) {
    g[e] = static_cast<float>(std::sin(1.7 * (row + 1) * (step + 1) + 0.9 * e)) *
           (e == dim - 1 ? 1e-3f : 1.0f);
  }
  return g;
}

TEST(SparseOptimizerTest, LazyAdamRowsCorrectBiasWithTheirOwnStepCounts) {
  SparseOptimizerOptions options;
  options.type = SparseOptimizer::kAdam;
  options.learning_rate = 0.01f;
  options.beta1 = 0.8f;
  options.beta2 = 0.99f;
  options.epsilon = 1e-6f;
  constexpr int kDim = 5;
  constexpr int kRows = 3;
  const float init[kDim] = {0.5f, -0.25f, 0.0f, 0.125f, -1.0f};
  std::vector<std::vector<float>> w(kRows, std::vector<float>(init, init + kDim));
  std::vector<std::vector<float>> state(kRows, std::vector<float>(2 * kDim + 1));
  std::vector<ReferenceRow> ref;
  for (int r = 0; r < kRows; ++r) {
    InitOptimizerState(options, kDim, state[r].data());
    ref.emplace_back(options, init, kDim);
  }
  // Row r is pushed only at steps divisible by r + 1: 12, 6 and 4 updates.
  for (int step = 0; step < 12; ++step) {
    for (int r = 0; r < kRows; ++r) {
      if (step % (r + 1) != 0) continue;
      const std::vector<float> g = TestGradient(r, step, kDim);
      ApplySparseOptimizer(options, kDim, g.data(), w[r].data(), state[r].data());
      ReferenceStep(options, g.data(), ref[r]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    EXPECT_EQ(ref[r].t, state[r][2 * kDim]) << r;
    for (int e = 0; e < kDim; ++e) {
      EXPECT_NEAR(ref[r].w[e], w[r][e], 1e-6 * std::max(1.0, std::abs(ref[r].w[e])))
          << r << "," << e;
      EXPECT_NEAR(ref[r].m[e], state[r][e], 1e-6) << r << "," << e;
      EXPECT_NEAR(ref[r].v[e], state[r][kDim + e], 1e-6) << r << "," << e;
    }
  }
  EXPECT_EQ(12.0f, state[0][2 * kDim]);
  EXPECT_EQ(4.0f, state[2][2 * kDim]);
}

TEST(SparseOptimizerTest, FtrlStepsMatchTheFormulaInDoubleAndWeightsAreTheClosedForm) {
  SparseOptimizerOptions options;
  options.type = SparseOptimizer::kFtrl;
  options.learning_rate = 0.1f;
  options.ftrl_beta = 1.0f;
  options.l1 = 0.01f;
  options.l2 = 0.5f;
  options.initial_accumulator = 0.1f;
  constexpr int kDim = 6;
  const float init[kDim] = {0.5f, -0.25f, 0.0f, 0.125f, -1.0f, 0.3f};
  std::vector<float> w(init, init + kDim);
  std::vector<float> state(2 * kDim);
  InitOptimizerState(options, kDim, state.data());
  ReferenceRow ref(options, init, kDim);
  for (int step = 0; step < 10; ++step) {
    std::vector<float> g = TestGradient(0, step, kDim);
    g[2] = 0.0f;  // an element that never gets a gradient
    ApplySparseOptimizer(options, kDim, g.data(), w.data(), state.data());
    ReferenceStep(options, g.data(), ref);
    for (int e = 0; e < kDim; ++e) {
      ASSERT_EQ(FtrlWeight(options, state[e], state[kDim + e]), w[e]) << step << "," << e;
    }
  }
  for (int e = 0; e < kDim; ++e) {
    EXPECT_NEAR(ref.w[e], w[e], 1e-6 * std::max(1.0, std::abs(ref.w[e]))) << e;
    EXPECT_NEAR(ref.z[e], state[e], 1e-5 * std::max(1.0, std::abs(ref.z[e]))) << e;
    EXPECT_NEAR(ref.acc[e], state[kDim + e], 1e-6 * std::max(1.0, ref.acc[e])) << e;
  }
  // z and n of an element without gradient stay at their start, so its weight
  // is the closed form at z = 0: exactly zero.
  EXPECT_EQ(0.0f, w[2]);
}

TEST(SparseOptimizerTest, FtrlWithL1MakesSmallWeightsExactlyZero) {
  SparseOptimizerOptions options;
  options.type = SparseOptimizer::kFtrl;
  options.learning_rate = 0.5f;
  options.l1 = 1.0f;
  constexpr int kDim = 4;
  std::vector<float> w = {0.01f, -0.02f, 0.0f, 0.03f};
  std::vector<float> state(2 * kDim);
  InitOptimizerState(options, kDim, state.data());
  ReferenceRow ref(options, w.data(), kDim);
  // Small gradients keep |z| under l1 for elements 0..2; element 3 gets
  // large ones of one sign, so its |z| passes l1.
  for (int step = 0; step < 5; ++step) {
    const std::vector<float> g = {0.1f, -0.05f, 0.2f * (step % 2 ? 1 : -1), 2.0f};
    ApplySparseOptimizer(options, kDim, g.data(), w.data(), state.data());
    ReferenceStep(options, g.data(), ref);
  }
  EXPECT_THAT(std::vector<float>(w.begin(), w.begin() + 3), ::testing::Each(0.0f));
  EXPECT_EQ(0.0, ref.w[0]);
  EXPECT_LT(w[3], 0.0f);
  EXPECT_NEAR(ref.w[3], w[3], 1e-6 * std::max(1.0, std::abs(ref.w[3])));
}

TEST(SparseOptimizerTest, AdagradStateStartsAtTheInitialAccumulator) {
  SparseOptimizerOptions options;
  options.type = SparseOptimizer::kAdagrad;
  options.initial_accumulator = 0.25f;
  std::vector<float> state(5, -1.0f);
  InitOptimizerState(options, 5, state.data());
  EXPECT_THAT(state, ::testing::Each(0.25f));
}

TEST(SparseOptimizerTest, SgdStepsMatchTheFormulaInDouble) {
  SparseOptimizerOptions options;
  options.type = SparseOptimizer::kSgd;
  options.learning_rate = 0.1f;
  std::vector<float> w = {0.5f, -0.25f, 0.0f};
  std::vector<double> ref(w.begin(), w.end());
  for (int step = 0; step < 5; ++step) {
    const std::vector<float> g = {0.3f * step, -1.0f, 2.0f - step};
    ApplySparseOptimizer(options, 3, g.data(), w.data(), nullptr);
    for (int e = 0; e < 3; ++e) ref[e] -= double{options.learning_rate} * g[e];
  }
  for (int e = 0; e < 3; ++e) EXPECT_NEAR(ref[e], w[e], 1e-6 * std::max(1.0, std::abs(ref[e])));
}

TEST(SparseOptimizerTest, AdagradStepsMatchTheFormulaInDouble) {
  SparseOptimizerOptions options;
  options.type = SparseOptimizer::kAdagrad;
  options.learning_rate = 0.05f;
  options.initial_accumulator = 0.1f;
  options.epsilon = 1e-8f;
  std::vector<float> w = {0.5f, -0.25f, 0.0f, 0.125f};
  std::vector<float> acc(4);
  InitOptimizerState(options, 4, acc.data());
  std::vector<double> ref_w(w.begin(), w.end());
  std::vector<double> ref_acc(4, double{options.initial_accumulator});
  for (int step = 0; step < 8; ++step) {
    const std::vector<float> g = {0.3f * step, -1.0f, 2.0f - step, 1e-3f};
    ApplySparseOptimizer(options, 4, g.data(), w.data(), acc.data());
    for (int e = 0; e < 4; ++e) {
      ref_acc[e] += double{g[e]} * g[e];
      ref_w[e] -=
          double{options.learning_rate} * g[e] / (std::sqrt(ref_acc[e]) + double{options.epsilon});
    }
  }
  for (int e = 0; e < 4; ++e) {
    EXPECT_NEAR(ref_w[e], w[e], 1e-6 * std::max(1.0, std::abs(ref_w[e]))) << e;
    EXPECT_NEAR(ref_acc[e], acc[e], 1e-6 * std::max(1.0, ref_acc[e])) << e;
  }
}

TEST(SparseOptimizerTest, AdagradWithZeroGradientLeavesTheRowUnchanged) {
  SparseOptimizerOptions options;
  options.type = SparseOptimizer::kAdagrad;
  options.initial_accumulator = 0.0f;
  std::vector<float> w = {0.5f, -0.25f};
  std::vector<float> acc = {0.0f, 0.0f};
  const std::vector<float> g = {0.0f, 0.0f};
  ApplySparseOptimizer(options, 2, g.data(), w.data(), acc.data());
  EXPECT_THAT(w, ::testing::ElementsAre(0.5f, -0.25f));
  EXPECT_THAT(acc, ::testing::ElementsAre(0.0f, 0.0f));
}

TEST(SparseOptimizerTest, RowWiseAdagradStepsMatchTheFormulaInDouble) {
  SparseOptimizerOptions options;
  options.type = SparseOptimizer::kRowWiseAdagrad;
  options.learning_rate = 0.05f;
  options.initial_accumulator = 0.1f;
  std::vector<float> w = {0.5f, -0.25f, 0.0f, 0.125f};
  float acc = -1.0f;
  InitOptimizerState(options, 4, &acc);
  EXPECT_EQ(0.1f, acc);
  std::vector<double> ref_w(w.begin(), w.end());
  double ref_acc = options.initial_accumulator;
  for (int step = 0; step < 8; ++step) {
    const std::vector<float> g = {0.3f * step, -1.0f, 2.0f - step, 1e-3f};
    ApplySparseOptimizer(options, 4, g.data(), w.data(), &acc);
    double mean_square = 0;
    for (int e = 0; e < 4; ++e) mean_square += double{g[e]} * g[e] / 4;
    ref_acc += mean_square;
    for (int e = 0; e < 4; ++e) {
      ref_w[e] -=
          double{options.learning_rate} * g[e] / (std::sqrt(ref_acc) + double{options.epsilon});
    }
  }
  for (int e = 0; e < 4; ++e) {
    EXPECT_NEAR(ref_w[e], w[e], 1e-6 * std::max(1.0, std::abs(ref_w[e]))) << e;
  }
  EXPECT_NEAR(ref_acc, acc, 1e-6 * std::max(1.0, ref_acc));
}

TEST(SparseOptimizerTest, RowWiseAdagradScalesTheWholeRowByOneStep) {
  SparseOptimizerOptions options;
  options.type = SparseOptimizer::kRowWiseAdagrad;
  options.learning_rate = 1.0f;
  options.epsilon = 0.0f;
  std::vector<float> w = {0.0f, 0.0f};
  float acc = 0.0f;
  const std::vector<float> g = {3.0f, 4.0f};  // mean square 12.5
  ApplySparseOptimizer(options, 2, g.data(), w.data(), &acc);
  EXPECT_FLOAT_EQ(12.5f, acc);
  EXPECT_FLOAT_EQ(-3.0f / std::sqrt(12.5f), w[0]);
  EXPECT_FLOAT_EQ(-4.0f / std::sqrt(12.5f), w[1]);
}

TEST(SparseOptimizerTest, InvalidHyperParametersNameTheirField) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    void (*mutate)(SparseOptimizerOptions&, float, float);
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](SparseOptimizerOptions& o, float, float) { o.learning_rate = 0.0f; }, "learning_rate"},
      {[](SparseOptimizerOptions& o, float, float) { o.learning_rate = -1.0f; }, "learning_rate"},
      {[](SparseOptimizerOptions& o, float n, float) { o.learning_rate = n; }, "learning_rate"},
      {[](SparseOptimizerOptions& o, float, float i) { o.learning_rate = i; }, "learning_rate"},
      {[](SparseOptimizerOptions& o, float, float) { o.initial_accumulator = -0.1f; },
       "initial_accumulator"},
      {[](SparseOptimizerOptions& o, float n, float) { o.initial_accumulator = n; },
       "initial_accumulator"},
      {[](SparseOptimizerOptions& o, float, float) { o.epsilon = -1e-8f; }, "epsilon"},
      {[](SparseOptimizerOptions& o, float, float i) { o.epsilon = i; }, "epsilon"},
      {[](SparseOptimizerOptions& o, float, float) { o.type = static_cast<SparseOptimizer>(7); },
       "type"},
      {[](SparseOptimizerOptions& o, float, float) {
         o.type = SparseOptimizer::kAdam;
         o.epsilon = 0.0f;
       },
       "epsilon"},
      {[](SparseOptimizerOptions& o, float, float) { o.beta1 = 1.0f; }, "beta1"},
      {[](SparseOptimizerOptions& o, float n, float) { o.beta1 = n; }, "beta1"},
      {[](SparseOptimizerOptions& o, float, float) { o.beta2 = -0.1f; }, "beta2"},
      {[](SparseOptimizerOptions& o, float, float) { o.ftrl_beta = -1.0f; }, "ftrl_beta"},
      {[](SparseOptimizerOptions& o, float, float i) { o.ftrl_beta = i; }, "ftrl_beta"},
      {[](SparseOptimizerOptions& o, float n, float) { o.l1 = n; }, "l1"},
      {[](SparseOptimizerOptions& o, float, float) { o.l1 = -0.5f; }, "l1"},
      {[](SparseOptimizerOptions& o, float, float) { o.l2 = -0.5f; }, "l2"},
  };
  EXPECT_TRUE(ValidateSparseOptimizerOptions(SparseOptimizerOptions{}).ok());
  for (const Case& c : cases) {
    SparseOptimizerOptions options;
    c.mutate(options, nan, inf);
    Status status = ValidateSparseOptimizerOptions(options);
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << c.field;
    EXPECT_THAT(status.message(), HasSubstr(c.field));
  }
}

}  // namespace
}  // namespace ember::embedding
