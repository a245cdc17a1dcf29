// libFuzzer target: the Criteo TSV line parser (io/criteo.h) on any bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/criteo.h"
#include "tests/fuzz/fuzz_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto format = ember::io::NewCriteoFormat();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ember::fuzz::ParseAndCheck(**format, "", text);
  return 0;
}
