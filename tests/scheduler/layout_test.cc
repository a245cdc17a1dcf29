#include "scheduler/layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/json.h"

namespace ember::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(MeshTest, ParsesAxesInAnyOrderAndPrintsThemOutermostFirst) {
  Result<Mesh> mesh = ParseMesh("data:2,pipeline:3");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(3, mesh->pipeline);
  EXPECT_EQ(2, mesh->data);
  EXPECT_EQ(1, mesh->expert);
  EXPECT_EQ(6, mesh->world());
  EXPECT_EQ("pipeline:3,data:2", MeshText(*mesh));
  EXPECT_EQ("data:1", MeshText(*ParseMesh("")));
  Result<Mesh> again = ParseMesh(MeshText(*mesh));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(6, again->world());
}

TEST(MeshTest, ABadMeshIsRefusedNamingWhatIsWrong) {
  EXPECT_EQ("--mesh=data:2,tensor:2: 'tensor:2' is not AXIS:SIZE (axes: pipeline, data, expert)",
            ParseMesh("data:2,tensor:2").status().message());
  EXPECT_EQ("--mesh=data:0: the size of data must be a positive integer",
            ParseMesh("data:0").status().message());
  EXPECT_EQ("--mesh=data:x: the size of data must be a positive integer",
            ParseMesh("data:x").status().message());
  EXPECT_EQ("--mesh=data:2,data:2: data is given twice", ParseMesh("data:2,data:2").status().message());
  EXPECT_FALSE(ParseMesh("data").ok());
}

// Every rank has one coordinate; its groups along each axis hold the ranks
// that differ from it on that axis alone, and partition the world.
TEST(MeshTest, CoordinatesAndGroupsCoverEveryRankOnce) {
  Mesh mesh;
  mesh.pipeline = 2;
  mesh.data = 3;
  mesh.expert = 2;
  std::set<std::vector<int>> seen;
  for (int rank = 0; rank < mesh.world(); ++rank) {
    const Mesh::Coordinates c = mesh.CoordinatesOf(rank);
    EXPECT_EQ(rank, mesh.RankAt(c));
    EXPECT_TRUE(seen.insert({c.pipeline, c.data, c.expert}).second);
    for (MeshAxis axis : {MeshAxis::kPipeline, MeshAxis::kData, MeshAxis::kExpert}) {
      const std::vector<int> group = mesh.GroupAlong(axis, rank);
      EXPECT_EQ(static_cast<size_t>(mesh.size(axis)), group.size());
      EXPECT_NE(group.end(), std::find(group.begin(), group.end(), rank));
      for (int other : group) {
        const Mesh::Coordinates o = mesh.CoordinatesOf(other);
        EXPECT_EQ(axis == MeshAxis::kPipeline || o.pipeline == c.pipeline, true);
        EXPECT_EQ(axis == MeshAxis::kData || o.data == c.data, true);
        EXPECT_EQ(axis == MeshAxis::kExpert || o.expert == c.expert, true);
      }
    }
  }
  EXPECT_EQ(12u, seen.size());
  // Pipeline outermost, expert innermost.
  EXPECT_THAT(mesh.GroupAlong(MeshAxis::kExpert, 0), ElementsAre(0, 1));
  EXPECT_THAT(mesh.GroupAlong(MeshAxis::kData, 0), ElementsAre(0, 2, 4));
  EXPECT_THAT(mesh.GroupAlong(MeshAxis::kPipeline, 3), ElementsAre(3, 9));
}

TEST(TableShardingsTest, ParsesSlotsRangesAndADefault) {
  Result<TableShardings> t =
      ParseTableShardings("default=row_wise@data,0-1=replicated,5=table_wise@3,7=column_wise@expert");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ("row_wise@data", TableShardingText(t->fallback));
  EXPECT_EQ(TableShardingKind::kReplicated, t->Of(0).kind);
  EXPECT_EQ(TableShardingKind::kReplicated, t->Of(1).kind);
  EXPECT_EQ("table_wise@3", TableShardingText(t->Of(5)));
  EXPECT_EQ("column_wise@expert", TableShardingText(t->Of(7)));
  EXPECT_EQ("row_wise@data", TableShardingText(t->Of(2)));
  EXPECT_EQ(4u, t->slots.size());
  Result<TableShardings> none = ParseTableShardings("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ("row_wise", TableShardingText(none->Of(3)));
}

TEST(TableShardingsTest, ABadEntryIsRefusedNamingIt) {
  EXPECT_EQ("--table_sharding=0=sharded: '0=sharded': 'sharded' is not a sharding "
            "(row_wise[@AXIS], table_wise@RANK, replicated, column_wise@AXIS)",
            ParseTableShardings("0=sharded").status().message());
  EXPECT_EQ("--table_sharding=0-2=replicated,1=row_wise: '1=row_wise': slot 1 is given twice",
            ParseTableShardings("0-2=replicated,1=row_wise").status().message());
  EXPECT_THAT(ParseTableShardings("x=replicated").status().message(),
              HasSubstr("slots are a number, a range a-b or default"));
  EXPECT_THAT(ParseTableShardings("3-1=replicated").status().message(),
              HasSubstr("slots are a number, a range a-b or default"));
  EXPECT_THAT(ParseTableShardings("0=table_wise").status().message(),
              HasSubstr("table_wise needs the rank"));
  EXPECT_THAT(ParseTableShardings("0=column_wise").status().message(),
              HasSubstr("column_wise needs the axis"));
  EXPECT_THAT(ParseTableShardings("0=row_wise@tensor").status().message(),
              HasSubstr("unknown axis 'tensor'"));
  EXPECT_THAT(ParseTableShardings("replicated").status().message(),
              HasSubstr("expected SLOTS=SHARDING"));
}

Layout SampleLayout() {
  Layout layout;
  layout.mesh = *ParseMesh("pipeline:2,data:2");
  layout.tables = *ParseTableShardings("24-25=replicated");
  layout.virtual_stages = 2;
  layout.micro_batches = 8;
  layout.schedule = "interleaved";
  return layout;
}

TEST(LayoutTest, PrintsInOneLine) {
  EXPECT_EQ(
      "mesh pipeline:2,data:2; tables: 2 replicated, 24 row-wise; pipeline: 2 chunks per stage, "
      "8 micro-batches, interleaved",
      SampleLayout().OneLine(26));
  Layout one;
  EXPECT_EQ("mesh data:1; tables: 26 row-wise", one.OneLine(26));
  Layout experts;
  experts.mesh = *ParseMesh("data:2,expert:2");
  EXPECT_EQ("mesh data:2,expert:2; tables: 3 row-wise; experts over expert:2", experts.OneLine(3));
}

TEST(LayoutTest, RoundTripsThroughJsonAndRefusesAnUnknownField) {
  const Layout layout = SampleLayout();
  const Json json = layout;
  Result<Layout> read = FromJson<Layout>(json);
  ASSERT_TRUE(read.ok()) << read.status();
  const Layout& back = *read;
  EXPECT_EQ(Json(back).dump(), json.dump());
  EXPECT_EQ(layout.Hash(), back.Hash());
  EXPECT_EQ(layout.tables, back.tables);

  Json extra = json;
  extra["mesh"]["tensor"] = 2;
  EXPECT_THAT(FromJson<Layout>(extra).status().message(), HasSubstr("mesh.tensor"));
  Json bad_slot = json;
  bad_slot["tables"]["slots"]["x"] = "replicated";
  EXPECT_THAT(FromJson<Layout>(bad_slot).status().message(), HasSubstr("tables.slots.x"));
  Json missing = json;
  missing.erase("schedule");
  EXPECT_THAT(FromJson<Layout>(missing).status().message(), HasSubstr("schedule"));
}

TEST(LayoutTest, TheHashChangesWithEveryField) {
  const uint64_t base = SampleLayout().Hash();
  Layout a = SampleLayout();
  a.mesh.data = 1;
  Layout b = SampleLayout();
  b.tables.slots.pop_back();
  Layout c = SampleLayout();
  c.micro_batches = 4;
  Layout d = SampleLayout();
  d.schedule = "1f1b";
  for (const Layout& other : {a, b, c, d}) EXPECT_NE(base, other.Hash());
}

TEST(LayoutTest, ALayoutThatDoesNotFitTheJobIsRefusedNamingTheField) {
  const Layout layout = SampleLayout();
  EXPECT_TRUE(CheckLayout(layout, 4, 26, 0).ok());
  EXPECT_EQ("--mesh=pipeline:2,data:2 has 4 ranks; this job has 3 (mpirun -np)",
            CheckLayout(layout, 3, 26, 0).message());
  EXPECT_EQ("--table_sharding names slot 24; the model has 20 (0 to 19)",
            CheckLayout(layout, 4, 20, 0).message());
  Layout on_rank = layout;
  on_rank.tables = *ParseTableShardings("3=table_wise@4");
  EXPECT_EQ("--table_sharding: slot 3 is table_wise@4, and this job's ranks are 0 to 3",
            CheckLayout(on_rank, 4, 26, 0).message());
  Layout missing_axis = layout;
  missing_axis.tables = *ParseTableShardings("default=row_wise@expert");
  EXPECT_EQ("--table_sharding: default is row_wise@expert, and the mesh (pipeline:2,data:2) has "
            "no expert axis",
            CheckLayout(missing_axis, 4, 26, 0).message());
  Layout experts;
  experts.mesh = *ParseMesh("data:2,expert:2");
  EXPECT_TRUE(CheckLayout(experts, 4, 26, 8).ok());
  EXPECT_EQ("--mesh=data:2,expert:2: --num_experts=3 does not divide over expert:2",
            CheckLayout(experts, 4, 26, 3).message());
  EXPECT_EQ("--mesh=data:2,expert:2: an expert axis needs a model with experts (--model=moe)",
            CheckLayout(experts, 4, 26, 0).message());
}

}  // namespace
}  // namespace ember::scheduler
