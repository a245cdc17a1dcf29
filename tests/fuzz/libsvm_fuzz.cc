// libFuzzer target: the libSVM / libFM parser (io/libsvm_format.h). Byte 0
// picks the options (bit 0: field_starts 0,10,100; bit 1:
// require_binary_values); the rest is parsed.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "io/libsvm_format.h"
#include "tests/fuzz/fuzz_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  static const std::unique_ptr<io::TextFormat> formats[4] = {
      *io::NewLibSvmFormat({}),
      *io::NewLibSvmFormat({.field_starts = {0, 10, 100}}),
      *io::NewLibSvmFormat({.require_binary_values = true}),
      *io::NewLibSvmFormat({.field_starts = {0, 10, 100}, .require_binary_values = true}),
  };
  fuzz::ParseWithFormatPickedByFirstByte(formats, data, size);
  return 0;
}
