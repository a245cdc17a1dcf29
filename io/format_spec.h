#pragma once

// One description of a text format, by name, for the command line and a
// bundle's manifest: every field maps to one flag (the csv dense defaults to
// three: dense_transform, dense_min, dense_max) and to the manifest key of
// that name, so a flagfile can describe a job's input. The formats are
// registered by name (io/text_format_registry.h), each with the fields it
// reads:
//
//   criteo   Criteo TSV (criteo.h); no other fields.
//   csv      delimited text with a schema (delimited_format.h): schema or
//            schema_file, delimiter, header, dense_defaults.
//   libsvm   libSVM / libFM (libsvm_format.h): field_starts,
//            require_binary_values.
//   libffm   field-aware libFFM (libsvm_format.h): num_fields,
//            require_binary_values.
//   slot     PaddleRec slots (slot_format.h): slots, dense_slots,
//            label_slots, feasign_first, ignore_unknown_slots.

#include <memory>
#include <string>
#include <vector>

#include "core/json_fwd.h"
#include "core/status.h"
#include "io/delimited_format.h"
#include "io/feature_hash.h"
#include "io/text_format.h"

namespace ember::io {

struct FormatSpec {
  // criteo | csv | libsvm | libffm | slot.
  std::string name = "criteo";
  int slot_bits = kDefaultSlotBits;

  // csv: the schema as a compact spec or as a file (exactly one of them).
  std::string schema;
  std::string schema_file;
  // csv: one byte or comma, tab, space, semicolon, colon, pipe.
  std::string delimiter = ",";
  bool header = false;
  DenseOptions dense_defaults;

  // libsvm: first feature index of each field, comma-separated
  // ("0,957,5039"); empty: every feature in one slot.
  std::string field_starts;
  // libffm: number of fields (slots); required.
  int num_fields = 0;
  // libsvm, libffm: a value other than 0 or 1 is a bad feature.
  bool require_binary_values = false;

  // slot: sparse slot names ("1-26", "user,item"); dense slots
  // ("dense_feature:13"); label slots (empty: the first token is the label).
  std::string slots;
  std::string dense_slots;
  std::string label_slots;
  bool feasign_first = false;
  bool ignore_unknown_slots = false;
};

// "log1p" or "raw"; and back (InvalidArgument "expected log1p or raw" for
// another name).
const char* DenseTransformName(DenseTransform transform);
Result<DenseTransform> ParseDenseTransform(const std::string& name);

// One field of FormatSpec that a format may read (all but name and
// slot_bits, which every format has), as registrations name it.
struct FormatOption {
  // The field's name: "schema", "dense_defaults", ...
  const char* name;
  // Its flags and manifest keys, in the manifest's order: {"schema"};
  // {"dense_transform", "dense_min", "dense_max"} for dense_defaults.
  std::vector<const char*> keys;
  // Whether `spec` holds other than the field's default.
  bool (*is_set)(const FormatSpec& spec);
};

// Every option of FormatSpec, in the field order above.
const std::vector<FormatOption>& FormatOptions();

// InvalidArgument "X does not apply to the N format" for the first option
// set in `spec` that is not one of `used` (option names).
Status CheckOptionsUsed(const FormatSpec& spec, const std::vector<std::string>& used);

// The format `spec` names, built by its registered factory
// (DefaultTextFormatRegistry, io/text_format_registry.h). InvalidArgument
// for an unknown name, a field set that the format does not use (a schema
// for libsvm, ...), csv without a schema or with both schema and
// schema_file, a bad list, and whatever the format's factory rejects;
// NotFound or IOError if the schema file cannot be read.
Result<std::unique_ptr<TextFormat>> MakeTextFormat(const FormatSpec& spec);

// The spec as a bundle's manifest holds it: "format" (the name), slot_bits,
// then every option by its keys (dense_min and dense_max null when unset).
// from_json reads all of them (strictly, core/json.h); whether the name is
// a registered format is MakeTextFormat's to say.
void to_json(Json& j, const FormatSpec& spec);
void from_json(const Json& j, FormatSpec& spec);

}  // namespace ember::io
