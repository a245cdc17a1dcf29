// libSVM / libFM (io/libsvm_format.h): "label index:value ...", its fields
// (slots) given by their first feature index.

#include <string>
#include <string_view>
#include <vector>

#include "io/internal/text_parsing.h"
#include "io/libsvm_format.h"
#include "io/text_format_registry.h"

namespace ember::io::formats {
namespace {

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

Result<std::unique_ptr<TextFormat>> MakeLibSvm(const FormatSpec& spec) {
  LibSvmFormatOptions options;
  EMBER_ASSIGN_OR_RETURN(options.field_starts, ParseFieldStarts(spec.field_starts));
  options.require_binary_values = spec.require_binary_values;
  options.slot_bits = spec.slot_bits;
  return NewLibSvmFormat(options);
}

}  // namespace

TextFormatEntry LibSvmFormat() {
  TextFormatEntry entry;
  entry.name = "libsvm";
  entry.options = {"field_starts", "require_binary_values"};
  entry.make = &MakeLibSvm;
  entry.label_separator = [](const FormatSpec&) { return std::string(" "); };
  entry.example_spec.name = "libsvm";
  entry.example_spec.field_starts = "0,10";
  entry.example_text = "1 3:1 12:1\n0 5:1\n1 1:1 10:1 11:1\n";
  entry.example_rows = 3;
  return entry;
}

}  // namespace ember::io::formats
