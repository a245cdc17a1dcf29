#include "io/columnar.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/file.h"
#include "io/internal/columnar_format.h"
#include "core/checksum.h"
#include "tests/io/text_fixture.h"
#include "tests/testing/temp_dir.h"

namespace ember::io {
namespace {

using ::testing::HasSubstr;

// How the bags of one slot of a generated batch are drawn.
enum class Bags { kOneHot, kVariable, kFixedThree, kAlwaysEmpty };

// Random rows, with per slot bags as `bags` says.
Batch RandomBatch(const ColumnarShape& shape, const std::vector<Bags>& bags, int64_t rows,
                  std::mt19937_64* random) {
  Batch batch;
  batch.Clear(shape.num_dense, shape.num_slots, shape.num_labels);
  std::uniform_int_distribution<int> bag_size(0, 5);
  for (int64_t i = 0; i < rows; ++i) {
    for (int l = 0; l < shape.num_labels; ++l) batch.labels.push_back((*random)() % 2);
    for (int d = 0; d < shape.num_dense; ++d) {
      batch.dense.push_back(static_cast<float>((*random)() % 1000) / 7.0f);
    }
    for (int s = 0; s < shape.num_slots; ++s) {
      int keys = 0;
      switch (bags[s]) {
        case Bags::kOneHot:
          keys = 1;
          break;
        case Bags::kVariable:
          // Mostly 0 to 4 keys (a third empty), sometimes 9 to 20: bags on
          // both sides of the gather's fixed-size copy.
          keys = (*random)() % 8 == 0 ? 9 + (*random)() % 12 : std::max(0, bag_size(*random) - 1);
          break;
        case Bags::kFixedThree:
          keys = 3;
          break;
        case Bags::kAlwaysEmpty:
          keys = 0;
          break;
      }
      for (int k = 0; k < keys; ++k) batch.keys.push_back((*random)());
      batch.offsets.push_back(static_cast<int64_t>(batch.keys.size()));
    }
    ++batch.size;
  }
  return batch;
}

class ColumnarTest : public test::TempDirTest {
 protected:
  // Writes `batches` to `path` with `options`, one Append each.
  static Status Write(const std::string& path, const ColumnarShape& shape,
                      const std::vector<Batch>& batches, const ColumnarWriteOptions& options = {}) {
    EMBER_ASSIGN_OR_RETURN(auto writer, ColumnarWriter::Open(path, shape, options));
    for (const Batch& batch : batches) EMBER_RETURN_IF_ERROR(writer->Append(batch));
    return writer->Finish();
  }

  // All of `batches`, concatenated.
  static Dataset Concatenate(const std::vector<Batch>& batches) {
    Dataset all;
    for (const Batch& batch : batches) all.Append(Dataset(batch));
    return all;
  }

  // Checks ReadRows of `file` against `expected` for the full range, the
  // empty range and `ranges` random ranges.
  static void ExpectRowsMatch(const ColumnarFile& file, const Dataset& expected, int ranges,
                              std::mt19937_64* random) {
    ASSERT_EQ(expected.size(), file.rows());
    std::vector<std::pair<int64_t, int64_t>> checks = {{0, file.rows()}, {0, 0}};
    if (file.rows() > 0) checks.push_back({file.rows() - 1, file.rows()});
    for (int i = 0; i < ranges; ++i) {
      const int64_t a = (*random)() % (file.rows() + 1);
      const int64_t b = (*random)() % (file.rows() + 1);
      checks.push_back({std::min(a, b), std::max(a, b)});
    }
    Batch actual;  // reused, as a training loop does
    Batch wanted;
    for (const auto& [begin, end] : checks) {
      SCOPED_TRACE(::testing::Message() << "rows [" << begin << ", " << end << ")");
      const Status status = file.ReadRows(begin, end, &actual);
      ASSERT_TRUE(status.ok()) << status;
      expected.GetBatch(begin, end, &wanted);
      ExpectSameBatch(wanted, actual);
    }
  }

  // A small file with two row groups, every kind of slot and a few keys,
  // for the corruption tests; returns its bytes.
  std::string WriteSmallFile(const std::string& path) {
    const ColumnarShape shape{.num_labels = 2, .num_dense = 2, .num_slots = 3};
    std::mt19937_64 random(7);
    const std::vector<Bags> bags = {Bags::kOneHot, Bags::kVariable, Bags::kFixedThree};
    ColumnarWriteOptions options;
    options.rows_per_group = 4;
    EXPECT_TRUE(Write(path, shape, {RandomBatch(shape, bags, 7, &random)}, options).ok());
    return *ReadFile(path);
  }

  std::vector<std::string> FilesIn() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }
};

// --- Round trips ---------------------------------------------------------------

TEST_F(ColumnarTest, RandomBatchesRoundTripForAnyRowRangeAcrossRowGroups) {
  const ColumnarShape shape{.num_labels = 2, .num_dense = 3, .num_slots = 4};
  const std::vector<Bags> bags = {Bags::kOneHot, Bags::kVariable, Bags::kFixedThree,
                                  Bags::kAlwaysEmpty};
  std::mt19937_64 random(1);
  std::vector<Batch> batches;
  for (int64_t rows : {5, 0, 1, 13, 20, 7, 31}) {
    batches.push_back(RandomBatch(shape, bags, rows, &random));
  }
  ColumnarWriteOptions options;
  options.rows_per_group = 8;  // groups cut across Append calls
  ASSERT_TRUE(Write(Path("a.col"), shape, batches, options).ok());
  const Dataset expected = Concatenate(batches);
  for (ChecksumPolicy policy :
       {ChecksumPolicy::kNever, ChecksumPolicy::kOnFirstRead, ChecksumPolicy::kOnOpen}) {
    SCOPED_TRACE(static_cast<int>(policy));
    Result<std::unique_ptr<ColumnarFile>> file =
        OpenColumnar(Path("a.col"), {.verify_checksums = policy});
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(shape, (*file)->shape());
    EXPECT_EQ(77, (*file)->rows());
    EXPECT_EQ(10, (*file)->num_row_groups());
    EXPECT_EQ(72, (*file)->RowGroupBegin(9));
    EXPECT_EQ(5, (*file)->RowGroupRows(9));
    ExpectRowsMatch(**file, expected, 200, &random);
    EXPECT_TRUE((*file)->VerifyChecksums().ok());
  }
}

TEST_F(ColumnarTest, OneHotSlotsRoundTripAndStoreNoOffsets) {
  const ColumnarShape shape{.num_labels = 1, .num_dense = 13, .num_slots = 26};
  const std::vector<Bags> bags(26, Bags::kOneHot);
  std::mt19937_64 random(2);
  const std::vector<Batch> batches = {RandomBatch(shape, bags, 300, &random),
                                      RandomBatch(shape, bags, 211, &random)};
  ColumnarWriteOptions options;
  options.rows_per_group = 100;
  ASSERT_TRUE(Write(Path("criteo.col"), shape, batches, options).ok());
  Result<std::unique_ptr<ColumnarFile>> file = OpenColumnar(Path("criteo.col"));
  ASSERT_TRUE(file.ok()) << file.status();
  ExpectRowsMatch(**file, Concatenate(batches), 100, &random);
  // Labels, dense and keys, plus padding, headers and the index; no offsets.
  const int64_t data_bytes = 511 * (4 + 13 * 4 + 26 * 8);
  EXPECT_LT((*file)->file_bytes(), data_bytes + 6 * 64 * 28 + 6 * 1520 + 160);
}

TEST_F(ColumnarTest, ShapesWithoutDenseOrSlotsRoundTrip) {
  std::mt19937_64 random(3);
  for (const ColumnarShape shape :
       {ColumnarShape{.num_labels = 1, .num_dense = 0, .num_slots = 0},
        ColumnarShape{.num_labels = 3, .num_dense = 0, .num_slots = 2},
        ColumnarShape{.num_labels = 1, .num_dense = 4, .num_slots = 0}}) {
    SCOPED_TRACE(::testing::Message() << shape.num_labels << " labels, " << shape.num_dense
                                      << " dense, " << shape.num_slots << " slots");
    const std::vector<Bags> bags(shape.num_slots, Bags::kVariable);
    const std::vector<Batch> batches = {RandomBatch(shape, bags, 9, &random),
                                        RandomBatch(shape, bags, 4, &random)};
    ColumnarWriteOptions options;
    options.rows_per_group = 5;
    ASSERT_TRUE(Write(Path("a.col"), shape, batches, options).ok());
    Result<std::unique_ptr<ColumnarFile>> file = OpenColumnar(Path("a.col"));
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(shape, (*file)->shape());
    ExpectRowsMatch(**file, Concatenate(batches), 30, &random);
  }
}

TEST_F(ColumnarTest, FileOfNoRowsOpensWithNoRowGroups) {
  const ColumnarShape shape{.num_labels = 1, .num_dense = 2, .num_slots = 2};
  ASSERT_TRUE(Write(Path("empty.col"), shape, {}).ok());
  Result<std::unique_ptr<ColumnarFile>> file = OpenColumnar(Path("empty.col"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(0, (*file)->rows());
  EXPECT_EQ(0, (*file)->num_row_groups());
  Batch batch;
  ASSERT_TRUE((*file)->ReadRows(0, 0, &batch).ok());
  EXPECT_EQ(0, batch.size);
  EXPECT_EQ(std::vector<int64_t>{0}, batch.offsets);
}

TEST_F(ColumnarTest, MaxGroupBytesClosesGroupsEarly) {
  const ColumnarShape shape{.num_labels = 1, .num_dense = 0, .num_slots = 1};
  std::mt19937_64 random(4);
  const Batch batch = RandomBatch(shape, {Bags::kFixedThree}, 100, &random);
  ColumnarWriteOptions options;
  options.max_group_bytes = 1;  // a group per append chunk
  ASSERT_TRUE(Write(Path("a.col"), shape, {batch, batch}, options).ok());
  Result<std::unique_ptr<ColumnarFile>> file = OpenColumnar(Path("a.col"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(2, (*file)->num_row_groups());
  ExpectRowsMatch(**file, Concatenate({batch, batch}), 20, &random);
}

TEST_F(ColumnarTest, ReadColumnarDatasetReadsEveryRow) {
  const ColumnarShape shape{.num_labels = 1, .num_dense = 2, .num_slots = 2};
  std::mt19937_64 random(5);
  const Batch batch = RandomBatch(shape, {Bags::kOneHot, Bags::kVariable}, 50, &random);
  ASSERT_TRUE(Write(Path("a.col"), shape, {batch}).ok());
  Result<Dataset> data = ReadColumnarDataset(Path("a.col"));
  ASSERT_TRUE(data.ok()) << data.status();
  ExpectSameBatch(batch, data->all());
}

TEST_F(ColumnarTest, RowRangeOutsideTheFileIsOutOfRange) {
  WriteSmallFile(Path("a.col"));
  Result<std::unique_ptr<ColumnarFile>> file = OpenColumnar(Path("a.col"));
  ASSERT_TRUE(file.ok()) << file.status();
  Batch batch;
  EXPECT_EQ(StatusCode::kOutOfRange, (*file)->ReadRows(0, 8, &batch).code());
  EXPECT_EQ(StatusCode::kOutOfRange, (*file)->ReadRows(-1, 2, &batch).code());
  EXPECT_EQ(StatusCode::kOutOfRange, (*file)->ReadRows(3, 2, &batch).code());
}

TEST_F(ColumnarTest, ConcurrentReadersGetWhatOneReaderGets) {
  const ColumnarShape shape{.num_labels = 1, .num_dense = 2, .num_slots = 3};
  const std::vector<Bags> bags = {Bags::kOneHot, Bags::kVariable, Bags::kFixedThree};
  std::mt19937_64 random(9);
  const Batch batch = RandomBatch(shape, bags, 500, &random);
  ColumnarWriteOptions options;
  options.rows_per_group = 16;
  ASSERT_TRUE(Write(Path("a.col"), shape, {batch}, options).ok());
  // Checksums are checked on first read: the threads race to check groups.
  Result<std::unique_ptr<ColumnarFile>> file = OpenColumnar(Path("a.col"));
  ASSERT_TRUE(file.ok()) << file.status();
  const Dataset expected(batch);
  constexpr int kThreads = 4;
  std::vector<Status> statuses(kThreads);
  std::vector<std::vector<Batch>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Overlapping ranges of 7 rows, each thread from its own start.
      for (int64_t begin = t; begin + 7 <= 500 && statuses[t].ok(); begin += 5) {
        results[t].emplace_back();
        statuses[t] = (*file)->ReadRows(begin, begin + 7, &results[t].back());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  Batch wanted;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(statuses[t].ok()) << statuses[t];
    for (size_t i = 0; i < results[t].size(); ++i) {
      expected.GetBatch(t + 5 * i, t + 5 * i + 7, &wanted);
      ExpectSameBatch(wanted, results[t][i]);
    }
  }
}

// --- Writer errors and atomicity ---------------------------------------------------

TEST_F(ColumnarTest, WriterIntoAMissingDirectoryFailsAndLeavesNoFile) {
  const ColumnarShape shape;
  Result<std::unique_ptr<ColumnarWriter>> writer =
      ColumnarWriter::Open(Path("no/such/dir/a.col"), shape);
  EXPECT_EQ(StatusCode::kInvalidArgument, writer.status().code());
  EXPECT_THAT(writer.status().message(), HasSubstr("no/such/dir/a.col"));
  // A regular file where a directory should be (permissions do not stop root).
  ASSERT_TRUE(WriteFileAtomic(Path("plain"), "x").ok());
  writer = ColumnarWriter::Open(Path("plain/a.col"), shape);
  EXPECT_EQ(StatusCode::kInvalidArgument, writer.status().code());
  // A directory where the file should be.
  std::filesystem::create_directory(Path("dir.col"));
  writer = ColumnarWriter::Open(Path("dir.col"), shape);
  EXPECT_EQ(StatusCode::kInvalidArgument, writer.status().code());
  EXPECT_THAT(FilesIn(), ::testing::UnorderedElementsAre("plain", "dir.col"));
}

TEST_F(ColumnarTest, WriterRejectsBadShapesAndBatchesAndStaysUsable) {
  EXPECT_EQ(StatusCode::kInvalidArgument,
            ColumnarWriter::Open(Path("a.col"), {.num_labels = 0}).status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument,
            ColumnarWriter::Open(Path("a.col"), {.num_slots = 5, .slot_bits = 2}).status().code());
  const ColumnarShape shape{.num_labels = 1, .num_dense = 1, .num_slots = 1};
  Result<std::unique_ptr<ColumnarWriter>> writer = ColumnarWriter::Open(Path("a.col"), shape);
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::mt19937_64 random(6);
  const Batch good = RandomBatch(shape, {Bags::kVariable}, 10, &random);
  Batch wrong_shape = good;
  wrong_shape.num_dense = 2;
  Batch short_labels = good;
  short_labels.labels.pop_back();
  Batch decreasing = good;
  decreasing.offsets[5] = decreasing.offsets[4] + 100;
  Batch past_keys = good;
  past_keys.offsets.back() += 1;
  for (const Batch* bad : {&wrong_shape, &short_labels, &decreasing, &past_keys}) {
    EXPECT_EQ(StatusCode::kInvalidArgument, (*writer)->Append(*bad).code());
  }
  ASSERT_TRUE((*writer)->Append(good).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  Result<Dataset> data = ReadColumnarDataset(Path("a.col"));
  ASSERT_TRUE(data.ok()) << data.status();
  ExpectSameBatch(good, data->all());
}

TEST_F(ColumnarTest, AbandonedWriterLeavesNoFileAndKeepsThePreviousOne) {
  const ColumnarShape shape{.num_labels = 1, .num_dense = 1, .num_slots = 1};
  std::mt19937_64 random(8);
  const Batch first = RandomBatch(shape, {Bags::kOneHot}, 10, &random);
  {
    auto writer = ColumnarWriter::Open(Path("fresh.col"), shape);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Append(first).ok());
  }  // destroyed without Finish
  EXPECT_TRUE(FilesIn().empty());

  ASSERT_TRUE(Write(Path("a.col"), shape, {first}).ok());
  const std::string before = *ReadFile(Path("a.col"));
  {
    auto writer = ColumnarWriter::Open(Path("a.col"), shape);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Append(RandomBatch(shape, {Bags::kOneHot}, 99, &random)).ok());
  }
  EXPECT_EQ(before, *ReadFile(Path("a.col")));
  EXPECT_THAT(FilesIn(), ::testing::ElementsAre("a.col"));

  // A second writer that finishes replaces the file.
  const Batch second = RandomBatch(shape, {Bags::kOneHot}, 3, &random);
  ASSERT_TRUE(Write(Path("a.col"), shape, {second}).ok());
  Result<Dataset> data = ReadColumnarDataset(Path("a.col"));
  ASSERT_TRUE(data.ok()) << data.status();
  ExpectSameBatch(second, data->all());
  EXPECT_THAT(FilesIn(), ::testing::ElementsAre("a.col"));
}

// --- Damaged files -------------------------------------------------------------------

// Writes `bytes` to `path` (no fsync: thousands of these run) and opens it
// with checksums checked on open.
Status OpenBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return OpenColumnar(path, {.verify_checksums = ChecksumPolicy::kOnOpen}).status();
}

TEST_F(ColumnarTest, TruncationAtAnyLengthIsDataLossNamingThePath) {
  const std::string bytes = WriteSmallFile(Path("a.col"));
  ASSERT_GT(bytes.size(), 1000u);
  for (size_t size = 0; size < bytes.size(); ++size) {
    SCOPED_TRACE(::testing::Message() << size << " of " << bytes.size() << " bytes");
    const Status status = OpenBytes(Path("cut.col"), bytes.substr(0, size));
    EXPECT_EQ(StatusCode::kDataLoss, status.code()) << status;
    EXPECT_THAT(status.message(), HasSubstr("cut.col"));
  }
}

TEST_F(ColumnarTest, AnyFlippedByteIsDetectedOnOpen) {
  const std::string bytes = WriteSmallFile(Path("a.col"));
  for (size_t at = 0; at < bytes.size(); ++at) {
    SCOPED_TRACE(::testing::Message() << "byte " << at << " of " << bytes.size());
    std::string damaged = bytes;
    damaged[at] ^= 0x20;
    const Status status = OpenBytes(Path("bad.col"), damaged);
    // The magic and the version name another kind of file; all else is damage.
    const StatusCode expected = at < 12 ? StatusCode::kInvalidArgument : StatusCode::kDataLoss;
    EXPECT_EQ(expected, status.code()) << status;
  }
}

TEST_F(ColumnarTest, FlippedByteInASectionFailsTheFirstReadOfItsRowGroup) {
  std::string bytes = WriteSmallFile(Path("a.col"));
  // The keys of slot 0 in the second row group, rows 4 to 7.
  Result<std::unique_ptr<ColumnarFile>> file = OpenColumnar(Path("a.col"));
  ASSERT_TRUE(file.ok());
  internal::GroupEntry entry;
  // Index entries follow the data; the second starts one entry in.
  const uint64_t index_offset = [&] {
    uint64_t v;
    std::memcpy(&v, bytes.data() + 56, 8);
    return v;
  }();
  internal::DecodeGroupEntry(reinterpret_cast<const unsigned char*>(bytes.data()) + index_offset +
                                 internal::GroupEntryBytes(3),
                             3, &entry);
  bytes[entry.slots[0].keys.offset + 3] ^= 1;
  ASSERT_TRUE(WriteFileAtomic(Path("bad.col"), bytes).ok());
  file = OpenColumnar(Path("bad.col"), {.verify_checksums = ChecksumPolicy::kOnFirstRead});
  ASSERT_TRUE(file.ok()) << file.status();
  Batch batch;
  EXPECT_TRUE((*file)->ReadRows(0, 4, &batch).ok());
  const Status status = (*file)->ReadRows(3, 5, &batch);
  EXPECT_EQ(StatusCode::kDataLoss, status.code());
  EXPECT_THAT(status.message(), HasSubstr("row group 1"));
  EXPECT_THAT(status.message(), HasSubstr("keys of slot 0"));
  EXPECT_EQ(StatusCode::kDataLoss, (*file)->VerifyChecksums().code());
}

TEST_F(ColumnarTest, OtherFilesAndVersionsAreInvalidArgument) {
  std::string bytes = WriteSmallFile(Path("a.col"));
  Status status = OpenBytes(Path("text.col"), "label\tI1\tI2\n1\t2\t3\n");
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("not an Ember columnar file"));
  bytes[8] = 2;  // version 2
  status = OpenBytes(Path("v2.col"), bytes);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("version 2"));
  EXPECT_EQ(StatusCode::kNotFound, OpenColumnar(Path("missing.col")).status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument, OpenColumnar(dir_.string()).status().code());
}

TEST_F(ColumnarTest, AppendedBytesAreDataLoss) {
  const std::string bytes = WriteSmallFile(Path("a.col"));
  const Status status = OpenBytes(Path("long.col"), bytes + std::string(64, '\0'));
  EXPECT_EQ(StatusCode::kDataLoss, status.code());
  EXPECT_THAT(status.message(), HasSubstr("header records"));
}

// A file whose header, index and section checksums are consistent again
// after an edit: shows the checks behind the checksums.
class ResealedFileTest : public ColumnarTest {
 protected:
  void SetUp() override {
    ColumnarTest::SetUp();
    bytes_ = WriteSmallFile(Path("a.col"));
    header_ = *internal::DecodeHeader("a.col", Data(), bytes_.size());
    for (uint64_t g = 0; g < header_.groups; ++g) {
      internal::GroupEntry entry;
      internal::DecodeGroupEntry(Data() + EntryAt(g), 3, &entry);
      entries_.push_back(entry);
    }
  }

  unsigned char* Data() { return reinterpret_cast<unsigned char*>(bytes_.data()); }
  uint64_t EntryAt(uint64_t g) const {
    return header_.index_offset + g * internal::GroupEntryBytes(3);
  }

  // Rewrites entries_, then every checksum, the header and the trailer, and
  // opens the result with checksums checked.
  Result<std::unique_ptr<ColumnarFile>> Reseal() {
    std::string index;
    for (internal::GroupEntry& entry : entries_) {
      auto rehash = [&](internal::SectionRef* section) {
        if (section->offset + section->bytes <= bytes_.size()) {
          section->hash = XxHash64(Data() + section->offset, section->bytes);
        }
      };
      rehash(&entry.labels);
      rehash(&entry.dense);
      for (internal::SlotEntry& slot : entry.slots) {
        rehash(&slot.offsets);
        rehash(&slot.keys);
      }
      internal::AppendGroupEntry(entry, &index);
    }
    std::memcpy(Data() + header_.index_offset, index.data(), index.size());
    header_.index_hash = XxHash64(index.data(), index.size());
    const std::string header = internal::EncodeHeader(header_);
    std::memcpy(Data(), header.data(), header.size());
    const std::string trailer = internal::EncodeTrailer(
        header_.index_offset, header_.file_bytes,
        internal::HeaderHash(reinterpret_cast<const unsigned char*>(header.data())));
    std::memcpy(Data() + bytes_.size() - trailer.size(), trailer.data(), trailer.size());
    EXPECT_TRUE(WriteFileAtomic(Path("edited.col"), bytes_).ok());
    return OpenColumnar(Path("edited.col"), {.verify_checksums = ChecksumPolicy::kOnOpen});
  }

  std::string bytes_;
  internal::ColumnarHeader header_;
  std::vector<internal::GroupEntry> entries_;
};

TEST_F(ResealedFileTest, UnchangedFileOpens) { EXPECT_TRUE(Reseal().ok()); }

TEST_F(ResealedFileTest, RowCountThatDisagreesWithTheGroupsIsDataLoss) {
  header_.rows += 1;
  const Status status = Reseal().status();
  EXPECT_EQ(StatusCode::kDataLoss, status.code());
  EXPECT_THAT(status.message(), HasSubstr("the row groups hold 7 rows, the header records 8"));
}

TEST_F(ResealedFileTest, SectionOfTheWrongSizeIsDataLoss) {
  entries_[1].dense.bytes -= 4;
  const Status status = Reseal().status();
  EXPECT_EQ(StatusCode::kDataLoss, status.code());
  EXPECT_THAT(status.message(), HasSubstr("row group 1"));
  EXPECT_THAT(status.message(), HasSubstr("dense"));
}

TEST_F(ResealedFileTest, SectionOutsideTheFileIsDataLoss) {
  entries_[0].slots[2].keys.offset = uint64_t{1} << 62;
  EXPECT_EQ(StatusCode::kDataLoss, Reseal().status().code());
  entries_[0].slots[2].keys.offset = 64;  // overlapping the header
  EXPECT_EQ(StatusCode::kDataLoss, Reseal().status().code());
}

TEST_F(ResealedFileTest, HugeBagSizeIsDataLoss) {
  entries_[0].slots[0].bag = uint64_t{1} << 61;
  EXPECT_EQ(StatusCode::kDataLoss, Reseal().status().code());
}

TEST_F(ResealedFileTest, RowCountsThatDoNotChainAreDataLoss) {
  entries_[1].first_row += 1;
  EXPECT_EQ(StatusCode::kDataLoss, Reseal().status().code());
}

TEST_F(ResealedFileTest, HeaderFieldOutOfRangeIsDataLoss) {
  header_.slot_bits = 0;
  EXPECT_EQ(StatusCode::kDataLoss, Reseal().status().code());
}

TEST_F(ResealedFileTest, DecreasingOrOutOfBoundsOffsetsFailReadRowsNotTheProcess) {
  // Slot 1 has variable bags: offsets [rows + 1] from 0.
  ASSERT_EQ(internal::kVariableBags, entries_[0].slots[1].bag);
  int64_t* offsets = reinterpret_cast<int64_t*>(Data() + entries_[0].slots[1].offsets.offset);
  const int64_t saved = offsets[2];
  offsets[2] = offsets[4] + 1000;  // bag 1 too long, bag 2 negative
  Result<std::unique_ptr<ColumnarFile>> file = Reseal();
  ASSERT_TRUE(file.ok()) << file.status();
  Batch batch;
  Status status = (*file)->ReadRows(0, 4, &batch);
  EXPECT_EQ(StatusCode::kDataLoss, status.code());
  EXPECT_THAT(status.message(), HasSubstr("offsets"));
  EXPECT_EQ(StatusCode::kDataLoss, (*file)->ReadRows(2, 3, &batch).code());
  EXPECT_TRUE((*file)->ReadRows(4, 7, &batch).ok());

  offsets[2] = saved;
  offsets[4] = 1 << 20;  // the end of rows [0, 4) past the keys
  file = Reseal();
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(StatusCode::kDataLoss, (*file)->ReadRows(1, 4, &batch).code());
  offsets[0] = -1;
  file = Reseal();
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(StatusCode::kDataLoss, (*file)->ReadRows(0, 1, &batch).code());
}

}  // namespace
}  // namespace ember::io
