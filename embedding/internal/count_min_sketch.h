#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "embedding/embedding_table.h"

namespace ember::embedding {

// A count-min sketch of key occurrences (Cormode & Muthukrishnan, "An Improved
// Data Stream Summary: The Count-Min Sketch and its Applications", J.
// Algorithms 55 (2005)) with conservative update (Estan & Varghese, "New
// Directions in Traffic Measurement and Accounting", SIGCOMM 2002): an Add
// raises only the counters that hold the key's current minimum. The estimate
// of a key is never below its true count; conservative update makes it
// overshoot less than plain count-min.
//
// `depth` rows of `width` 32-bit counters (saturating). The depth columns of a
// key come from one seeded 64-bit hash by double hashing (Kirsch &
// Mitzenmacher, "Less Hashing, Same Performance", ESA 2006):
// column_i = (a + i * b) mod width, with a and b its two 32-bit halves (b odd).
// With conservative update the counters depend on the order of Adds, so the
// caller must add in a deterministic order.
// Thread safety: none; the owner serialises access.
class CountMinSketch {
 public:
  // `width` is rounded up to a power of two. May throw std::bad_alloc.
  // REQUIRES: width in [1, 2^32]; depth in [1, 16].
  CountMinSketch(int64_t width, int depth, uint64_t seed);
  CountMinSketch(const CountMinSketch&) = delete;
  CountMinSketch& operator=(const CountMinSketch&) = delete;

  // Counts one occurrence of `key`; returns its new estimate.
  uint32_t Add(Key key);
  // The estimated occurrences of `key`.
  uint32_t Estimate(Key key) const;
  // Starts loading the counters of `key`.
  void Prefetch(Key key) const;

  int64_t width() const { return width_; }
  int depth() const { return depth_; }
  int64_t bytes() const { return width_ * depth_ * static_cast<int64_t>(sizeof(uint32_t)); }
  // Appends the counters (bytes() bytes, host byte order) to `out`.
  void AppendCounters(std::string* out) const;
  // Replaces the counters with bytes AppendCounters wrote for a sketch of
  // the same width and depth. REQUIRES: counters.size() == bytes().
  void LoadCounters(std::string_view counters);

 private:
  uint64_t Hash(Key key) const;
  uint32_t* Counter(uint64_t hash, int row) const;

  int64_t width_;
  uint64_t mask_;
  int depth_;
  uint64_t seed_;
  std::unique_ptr<uint32_t[]> counters_;  // row-major, depth_ x width_
};

}  // namespace ember::embedding
