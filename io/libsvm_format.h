#pragma once

// libSVM / libFM ("libsvm") and field-aware libFFM ("libffm") text formats.
//
//   libsvm:  label idx:val idx:val ...        e.g. "1 5:1 957:1 5046:1"
//   libffm:  label field:idx:val ...          e.g. "0 0:5:1 1:957:1 3:5046:1"
//
// Tokens are separated by runs of spaces or tabs; a token starting with '#'
// ends the line (svmlight comments). Features may come in any order.
//
// Labels: a number equal to 1 (click) or to 0 or -1 (no click): "1", "+1",
// "0", "-1", "1.0". Anything else is a "bad label".
//
// Features become categorical keys; our Batch has no per-key weights, so a
// feature is an id and its value decides only whether it is there:
//   - idx (and field) are unsigned decimal integers; the key is
//     HashCategorical(slot, idx without leading zeros, slot_bits).
//   - val must be a finite number. val == 0 drops the feature (an explicit
//     zero of a sparse vector is an absent feature). Any other value keeps
//     it as an id and is otherwise ignored: right for one-hot data (Frappe,
//     Criteo/Avazu converted to libFM), lossy for real-valued features. With
//     require_binary_values a value other than 0 or 1 is a "bad feature".
//   - The slot of a feature: libffm uses its field (field < num_fields).
//     libsvm puts every feature into slot 0, one bag per example, unless
//     field_starts cuts the index space into fields: field f holds the
//     indices [field_starts[f], field_starts[f + 1]) (the last field is open
//     ended), as in Frappe's libFM files where each field has a contiguous
//     range of global indices.
//   - The features of one slot form a bag in line order; a slot without
//     features has an empty bag. A repeated feature is kept twice.
//
// Bad lines: "bad label" (a blank line too), "bad feature" (not idx:val or
// field:idx:val, an index that is not an unsigned integer, a non-binary
// value under require_binary_values), "unparsable number" (val),
// "unknown slot" (libffm: field >= num_fields; libsvm: an index below
// field_starts[0]), "line too long" (text_reader.h).

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "io/feature_hash.h"
#include "io/text_format.h"

namespace ember::io {

struct LibSvmFormatOptions {
  // First feature index of each field, strictly increasing; empty: one slot.
  std::vector<uint64_t> field_starts;
  bool require_binary_values = false;
  int slot_bits = kDefaultSlotBits;
};

// InvalidArgument if field_starts is not strictly increasing, has more
// fields than slot_bits allow, or slot_bits is outside [1, 32].
Result<std::unique_ptr<TextFormat>> NewLibSvmFormat(const LibSvmFormatOptions& options);

struct LibFfmFormatOptions {
  // Fields 0 .. num_fields - 1, one slot each. Required.
  int num_fields = 0;
  bool require_binary_values = false;
  int slot_bits = kDefaultSlotBits;
};

// InvalidArgument if num_fields < 1 or more than slot_bits allow, or
// slot_bits is outside [1, 32].
Result<std::unique_ptr<TextFormat>> NewLibFfmFormat(const LibFfmFormatOptions& options);

}  // namespace ember::io
