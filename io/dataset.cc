#include "io/dataset.h"

#include <algorithm>

#include <glog/logging.h>

namespace ember::io {
namespace {

// Bad-line examples kept when reports are merged; matches the readers.
constexpr size_t kMaxBadLineExamples = 5;

// Appends example `i` of `from` to `to`. REQUIRES: same shape.
void AppendExample(const Batch& from, int64_t i, Batch* to) {
  if (from.num_labels == 1) {
    to->labels.push_back(from.labels[i]);
  } else {
    const float* labels = from.labels.data() + i * from.num_labels;
    to->labels.insert(to->labels.end(), labels, labels + from.num_labels);
  }
  const float* dense = from.dense.data() + i * from.num_dense;
  to->dense.insert(to->dense.end(), dense, dense + from.num_dense);
  for (int s = 0; s < from.num_slots; ++s) {
    const int64_t bag = i * from.num_slots + s;
    to->keys.insert(to->keys.end(), from.keys.begin() + from.offsets[bag],
                    from.keys.begin() + from.offsets[bag + 1]);
    to->offsets.push_back(static_cast<int64_t>(to->keys.size()));
  }
  ++to->size;
}

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
  batch->Clear(num_dense(), num_slots(), num_labels());
  const int64_t rows = static_cast<int64_t>(indices.size());
  batch->labels.reserve(rows * num_labels());
  batch->dense.reserve(rows * num_dense());
  batch->offsets.reserve(rows * num_slots() + 1);
  for (const int64_t i : indices) {
    DCHECK(0 <= i && i < size()) << "GatherBatch index out of range";
    AppendExample(all_, i, batch);
  }
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
