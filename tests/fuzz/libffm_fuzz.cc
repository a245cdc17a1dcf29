// libFuzzer target: the field-aware libFFM parser (io/libsvm_format.h).
// Byte 0 picks the options (bit 0: 1 field instead of 4; bit 1:
// require_binary_values); the rest is parsed.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "io/libsvm_format.h"
#include "tests/fuzz/fuzz_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  static const std::unique_ptr<io::TextFormat> formats[4] = {
      *io::NewLibFfmFormat({.num_fields = 4}),
      *io::NewLibFfmFormat({.num_fields = 1}),
      *io::NewLibFfmFormat({.num_fields = 4, .require_binary_values = true}),
      *io::NewLibFfmFormat({.num_fields = 1, .require_binary_values = true}),
  };
  fuzz::ParseWithFormatPickedByFirstByte(formats, data, size);
  return 0;
}
