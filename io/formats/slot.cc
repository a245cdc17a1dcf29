// PaddleRec slots (io/slot_format.h): "label slot:feasign ...", with sparse,
// dense and label slots named.

#include <string>

#include "io/slot_format.h"
#include "io/text_format_registry.h"

namespace ember::io::formats {
namespace {

Result<std::unique_ptr<TextFormat>> MakeSlot(const FormatSpec& spec) {
  SlotFormatOptions options;
  EMBER_ASSIGN_OR_RETURN(options.slots, ParseSlotList(spec.slots));
  EMBER_ASSIGN_OR_RETURN(options.dense_slots, ParseDenseSlotList(spec.dense_slots));
  EMBER_ASSIGN_OR_RETURN(options.label_slots, ParseSlotList(spec.label_slots));
  options.feasign_first = spec.feasign_first;
  options.ignore_unknown_slots = spec.ignore_unknown_slots;
  options.slot_bits = spec.slot_bits;
  return NewSlotFormat(options);
}

}  // namespace

TextFormatEntry SlotFormat() {
  TextFormatEntry entry;
  entry.name = "slot";
  entry.options = {"slots", "dense_slots", "label_slots", "feasign_first",
                   "ignore_unknown_slots"};
  entry.make = &MakeSlot;
  // With label slots the labels are tokens among the others.
  entry.label_separator = [](const FormatSpec& spec) {
    return spec.label_slots.empty() ? std::string(" ") : std::string();
  };
  entry.example_spec.name = "slot";
  entry.example_spec.slots = "user,item";
  entry.example_spec.dense_slots = "ctr";
  entry.example_text = "1 user:7 item:9 ctr:0.5\n0 item:3\n1 user:8 item:9 item:4 ctr:0.1\n";
  entry.example_rows = 3;
  return entry;
}

}  // namespace ember::io::formats
