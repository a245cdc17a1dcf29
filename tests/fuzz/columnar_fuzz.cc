// libFuzzer target: the columnar reader (io/columnar.h) on any file. The
// input's first byte picks the mode; the rest is written to a temporary file
// that is opened with OpenColumnar and read with ReadRows:
//   bit 0 clear  the bytes as they are, checksums checked when groups are
//                first read and then all of them (VerifyChecksums): almost
//                every mutation must be caught by a checksum;
//   bit 0 set    the bytes repaired first (magic, version, file size, index
//                and header checksums, trailer), then read without section
//                checksums: the fuzzer reaches the index and section checks,
//                and a damaged file may give wrong values but never a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "io/columnar.h"
#include "io/internal/columnar_format.h"
#include "core/checksum.h"
#include "tests/fuzz/fuzz_parse.h"

namespace {

using ember::io::internal::kColumnarHeaderBytes;
using ember::io::internal::kColumnarTrailerBytes;

uint64_t GetU64(const std::string& bytes, size_t at) {
  uint64_t value;
  std::memcpy(&value, bytes.data() + at, sizeof(value));
  return value;
}

void PutU64(uint64_t value, size_t at, std::string* bytes) {
  std::memcpy(bytes->data() + at, &value, sizeof(value));
}

// Makes the header and trailer consistent with each other and the index, as
// the writer would have (offsets from io/columnar.h's layout).
void Repair(std::string* bytes) {
  const size_t size = bytes->size();
  if (size < kColumnarHeaderBytes + kColumnarTrailerBytes) return;
  std::memcpy(bytes->data(), ember::io::internal::kColumnarMagic, 8);
  const uint32_t version = ember::io::internal::kColumnarVersion;
  const uint32_t header_bytes = kColumnarHeaderBytes;
  std::memcpy(bytes->data() + 8, &version, 4);
  std::memcpy(bytes->data() + 12, &header_bytes, 4);
  PutU64(size, 80, bytes);
  std::memset(bytes->data() + 88, 0, 32);
  const uint64_t index_offset = GetU64(*bytes, 56);
  const uint64_t index_bytes = GetU64(*bytes, 64);
  if (index_offset <= size && index_bytes <= size - index_offset) {
    PutU64(ember::XxHash64(bytes->data() + index_offset, index_bytes), 72, bytes);
  }
  const uint64_t header_hash =
      ember::io::internal::HeaderHash(reinterpret_cast<const unsigned char*>(bytes->data()));
  PutU64(header_hash, 120, bytes);
  const std::string trailer = ember::io::internal::EncodeTrailer(index_offset, size, header_hash);
  bytes->replace(size - kColumnarTrailerBytes, kColumnarTrailerBytes, trailer);
}

// The file each input is written to: in memory (tmpfs) when there is one,
// since writing a file per input is the slow part.
std::string TempPath() {
  return std::string(::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
         "/ember_columnar_fuzz_" + std::to_string(::getpid()) + ".col";
}

// Reads every row group, then a few other ranges, then everything.
void ReadAll(const ember::io::ColumnarFile& file) {
  using ember::fuzz::Require;
  ember::io::Batch batch;
  for (int64_t g = 0; g < file.num_row_groups(); ++g) {
    const int64_t begin = file.RowGroupBegin(g);
    const int64_t rows = file.RowGroupRows(g);
    if (!file.ReadRows(begin, begin + rows, &batch).ok()) continue;
    Require(batch.size == rows, "a group's read has its rows");
    Require(batch.offsets.size() == static_cast<size_t>(rows * file.shape().num_slots + 1),
            "one offset per bag");
    Require(batch.offsets.back() == static_cast<int64_t>(batch.keys.size()),
            "the last offset is the number of keys");
  }
  const int64_t rows = file.rows();
  for (const auto& [begin, end] : {std::pair<int64_t, int64_t>{0, rows},
                                   {rows / 3, rows / 2},
                                   {rows - 1, rows},
                                   {0, rows + 1}}) {
    if (begin < 0) continue;
    const ember::Status status = file.ReadRows(begin, end, &batch);
    if (status.ok()) Require(batch.size == end - begin, "a read has the rows asked for");
  }
  file.VerifyChecksums().IgnoreError();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  if (size == 0) return 0;
  // In memory (tmpfs) when there is one: a file per input is the slow part.
  static const std::string path = TempPath();
  const bool repair = (data[0] & 1) != 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (repair) Repair(&bytes);
  {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  io::ColumnarReadOptions options;
  options.verify_checksums = repair ? io::ChecksumPolicy::kNever : io::ChecksumPolicy::kOnFirstRead;
  Result<std::unique_ptr<io::ColumnarFile>> file = io::OpenColumnar(path, options);
  // The mapping outlives the name: nothing is left behind when the fuzzer
  // exits without running destructors.
  ::unlink(path.c_str());
  if (file.ok()) ReadAll(**file);
  return 0;
}
