#include "scheduler/layout.h"

#include <glog/logging.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "core/checksum.h"
#include "core/json.h"

namespace ember::scheduler {
namespace {

constexpr MeshAxis kAxes[] = {MeshAxis::kPipeline, MeshAxis::kData, MeshAxis::kExpert};

bool ParseInt(std::string_view text, int* out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> items;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t at = text.find(separator, start);
    const size_t end = at == std::string_view::npos ? text.size() : at;
    items.push_back(text.substr(start, end - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return items;
}

Result<TableSharding> ParseSharding(std::string_view text) {
  const size_t at = text.find('@');
  const std::string_view kind = text.substr(0, at);
  const std::string_view where = at == std::string_view::npos ? "" : text.substr(at + 1);
  TableSharding sharding;
  MeshAxis axis;
  if (kind == "row_wise" || kind == "column_wise") {
    sharding.kind = kind == "row_wise" ? TableShardingKind::kRowWise : TableShardingKind::kColumnWise;
    if (where.empty() && sharding.kind == TableShardingKind::kColumnWise) {
      return Status::InvalidArgument("column_wise needs the axis of its slices: column_wise@AXIS");
    }
    if (!where.empty() && !ParseMeshAxis(where, &axis)) {
      return Status::InvalidArgument("unknown axis '", where, "' (axes: pipeline, data, expert)");
    }
    sharding.axis = std::string(where);
    return sharding;
  }
  if (kind == "table_wise") {
    sharding.kind = TableShardingKind::kTableWise;
    if (!ParseInt(where, &sharding.rank) || sharding.rank < 0) {
      return Status::InvalidArgument("table_wise needs the rank that holds it: table_wise@RANK");
    }
    return sharding;
  }
  if (kind == "replicated" && where.empty()) {
    sharding.kind = TableShardingKind::kReplicated;
    return sharding;
  }
  return Status::InvalidArgument("'", text,
                                 "' is not a sharding (row_wise[@AXIS], table_wise@RANK, "
                                 "replicated, column_wise@AXIS)");
}

}  // namespace

const char* MeshAxisName(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kPipeline:
      return "pipeline";
    case MeshAxis::kData:
      return "data";
    case MeshAxis::kExpert:
      return "expert";
  }
  return "?";
}

bool ParseMeshAxis(std::string_view name, MeshAxis* axis) {
  for (MeshAxis a : kAxes) {
    if (name == MeshAxisName(a)) {
      *axis = a;
      return true;
    }
  }
  return false;
}

int Mesh::size(MeshAxis axis) const {
  switch (axis) {
    case MeshAxis::kPipeline:
      return pipeline;
    case MeshAxis::kData:
      return data;
    case MeshAxis::kExpert:
      return expert;
  }
  return 1;
}

Mesh::Coordinates Mesh::CoordinatesOf(int rank) const {
  CHECK(rank >= 0 && rank < world()) << "rank " << rank << " of a mesh of " << world();
  Coordinates c;
  c.expert = rank % expert;
  c.data = (rank / expert) % data;
  c.pipeline = rank / (expert * data);
  return c;
}

std::vector<int> Mesh::GroupAlong(MeshAxis axis, int rank) const {
  Coordinates c = CoordinatesOf(rank);
  std::vector<int> group;
  for (int i = 0; i < size(axis); ++i) {
    (axis == MeshAxis::kPipeline ? c.pipeline : axis == MeshAxis::kData ? c.data : c.expert) = i;
    group.push_back(RankAt(c));
  }
  return group;
}

Result<Mesh> ParseMesh(const std::string& text) {
  Mesh mesh;
  if (text.empty()) return mesh;
  bool seen[3] = {false, false, false};
  for (std::string_view item : Split(text, ',')) {
    const size_t colon = item.find(':');
    MeshAxis axis;
    int size = 0;
    if (colon == std::string_view::npos || !ParseMeshAxis(item.substr(0, colon), &axis)) {
      return Status::InvalidArgument("--mesh=", text, ": '", item,
                                     "' is not AXIS:SIZE (axes: pipeline, data, expert)");
    }
    if (!ParseInt(item.substr(colon + 1), &size) || size < 1) {
      return Status::InvalidArgument("--mesh=", text, ": the size of ", MeshAxisName(axis),
                                     " must be a positive integer");
    }
    if (seen[static_cast<int>(axis)]) {
      return Status::InvalidArgument("--mesh=", text, ": ", MeshAxisName(axis), " is given twice");
    }
    seen[static_cast<int>(axis)] = true;
    (axis == MeshAxis::kPipeline ? mesh.pipeline : axis == MeshAxis::kData ? mesh.data : mesh.expert) =
        size;
  }
  return mesh;
}

std::string MeshText(const Mesh& mesh) {
  std::string text;
  for (MeshAxis axis : kAxes) {
    if (mesh.size(axis) == 1) continue;
    text += (text.empty() ? "" : ",") + std::string(MeshAxisName(axis)) + ":" +
            std::to_string(mesh.size(axis));
  }
  return text.empty() ? "data:1" : text;
}

const char* TableShardingKindName(TableShardingKind kind) {
  switch (kind) {
    case TableShardingKind::kRowWise:
      return "row_wise";
    case TableShardingKind::kTableWise:
      return "table_wise";
    case TableShardingKind::kReplicated:
      return "replicated";
    case TableShardingKind::kColumnWise:
      return "column_wise";
  }
  return "?";
}

std::string TableShardingText(const TableSharding& sharding) {
  std::string text = TableShardingKindName(sharding.kind);
  if (sharding.kind == TableShardingKind::kTableWise) return text + "@" + std::to_string(sharding.rank);
  if (!sharding.axis.empty()) text += "@" + sharding.axis;
  return text;
}

const TableSharding& TableShardings::Of(int slot) const {
  for (const auto& [s, sharding] : slots) {
    if (s == slot) return sharding;
  }
  return fallback;
}

Result<TableShardings> ParseTableShardings(const std::string& text) {
  TableShardings out;
  if (text.empty()) return out;
  bool fallback_given = false;
  std::map<int, TableSharding> slots;
  for (std::string_view entry : Split(text, ',')) {
    const size_t eq = entry.find('=');
    auto bad = [&](const std::string& why) {
      return Status::InvalidArgument("--table_sharding=", text, ": '", entry, "': ", why);
    };
    if (eq == std::string_view::npos) return bad("expected SLOTS=SHARDING");
    Result<TableSharding> sharding = ParseSharding(entry.substr(eq + 1));
    if (!sharding.ok()) return bad(sharding.status().message());
    const std::string_view which = entry.substr(0, eq);
    if (which == "default") {
      if (fallback_given) return bad("default is given twice");
      fallback_given = true;
      out.fallback = *sharding;
      continue;
    }
    const size_t dash = which.find('-');
    int first = 0, last = 0;
    if (!ParseInt(which.substr(0, dash), &first) ||
        (dash != std::string_view::npos && !ParseInt(which.substr(dash + 1), &last))) {
      return bad("slots are a number, a range a-b or default");
    }
    if (dash == std::string_view::npos) last = first;
    if (first < 0 || last < first) return bad("slots are a number, a range a-b or default");
    for (int slot = first; slot <= last; ++slot) {
      if (!slots.emplace(slot, *sharding).second) {
        return bad("slot " + std::to_string(slot) + " is given twice");
      }
    }
  }
  out.slots.assign(slots.begin(), slots.end());
  return out;
}

std::string Layout::OneLine(int num_slots) const {
  std::map<std::string, int> counts;  // Sharding text -> tables.
  for (int slot = 0; slot < num_slots; ++slot) ++counts[TableShardingText(tables.Of(slot))];
  std::string text = "mesh " + MeshText(mesh) + "; tables:";
  bool first = true;
  for (const auto& [sharding, count] : counts) {
    std::string words = sharding;
    std::replace(words.begin(), words.end(), '_', '-');
    text += (first ? " " : ", ") + std::to_string(count) + " " + words;
    first = false;
  }
  if (mesh.pipeline > 1 || micro_batches > 1) {
    text += "; pipeline: " + std::to_string(virtual_stages) + " chunk" +
            (virtual_stages == 1 ? "" : "s") + " per stage, " + std::to_string(micro_batches) +
            " micro-batch" + (micro_batches == 1 ? "" : "es") + ", " + schedule;
  }
  if (mesh.expert > 1) text += "; experts over expert:" + std::to_string(mesh.expert);
  return text;
}

uint64_t Layout::Hash() const {
  const std::string text = Json(*this).dump();
  return XxHash64(text.data(), text.size());
}

Status CheckLayout(const Layout& layout, int world, int num_slots, int num_experts) {
  const Mesh& mesh = layout.mesh;
  if (mesh.world() != world) {
    return Status::InvalidArgument("--mesh=", MeshText(mesh), " has ", mesh.world(),
                                   " rank", mesh.world() == 1 ? "" : "s", "; this job has ",
                                   world, " (mpirun -np)");
  }
  auto check_table = [&](const std::string& which, const TableSharding& s) -> Status {
    if (s.kind == TableShardingKind::kTableWise && s.rank >= world) {
      return Status::InvalidArgument("--table_sharding: ", which, " is table_wise@", s.rank,
                                     ", and this job's ranks are 0 to ", world - 1);
    }
    if (!s.axis.empty()) {
      MeshAxis axis;
      if (!ParseMeshAxis(s.axis, &axis)) {
        return Status::InvalidArgument("--table_sharding: ", which, ": unknown axis '", s.axis, "'");
      }
      if (mesh.size(axis) == 1) {
        return Status::InvalidArgument("--table_sharding: ", which, " is ", TableShardingText(s),
                                       ", and the mesh (", MeshText(mesh), ") has no ", s.axis,
                                       " axis");
      }
    }
    return Status::OK();
  };
  EMBER_RETURN_IF_ERROR(check_table("default", layout.tables.fallback));
  for (const auto& [slot, sharding] : layout.tables.slots) {
    if (slot >= num_slots) {
      return Status::InvalidArgument("--table_sharding names slot ", slot, "; the model has ",
                                     num_slots, " (0 to ", num_slots - 1, ")");
    }
    EMBER_RETURN_IF_ERROR(check_table("slot " + std::to_string(slot), sharding));
  }
  if (mesh.expert > 1) {
    if (num_experts == 0) {
      return Status::InvalidArgument("--mesh=", MeshText(mesh),
                                     ": an expert axis needs a model with experts (--model=moe)");
    }
    if (num_experts % mesh.expert != 0) {
      return Status::InvalidArgument("--mesh=", MeshText(mesh), ": --num_experts=", num_experts,
                                     " does not divide over expert:", mesh.expert);
    }
  }
  if (layout.virtual_stages < 1 || layout.micro_batches < 1) {
    return Status::InvalidArgument("--virtual_stages and --micro_batches must be >= 1");
  }
  return Status::OK();
}

void to_json(Json& j, const Mesh& mesh) {
  j = Json{{"pipeline", mesh.pipeline}, {"data", mesh.data}, {"expert", mesh.expert}};
}

void from_json(const Json& j, Mesh& mesh) {
  JsonFields f(j);
  f.Get("pipeline", &mesh.pipeline);
  f.Get("data", &mesh.data);
  f.Get("expert", &mesh.expert);
  f.Done();
  for (MeshAxis axis : kAxes) {
    if (mesh.size(axis) < 1) throw JsonFieldError(MeshAxisName(axis), "is below 1");
  }
}

void to_json(Json& j, const Layout& layout) {
  Json slots = Json::object();
  for (const auto& [slot, sharding] : layout.tables.slots) {
    slots[std::to_string(slot)] = TableShardingText(sharding);
  }
  j = Json{{"mesh", layout.mesh},
           {"tables", {{"default", TableShardingText(layout.tables.fallback)}, {"slots", slots}}},
           {"virtual_stages", layout.virtual_stages},
           {"micro_batches", layout.micro_batches},
           {"schedule", layout.schedule}};
}

void from_json(const Json& j, Layout& layout) {
  JsonFields f(j);
  f.Get("mesh", &layout.mesh);
  const Json* tables = f.Raw("tables");
  if (tables == nullptr) throw JsonFieldError("tables", "is missing");
  try {
    JsonFields t(*tables);
    std::string fallback;
    t.Get("default", &fallback);
    Result<TableSharding> parsed = ParseSharding(fallback);
    if (!parsed.ok()) throw JsonFieldError("default", parsed.status().message());
    layout.tables.fallback = *parsed;
    std::vector<std::pair<std::string, std::string>> slots;
    t.Get("slots", &slots);
    t.Done();
    layout.tables.slots.clear();
    for (const auto& [key, text] : slots) {
      int slot = 0;
      if (!ParseInt(key, &slot) || slot < 0) throw JsonFieldError("slots." + key, "is not a slot");
      Result<TableSharding> sharding = ParseSharding(text);
      if (!sharding.ok()) throw JsonFieldError("slots." + key, sharding.status().message());
      layout.tables.slots.emplace_back(slot, *sharding);
    }
    std::sort(layout.tables.slots.begin(), layout.tables.slots.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
  } catch (const JsonFieldError& e) {
    throw e.Within("tables");
  }
  f.Get("virtual_stages", &layout.virtual_stages);
  f.Get("micro_batches", &layout.micro_batches);
  f.Get("schedule", &layout.schedule);
  f.Done();
}

}  // namespace ember::scheduler
