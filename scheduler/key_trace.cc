#include "scheduler/key_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/random.h"

namespace ember::scheduler {
namespace {

// Rows the tiered table's LFU samples per victim
// (embedding/internal/eviction_policy.h, EvictionPolicy::kLfuSamples).
constexpr int kLfuSamples = 8;

}  // namespace

void KeyTrace::Truncate(int64_t examples) {
  if (examples >= examples_) return;
  const auto end = std::lower_bound(example_.begin(), example_.end(), examples,
                                    [](uint32_t e, int64_t limit) { return e < limit; });
  const size_t kept = static_cast<size_t>(end - example_.begin());
  example_.resize(kept);
  keys_.resize(kept);
  examples_ = std::max<int64_t>(0, examples);
  std::lock_guard<std::mutex> lock(mu_);
  memo_.clear();
}

void KeyTrace::Shuffle(uint64_t seed) {
  // A random permutation of the examples (Fisher-Yates on Mix64's stream),
  // then the occurrences sorted by their example's new place, each
  // example's keys kept in order.
  std::vector<uint32_t> place(static_cast<size_t>(examples_));
  for (size_t e = 0; e < place.size(); ++e) place[e] = static_cast<uint32_t>(e);
  uint64_t random = Mix64(seed);
  for (size_t e = place.size(); e > 1; --e) {
    random = Mix64(random + 0x9e3779b97f4a7c15ULL);
    std::swap(place[e - 1], place[random % e]);
  }
  std::vector<size_t> order(keys_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return place[example_[a]] < place[example_[b]]; });
  std::vector<uint32_t> example(order.size());
  std::vector<uint64_t> keys(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    example[i] = place[example_[order[i]]];
    keys[i] = keys_[order[i]];
  }
  example_ = std::move(example);
  keys_ = std::move(keys);
  std::lock_guard<std::mutex> lock(mu_);
  memo_.clear();
}

TierTraffic KeyTrace::Simulate(double held_rows, int64_t batch) const {
  // Beyond a row per sampled occurrence, more memory changes nothing.
  held_rows = std::clamp(held_rows, 0.0, static_cast<double>(keys_.size()) * kSampleOneIn);
  const auto memo_key = std::make_pair(std::llround(held_rows), batch);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = memo_.find(memo_key); it != memo_.end()) return it->second;
  }
  struct Row {
    uint32_t frequency = 0;  // Batches that pulled it.
    int64_t last = -1;       // The last of them.
    int64_t slot = -1;       // In `resident`; -1: on disk (or never seen).
  };
  std::unordered_map<uint64_t, Row> rows;
  std::vector<Row*> resident;
  // Rows memory may keep after a batch, in the sampled key space.
  const double capacity = held_rows / kSampleOneIn;
  uint64_t random = 0x9e3779b97f4a7c15ULL;
  double distinct = 0.0, hits = 0.0, reads = 0.0, writes = 0.0, created = 0.0;
  const int64_t batches = std::max<int64_t>(1, (examples_ + batch - 1) / batch);
  size_t i = 0;
  for (int64_t b = 0; b < batches; ++b) {
    for (; i < keys_.size() && static_cast<int64_t>(example_[i]) / batch == b; ++i) {
      Row& row = rows[keys_[i]];
      if (row.last == b) continue;  // A batch pulls each distinct key once.
      ++distinct;
      if (row.slot >= 0) {
        ++hits;
      } else {
        (row.frequency > 0 ? reads : created) += 1.0;
        row.slot = static_cast<int64_t>(resident.size());
        resident.push_back(&row);
      }
      ++row.frequency;
      row.last = b;
    }
    // Back to the budget: the coldest of kLfuSamples sampled rows at a
    // time, the batch's own rows last.
    while (static_cast<double>(resident.size()) > capacity && !resident.empty()) {
      Row* victim = nullptr;
      for (int s = 0; s < kLfuSamples; ++s) {
        random = Mix64(random + 0x9e3779b97f4a7c15ULL);
        Row* row = resident[random % resident.size()];
        if (victim == nullptr || std::make_tuple(row->last == b, row->frequency, row->last) <
                                     std::make_tuple(victim->last == b, victim->frequency,
                                                     victim->last)) {
          victim = row;
        }
      }
      Row* moved = resident.back();
      resident[victim->slot] = moved;
      moved->slot = victim->slot;
      resident.pop_back();
      victim->slot = -1;
      ++writes;
    }
  }
  const double scale = static_cast<double>(kSampleOneIn) / static_cast<double>(batches);
  const TierTraffic traffic{distinct * scale, hits * scale, reads * scale, writes * scale,
                            created * scale};
  std::lock_guard<std::mutex> lock(mu_);
  if (memo_.size() > 4096) memo_.clear();  // A bound, never reached by one plan.
  memo_.emplace(memo_key, traffic);
  return traffic;
}

std::shared_ptr<KeyTrace> ZipfKeyTrace(const std::vector<int64_t>& slot_vocabulary,
                                       double exponent, int multi_hot_slots, int max_bag_size,
                                       int64_t examples, uint64_t seed) {
  int64_t values = 0;
  for (int64_t v : slot_vocabulary) values += std::max<int64_t>(0, v);
  if (slot_vocabulary.empty() || values > (int64_t{1} << 28)) return nullptr;
  const int slots = static_cast<int>(slot_vocabulary.size());
  // Per slot: its sampled ranks and their cumulative probability.
  std::map<int64_t, double> harmonic;  // Per distinct vocabulary.
  std::vector<std::vector<uint32_t>> ranks(slots);
  std::vector<std::vector<double>> mass(slots);
  for (int s = 0; s < slots; ++s) {
    const int64_t v = slot_vocabulary[s];
    auto [it, inserted] = harmonic.try_emplace(v, 0.0);
    if (inserted) {
      for (int64_t r = v; r >= 1; --r) it->second += std::pow(static_cast<double>(r), -exponent);
    }
    double sum = 0.0;
    for (int64_t r = 0; r < v; ++r) {
      const uint64_t key = (static_cast<uint64_t>(s) << 32) | static_cast<uint64_t>(r);
      if (!KeyTrace::Sampled(key)) continue;
      sum += std::pow(static_cast<double>(r + 1), -exponent) / it->second;
      ranks[s].push_back(static_cast<uint32_t>(r));
      mass[s].push_back(sum);
    }
  }
  auto trace = std::make_shared<KeyTrace>();
  uint64_t random = Mix64(seed ^ 0x5851f42d4c957f2dULL);
  auto uniform = [&random] {
    random = Mix64(random + 0x9e3779b97f4a7c15ULL);
    return static_cast<double>(random >> 11) * 0x1.0p-53;
  };
  const int first_multi_hot = slots - std::clamp(multi_hot_slots, 0, slots);
  for (int64_t e = 0; e < examples; ++e) {
    for (int s = 0; s < slots; ++s) {
      int64_t bag = 1;
      if (s >= first_multi_hot) {
        bag = std::min<int64_t>(max_bag_size, static_cast<int64_t>(uniform() * (max_bag_size + 1)));
      }
      for (int64_t k = 0; k < bag; ++k) {
        const double u = uniform();
        if (mass[s].empty() || u >= mass[s].back()) continue;  // An unsampled key.
        const size_t i = static_cast<size_t>(
            std::upper_bound(mass[s].begin(), mass[s].end(), u) - mass[s].begin());
        trace->Add(e, (static_cast<uint64_t>(s) << 32) | ranks[s][std::min(i, ranks[s].size() - 1)]);
      }
    }
  }
  trace->Cover(examples);
  return trace;
}

}  // namespace ember::scheduler
