#include "embedding/internal/eviction_policy.h"

#include <cstring>
#include <tuple>

#include <glog/logging.h>

#include "core/random.h"

namespace ember::embedding {

uint32_t EvictionPolicy::Prev(const RowArena& rows, int64_t slot) const {
  uint32_t prev;
  std::memcpy(&prev, rows.row(slot) + links_offset_, sizeof(prev));
  return prev;
}

uint32_t EvictionPolicy::Next(const RowArena& rows, int64_t slot) const {
  uint32_t next;
  std::memcpy(&next, rows.row(slot) + links_offset_ + 1, sizeof(next));
  return next;
}

void EvictionPolicy::SetPrev(RowArena& rows, int64_t slot, uint32_t prev) {
  std::memcpy(rows.row(slot) + links_offset_, &prev, sizeof(prev));
}

void EvictionPolicy::SetNext(RowArena& rows, int64_t slot, uint32_t next) {
  std::memcpy(rows.row(slot) + links_offset_ + 1, &next, sizeof(next));
}

void EvictionPolicy::Inserted(RowArena& rows, int64_t slot) {
  if (kind_ != Kind::kLru) return;
  DCHECK_LT(slot, int64_t{kNil}) << "LRU links hold slots below 2^32 - 1";
  const uint32_t s = static_cast<uint32_t>(slot);
  SetPrev(rows, slot, kNil);
  SetNext(rows, slot, head_);
  if (head_ != kNil) SetPrev(rows, head_, s);
  head_ = s;
  if (tail_ == kNil) tail_ = s;
}

void EvictionPolicy::InsertedCold(RowArena& rows, int64_t slot) {
  if (kind_ != Kind::kLru) return;
  const uint32_t s = static_cast<uint32_t>(slot);
  SetNext(rows, slot, kNil);
  SetPrev(rows, slot, tail_);
  if (tail_ != kNil) SetNext(rows, tail_, s);
  tail_ = s;
  if (head_ == kNil) head_ = s;
}

void EvictionPolicy::Unlink(RowArena& rows, int64_t slot) {
  const uint32_t prev = Prev(rows, slot);
  const uint32_t next = Next(rows, slot);
  if (prev != kNil) {
    SetNext(rows, prev, next);
  } else {
    head_ = next;
  }
  if (next != kNil) {
    SetPrev(rows, next, prev);
  } else {
    tail_ = prev;
  }
}

void EvictionPolicy::Moved(RowArena& rows, int64_t from, int64_t to) {
  if (kind_ != Kind::kLru) return;
  const uint32_t t = static_cast<uint32_t>(to);
  const uint32_t prev = Prev(rows, to);
  const uint32_t next = Next(rows, to);
  if (prev != kNil) {
    SetNext(rows, prev, t);
  } else {
    DCHECK_EQ(head_, static_cast<uint32_t>(from));
    head_ = t;
  }
  if (next != kNil) {
    SetPrev(rows, next, t);
  } else {
    DCHECK_EQ(tail_, static_cast<uint32_t>(from));
    tail_ = t;
  }
}

int64_t EvictionPolicy::PickVictim(RowArena& rows, int64_t live, int64_t step,
                                   const std::function<bool(int64_t slot)>& spared,
                                   int64_t* passes_left) {
  DCHECK_GT(live, 0);
  if (kind_ == Kind::kLru) {
    DCHECK_NE(tail_, kNil) << "every live row is in the LRU list";
    int64_t victim = tail_;
    for (; *passes_left > 0 && spared(victim); --*passes_left) {
      Accessed(rows, victim);  // to the hot end
      victim = tail_;
    }
    return victim;
  }
  DCHECK(kind_ == Kind::kLfu);
  while (true) {
    // All samples are drawn first and their metadata prefetched, so that the
    // reads, which mostly miss the cache, overlap instead of following one
    // another.
    int64_t slots[kLfuSamples];
    for (int i = 0; i < kLfuSamples; ++i) {
      random_ = Mix64(random_ + 0x9e3779b97f4a7c15ULL);
      // Lemire's multiply-shift maps the draw to [0, live) without a
      // division; its bias (under live / 2^64) is immaterial to sampling.
      slots[i] = static_cast<int64_t>(
          (static_cast<__uint128_t>(random_) * static_cast<uint64_t>(live)) >> 64);
      __builtin_prefetch(rows.row(slots[i]) + meta_offset_);
    }
    // The sample's rank: (pulled at `step`, frequency, last_seen_step).
    std::tuple<bool, uint32_t, int64_t> rank[kLfuSamples];
    for (int i = 0; i < kLfuSamples; ++i) {
      const float* meta = rows.row(slots[i]) + meta_offset_;
      // RowMeta layout: key (2 floats), last_seen_step (2), frequency (1).
      int64_t seen_step;
      uint32_t frequency;
      std::memcpy(&seen_step, meta + 2, sizeof(seen_step));
      std::memcpy(&frequency, meta + 4, sizeof(frequency));
      rank[i] = {seen_step == step, frequency, seen_step};
    }
    // The sample's rows coldest first (a selection: the first is mostly the
    // one taken).
    uint32_t taken = 0;
    for (int n = 0; n < kLfuSamples; ++n) {
      int best = -1;
      for (int i = 0; i < kLfuSamples; ++i) {
        if ((taken >> i & 1) == 0 && (best < 0 || rank[i] < rank[best])) best = i;
      }
      taken |= 1u << best;
      if (*passes_left <= 0 || !spared(slots[best])) return slots[best];
      --*passes_left;
    }
  }
}

}  // namespace ember::embedding
