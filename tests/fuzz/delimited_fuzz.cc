// libFuzzer target: the delimited ("csv") format (io/delimited_format.h).
// The input carries its own configuration:
//   byte 0        bit 0: header; bits 1-2: delimiter (',', '\t', ';', '|');
//                 bit 3: raw dense transform; bit 4: clip dense to [-5, 50]
//   line 1        a compact schema spec (a fixed multi-task schema with every
//                 role if it does not parse)
//   line 2        the header, when bit 0 is set
//   the rest      the lines to parse
// so the fuzzer explores schema parsing, header binding and line parsing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/delimited_format.h"
#include "tests/fuzz/fuzz_parse.h"

namespace {

constexpr char kFallbackSchema[] =
    "label,dense,dense:raw:min=0:max=9,cat,multi,ignore,label:threshold=0.5,multi:sep=space";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  if (size == 0) return 0;
  const uint8_t config = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string_view spec = fuzz::TakeLine(&rest);
  io::DelimitedFormatOptions options;
  Result<io::DelimitedSchema> schema = io::ParseSchemaSpec(spec);
  if (!schema.ok()) schema = io::ParseSchemaSpec(kFallbackSchema);
  fuzz::Require(schema.ok(), "the fallback schema parses");
  options.schema = *schema;
  options.header = (config & 1) != 0;
  static constexpr char kDelimiters[] = {',', '\t', ';', '|'};
  options.delimiter = kDelimiters[(config >> 1) & 3];
  if (config & 8) options.dense_defaults.transform = io::DenseTransform::kRaw;
  if (config & 16) {
    options.dense_defaults.min = -5.0;
    options.dense_defaults.max = 50.0;
  }
  Result<std::unique_ptr<io::TextFormat>> format = io::NewDelimitedFormat(options);
  if (!format.ok()) return 0;
  const std::string_view header = options.header ? fuzz::TakeLine(&rest) : std::string_view();
  fuzz::ParseAndCheck(**format, header, rest);
  return 0;
}
