#pragma once

// What the StreamReader tests share: reading a reader to its end (with the
// position after every batch), records as comparable values, and resuming
// at cut points.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "io/batch.h"
#include "io/criteo.h"
#include "io/stream_reader.h"
#include "tests/io/text_fixture.h"

namespace ember::io {

// A Criteo line whose first categorical value is unique to `i`, so that
// every record of the generated files differs from every other.
inline std::string CriteoLine(int64_t i) {
  char hex[32];
  std::string line = (i * 7) % 3 == 0 ? "1" : "0";
  for (int j = 0; j < kCriteoDense; ++j) {
    line += '\t';
    if ((i + j) % 11 != 0) line += std::to_string((i * (j + 3)) % 97);
  }
  std::snprintf(hex, sizeof(hex), "%08llx", static_cast<unsigned long long>(i));
  line += '\t';
  line += hex;
  for (int s = 1; s < kCriteoSlots; ++s) {
    line += '\t';
    if ((i + s) % 13 != 0) {
      std::snprintf(hex, sizeof(hex), "%08llx", static_cast<unsigned long long>((i * 31 + s) % 89));
      line += hex;
    }
  }
  return line;
}

// Lines [first, first + count), each ending in `eol`.
inline std::string CriteoText(int64_t first, int64_t count, const std::string& eol = "\n") {
  std::string text;
  for (int64_t i = first; i < first + count; ++i) text += CriteoLine(i) + eol;
  return text;
}

// A reader's output: its batches, the epoch of each, and (on request) the
// serialised position before the first batch and after each one.
struct StreamRun {
  std::vector<Batch> batches;
  std::vector<int64_t> epochs;
  std::vector<std::string> positions;
  StreamStats stats;
  Status status;  // The error that ended the run, if any.
};

inline StreamRun ReadStream(StreamReader* reader, bool with_positions = false) {
  StreamRun run;
  if (with_positions) run.positions.push_back(reader->position().Serialize());
  Batch batch;
  while (true) {
    Result<bool> more = reader->Next(&batch);
    if (!more.ok()) {
      run.status = more.status();
      break;
    }
    if (!*more) break;
    run.batches.push_back(batch);
    run.epochs.push_back(reader->epoch());
    if (with_positions) run.positions.push_back(reader->position().Serialize());
  }
  run.stats = reader->stats();
  return run;
}

// All batches of `run` (from batch `first` on) as one batch.
inline Batch Concat(const StreamRun& run, size_t first = 0) {
  Batch all;
  if (run.batches.empty()) return all;
  const Batch& shape = run.batches.front();
  all.Clear(shape.num_dense, shape.num_slots, shape.num_labels);
  for (size_t b = first; b < run.batches.size(); ++b) AppendBatch(run.batches[b], &all);
  return all;
}

inline std::vector<int64_t> BatchSizes(const StreamRun& run, size_t first = 0) {
  std::vector<int64_t> sizes;
  for (size_t b = first; b < run.batches.size(); ++b) sizes.push_back(run.batches[b].size);
  return sizes;
}

// Each example of `batch` as bytes (labels, dense values, bag sizes, keys):
// equal strings, equal examples.
inline std::vector<std::string> Records(const Batch& batch) {
  std::vector<std::string> records;
  records.reserve(batch.size);
  for (int64_t i = 0; i < batch.size; ++i) {
    std::string record;
    auto append = [&record](const void* data, size_t bytes) {
      record.append(static_cast<const char*>(data), bytes);
    };
    append(batch.labels.data() + i * batch.num_labels, sizeof(float) * batch.num_labels);
    append(batch.dense.data() + i * batch.num_dense, sizeof(float) * batch.num_dense);
    for (int s = 0; s < batch.num_slots; ++s) {
      const std::vector<Key> keys = BagKeys(batch, i, s);
      const int64_t size = static_cast<int64_t>(keys.size());
      append(&size, sizeof(size));
      append(keys.data(), sizeof(Key) * keys.size());
    }
    records.push_back(std::move(record));
  }
  return records;
}

inline std::vector<std::string> SortedRecords(const Batch& batch) {
  std::vector<std::string> records = Records(batch);
  std::sort(records.begin(), records.end());
  return records;
}

inline void ExpectSameRun(const StreamRun& expected, const StreamRun& actual) {
  EXPECT_EQ(expected.status, actual.status);
  EXPECT_EQ(expected.epochs, actual.epochs);
  EXPECT_EQ(BatchSizes(expected), BatchSizes(actual));
  ExpectSameBatch(Concat(expected), Concat(actual));
}

inline void ExpectSameReport(const BadLineReport& expected, const BadLineReport& actual) {
  EXPECT_EQ(expected.lines_read, actual.lines_read);
  EXPECT_EQ(expected.bad_lines, actual.bad_lines);
  EXPECT_EQ(expected.by_reason, actual.by_reason);
  EXPECT_EQ(expected.first_examples, actual.first_examples);
}

// Opens a reader with `open`, seeks it to each position of `full` whose
// index is in `cuts` (0: before the first batch; k: after batch k), reads it
// to its end and expects exactly the batches of `full` after the cut, the
// same epochs, bad-line report and totals.
template <typename Open>
void ExpectResumesAt(const StreamRun& full, const std::vector<size_t>& cuts, Open open) {
  ASSERT_EQ(full.batches.size() + 1, full.positions.size());
  for (const size_t cut : cuts) {
    SCOPED_TRACE("resumed after batch " + std::to_string(cut));
    Result<std::unique_ptr<StreamReader>> reader = open();
    ASSERT_TRUE(reader.ok()) << reader.status();
    Result<StreamPosition> position = StreamPosition::Parse(full.positions[cut]);
    ASSERT_TRUE(position.ok()) << position.status();
    ASSERT_TRUE((*reader)->Seek(*position).ok());
    EXPECT_EQ(full.positions[cut], (*reader)->position().Serialize());
    const StreamRun rest = ReadStream(reader->get());
    ASSERT_TRUE(rest.status.ok()) << rest.status;
    EXPECT_EQ(std::vector<int64_t>(full.epochs.begin() + cut, full.epochs.end()), rest.epochs);
    EXPECT_EQ(BatchSizes(full, cut), BatchSizes(rest));
    if (cut < full.batches.size()) {
      ExpectSameBatch(Concat(full, cut), Concat(rest));
    } else {
      EXPECT_TRUE(rest.batches.empty());
    }
    ExpectSameReport(full.stats.bad_lines, rest.stats.bad_lines);
    EXPECT_EQ(full.stats.records_delivered, rest.stats.records_delivered);
    EXPECT_EQ(full.stats.padded_for_equal_shards, rest.stats.padded_for_equal_shards);
    EXPECT_EQ(full.stats.dropped_for_equal_shards, rest.stats.dropped_for_equal_shards);
  }
}

// Every index 0 .. n, or about `count` of them spread evenly (first and
// last included).
inline std::vector<size_t> CutPoints(size_t n, size_t count = 0) {
  std::vector<size_t> cuts;
  if (count == 0 || count > n + 1) count = n + 1;
  for (size_t i = 0; i < count; ++i) {
    cuts.push_back(count == 1 ? 0 : i * n / (count - 1));
  }
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts;
}

}  // namespace ember::io
