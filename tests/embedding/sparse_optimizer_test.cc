#include "embedding/sparse_optimizer.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ember::embedding {
namespace {

using ::testing::HasSubstr;

TEST(SparseOptimizerTest, ParsesEveryKnownNameAndNamesItBack) {
  struct Case {
    std::string name;
    SparseOptimizer type;
  };
  for (const Case& c : {Case{"sgd", SparseOptimizer::kSgd},
                        Case{"adagrad", SparseOptimizer::kAdagrad}}) {
    Result<SparseOptimizer> parsed = ParseSparseOptimizer(c.name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(c.type, *parsed);
    EXPECT_EQ(c.name, SparseOptimizerName(c.type));
  }
}

TEST(SparseOptimizerTest, RejectsUnknownNamesListingTheValidOnes) {
  for (const std::string name : {"", "adam", "SGD ", "ftrl"}) {
    Result<SparseOptimizer> parsed = ParseSparseOptimizer(name);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(StatusCode::kInvalidArgument, parsed.status().code());
    EXPECT_THAT(parsed.status().message(), HasSubstr("sgd, adagrad"));
  }
}

TEST(SparseOptimizerTest, SgdKeepsNoStateAndAdagradOneFloatPerElement) {
  EXPECT_EQ(0, StateFloatsPerElement(SparseOptimizer::kSgd));
  EXPECT_EQ(1, StateFloatsPerElement(SparseOptimizer::kAdagrad));
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
      ref_w[e] -= double{options.learning_rate} * g[e] /
                  (std::sqrt(ref_acc[e]) + double{options.epsilon});
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
