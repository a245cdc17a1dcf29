#include "io/internal/columnar_gather.h"

#include <cstring>

namespace ember::io::internal {
namespace {

// Every slot one-hot (Criteo): a transpose of [slots x rows] keys into
// [rows x slots], and offsets that count up by one.
void GatherOneHot(const SlotView* views, int num_slots, int64_t r0, int64_t r1,
                  int64_t* out_offsets, Key* out_keys, int64_t* cursor) {
  const int64_t start = *cursor;
  Key* dst = out_keys + start;
  for (int64_t r = r0; r < r1; ++r) {
    for (int s = 0; s < num_slots; ++s) dst[s] = views[s].keys[r];
    dst += num_slots;
  }
  const int64_t bags = (r1 - r0) * num_slots;
  for (int64_t i = 0; i < bags; ++i) out_offsets[i] = start + i + 1;
  *cursor = start + bags;
}

}  // namespace

bool GatherKeys(const SlotView* views, int num_slots, int64_t r0, int64_t r1, int64_t* out_offsets,
                Key* out_keys, int64_t* cursor) {
  bool one_hot = true;
  for (int s = 0; s < num_slots; ++s) one_hot = one_hot && views[s].bag == 1;
  if (one_hot) {
    GatherOneHot(views, num_slots, r0, r1, out_offsets, out_keys, cursor);
    return true;
  }
  int64_t c = *cursor;
  for (int64_t r = r0; r < r1; ++r) {
    for (int s = 0; s < num_slots; ++s) {
      const SlotView& view = views[s];
      if (view.bag == 1) {
        out_keys[c++] = view.keys[r];
      } else {
        int64_t lo, hi;
        if (view.bag >= 0) {
          lo = r * view.bag;
          hi = lo + view.bag;
        } else {
          lo = view.offsets[r];
          hi = view.offsets[r + 1];
          // With offsets[r0] and offsets[r1] in bounds (KeysInRows), these
          // two keep every read within the slot's keys and every write
          // within the keys counted for the rows.
          if (hi < lo || hi > view.offsets[r1]) return false;
        }
        // Small bags are copied as a fixed kGatherSlackKeys keys, whatever
        // their size: no loop whose trip count the branch predictor must
        // guess. The keys past the bag are overwritten by the bags after it
        // (or lie in the caller's slack).
        const int64_t n = hi - lo;
        if (n <= kGatherSlackKeys) {
          std::memcpy(out_keys + c, view.keys + lo, kGatherSlackKeys * sizeof(Key));
        } else {
          std::memcpy(out_keys + c, view.keys + lo, n * sizeof(Key));
        }
        c += n;
      }
      *out_offsets++ = c;
    }
  }
  *cursor = c;
  return true;
}

}  // namespace ember::io::internal
