#pragma once

// The order that sorts a batch of 64-bit keys: what a MultiGet, a sorted
// WriteBatch and the pipeline's staleness gate each need of a batch's keys.

#include <cstdint>
#include <vector>

namespace ember {

// Sets `order` to the permutation that sorts keys[0, n) ascending
// (keys[order[0]] <= keys[order[1]] <= ...; equal keys keep their input
// order), and, when `sorted` is not null, `sorted` to the keys in that order.
// Large batches go through a least-significant-digit radix sort of (key,
// position) pairs, 8 bits a pass, skipping the digits every key shares: on
// 90k random keys 1.7-2.5 ms on one core of this machine, against 7.5 ms for
// std::sort of positions compared through the keys. Small ones are sorted by
// comparison. The scratch pairs (16 bytes a key) stay with the calling
// thread up to 2^18 keys. Thread safety: concurrent calls are safe (the
// scratch is per thread).
void SortedOrder(const uint64_t* keys, int64_t n, std::vector<int64_t>* order,
                 std::vector<uint64_t>* sorted = nullptr);

inline void SortedOrder(const std::vector<uint64_t>& keys, std::vector<int64_t>* order,
                        std::vector<uint64_t>* sorted = nullptr) {
  SortedOrder(keys.data(), static_cast<int64_t>(keys.size()), order, sorted);
}

}  // namespace ember
