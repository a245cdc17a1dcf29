#include "io/internal/shuffle_buffer.h"

#include <glog/logging.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/random.h"

namespace ember::io::internal {
namespace {

// Keeps the drain order's random stream apart from the slot choices.
constexpr uint64_t kDrainStream = 0x64726169'6e6f7264ULL;

}  // namespace

ShuffleBuffer::ShuffleBuffer(int64_t capacity, const TextLayout& layout)
    : capacity_(capacity), layout_(layout) {
  CHECK_GE(capacity, 1) << "a shuffle buffer holds at least one record";
  labels_.resize(capacity * layout.num_labels);
  dense_.resize(capacity * layout.num_dense);
  bag_ends_.resize(capacity * layout.num_slots);
  keys_.resize(capacity);
  origins_.resize(capacity);
}

void ShuffleBuffer::Reset(uint64_t key) {
  key_ = key;
  draining_ = false;
  drain_order_.clear();
  drain_step_ = 0;
}

int64_t ShuffleBuffer::SlotFor(int64_t t) const {
  if (t < capacity_) return t;
  // Lemire's multiply-shift: a bias below capacity / 2^64, far below anything
  // measurable, and no rejection loop, so the slot is a function of t alone.
  const uint64_t hash = HashCombine(key_, static_cast<uint64_t>(t));
  return static_cast<int64_t>((static_cast<__uint128_t>(hash) * capacity_) >> 64);
}

void ShuffleBuffer::Put(int64_t slot, const Batch& rows, int64_t row, const RecordOrigin& origin) {
  DCHECK_LT(slot, capacity_);
  const int num_labels = layout_.num_labels;
  const int num_dense = layout_.num_dense;
  const int num_slots = layout_.num_slots;
  std::copy_n(rows.labels.begin() + row * num_labels, num_labels,
              labels_.begin() + slot * num_labels);
  std::copy_n(rows.dense.begin() + row * num_dense, num_dense, dense_.begin() + slot * num_dense);
  const int64_t* offsets = rows.offsets.data() + row * num_slots;
  const int64_t first = offsets[0];
  for (int s = 0; s < num_slots; ++s) bag_ends_[slot * num_slots + s] = offsets[s + 1] - first;
  keys_[slot].assign(rows.keys.begin() + first, rows.keys.begin() + offsets[num_slots]);
  origins_[slot] = origin;
}

void ShuffleBuffer::Emit(int64_t slot, Batch* out) const {
  const int num_labels = layout_.num_labels;
  const int num_dense = layout_.num_dense;
  const int num_slots = layout_.num_slots;
  out->labels.insert(out->labels.end(), labels_.begin() + slot * num_labels,
                     labels_.begin() + (slot + 1) * num_labels);
  out->dense.insert(out->dense.end(), dense_.begin() + slot * num_dense,
                    dense_.begin() + (slot + 1) * num_dense);
  const int64_t base = static_cast<int64_t>(out->keys.size());
  for (int s = 0; s < num_slots; ++s) {
    out->offsets.push_back(base + bag_ends_[slot * num_slots + s]);
  }
  out->keys.insert(out->keys.end(), keys_[slot].begin(), keys_[slot].end());
  ++out->size;
}

void ShuffleBuffer::StartDrain(int64_t occupied) {
  DCHECK_LE(occupied, capacity_);
  draining_ = true;
  drain_order_.resize(occupied);
  std::iota(drain_order_.begin(), drain_order_.end(), 0);
  RandomStream random(key_, kDrainStream);
  for (int64_t i = occupied; i > 1; --i) {
    std::swap(drain_order_[i - 1], drain_order_[random.NextBelow(i)]);
  }
  drain_step_ = 0;
}

RecordOrigin ShuffleBuffer::OldestLive(int64_t occupied) const {
  const RecordOrigin* oldest = nullptr;
  auto consider = [&](int64_t slot) {
    if (oldest == nullptr || origins_[slot].input < oldest->input) oldest = &origins_[slot];
  };
  if (draining_) {
    for (size_t i = drain_step_; i < drain_order_.size(); ++i) consider(drain_order_[i]);
  } else {
    for (int64_t slot = 0; slot < occupied; ++slot) consider(slot);
  }
  CHECK(oldest != nullptr) << "OldestLive needs a live record";
  return *oldest;
}

}  // namespace ember::io::internal
