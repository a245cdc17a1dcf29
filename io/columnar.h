#pragma once

// Ember's binary columnar format: the fast path for repeated epochs. Written
// once (`ember convert`) with a streaming ColumnarWriter, read many times by
// memory-mapping the file (OpenColumnar).
//
// Layout. A file is a 128-byte header, a sequence of row groups, an index of
// the row groups and a 32-byte trailer. All integers are little-endian
// (u32/u64 unsigned, i64 two's complement), floats IEEE-754 binary32; every
// section starts at the first multiple of 64 bytes after the one before it
// (zero bytes pad the gaps), so a mapped section is aligned for any element
// type. Readers require exactly this layout.
//
//   Header, at 0:
//     0   8  magic "EMBERCOL"
//     8   4  u32 version, 1
//     12  4  u32 header bytes, 128
//     16  4  u32 num_labels   labels per row, >= 1
//     20  4  u32 num_dense    dense features per row
//     24  4  u32 num_slots    categorical slots per row
//     28  4  u32 slot_bits    high key bits holding the slot (see feature_hash.h)
//     32  8  u64 rows
//     40  8  u64 row groups
//     48  8  u64 rows per group the writer aimed at (informational)
//     56  8  u64 index offset
//     64  8  u64 index bytes: row groups x (64 + 56 x num_slots)
//     72  8  u64 index checksum
//     80  8  u64 file bytes
//     88  32 zero (reserved)
//     120 8  u64 header checksum, of bytes [0, 120)
//
//   Row group g, rows [first_row, first_row + rows), one section after the
//   other, each at the next multiple of 64:
//     labels            f32 [rows x num_labels], row-major
//     dense             f32 [rows x num_dense], row-major
//     for each slot s:
//       offsets of s    i64 [rows + 1], offsets[0] = 0: the keys of row r are
//                       keys[offsets[r] .. offsets[r + 1]). Empty (0 bytes)
//                       when every bag of s in the group has the same size
//                       (a one-hot slot): row r then owns keys[r*b .. r*b + b)
//       keys of s       u64 [number of keys of s in the group]
//
//   Index, at the next multiple of 64 after the last group: one entry per
//   row group, 64 + 56 x num_slots bytes each, where a section reference
//   is (u64 offset from the start of the file, u64 bytes, u64 checksum):
//     0   8  u64 first_row (the sum of the rows of the groups before it)
//     8   8  u64 rows, >= 1
//     16  24 labels section
//     40  24 dense section
//     64 + 56 s:
//       0   24 offsets section of slot s
//       24  24 keys section of slot s
//       48  8  u64 bag size b shared by every row, or 2^64 - 1 if bags vary
//
//   Trailer, the last 32 bytes, right after the index:
//     0   8  u64 index offset (as in the header)
//     8   8  u64 file bytes (as in the header)
//     16  8  u64 header checksum (as in the header)
//     24  8  magic "EMBEREND"
//
// Checksums are XXH64 (seed 0) of the bytes they cover: a 64-bit checksum
// that hashes at memory speed in portable code (core/checksum.h);
// zlib's crc32 runs at a fraction of that and crc32c needs SSE4.2 dispatch.
//
// Why row groups: the writer holds one group in memory (bounded whatever the
// file size) and writes each group once, in order, to one temporary file;
// a reader finds the groups of any row range from the index (random access,
// shuffling by group, one reader thread per group) and verifies a group's
// checksums the first time it reads it. Per-slot CSR inside a group keeps
// each column contiguous and lets one-hot slots (all of Criteo) drop their
// offsets, which halves their bytes.
//
// Every byte is checked: the header by its checksum, sections by theirs,
// padding for zeros, the index by its checksum and the trailer against the
// header. A truncated file has fewer bytes than the header says and no
// trailer at its end; a damaged one fails a check: both are DataLoss when
// opened or read, never a crash. Byte order: this build reads and writes
// little-endian hosts only (checked at compile time).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/status.h"
#include "io/batch.h"
#include "io/dataset.h"
#include "io/feature_hash.h"

namespace ember::io {

namespace internal {
struct SectionRef;
}  // namespace internal

// What every row of a columnar file holds.
struct ColumnarShape {
  // Labels per row (several for multi-task models). In [1, 1024].
  int num_labels = 1;
  // Dense features per row. In [0, 65536].
  int num_dense = 0;
  // Categorical slots per row. In [0, 65536] and at most 2^slot_bits.
  int num_slots = 0;
  // High key bits that hold the slot; stored for readers. In [1, 32].
  int slot_bits = kDefaultSlotBits;

  bool operator==(const ColumnarShape&) const = default;
};

// InvalidArgument naming the field unless every field is in its range.
Status ValidateColumnarShape(const ColumnarShape& shape);

struct ColumnarWriteOptions {
  // Rows per row group; the last group and groups closed by max_group_bytes
  // hold fewer. Default: 65536 (about 17 MiB of Criteo rows).
  int64_t rows_per_group = 65536;
  // A group is closed early once its buffered data reaches this size, which
  // bounds the writer's memory for rows with large bags. Default: 256 MiB.
  int64_t max_group_bytes = int64_t{256} << 20;
};

// Writes a columnar file from batches, streaming: memory holds one row group
// and the index (64 + 56 x num_slots bytes per group), whatever the number of
// rows. The file appears at `path` only when Finish succeeds, atomically
// (see AtomicFileWriter); a writer destroyed without a successful Finish, or
// after an error, leaves any previous file at `path` untouched and no new one.
// Thread safety: one thread at a time.
class ColumnarWriter {
 public:
  // Starts a file of rows of `shape`. InvalidArgument for a bad shape or
  // options, or when `path` is a directory or its directory is missing or
  // not writable; IOError (naming the temporary file) if it cannot be
  // created.
  static Result<std::unique_ptr<ColumnarWriter>> Open(const std::string& path,
                                                      const ColumnarShape& shape,
                                                      const ColumnarWriteOptions& options = {});
  ~ColumnarWriter();
  ColumnarWriter(const ColumnarWriter&) = delete;
  ColumnarWriter& operator=(const ColumnarWriter&) = delete;

  // Appends the rows of `batch`, in order. The batch needs the shape's
  // num_labels, num_dense and num_slots, vectors of those sizes and
  // well-formed CSR offsets (non-decreasing, within keys; they need not
  // start at 0). InvalidArgument otherwise, and the writer stays usable.
  // IOError if writing fails; that error is then returned by every later
  // call. REQUIRES: Finish not called yet.
  Status Append(const Batch& batch);

  // Writes the last group, the index, the trailer and the header, fsyncs and
  // renames the file into place. Returns the first error of the writer if
  // there was one. REQUIRES: called at most once.
  Status Finish();

  // Rows appended so far.
  int64_t rows() const { return rows_; }

 private:
  // The rows of the current group of one slot, in per-slot CSR.
  struct SlotBuffer {
    std::vector<int64_t> offsets;  // [rows + 1], from 0
    std::vector<Key> keys;
  };

  ColumnarWriter(const ColumnarShape& shape, const ColumnarWriteOptions& options,
                 std::unique_ptr<AtomicFileWriter> file);
  // Appends rows [begin, end) of a validated batch to the current group.
  void BufferRows(const Batch& batch, int64_t begin, int64_t end);
  int64_t BufferedBytes() const;
  // Writes the current group (if it has rows) and its index entry.
  Status FlushGroup();
  Status WriteSection(const void* data, int64_t bytes, internal::SectionRef* section);
  Status FinishFile();

  const ColumnarShape shape_;
  const ColumnarWriteOptions options_;
  std::unique_ptr<AtomicFileWriter> file_;
  Status error_;  // the first I/O error; the writer is dead after one
  bool finished_ = false;
  int64_t rows_ = 0;
  int64_t groups_ = 0;
  // The current group.
  int64_t group_rows_ = 0;
  std::vector<float> labels_;
  std::vector<float> dense_;
  std::vector<SlotBuffer> slots_;
  // The encoded index entries of the groups written so far.
  std::string index_;
};

// When OpenColumnar and ColumnarFile check section checksums.
enum class ChecksumPolicy {
  // Never. Sizes and offsets are still checked and padding is not: a
  // damaged file can give wrong values, never a crash.
  kNever,
  // Each row group the first time ReadRows touches it: one extra pass over
  // the group's bytes on the first epoch (which then takes about 2.5 times
  // as long as a later one from the page cache), nothing after. Open reads
  // only the header, index and trailer.
  kOnFirstRead,
  // Every row group during OpenColumnar: it reads the whole file once,
  // disk-bound for a file not in the page cache; for one that is, it takes
  // about 1.5 times as long as reading every row with ReadRows (mapping the
  // pages included; tools/bench/io_bench, verify_checksums vs read_rows).
  kOnOpen,
};

struct ColumnarReadOptions {
  // Default: kOnFirstRead, which catches a damaged group before any of its
  // rows is returned, at no cost to an open or to later epochs.
  ChecksumPolicy verify_checksums = ChecksumPolicy::kOnFirstRead;
  // madvise for the mapping: true for MADV_SEQUENTIAL (aggressive read-ahead,
  // for reading in row order), false for MADV_RANDOM (shuffled groups).
  bool sequential = true;
};

// An open, memory-mapped columnar file.
// Thread safety: all methods may be called concurrently (parallel readers
// of disjoint or overlapping row ranges).
class ColumnarFile {
 public:
  virtual ~ColumnarFile() = default;

  virtual const std::string& path() const = 0;
  virtual const ColumnarShape& shape() const = 0;
  virtual int64_t rows() const = 0;
  // Size of the file in bytes.
  virtual int64_t file_bytes() const = 0;
  virtual int64_t num_row_groups() const = 0;
  // First row of group g and its row count. REQUIRES: 0 <= g < num_row_groups().
  virtual int64_t RowGroupBegin(int64_t g) const = 0;
  virtual int64_t RowGroupRows(int64_t g) const = 0;

  // Fills `out` with rows [begin, end) as one Batch of the file's shape:
  // labels [n x num_labels], dense [n x num_dense], keys as example-major
  // CSR with offsets from 0. Replaces what `out` held and reuses its capacity (a
  // batch reused for ranges of one size allocates nothing).
  // OutOfRange unless 0 <= begin <= end <= rows(). DataLoss naming the path
  // and row group when a checksum checked under the policy does not match
  // or a slot's offsets are inconsistent; `out` is then unspecified.
  virtual Status ReadRows(int64_t begin, int64_t end, Batch* out) const = 0;

  // Checks the checksums of every row group not checked yet, whatever the
  // policy; DataLoss naming the path, row group and section of the first
  // mismatch. Reads the whole file.
  virtual Status VerifyChecksums() const = 0;
};

// Maps `path` and checks its header, index and trailer: sizes, alignment,
// section bounds and the header and index checksums, and with kOnOpen every
// section's checksum. NotFound if there is no file; InvalidArgument, naming
// the path, for a file that is not in this format (magic) or of another
// version; DataLoss, naming the path and what is wrong, for a truncated or
// damaged file; IOError if it cannot be read or mapped.
Result<std::unique_ptr<ColumnarFile>> OpenColumnar(const std::string& path,
                                                   const ColumnarReadOptions& options = {});

// All rows of the columnar file at `path` as a Dataset, checksums checked.
// Errors as OpenColumnar and ReadRows.
Result<Dataset> ReadColumnarDataset(const std::string& path);

}  // namespace ember::io
