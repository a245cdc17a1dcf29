// libFuzzer target: the libSVM / libFM parser (io/libsvm_format.h). Byte 0
// picks the options (bit 0: field_starts 0,10,100; bit 1:
// require_binary_values); the rest is parsed.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "io/libsvm_format.h"
#include "tests/fuzz/fuzz_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  if (size == 0) return 0;
  static const std::unique_ptr<io::TextFormat> formats[4] = {
      *io::NewLibSvmFormat({}),
      *io::NewLibSvmFormat({.field_starts = {0, 10, 100}}),
      *io::NewLibSvmFormat({.require_binary_values = true}),
      *io::NewLibSvmFormat({.field_starts = {0, 10, 100}, .require_binary_values = true}),
  };
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  fuzz::ParseAndCheck(*formats[data[0] & 3], "", text);
  return 0;
}
