// libFuzzer target: the PaddleRec slot parser (io/slot_format.h). Byte 0
// picks the options (bit 0: label slots "click,conv" instead of a leading
// label; bit 1: feasign_first; bit 2: ignore_unknown_slots); the rest is
// parsed with sparse slots "user,item,1-3" and dense slots "ctr,d:3".
#include <cstddef>
#include <cstdint>
#include <memory>

#include "io/slot_format.h"
#include "tests/fuzz/fuzz_parse.h"

namespace {

std::unique_ptr<ember::io::TextFormat> MakeFormat(int config) {
  ember::io::SlotFormatOptions options;
  options.slots = {"user", "item", "1", "2", "3"};
  options.dense_slots = {{"ctr", 1}, {"d", 3}};
  if (config & 1) options.label_slots = {"click", "conv"};
  options.feasign_first = (config & 2) != 0;
  options.ignore_unknown_slots = (config & 4) != 0;
  auto format = ember::io::NewSlotFormat(options);
  ember::fuzz::Require(format.ok(), "the slot options are valid");
  return *std::move(format);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  static const std::unique_ptr<io::TextFormat> formats[8] = {
      MakeFormat(0), MakeFormat(1), MakeFormat(2), MakeFormat(3),
      MakeFormat(4), MakeFormat(5), MakeFormat(6), MakeFormat(7),
  };
  fuzz::ParseWithFormatPickedByFirstByte(formats, data, size);
  return 0;
}
