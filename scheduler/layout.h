#pragma once

// How a job spreads over its ranks, as one value (ARCHITECTURE.md,
// "layouts"): a mesh of the ranks with named axes, a sharding for each
// embedding table (slot), and the dense graph's pipeline shape and expert
// split. A user writes one with --mesh and --table_sharding
// (tools/train_flags.cc), the older flags (--pipeline_parallel,
// --expert_parallel) are shorthands for one, and the planner will search
// over them; the engine checks the layout of a job against its world and
// runs it (engine/job.h says which layouts it runs). Every rank checks the
// layout's hash at start; checkpoints, metrics and traces record it.
//
// The mesh's axes, outermost first: pipeline, data, expert. Rank r has the
// coordinates (p, d, e) with r = (p * data + d) * expert + e, so that the
// ranks of one pipeline stage are neighbours and those of an expert group
// are closest. Experts split over the expert axis; everything else that is
// replicated (the dense parameters outside the experts, replicated tables)
// is replicated over data x expert, and each of the data x expert ranks of
// a pipeline stage reads examples of its own (Megatron's expert grid: the
// expert ranks are data ranks too, so expert parallelism never idles a rank).

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json_fwd.h"
#include "core/status.h"

namespace ember::scheduler {

enum class MeshAxis { kPipeline, kData, kExpert };
// "pipeline", "data", "expert"; and back (false for another name).
const char* MeshAxisName(MeshAxis axis);
bool ParseMeshAxis(std::string_view name, MeshAxis* axis);

struct Mesh {
  int pipeline = 1;
  int data = 1;
  int expert = 1;

  int size(MeshAxis axis) const;
  // The ranks of the mesh: the product of the axes.
  int world() const { return pipeline * data * expert; }

  struct Coordinates {
    int pipeline = 0;
    int data = 0;
    int expert = 0;
  };
  // REQUIRES: 0 <= rank < world().
  Coordinates CoordinatesOf(int rank) const;
  int RankAt(const Coordinates& c) const { return (c.pipeline * data + c.data) * expert + c.expert; }
  // The ranks that differ from `rank` only along `axis`, in coordinate order
  // (the group of a collective along the axis); {rank} for an axis of 1.
  std::vector<int> GroupAlong(MeshAxis axis, int rank) const;
};

// "data:2,pipeline:2" (axes of size 1 may be left out; "" is one rank);
// InvalidArgument naming --mesh for an unknown axis ("(axes: pipeline,
// data, expert)"), one given twice or a size below 1.
Result<Mesh> ParseMesh(const std::string& text);
// "pipeline:2,data:2": the axes above 1, outermost first; "data:1" for one
// rank. ParseMesh reads it back.
std::string MeshText(const Mesh& mesh);

// How one embedding table (a slot's keys) spreads over the ranks.
enum class TableShardingKind {
  // Rows by key hash over the ranks of `axis` (every rank: axis empty),
  // each key's owner recomputable for any world.
  kRowWise,
  // The whole table on rank `rank`.
  kTableWise,
  // Every rank holds every row; gradients all-reduced over data x expert.
  kReplicated,
  // Each rank of `axis` holds a slice of every row's columns.
  kColumnWise,
};
// "row_wise", "table_wise", "replicated", "column_wise".
const char* TableShardingKindName(TableShardingKind kind);

struct TableSharding {
  TableShardingKind kind = TableShardingKind::kRowWise;
  // kRowWise, kColumnWise: the axis ("pipeline", "data", "expert"), or empty
  // for all ranks (row-wise only).
  std::string axis;
  // kTableWise: the rank that holds the table.
  int rank = 0;

  friend bool operator==(const TableSharding&, const TableSharding&) = default;
};

// "row_wise", "row_wise@data", "table_wise@3", "replicated",
// "column_wise@expert"; and back.
std::string TableShardingText(const TableSharding& sharding);

// The shardings of --table_sharding: comma-separated SLOTS=SHARDING entries,
// SLOTS a slot, a range "a-b" or "default" (every slot not named), e.g.
// "default=row_wise,0-1=replicated,5=table_wise@3". InvalidArgument naming
// --table_sharding and the entry for a bad one or a slot named twice.
struct TableShardings {
  TableSharding fallback;  // The "default" entry's.
  // (slot, sharding) for the slots named, in slot order.
  std::vector<std::pair<int, TableSharding>> slots;

  // The sharding of `slot`.
  const TableSharding& Of(int slot) const;
  friend bool operator==(const TableShardings&, const TableShardings&) = default;
};
Result<TableShardings> ParseTableShardings(const std::string& text);

struct Layout {
  // With mesh.expert > 1 the experts of the model's MoE layers divide over
  // the expert axis.
  Mesh mesh;
  TableShardings tables;
  // The dense graph over the pipeline axis: chunks per pipeline coordinate,
  // micro-batches per step and the schedule's name (pipeline/schedule.h);
  // read only when mesh.pipeline > 1 or micro_batches > 1.
  int virtual_stages = 1;
  int micro_batches = 1;
  std::string schedule = "1f1b";

  // One line for logs and reports:
  // "mesh pipeline:2,data:2; tables: 24 row-wise, 2 replicated;
  //  pipeline: 2 chunks per stage, 8 micro-batches, interleaved".
  std::string OneLine(int num_slots) const;
  // XXH64 of the layout's JSON: what every rank compares at start.
  uint64_t Hash() const;
};

// InvalidArgument naming the field unless `layout` can run on `world` ranks
// with a model of `num_slots` tables and `num_experts` experts (0: no MoE
// layer): the mesh's product is the world ("--mesh=pipeline:2,data:3 has 6
// ranks; this job has 4"), every named slot exists, an axis a table names
// is in the mesh (size > 1), a table-wise rank exists, the experts divide
// over the expert axis, and the pipeline's chunks and micro-batches are
// positive.
Status CheckLayout(const Layout& layout, int world, int num_slots, int num_experts);

// Strict JSON (core/json.h): {"mesh": {"pipeline", "data", "expert"},
// "tables": {"default": "row_wise", "slots": {"0": "replicated"}},
// "virtual_stages", "micro_batches", "schedule"}.
void to_json(Json& j, const Layout& layout);
void from_json(const Json& j, Layout& layout);
void to_json(Json& j, const Mesh& mesh);
void from_json(const Json& j, Mesh& mesh);

}  // namespace ember::scheduler
