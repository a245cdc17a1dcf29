// Delimited text with a schema (io/delimited_format.h): the schema as a
// compact spec or a file, the delimiter, a header line and the dense
// defaults.

#include "io/delimited_format.h"
#include "io/text_format_registry.h"

namespace ember::io::formats {
namespace {

Result<std::unique_ptr<TextFormat>> MakeCsv(const FormatSpec& spec) {
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

}  // namespace

TextFormatEntry CsvFormat() {
  TextFormatEntry entry;
  entry.name = "csv";
  entry.options = {"schema", "schema_file", "delimiter", "header", "dense_defaults"};
  entry.make = &MakeCsv;
  // The schema places the label columns anywhere: unlabelled lines are not
  // read (label_separator stays null).
  entry.example_spec.name = "csv";
  entry.example_spec.schema = "click=label,price=dense,user=cat,tags=multi";
  entry.example_spec.header = true;
  entry.example_text = "click,price,user,tags\n1,2.5,u7,a|b\n0,,u8,\n1,3,u7,c\n";
  entry.example_rows = 3;
  return entry;
}

}  // namespace ember::io::formats
