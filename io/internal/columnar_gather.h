#pragma once

// The hot loop of ColumnarFile::ReadRows: per-slot CSR of a row group into
// the example-major CSR of a Batch.

#include <cstdint>

#include "io/batch.h"

namespace ember::io::internal {

// Keys GatherKeys may write past the last key it gathers, and read past the
// last key of a slot.
inline constexpr int64_t kGatherSlackKeys = 8;

// One slot of one row group, in the mapped file. Either every row has `bag`
// keys (row r owns keys[r * bag, (r + 1) * bag), offsets is null), or bag is
// -1 and row r owns keys[offsets[r], offsets[r + 1]). At least
// kGatherSlackKeys keys' worth of bytes after keys[num_keys - 1] are
// readable (in a columnar file the index and the trailer follow every
// section: at least 96 bytes).
struct SlotView {
  const int64_t* offsets = nullptr;
  const Key* keys = nullptr;
  int64_t num_keys = 0;
  int64_t bag = -1;
};

// Keys of rows [r0, r1) of `view`, or -1 when the offsets at r0 and r1 are
// not 0 <= offsets[r0] <= offsets[r1] <= num_keys.
// REQUIRES: 0 <= r0 <= r1 <= rows of the group.
inline int64_t KeysInRows(const SlotView& view, int64_t r0, int64_t r1) {
  if (view.bag >= 0) return (r1 - r0) * view.bag;
  const int64_t lo = view.offsets[r0];
  const int64_t hi = view.offsets[r1];
  if (lo < 0 || hi < lo || hi > view.num_keys) return -1;
  return hi - lo;
}

// Writes the keys of rows [r0, r1) of the `num_slots` slots at `views`, row
// by row and slot by slot, to out_keys[*cursor ...], and after the bag of
// (row i, slot s) the end of that bag to out_offsets[(i - r0) * num_slots +
// s]; advances *cursor past the keys written. Returns false, having written
// an unspecified part, if a variable slot's offsets between r0 and r1
// decrease or leave [offsets[r0], offsets[r1]].
// REQUIRES: KeysInRows(views[s], r0, r1) >= 0 for every slot, room for their
// sum plus kGatherSlackKeys at out_keys + *cursor (the slack may be
// overwritten), and room for (r1 - r0) * num_slots offsets.
bool GatherKeys(const SlotView* views, int num_slots, int64_t r0, int64_t r1, int64_t* out_offsets,
                Key* out_keys, int64_t* cursor);

}  // namespace ember::io::internal
