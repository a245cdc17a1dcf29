#pragma once

// The contract of io/batch_source.h as a value-parameterized suite: each
// BatchSource is one entry, a factory that makes it over the suite's data,
// and a layer registers its entries with one line:
//
//   INSTANTIATE_TEST_SUITE_P(Io, BatchSourceContractTest,
//                            ::testing::ValuesIn(IoBatchSources()), BatchSourceName);
//
// The data (ContractData) is written by the suite into each test's
// directory: the same Criteo rows as two text files, one columnar file and a
// Dataset in memory; every record is distinct, so "each example once" can be
// checked. The suite also makes other data (fewer rows, the same file names)
// and text with a bad line, and asks an entry for its source over those.
// The cases are in batch_source_contract.cc; tests/io instantiates the io
// sources, tests/engine the engine's (tests of io do not link engine).

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/batch_source.h"
#include "io/dataset.h"
#include "tests/testing/temp_dir.h"

namespace ember::test {

// One data set, written three ways with the same rows in the same order.
struct ContractData {
  std::vector<std::string> text_files;  // Criteo TSV.
  // Data with a bad line (bad_data()) has only the text files.
  std::string columnar_file;
  io::Dataset examples;  // The rows of the text files, in memory.
};

// What the suite asks an entry for.
struct SourceRequest {
  const ContractData* data = nullptr;
  int rank = 0;  // Of the entry's ranks.
  // The entry's options changed in something its positions record (the
  // batch size, say): a position of the source so made must not resume the
  // usual one.
  bool other_options = false;
};

// A source with what it borrows (inner sources, readers, communicators).
struct MadeSource {
  std::vector<std::shared_ptr<void>> parts;  // Destroyed after `source`.
  std::unique_ptr<io::BatchSource> source;
};

struct BatchSourceEntry {
  std::string name;  // A test-name suffix: letters, digits and '_'.
  // Ranks the data is split among (make is asked for each): every example
  // comes out once per epoch on one of them.
  int ranks = 1;
  // Epochs the source reads.
  int64_t epochs = 2;
  // EstimatedBatches is the number of batches Next returns (for this data:
  // no bad lines), rather than an estimate or -1.
  bool exact_estimate = true;
  // ResumePosition and ResumeFrom work; false: both are Unimplemented.
  bool resumes = true;
  // InMemoryData is the data set's examples; false: it is null.
  bool in_memory = false;
  // Reads the text files, failing at a bad line (BadLinePolicy::kFail).
  bool reads_text = false;
  std::function<Result<MadeSource>(const SourceRequest&)> make;
};

void PrintTo(const BatchSourceEntry& entry, std::ostream* out);
std::string BatchSourceName(const ::testing::TestParamInfo<BatchSourceEntry>& info);

// MadeSource over a source that borrows nothing.
MadeSource Own(std::unique_ptr<io::BatchSource> source);

class BatchSourceContractTest : public TempDirTest,
                                public ::testing::WithParamInterface<BatchSourceEntry> {
 protected:
  // Writes data(), other_data() and bad_data().
  void SetUp() override;

  // Rows of data() and other_data(): prime to the batch sizes of the
  // entries, so that an epoch ends in a short batch.
  static constexpr int64_t kRows = 37;
  static constexpr int64_t kOtherRows = 34;
  // bad_data(): its second file's line kBadLine does not have 40 columns.
  static constexpr int64_t kBadLine = 3;

  const ContractData& data() const { return data_; }
  const ContractData& other_data() const { return other_data_; }
  const ContractData& bad_data() const { return bad_data_; }
  const BatchSourceEntry& entry() const { return GetParam(); }

  // The entry's source for `request`; fails the test (and returns an
  // empty MadeSource) if it cannot be made.
  MadeSource Make(const SourceRequest& request) const;

 private:
  ContractData data_, other_data_, bad_data_;
};

}  // namespace ember::test
