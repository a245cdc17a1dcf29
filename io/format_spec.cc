#include "io/format_spec.h"

#include <string_view>
#include <vector>

#include "io/criteo.h"
#include "io/internal/text_parsing.h"
#include "io/libsvm_format.h"
#include "io/slot_format.h"

namespace ember::io {
namespace {

// InvalidArgument if a field meant for another format is set.
Status CheckUnused(const FormatSpec& spec) {
  struct Field {
    const char* name;
    bool set;
    bool used;
  };
  const std::string& n = spec.name;
  const FormatSpec defaults;
  const Field fields[] = {
      {"schema", !spec.schema.empty(), n == "csv"},
      {"schema_file", !spec.schema_file.empty(), n == "csv"},
      {"delimiter", spec.delimiter != defaults.delimiter, n == "csv"},
      {"header", spec.header, n == "csv"},
      {"dense_defaults",
       spec.dense_defaults.transform != DenseTransform::kLog1p ||
           spec.dense_defaults.min.has_value() || spec.dense_defaults.max.has_value(),
       n == "csv"},
      {"field_starts", !spec.field_starts.empty(), n == "libsvm"},
      {"num_fields", spec.num_fields != 0, n == "libffm"},
      {"require_binary_values", spec.require_binary_values, n == "libsvm" || n == "libffm"},
      {"slots", !spec.slots.empty(), n == "slot"},
      {"dense_slots", !spec.dense_slots.empty(), n == "slot"},
      {"label_slots", !spec.label_slots.empty(), n == "slot"},
      {"feasign_first", spec.feasign_first, n == "slot"},
      {"ignore_unknown_slots", spec.ignore_unknown_slots, n == "slot"},
  };
  for (const Field& field : fields) {
    if (field.set && !field.used) {
      return Status::InvalidArgument(field.name, " does not apply to the ", n, " format");
    }
  }
  return Status::OK();
}

Result<std::vector<uint64_t>> ParseFieldStarts(std::string_view text) {
  std::vector<uint64_t> starts;
  if (text.empty()) return starts;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(',', begin);
    const std::string_view part =
        text.substr(begin, end == std::string_view::npos ? end : end - begin);
    uint64_t start = 0;
    if (!internal::ParseUint64(part, &start)) {
      return Status::InvalidArgument("field_starts must be unsigned integers separated by ',', ",
                                     "got \"", part, "\"");
    }
    starts.push_back(start);
    if (end == std::string_view::npos) return starts;
    begin = end + 1;
  }
}

Result<std::unique_ptr<TextFormat>> MakeDelimited(const FormatSpec& spec) {
  if (spec.schema.empty() == spec.schema_file.empty()) {
    return Status::InvalidArgument("the csv format needs exactly one of schema and schema_file");
  }
  DelimitedFormatOptions options;
  if (!spec.schema.empty()) {
    EMBER_ASSIGN_OR_RETURN(options.schema, ParseSchemaSpec(spec.schema));
  } else {
    EMBER_ASSIGN_OR_RETURN(options.schema, ReadSchemaFile(spec.schema_file));
  }
  EMBER_ASSIGN_OR_RETURN(options.delimiter, ParseDelimiter(spec.delimiter));
  options.header = spec.header;
  options.dense_defaults = spec.dense_defaults;
  options.slot_bits = spec.slot_bits;
  return NewDelimitedFormat(options);
}

Result<std::unique_ptr<TextFormat>> MakeSlot(const FormatSpec& spec) {
  SlotFormatOptions options;
  EMBER_ASSIGN_OR_RETURN(options.slots, ParseSlotList(spec.slots));
  EMBER_ASSIGN_OR_RETURN(options.dense_slots, ParseDenseSlotList(spec.dense_slots));
  EMBER_ASSIGN_OR_RETURN(options.label_slots, ParseSlotList(spec.label_slots));
  options.feasign_first = spec.feasign_first;
  options.ignore_unknown_slots = spec.ignore_unknown_slots;
  options.slot_bits = spec.slot_bits;
  return NewSlotFormat(options);
}

}  // namespace

Result<std::unique_ptr<TextFormat>> MakeTextFormat(const FormatSpec& spec) {
  const std::string& name = spec.name;
  if (name != "criteo" && name != "csv" && name != "libsvm" && name != "libffm" && name != "slot") {
    return Status::InvalidArgument("unknown text format \"", name,
                                   "\" (expected criteo, csv, libsvm, libffm or slot)");
  }
  EMBER_RETURN_IF_ERROR(CheckUnused(spec));
  if (name == "criteo") return NewCriteoFormat(spec.slot_bits);
  if (name == "csv") return MakeDelimited(spec);
  if (name == "libsvm") {
    LibSvmFormatOptions options;
    EMBER_ASSIGN_OR_RETURN(options.field_starts, ParseFieldStarts(spec.field_starts));
    options.require_binary_values = spec.require_binary_values;
    options.slot_bits = spec.slot_bits;
    return NewLibSvmFormat(options);
  }
  if (name == "libffm") {
    LibFfmFormatOptions options;
    options.num_fields = spec.num_fields;
    options.require_binary_values = spec.require_binary_values;
    options.slot_bits = spec.slot_bits;
    return NewLibFfmFormat(options);
  }
  return MakeSlot(spec);
}

}  // namespace ember::io
