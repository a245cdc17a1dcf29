#pragma once

// The PaddleRec slot format ("slot"): one example per line, tokens separated
// by runs of spaces or tabs, each feature a "slot:feasign" pair:
//
//   1 user:10086 item:357 item:421 age:3 ctr:0.05     (label first)
//   click:1 user:10086 item:357 ctr:0.05             (label_slots = click)
//   0:1 10086:2 357:3 421:3                          (feasign_first, label
//                                                     slot "1": slot_dnn)
//
// PaddleRec writes both orders: its slot reader docs use "slot:feasign" with
// the label as a slot ("label:1", "click:0"), its slot_dnn demo data
// "feasign:slot" with the click as slot 1. The slots are declared by
// options, as in PaddleRec's sparse_slots / dense_slots; tokens may come in
// any order.
//
//   - Labels: by default the first token of a line is the label; with
//     label_slots the labels are the feasigns of those slots (several: a
//     multi-task example, labels in label_slots order). A label is a number
//     in [0, 1] ("0", "1", "0.5"); each label slot appears exactly once.
//   - Sparse slots (`slots`, slot index = position in the list): a feasign
//     is any non-empty string and becomes HashCategorical(slot, feasign,
//     slot_bits). The feasigns of one slot form a bag, in line order
//     (multi-hot); a slot absent from a line has an empty bag (PaddleRec
//     pads with feasign 0 instead).
//   - Dense slots (`dense_slots`, each with a width, default 1): the values
//     of a dense slot are finite numbers, taken raw (no transform), filling
//     its width in order ("dense_feature:13" takes 13 tokens
//     "dense_feature:<x>"); values not given are 0.
//
// Bad lines: "bad label" (label missing, not a number in [0, 1], or a label
// slot twice), "bad feature" (a token that is not slot:feasign, an empty
// feasign, more values for a dense slot than its width), "unparsable
// number" (a dense value), "unknown slot" (a slot not declared, unless
// ignore_unknown_slots: then the token is skipped, as PaddleRec's slot_dnn
// reader does), "line too long" (text_reader.h).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/feature_hash.h"
#include "io/text_format.h"

namespace ember::io {

struct DenseSlot {
  std::string name;
  int width = 1;
};

struct SlotFormatOptions {
  // Sparse slot names; slot s of the batch is slots[s].
  std::vector<std::string> slots;
  // Dense slot names and widths; their values are the dense features, in
  // this order.
  std::vector<DenseSlot> dense_slots;
  // Slots holding the labels; empty: the first token of a line is the label.
  std::vector<std::string> label_slots;
  // Pairs are written "feasign:slot" instead of "slot:feasign".
  bool feasign_first = false;
  // Skip tokens of undeclared slots instead of rejecting the line.
  bool ignore_unknown_slots = false;
  int slot_bits = kDefaultSlotBits;
};

// InvalidArgument if there are no sparse or dense slots, a name is empty,
// holds ':' or a blank or is declared twice (across slots, dense_slots and
// label_slots), a dense width is < 1, there are more slots than slot_bits
// allow, or slot_bits is outside [1, 32].
Result<std::unique_ptr<TextFormat>> NewSlotFormat(const SlotFormatOptions& options);

// Parses a list of slot names separated by ',': "user,item,ctr", where
// "a-b" with integers a <= b stands for a, a+1, ..., b ("1-26",
// "click,2-301"). InvalidArgument for an empty name or range.
Result<std::vector<std::string>> ParseSlotList(std::string_view text);

// Parses dense slots "name[:width]" separated by ',': "dense_feature:13,ctr".
Result<std::vector<DenseSlot>> ParseDenseSlotList(std::string_view text);

}  // namespace ember::io
