// Field-aware libFFM (io/libsvm_format.h): "label field:index:value ...",
// one slot per field.

#include <string>

#include "io/libsvm_format.h"
#include "io/text_format_registry.h"

namespace ember::io::formats {

TextFormatEntry LibFfmFormat() {
  TextFormatEntry entry;
  entry.name = "libffm";
  entry.options = {"num_fields", "require_binary_values"};
  entry.make = [](const FormatSpec& spec) {
    LibFfmFormatOptions options;
    options.num_fields = spec.num_fields;
    options.require_binary_values = spec.require_binary_values;
    options.slot_bits = spec.slot_bits;
    return NewLibFfmFormat(options);
  };
  entry.label_separator = [](const FormatSpec&) { return std::string(" "); };
  entry.example_spec.name = "libffm";
  entry.example_spec.num_fields = 2;
  entry.example_text = "1 0:3:1 1:12:1\n0 1:5:1\n1 0:1:1 0:2:1 1:7:1\n";
  entry.example_rows = 3;
  return entry;
}

}  // namespace ember::io::formats
