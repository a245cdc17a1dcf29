// Criteo TSV (io/criteo.h): a label, 13 integer and 26 hex categorical
// columns, tab-separated; no options of its own.

#include <string>

#include "io/criteo.h"
#include "io/text_format_registry.h"

namespace ember::io::formats {

TextFormatEntry CriteoFormat() {
  TextFormatEntry entry;
  entry.name = "criteo";
  entry.make = [](const FormatSpec& spec) { return NewCriteoFormat(spec.slot_bits); };
  entry.label_separator = [](const FormatSpec&) { return std::string("\t"); };
  entry.example_spec.name = "criteo";
  for (int row = 0; row < 3; ++row) {
    std::string line = row == 1 ? "1" : "0";
    for (int i = 0; i < 13; ++i) line += "\t" + (i == row ? std::string() : std::to_string(i * row));
    for (int i = 0; i < 26; ++i) line += "\t" + std::to_string(10000000 + 7 * i + row);
    entry.example_text += line + "\n";
  }
  entry.example_rows = 3;
  return entry;
}

}  // namespace ember::io::formats
