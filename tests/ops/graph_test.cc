#include "ops/graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ops/op_registry.h"
#include "tests/ops/test_tensors.h"

namespace ember::ops {
namespace {

using ::testing::ElementsAre;
using testing::ExpectInvalid;

// A cross layer x0 [4] -> out, saving z for its backward.
struct CrossGraph {
  Graph graph{&DefaultOpRegistry()};
  int x0 = -1;
  std::vector<int> cross;
};

void BuildCross(CrossGraph* g) {
  g->x0 = *g->graph.AddInput("x0", {4});
  const int w = *g->graph.AddParameter("w", {4, 4}, Initializer::kHeUniform, 8);
  const int b = *g->graph.AddParameter("b", {4}, Initializer::kZeros);
  Result<std::vector<int>> cross = g->graph.AddNode("cross", "cross_layer", {g->x0, g->x0, w, b});
  ASSERT_TRUE(cross.ok()) << cross.status();
  g->cross = *cross;
}

TEST(GraphTest, SavedOutputsComeAfterTheOutputsAndAreMarkedAsSuch) {
  CrossGraph g;
  BuildCross(&g);
  ASSERT_EQ(2u, g.cross.size());
  const GraphValue& out = g.graph.values()[g.cross[0]];
  const GraphValue& z = g.graph.values()[g.cross[1]];
  EXPECT_EQ("cross", out.name);  // Named as a node with one output.
  EXPECT_FALSE(out.saved_for_backward);
  EXPECT_EQ("cross:saved0", z.name);
  EXPECT_TRUE(z.saved_for_backward);
  EXPECT_EQ(ValueKind::kActivation, z.kind);
  EXPECT_EQ((std::vector<int64_t>{4}), z.shape);
  EXPECT_EQ(0, z.producer);

  // Low rank saves t [r] and z [d].
  const int u = *g.graph.AddParameter("u", {4, 2}, Initializer::kHeUniform, 6);
  const int v = *g.graph.AddParameter("v", {4, 2}, Initializer::kHeUniform, 6);
  const int b = *g.graph.FindValue("b");
  Result<std::vector<int>> low =
      g.graph.AddNode("low", "cross_layer_low_rank", {g.x0, g.cross[0], u, v, b});
  ASSERT_TRUE(low.ok()) << low.status();
  std::vector<std::string> names;
  for (int id : *low) names.push_back(g.graph.values()[id].name);
  EXPECT_THAT(names, ElementsAre("low", "low:saved0", "low:saved1"));
  EXPECT_EQ((std::vector<int64_t>{2}), g.graph.values()[(*low)[1]].shape);
  EXPECT_EQ((std::vector<int64_t>{4}), g.graph.values()[(*low)[2]].shape);
}

TEST(GraphTest, ASavedOutputFeedsNoOtherNodeAndIsNoGraphOutput) {
  CrossGraph g;
  BuildCross(&g);
  const int saved_z = g.cross[1];
  ExpectInvalid(g.graph.AddNode("sum", "add", {g.cross[0], saved_z}).status(),
                "node \"sum\" reads \"cross:saved0\", which node \"cross\" saves for its own "
                "backward");
  ExpectInvalid(g.graph.MarkOutput(saved_z),
                "graph output \"cross:saved0\" is saved by its node for its backward");
  // Nothing was added by the refused calls; the layer's output is usable.
  EXPECT_EQ(1u, g.graph.nodes().size());
  EXPECT_TRUE(g.graph.outputs().empty());
  ASSERT_TRUE(g.graph.AddNode("sum", "add", {g.cross[0], g.cross[0]}).ok());
  EXPECT_TRUE(g.graph.MarkOutput(g.cross[0]).ok());
}

TEST(GraphTest, AnOpMustKeepOneOutputUnsaved) {
  OpRegistry registry;
  OpDef all_saved;
  all_saved.name = "all_saved";
  all_saved.infer = [](const std::vector<InputShape>& in,
                       const OpAttrs&) -> Result<std::vector<std::vector<int64_t>>> {
    return std::vector<std::vector<int64_t>>{in[0].shape};
  };
  all_saved.saved_outputs = 1;
  ASSERT_TRUE(registry.RegisterOp(all_saved).ok());
  Graph graph(&registry);
  const int x = *graph.AddInput("x", {3});
  ExpectInvalid(graph.AddNode("n", "all_saved", {x}).status(),
                "all_saved saves 1 of its 1 outputs for its backward");

  OpDef negative = all_saved;
  negative.name = "negative";
  negative.saved_outputs = -1;
  ExpectInvalid(registry.RegisterOp(negative), "op negative: saved_outputs is -1");
}

}  // namespace
}  // namespace ember::ops
