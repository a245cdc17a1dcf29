#pragma once

// What the text format tests share: files written into a per-test directory
// (plain or gzip), a read of one string through a format, and comparisons
// of batches.

#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/file.h"
#include "io/batch.h"
#include "io/dataset.h"
#include "io/text_format.h"
#include "io/text_reader.h"
#include "tests/testing/temp_dir.h"

namespace ember::io {

// The shared data directory (../shared/data, see tests/CMakeLists.txt).
inline std::string SharedDataPath(const std::string& relative) {
  return std::string(EMBER_SHARED_DATA_DIR) + "/" + relative;
}

// The keys of example i, slot s.
inline std::vector<Key> BagKeys(const Batch& batch, int64_t i, int s) {
  const int64_t bag = i * batch.num_slots + s;
  return std::vector<Key>(batch.keys.begin() + batch.offsets[bag],
                          batch.keys.begin() + batch.offsets[bag + 1]);
}

inline void ExpectSameBatch(const Batch& expected, const Batch& actual) {
  EXPECT_EQ(expected.size, actual.size);
  EXPECT_EQ(expected.num_dense, actual.num_dense);
  EXPECT_EQ(expected.num_slots, actual.num_slots);
  EXPECT_EQ(expected.num_labels, actual.num_labels);
  EXPECT_EQ(expected.labels, actual.labels);
  EXPECT_EQ(expected.dense, actual.dense);
  EXPECT_EQ(expected.offsets, actual.offsets);
  EXPECT_EQ(expected.keys, actual.keys);
}

// Checks the sizes of a batch against its shape.
inline void ExpectWellFormed(const Batch& batch) {
  EXPECT_EQ(static_cast<size_t>(batch.size * batch.num_labels), batch.labels.size());
  EXPECT_EQ(static_cast<size_t>(batch.size * batch.num_dense), batch.dense.size());
  ASSERT_EQ(static_cast<size_t>(batch.size * batch.num_slots + 1), batch.offsets.size());
  EXPECT_EQ(0, batch.offsets.front());
  EXPECT_EQ(static_cast<int64_t>(batch.keys.size()), batch.offsets.back());
}

inline int64_t CountPositives(const Batch& batch) {
  int64_t positives = 0;
  for (const float label : batch.labels) positives += label == 1.0f ? 1 : 0;
  return positives;
}

class TextFormatTest : public test::TempDirTest {
 protected:
  std::string Write(const std::string& name, const std::string& contents) const {
    const std::string path = Path(name);
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }

  std::string WriteGzip(const std::string& name, const std::string& contents) const {
    const std::string path = Path(name);
    gzFile file = gzopen(path.c_str(), "wb");
    EXPECT_NE(nullptr, file);
    EXPECT_EQ(static_cast<int>(contents.size()),
              gzwrite(file, contents.data(), static_cast<unsigned>(contents.size())));
    EXPECT_EQ(Z_OK, gzclose(file));
    return path;
  }

  // Reads `contents` as one file through `format`, skipping bad lines
  // whatever their ratio unless `options` say otherwise.
  Result<Dataset> ReadText(const TextFormat& format, const std::string& contents,
                           TextReadOptions options = Lenient()) const {
    return ReadTextFiles({Write("data.txt", contents)}, format, options);
  }

  // Reads `path` with 1 and with 2 parser threads under strict options,
  // expects identical, well-formed batches and returns the 1-thread read.
  static Dataset ReadOnOneAndTwoThreads(const std::string& path, const TextFormat& format) {
    TextReadOptions options = Strict();
    options.threads = 1;
    Result<Dataset> one = ReadTextFiles({path}, format, options);
    options.threads = 2;
    Result<Dataset> two = ReadTextFiles({path}, format, options);
    EXPECT_TRUE(one.ok()) << one.status();
    EXPECT_TRUE(two.ok()) << two.status();
    if (!one.ok() || !two.ok()) return Dataset();
    ExpectWellFormed(one->all());
    ExpectSameBatch(one->all(), two->all());
    return *std::move(one);
  }

  static TextReadOptions Lenient() {
    TextReadOptions options;
    options.max_bad_ratio = 1.0;
    return options;
  }
  static TextReadOptions Strict() {
    TextReadOptions options;
    options.bad_lines = BadLinePolicy::kFail;
    return options;
  }
};

}  // namespace ember::io
