#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/batch.h"
#include "io/feature_hash.h"

namespace ember::io {

inline constexpr int kDefaultSlotBitsForReader = kDefaultSlotBits;

// Counts of lines a reader rejected, by reason ("column count", "bad label",
// "unparsable integer", ...; see BadLineReasonName in text_format.h), plus
// the first few examples with file:line.
struct BadLineReport {
  int64_t lines_read = 0;
  int64_t bad_lines = 0;
  std::map<std::string, int64_t> by_reason;
  std::vector<std::string> first_examples;  // "path:line: reason"
};

// Adds the counts of `from` to `to` and its examples while `to` has fewer
// than 5.
void MergeBadLineReport(const BadLineReport& from, BadLineReport* to);

// "3 of 1000 lines bad (bad label: 1, column count: 2)"; "0 of 1000 lines
// bad" when there are none.
std::string BadLineTotals(const BadLineReport& report);

// Examples held in memory in columnar form (one Batch holding all of them),
// cut into mini-batches on request.
// Thread safety: const methods may be called concurrently.
class Dataset {
 public:
  Dataset() = default;
  explicit Dataset(Batch all, BadLineReport report = {})
      : all_(std::move(all)), report_(std::move(report)) {}

  int64_t size() const { return all_.size; }
  int num_dense() const { return all_.num_dense; }
  int num_slots() const { return all_.num_slots; }
  int num_labels() const { return all_.num_labels; }
  const BadLineReport& bad_lines() const { return report_; }
  const Batch& all() const { return all_; }

  // Examples [begin, end) as a new Dataset (a copy) that keeps this
  // dataset's bad-line report. REQUIRES: 0 <= begin <= end <= size().
  Dataset Slice(int64_t begin, int64_t end) const;
  // Fills `batch` with examples [begin, end), replacing what it held (its
  // capacity is reused); its offsets start at 0.
  // REQUIRES: 0 <= begin <= end <= size().
  void GetBatch(int64_t begin, int64_t end, Batch* batch) const;
  // Fills `batch` with the examples at `indices` (in that order; repeats
  // allowed), replacing what it held. REQUIRES: every index in [0, size()).
  void GatherBatch(const std::vector<int64_t>& indices, Batch* batch) const;
  // Appends the examples of `other` and adds its bad-line counts to ours
  // (examples kept up to 5). A default-constructed Dataset takes the shape
  // of `other`. REQUIRES: otherwise the same num_dense, num_slots and
  // num_labels.
  void Append(const Dataset& other);

 private:
  Batch all_;
  BadLineReport report_;
};

}  // namespace ember::io
