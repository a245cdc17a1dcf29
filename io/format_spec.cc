#include "io/format_spec.h"

#include <algorithm>
#include <optional>

#include "core/json.h"
#include "io/text_format_registry.h"

namespace ember::io {
namespace {

const FormatSpec& Defaults() {
  static const FormatSpec defaults;
  return defaults;
}

// dense_min and dense_max: a number, or null for no bound.
void ReadBound(JsonFields& fields, const char* key, std::optional<double>* bound) {
  const Json* value = fields.Raw(key);
  if (value == nullptr) throw JsonFieldError(key, "is missing");
  if (value->is_null()) {
    bound->reset();
    return;
  }
  double number = 0;
  fields.Get(key, &number);
  *bound = number;
}

Json BoundJson(const std::optional<double>& bound) { return bound ? Json(*bound) : Json(); }

}  // namespace

const char* DenseTransformName(DenseTransform transform) {
  return transform == DenseTransform::kRaw ? "raw" : "log1p";
}

Result<DenseTransform> ParseDenseTransform(const std::string& name) {
  if (name == "log1p") return DenseTransform::kLog1p;
  if (name == "raw") return DenseTransform::kRaw;
  return Status::InvalidArgument("expected log1p or raw, got \"", name, "\"");
}

const std::vector<FormatOption>& FormatOptions() {
  static const std::vector<FormatOption> options = {
      {"schema", {"schema"}, [](const FormatSpec& s) { return !s.schema.empty(); }},
      {"schema_file", {"schema_file"}, [](const FormatSpec& s) { return !s.schema_file.empty(); }},
      {"delimiter", {"delimiter"},
       [](const FormatSpec& s) { return s.delimiter != Defaults().delimiter; }},
      {"header", {"header"}, [](const FormatSpec& s) { return s.header; }},
      {"dense_defaults", {"dense_transform", "dense_min", "dense_max"},
       [](const FormatSpec& s) {
         return s.dense_defaults.transform != DenseTransform::kLog1p ||
                s.dense_defaults.min.has_value() || s.dense_defaults.max.has_value();
       }},
      {"field_starts", {"field_starts"}, [](const FormatSpec& s) { return !s.field_starts.empty(); }},
      {"num_fields", {"num_fields"}, [](const FormatSpec& s) { return s.num_fields != 0; }},
      {"require_binary_values", {"require_binary_values"},
       [](const FormatSpec& s) { return s.require_binary_values; }},
      {"slots", {"slots"}, [](const FormatSpec& s) { return !s.slots.empty(); }},
      {"dense_slots", {"dense_slots"}, [](const FormatSpec& s) { return !s.dense_slots.empty(); }},
      {"label_slots", {"label_slots"}, [](const FormatSpec& s) { return !s.label_slots.empty(); }},
      {"feasign_first", {"feasign_first"}, [](const FormatSpec& s) { return s.feasign_first; }},
      {"ignore_unknown_slots", {"ignore_unknown_slots"},
       [](const FormatSpec& s) { return s.ignore_unknown_slots; }},
  };
  return options;
}

Status CheckOptionsUsed(const FormatSpec& spec, const std::vector<std::string>& used) {
  for (const FormatOption& option : FormatOptions()) {
    if (option.is_set(spec) && std::find(used.begin(), used.end(), option.name) == used.end()) {
      return Status::InvalidArgument(option.name, " does not apply to the ", spec.name, " format");
    }
  }
  return Status::OK();
}

Result<std::unique_ptr<TextFormat>> MakeTextFormat(const FormatSpec& spec) {
  EMBER_ASSIGN_OR_RETURN(const TextFormatEntry* entry, DefaultTextFormatRegistry().Find(spec.name));
  EMBER_RETURN_IF_ERROR(CheckOptionsUsed(spec, entry->options));
  return entry->make(spec);
}

void to_json(Json& j, const FormatSpec& f) {
  j = Json{{"format", f.name},
           {"slot_bits", f.slot_bits},
           {"schema", f.schema},
           {"schema_file", f.schema_file},
           {"delimiter", f.delimiter},
           {"header", f.header},
           {"dense_transform", DenseTransformName(f.dense_defaults.transform)},
           {"dense_min", BoundJson(f.dense_defaults.min)},
           {"dense_max", BoundJson(f.dense_defaults.max)},
           {"field_starts", f.field_starts},
           {"num_fields", f.num_fields},
           {"require_binary_values", f.require_binary_values},
           {"slots", f.slots},
           {"dense_slots", f.dense_slots},
           {"label_slots", f.label_slots},
           {"feasign_first", f.feasign_first},
           {"ignore_unknown_slots", f.ignore_unknown_slots}};
}

void from_json(const Json& j, FormatSpec& f) {
  JsonFields fields(j);
  fields.Get("format", &f.name);
  fields.Get("slot_bits", &f.slot_bits);
  fields.Get("schema", &f.schema);
  fields.Get("schema_file", &f.schema_file);
  fields.Get("delimiter", &f.delimiter);
  fields.Get("header", &f.header);
  std::string transform;
  fields.Get("dense_transform", &transform);
  Result<DenseTransform> parsed = ParseDenseTransform(transform);
  if (!parsed.ok()) throw JsonFieldError("dense_transform", parsed.status().message());
  f.dense_defaults.transform = *parsed;
  ReadBound(fields, "dense_min", &f.dense_defaults.min);
  ReadBound(fields, "dense_max", &f.dense_defaults.max);
  fields.Get("field_starts", &f.field_starts);
  fields.Get("num_fields", &f.num_fields);
  fields.Get("require_binary_values", &f.require_binary_values);
  fields.Get("slots", &f.slots);
  fields.Get("dense_slots", &f.dense_slots);
  fields.Get("label_slots", &f.label_slots);
  fields.Get("feasign_first", &f.feasign_first);
  fields.Get("ignore_unknown_slots", &f.ignore_unknown_slots);
  fields.Done();
}

}  // namespace ember::io
