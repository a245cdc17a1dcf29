#include "io/dataset.h"

#include <algorithm>

#include <glog/logging.h>

namespace ember::io {
namespace {

// Bad-line examples kept when reports are merged; matches the readers.
constexpr size_t kMaxBadLineExamples = 5;

// Appends examples [begin, end) of `from` to `to` in bulk. REQUIRES: same shape.
void AppendRange(const Batch& from, int64_t begin, int64_t end, Batch* to) {
  if (begin == end) return;
  to->labels.insert(to->labels.end(), from.labels.begin() + begin * from.num_labels,
                    from.labels.begin() + end * from.num_labels);
  to->dense.insert(to->dense.end(), from.dense.begin() + begin * from.num_dense,
                   from.dense.begin() + end * from.num_dense);
  const int64_t first_bag = begin * from.num_slots;
  const int64_t last_bag = end * from.num_slots;
  const int64_t key_begin = from.offsets[first_bag];
  const int64_t key_end = from.offsets[last_bag];
  const int64_t shift = static_cast<int64_t>(to->keys.size()) - key_begin;
  to->keys.insert(to->keys.end(), from.keys.begin() + key_begin, from.keys.begin() + key_end);
  for (int64_t bag = first_bag + 1; bag <= last_bag; ++bag) {
    to->offsets.push_back(from.offsets[bag] + shift);
  }
  to->size += end - begin;
}

}  // namespace

void MergeBadLineReport(const BadLineReport& from, BadLineReport* to) {
  to->lines_read += from.lines_read;
  to->bad_lines += from.bad_lines;
  for (const auto& [reason, count] : from.by_reason) to->by_reason[reason] += count;
  for (const std::string& example : from.first_examples) {
    if (to->first_examples.size() >= kMaxBadLineExamples) break;
    to->first_examples.push_back(example);
  }
}

std::string BadLineTotals(const BadLineReport& report) {
  std::string summary = std::to_string(report.bad_lines) + " of " +
                        std::to_string(report.lines_read) + " lines bad";
  if (report.by_reason.empty()) return summary;
  summary += " (";
  bool first = true;
  for (const auto& [reason, count] : report.by_reason) {
    summary += (first ? "" : ", ") + reason + ": " + std::to_string(count);
    first = false;
  }
  return summary + ")";
}

Dataset Dataset::Slice(int64_t begin, int64_t end) const {
  Batch part;
  GetBatch(begin, end, &part);
  return Dataset(std::move(part), report_);
}

void Dataset::GetBatch(int64_t begin, int64_t end, Batch* batch) const {
  CHECK(0 <= begin && begin <= end && end <= size())
      << "GetBatch range [" << begin << ", " << end << ") must lie in [0, " << size() << ")";
  batch->Clear(num_dense(), num_slots(), num_labels());
  const int64_t rows = end - begin;
  batch->labels.reserve(rows * num_labels());
  batch->dense.reserve(rows * num_dense());
  batch->offsets.reserve(rows * num_slots() + 1);
  AppendRange(all_, begin, end, batch);
}

void Dataset::GatherBatch(const std::vector<int64_t>& indices, Batch* batch) const {
  // The sizes first, then each field written in place: an example's keys are
  // one contiguous run, copied at once, and no vector grows per bag. (With an
  // insert per bag this copy was 3% of the DLRM step of tools/bench/suite.py
  // on 2 threads, on the thread that feeds the stages.)
  const int64_t rows = static_cast<int64_t>(indices.size());
  const int slots = num_slots(), dense = num_dense(), labels = num_labels();
  const int64_t* from_offsets = all_.offsets.data();
  int64_t keys = 0;
  for (const int64_t i : indices) {
    DCHECK(0 <= i && i < size()) << "GatherBatch index out of range";
    keys += from_offsets[(i + 1) * slots] - from_offsets[i * slots];
  }
  batch->Clear(dense, slots, labels);
  batch->labels.resize(rows * labels);
  batch->dense.resize(rows * dense);
  batch->offsets.resize(rows * slots + 1);
  batch->keys.resize(keys);
  int64_t* offsets = batch->offsets.data() + 1;
  int64_t written = 0;
  // The examples are scattered (a shuffled order): each one's bag offsets,
  // dense values and label are prefetched kAhead examples before they are
  // copied, its keys (located by those offsets) kAhead / 2 before.
  constexpr int64_t kAhead = 8;
  const auto prefetch = [&](int64_t i) {
    __builtin_prefetch(from_offsets + i * slots);
    __builtin_prefetch(from_offsets + (i + 1) * slots);
    __builtin_prefetch(all_.dense.data() + i * dense);
    __builtin_prefetch(all_.labels.data() + i * labels);
  };
  for (int64_t r = 0; r < std::min(rows, kAhead); ++r) prefetch(indices[r]);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = indices[r];
    if (r + kAhead < rows) prefetch(indices[r + kAhead]);
    if (r + kAhead / 2 < rows) {
      const int64_t j = indices[r + kAhead / 2];
      const int64_t last = from_offsets[(j + 1) * slots];
      for (int64_t k = from_offsets[j * slots]; k < last; k += 8) {
        __builtin_prefetch(all_.keys.data() + k);
      }
    }
    std::copy_n(all_.labels.data() + i * labels, labels, batch->labels.data() + r * labels);
    std::copy_n(all_.dense.data() + i * dense, dense, batch->dense.data() + r * dense);
    const int64_t* bags = from_offsets + i * slots;
    const int64_t shift = written - bags[0];
    for (int s = 1; s <= slots; ++s) *offsets++ = bags[s] + shift;
    const int64_t count = bags[slots] - bags[0];
    std::copy_n(all_.keys.data() + bags[0], count, batch->keys.data() + written);
    written += count;
  }
  batch->size = rows;
}

void Dataset::Append(const Dataset& other) {
  // A default-constructed Dataset has no shape yet and takes the other's.
  if (all_.offsets.empty()) {
    all_.Clear(other.num_dense(), other.num_slots(), other.num_labels());
  }
  if (other.all_.offsets.empty()) {
    MergeBadLineReport(other.report_, &report_);
    return;
  }
  CHECK_EQ(num_dense(), other.num_dense()) << "Append requires the same dense width";
  CHECK_EQ(num_slots(), other.num_slots()) << "Append requires the same slot count";
  CHECK_EQ(num_labels(), other.num_labels()) << "Append requires the same label count";
  AppendRange(other.all_, 0, other.size(), &all_);
  MergeBadLineReport(other.report_, &report_);
}

}  // namespace ember::io
