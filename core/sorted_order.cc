#include "core/sorted_order.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <utility>

namespace ember {
namespace {

// Below this many keys a comparison sort wins over the radix sort's passes
// and histograms.
constexpr int64_t kMinRadixKeys = 512;

// The most pairs a thread keeps between calls: 2 x 4 MiB.
constexpr int64_t kMaxKeptEntries = int64_t{1} << 18;

struct Entry {
  uint64_t key;
  int64_t position;
};

constexpr int kDigitBits = 8;
constexpr int kDigits = 64 / kDigitBits;
constexpr int kBuckets = 1 << kDigitBits;

}  // namespace

void SortedOrder(const uint64_t* keys, int64_t n, std::vector<int64_t>* order,
                 std::vector<uint64_t>* sorted) {
  order->resize(n);
  if (sorted != nullptr) sorted->resize(n);
  if (n < kMinRadixKeys) {
    std::iota(order->begin(), order->end(), int64_t{0});
    std::stable_sort(order->begin(), order->end(),
                     [keys](int64_t a, int64_t b) { return keys[a] < keys[b]; });
    if (sorted != nullptr) {
      for (int64_t i = 0; i < n; ++i) (*sorted)[i] = keys[(*order)[i]];
    }
    return;
  }
  // Kept by the thread: a batch's pairs are ~1.5 MB, whose pages would fault
  // in again on every call. A larger batch gets pairs of its own, freed when
  // it is done, rather than leaving them with the thread.
  thread_local std::vector<Entry> kept_from, kept_to;
  std::vector<Entry> own_from, own_to;
  const bool keep = n <= kMaxKeptEntries;
  std::vector<Entry>& from = keep ? kept_from : own_from;
  std::vector<Entry>& to = keep ? kept_to : own_to;
  from.resize(n);
  to.resize(n);
  // Every digit's histogram in one pass over the keys.
  std::array<std::array<int64_t, kBuckets>, kDigits> counts{};
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t key = keys[i];
    from[i] = Entry{key, i};
    for (int d = 0; d < kDigits; ++d) ++counts[d][(key >> (d * kDigitBits)) & (kBuckets - 1)];
  }
  for (int d = 0; d < kDigits; ++d) {
    std::array<int64_t, kBuckets>& count = counts[d];
    const int shift = d * kDigitBits;
    // A digit every key shares orders nothing.
    if (count[(keys[0] >> shift) & (kBuckets - 1)] == n) continue;
    int64_t next = 0;
    for (int64_t& c : count) next += std::exchange(c, next);
    for (const Entry& e : from) to[count[(e.key >> shift) & (kBuckets - 1)]++] = e;
    from.swap(to);
  }
  for (int64_t i = 0; i < n; ++i) {
    (*order)[i] = from[i].position;
    if (sorted != nullptr) (*sorted)[i] = from[i].key;
  }
}

}  // namespace ember
