#include "io/columnar.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string_view>
#include <utility>

#include <glog/logging.h>

#include "io/internal/columnar_format.h"
#include "io/internal/columnar_gather.h"
#include "io/internal/mapped_file.h"
#include "core/checksum.h"

namespace ember::io {
namespace {

using internal::AlignUp;
using internal::ColumnarHeader;
using internal::GroupEntry;
using internal::kColumnarAlignment;
using internal::kColumnarHeaderBytes;
using internal::kColumnarTrailerBytes;
using internal::kVariableBags;
using internal::SectionRef;
using internal::SlotEntry;
using internal::SlotView;

constexpr int kMaxLabels = 1024;
constexpr int kMaxDense = 65536;
constexpr int kMaxSlots = 65536;
// Rows a writer buffers before it checks max_group_bytes again.
constexpr int64_t kAppendChunkRows = 4096;

}  // namespace

Status ValidateColumnarShape(const ColumnarShape& shape) {
  if (shape.num_labels < 1 || shape.num_labels > kMaxLabels) {
    return Status::InvalidArgument("num_labels ", shape.num_labels, " is outside [1, ", kMaxLabels,
                                   "]");
  }
  if (shape.num_dense < 0 || shape.num_dense > kMaxDense) {
    return Status::InvalidArgument("num_dense ", shape.num_dense, " is outside [0, ", kMaxDense,
                                   "]");
  }
  if (shape.slot_bits < 1 || shape.slot_bits > 32) {
    return Status::InvalidArgument("slot_bits ", shape.slot_bits, " is outside [1, 32]");
  }
  if (shape.num_slots < 0 || shape.num_slots > kMaxSlots ||
      shape.num_slots > (int64_t{1} << shape.slot_bits)) {
    return Status::InvalidArgument("num_slots ", shape.num_slots, " is outside [0, ",
                                   std::min<int64_t>(kMaxSlots, int64_t{1} << shape.slot_bits),
                                   "] (slot_bits ", shape.slot_bits, ")");
  }
  return Status::OK();
}

// --- Writer --------------------------------------------------------------------

Result<std::unique_ptr<ColumnarWriter>> ColumnarWriter::Open(const std::string& path,
                                                             const ColumnarShape& shape,
                                                             const ColumnarWriteOptions& options) {
  Status valid = ValidateColumnarShape(shape);
  if (!valid.ok()) return Status::InvalidArgument(path, ": ", valid.message());
  if (options.rows_per_group < 1 || options.max_group_bytes < 1) {
    return Status::InvalidArgument(path, ": rows_per_group (", options.rows_per_group,
                                   ") and max_group_bytes (", options.max_group_bytes,
                                   ") must be at least 1");
  }
  // A directory at `path` or no directory for it fails now, not at Finish.
  EMBER_RETURN_IF_ERROR(CheckWritableDestination(path));
  EMBER_ASSIGN_OR_RETURN(auto file, AtomicFileWriter::Create(path));
  // The header is written last, when the counts are known; hold its place.
  EMBER_RETURN_IF_ERROR(file->Write(std::string(kColumnarHeaderBytes, '\0')));
  return std::unique_ptr<ColumnarWriter>(new ColumnarWriter(shape, options, std::move(file)));
}

ColumnarWriter::ColumnarWriter(const ColumnarShape& shape, const ColumnarWriteOptions& options,
                               std::unique_ptr<AtomicFileWriter> file)
    : shape_(shape), options_(options), file_(std::move(file)), slots_(shape.num_slots) {
  for (SlotBuffer& slot : slots_) slot.offsets.assign(1, 0);
}

// Destroying file_ without a commit removes the temporary file.
ColumnarWriter::~ColumnarWriter() = default;

namespace {

// InvalidArgument unless `batch` has the shape and well-formed CSR offsets.
Status CheckBatch(const Batch& batch, const ColumnarShape& shape, const std::string& path) {
  if (batch.num_labels != shape.num_labels || batch.num_dense != shape.num_dense ||
      batch.num_slots != shape.num_slots) {
    return Status::InvalidArgument(path, ": batch has ", batch.num_labels, " labels, ",
                                   batch.num_dense, " dense and ", batch.num_slots,
                                   " slots per row, the file ", shape.num_labels, ", ",
                                   shape.num_dense, " and ", shape.num_slots);
  }
  const int64_t n = batch.size;
  if (n < 0 || static_cast<int64_t>(batch.labels.size()) != n * shape.num_labels ||
      static_cast<int64_t>(batch.dense.size()) != n * shape.num_dense ||
      static_cast<int64_t>(batch.offsets.size()) != n * shape.num_slots + 1) {
    return Status::InvalidArgument(path, ": batch of ", n, " rows has ", batch.labels.size(),
                                   " labels (", shape.num_labels, " per row), ", batch.dense.size(),
                                   " dense values and ", batch.offsets.size(), " offsets");
  }
  if (batch.offsets.front() < 0 || batch.offsets.back() > static_cast<int64_t>(batch.keys.size()) ||
      !std::is_sorted(batch.offsets.begin(), batch.offsets.end())) {
    return Status::InvalidArgument(path, ": batch offsets are not non-decreasing within its ",
                                   batch.keys.size(), " keys");
  }
  return Status::OK();
}

}  // namespace

Status ColumnarWriter::Append(const Batch& batch) {
  CHECK(!finished_) << "ColumnarWriter::Append after Finish";
  if (!error_.ok()) return error_;
  EMBER_RETURN_IF_ERROR(CheckBatch(batch, shape_, file_->path()));
  for (int64_t begin = 0; begin < batch.size;) {
    const int64_t end = std::min(
        {batch.size, begin + kAppendChunkRows, begin + options_.rows_per_group - group_rows_});
    BufferRows(batch, begin, end);
    begin = end;
    if (group_rows_ == options_.rows_per_group || BufferedBytes() >= options_.max_group_bytes) {
      error_ = FlushGroup();
      if (!error_.ok()) return error_;
    }
  }
  return Status::OK();
}

void ColumnarWriter::BufferRows(const Batch& batch, int64_t begin, int64_t end) {
  const int num_labels = shape_.num_labels;
  const int num_dense = shape_.num_dense;
  const int num_slots = shape_.num_slots;
  labels_.insert(labels_.end(), batch.labels.begin() + begin * num_labels,
                 batch.labels.begin() + end * num_labels);
  dense_.insert(dense_.end(), batch.dense.begin() + begin * num_dense,
                batch.dense.begin() + end * num_dense);
  for (int s = 0; s < num_slots; ++s) {
    SlotBuffer& slot = slots_[s];
    for (int64_t r = begin; r < end; ++r) {
      const int64_t bag = r * num_slots + s;
      slot.keys.insert(slot.keys.end(), batch.keys.begin() + batch.offsets[bag],
                       batch.keys.begin() + batch.offsets[bag + 1]);
      slot.offsets.push_back(static_cast<int64_t>(slot.keys.size()));
    }
  }
  group_rows_ += end - begin;
  rows_ += end - begin;
}

int64_t ColumnarWriter::BufferedBytes() const {
  int64_t bytes = static_cast<int64_t>((labels_.size() + dense_.size()) * sizeof(float));
  for (const SlotBuffer& slot : slots_) {
    bytes += static_cast<int64_t>(slot.offsets.size() * sizeof(int64_t) +
                                  slot.keys.size() * sizeof(Key));
  }
  return bytes;
}

namespace {

// The bag size every row of `offsets` has, or kVariableBags.
uint64_t UniformBag(const std::vector<int64_t>& offsets) {
  const int64_t bag = offsets[1] - offsets[0];
  for (size_t r = 1; r + 1 < offsets.size(); ++r) {
    if (offsets[r + 1] - offsets[r] != bag) return kVariableBags;
  }
  return static_cast<uint64_t>(bag);
}

}  // namespace

// Pads the file to the next section boundary, writes `bytes` bytes of `data`
// there and points `section` at them.
Status ColumnarWriter::WriteSection(const void* data, int64_t bytes, SectionRef* section) {
  static constexpr char kZeros[kColumnarAlignment] = {};
  const int64_t start = AlignUp(file_->size());
  EMBER_RETURN_IF_ERROR(file_->Write(std::string_view(kZeros, start - file_->size())));
  section->offset = static_cast<uint64_t>(start);
  section->bytes = static_cast<uint64_t>(bytes);
  section->hash = XxHash64(data, static_cast<size_t>(bytes));
  return file_->Write(std::string_view(static_cast<const char*>(data), bytes));
}

Status ColumnarWriter::FlushGroup() {
  if (group_rows_ == 0) return Status::OK();
  GroupEntry entry;
  entry.first_row = static_cast<uint64_t>(rows_ - group_rows_);
  entry.rows = static_cast<uint64_t>(group_rows_);
  EMBER_RETURN_IF_ERROR(
      WriteSection(labels_.data(), labels_.size() * sizeof(float), &entry.labels));
  EMBER_RETURN_IF_ERROR(WriteSection(dense_.data(), dense_.size() * sizeof(float), &entry.dense));
  entry.slots.resize(slots_.size());
  for (size_t s = 0; s < slots_.size(); ++s) {
    SlotBuffer& slot = slots_[s];
    SlotEntry& slot_entry = entry.slots[s];
    slot_entry.bag = UniformBag(slot.offsets);
    // Uniform bags need no offsets: row r owns keys [r * bag, (r + 1) * bag).
    const int64_t offset_bytes =
        slot_entry.bag == kVariableBags ? slot.offsets.size() * sizeof(int64_t) : 0;
    EMBER_RETURN_IF_ERROR(WriteSection(slot.offsets.data(), offset_bytes, &slot_entry.offsets));
    EMBER_RETURN_IF_ERROR(
        WriteSection(slot.keys.data(), slot.keys.size() * sizeof(Key), &slot_entry.keys));
    slot.offsets.assign(1, 0);
    slot.keys.clear();
  }
  internal::AppendGroupEntry(entry, &index_);
  ++groups_;
  group_rows_ = 0;
  labels_.clear();
  dense_.clear();
  return Status::OK();
}

Status ColumnarWriter::Finish() {
  CHECK(!finished_) << "ColumnarWriter::Finish is called once";
  finished_ = true;
  if (error_.ok()) error_ = FinishFile();
  // A failed file is removed now rather than when the writer is destroyed.
  if (!error_.ok()) file_.reset();
  return error_;
}

Status ColumnarWriter::FinishFile() {
  EMBER_RETURN_IF_ERROR(FlushGroup());
  SectionRef index;
  EMBER_RETURN_IF_ERROR(WriteSection(index_.data(), index_.size(), &index));
  ColumnarHeader header;
  header.num_labels = static_cast<uint32_t>(shape_.num_labels);
  header.num_dense = static_cast<uint32_t>(shape_.num_dense);
  header.num_slots = static_cast<uint32_t>(shape_.num_slots);
  header.slot_bits = static_cast<uint32_t>(shape_.slot_bits);
  header.rows = static_cast<uint64_t>(rows_);
  header.groups = static_cast<uint64_t>(groups_);
  header.rows_per_group = static_cast<uint64_t>(options_.rows_per_group);
  header.index_offset = index.offset;
  header.index_bytes = index.bytes;
  header.index_hash = index.hash;
  header.file_bytes = static_cast<uint64_t>(file_->size() + kColumnarTrailerBytes);
  const std::string header_bytes = internal::EncodeHeader(header);
  const uint64_t header_hash =
      internal::HeaderHash(reinterpret_cast<const unsigned char*>(header_bytes.data()));
  EMBER_RETURN_IF_ERROR(
      file_->Write(internal::EncodeTrailer(index.offset, header.file_bytes, header_hash)));
  EMBER_RETURN_IF_ERROR(file_->WriteAt(0, header_bytes));
  return file_->Commit();
}

// --- Reader --------------------------------------------------------------------

namespace {

// The sections of a row group in file order: labels, dense, then the offsets
// and keys of each slot.
int64_t SectionsPerGroup(int num_slots) { return 2 + 2 * int64_t{num_slots}; }

std::string SectionName(int64_t k) {
  if (k == 0) return "labels";
  if (k == 1) return "dense";
  return ember::internal::StrCat(k % 2 == 0 ? "offsets" : "keys", " of slot ", (k - 2) / 2);
}

bool IsZero(const unsigned char* bytes, uint64_t size) {
  return std::all_of(bytes, bytes + size, [](unsigned char b) { return b == 0; });
}

// a * b, or false on overflow.
bool Multiply(uint64_t a, uint64_t b, uint64_t* product) {
  return !__builtin_mul_overflow(a, b, product);
}

// a * b, or 2^64 - 1 (more bytes than any section can have) on overflow.
uint64_t SaturatingMultiply(uint64_t a, uint64_t b) {
  uint64_t product;
  return Multiply(a, b, &product) ? product : ~uint64_t{0};
}

class MappedColumnarFile : public ColumnarFile {
 public:
  MappedColumnarFile(std::string path, const ColumnarReadOptions& options,
                     std::unique_ptr<internal::MappedFile> map)
      : path_(std::move(path)), options_(options), map_(std::move(map)) {}

  // Checks the header, trailer and index and builds the views.
  Status Load();

  const std::string& path() const override { return path_; }
  const ColumnarShape& shape() const override { return shape_; }
  int64_t rows() const override { return rows_; }
  int64_t file_bytes() const override { return map_->size(); }
  int64_t num_row_groups() const override { return groups_; }
  int64_t RowGroupBegin(int64_t g) const override {
    CHECK(0 <= g && g < groups_) << "row group index must be in [0, num_row_groups())";
    return first_row_[g];
  }
  int64_t RowGroupRows(int64_t g) const override {
    CHECK(0 <= g && g < groups_) << "row group index must be in [0, num_row_groups())";
    return first_row_[g + 1] - first_row_[g];
  }
  Status ReadRows(int64_t begin, int64_t end, Batch* out) const override;
  Status VerifyChecksums() const override;

 private:
  Status CheckTrailerAndIndex(const ColumnarHeader& header);
  // Checks the entry of group g and records its sections and views.
  Status LoadGroup(int64_t g, const GroupEntry& entry, uint64_t index_offset);
  Status VerifyGroup(int64_t g) const;
  // The rows of group g within [begin, end), relative to the group.
  std::pair<int64_t, int64_t> RowsInGroup(int64_t g, int64_t begin, int64_t end) const {
    return {std::max(begin, first_row_[g]) - first_row_[g],
            std::min(end, first_row_[g + 1]) - first_row_[g]};
  }
  // ReadRows, by group: adds the keys of the rows in group g to *keys,
  // checking the offsets the gather relies on.
  Status CountKeys(int64_t g, int64_t begin, int64_t end, int64_t* keys) const;
  // Copies the rows in group g to `out` from *out_row and *key_cursor on,
  // and advances both.
  Status CopyRows(int64_t g, int64_t begin, int64_t end, Batch* out, int64_t* out_row,
                  int64_t* key_cursor) const;
  int64_t GroupOf(int64_t row) const {
    return std::upper_bound(first_row_.begin(), first_row_.end(), row) - first_row_.begin() - 1;
  }
  template <typename T>
  const T* At(uint64_t offset) const {
    return reinterpret_cast<const T*>(map_->data() + offset);
  }

  const std::string path_;
  const ColumnarReadOptions options_;
  const std::unique_ptr<internal::MappedFile> map_;
  ColumnarShape shape_;
  int64_t rows_ = 0;
  int64_t groups_ = 0;
  std::vector<int64_t> first_row_;    // [groups + 1], the last is rows_
  std::vector<const float*> labels_;  // [groups]
  std::vector<const float*> dense_;   // [groups]
  std::vector<SlotView> slots_;       // [groups x num_slots]
  std::vector<SectionRef> sections_;  // [groups x SectionsPerGroup]
  // Set once a group's checksums matched; relaxed is enough: a group checked
  // twice by two threads at once is only extra work.
  std::unique_ptr<std::atomic<bool>[]> verified_;
};

Status MappedColumnarFile::Load() {
  const int64_t size = map_->size();
  EMBER_ASSIGN_OR_RETURN(const ColumnarHeader header,
                         internal::DecodeHeader(path_, map_->data(), size));
  if (header.num_labels > kMaxLabels || header.num_dense > kMaxDense ||
      header.num_slots > kMaxSlots || header.slot_bits > 32) {
    return Status::DataLoss(path_, ": header has out-of-range counts");
  }
  shape_.num_labels = static_cast<int>(header.num_labels);
  shape_.num_dense = static_cast<int>(header.num_dense);
  shape_.num_slots = static_cast<int>(header.num_slots);
  shape_.slot_bits = static_cast<int>(header.slot_bits);
  const Status valid = ValidateColumnarShape(shape_);
  if (!valid.ok()) return Status::DataLoss(path_, ": header: ", valid.message());
  if (static_cast<uint64_t>(size) < header.file_bytes) {
    return Status::DataLoss(path_, ": truncated: ", size, " bytes of the ", header.file_bytes,
                            " the header records");
  }
  if (static_cast<uint64_t>(size) > header.file_bytes) {
    return Status::DataLoss(path_, ": ", size, " bytes, but the header records ", header.file_bytes,
                            " (bytes appended after the trailer?)");
  }
  EMBER_RETURN_IF_ERROR(CheckTrailerAndIndex(header));
  const int64_t entry_bytes = internal::GroupEntryBytes(shape_.num_slots);
  groups_ = static_cast<int64_t>(header.groups);
  first_row_.assign(1, 0);
  first_row_.reserve(groups_ + 1);
  labels_.reserve(groups_);
  dense_.reserve(groups_);
  slots_.reserve(groups_ * shape_.num_slots);
  sections_.reserve(groups_ * SectionsPerGroup(shape_.num_slots));
  GroupEntry entry;
  for (int64_t g = 0; g < groups_; ++g) {
    internal::DecodeGroupEntry(map_->data() + header.index_offset + g * entry_bytes,
                               shape_.num_slots, &entry);
    EMBER_RETURN_IF_ERROR(LoadGroup(g, entry, header.index_offset));
    if (static_cast<uint64_t>(first_row_.back()) > header.rows) break;
  }
  if (static_cast<uint64_t>(first_row_.back()) != header.rows) {
    return Status::DataLoss(path_, ": the row groups hold ", first_row_.back(),
                            " rows, the header records ", header.rows);
  }
  const uint64_t data_end =
      sections_.empty() ? kColumnarHeaderBytes : sections_.back().offset + sections_.back().bytes;
  if (header.index_offset != static_cast<uint64_t>(AlignUp(data_end)) ||
      !IsZero(map_->data() + data_end, header.index_offset - data_end)) {
    return Status::DataLoss(path_, ": index at ", header.index_offset,
                            " does not follow the last row group (ending at ", data_end, ")");
  }
  rows_ = first_row_.back();
  verified_ = std::make_unique<std::atomic<bool>[]>(groups_);
  if (options_.verify_checksums == ChecksumPolicy::kOnOpen) return VerifyChecksums();
  return Status::OK();
}

Status MappedColumnarFile::CheckTrailerAndIndex(const ColumnarHeader& header) {
  const uint64_t size = header.file_bytes;
  if (size < kColumnarHeaderBytes + kColumnarTrailerBytes) {
    return Status::DataLoss(path_, ": ", size, " bytes leave no room for a trailer");
  }
  const std::string trailer = internal::EncodeTrailer(header.index_offset, header.file_bytes,
                                                      internal::HeaderHash(map_->data()));
  if (std::memcmp(map_->data() + size - kColumnarTrailerBytes, trailer.data(),
                  kColumnarTrailerBytes) != 0) {
    return Status::DataLoss(path_, ": the trailer (last ", kColumnarTrailerBytes,
                            " bytes) does not match the header");
  }
  const uint64_t index_end = size - kColumnarTrailerBytes;
  const uint64_t entry_bytes = internal::GroupEntryBytes(shape_.num_slots);
  uint64_t index_bytes = 0;
  if (header.index_offset < kColumnarHeaderBytes || header.index_offset % kColumnarAlignment ||
      header.index_offset > index_end || header.index_bytes != index_end - header.index_offset ||
      !Multiply(header.groups, entry_bytes, &index_bytes) || index_bytes != header.index_bytes) {
    return Status::DataLoss(path_, ": index of ", header.groups, " row groups at ",
                            header.index_offset, " (", header.index_bytes,
                            " bytes) does not fit the file");
  }
  if (XxHash64(map_->data() + header.index_offset, header.index_bytes) != header.index_hash) {
    return Status::DataLoss(path_, ": index checksum mismatch");
  }
  return Status::OK();
}

Status MappedColumnarFile::LoadGroup(int64_t g, const GroupEntry& entry, uint64_t index_offset) {
  const uint64_t rows = entry.rows;
  auto bad = [&](const std::string& what) {
    return Status::DataLoss(path_, ": row group ", g, " (first row ", entry.first_row, ", ", rows,
                            " rows): ", what);
  };
  if (entry.first_row != static_cast<uint64_t>(first_row_.back())) {
    return bad(ember::internal::StrCat("expected first row ", first_row_.back()));
  }
  if (rows == 0 || rows > index_offset) return bad("row count out of range");
  const uint64_t label_bytes = SaturatingMultiply(rows, shape_.num_labels * sizeof(float));
  const uint64_t dense_bytes = SaturatingMultiply(rows, shape_.num_dense * sizeof(float));
  // rows <= index_offset < 2^63.
  const uint64_t offset_bytes = SaturatingMultiply(rows + 1, sizeof(int64_t));
  // Each section lies after the one before it, aligned, before the index.
  uint64_t cursor = kColumnarHeaderBytes;
  int64_t k = 0;
  auto check = [&](const SectionRef& section, uint64_t expected_bytes) -> Status {
    const std::string name = SectionName(k++);
    if (section.bytes != expected_bytes) {
      return bad(
          ember::internal::StrCat(name, ": ", section.bytes, " bytes, expected ", expected_bytes));
    }
    // The writer's layout exactly: every byte of the file is then covered by
    // a checksum, a comparison with the header or a zero check of padding.
    if (section.offset != static_cast<uint64_t>(AlignUp(cursor)) || section.offset > index_offset ||
        section.bytes > index_offset - section.offset) {
      return bad(ember::internal::StrCat(name, ": bytes [", section.offset, ", +", section.bytes,
                                         ") out of place"));
    }
    cursor = section.offset + section.bytes;
    sections_.push_back(section);
    return Status::OK();
  };
  if (g > 0) cursor = sections_.back().offset + sections_.back().bytes;
  EMBER_RETURN_IF_ERROR(check(entry.labels, label_bytes));
  EMBER_RETURN_IF_ERROR(check(entry.dense, dense_bytes));
  labels_.push_back(At<float>(entry.labels.offset));
  dense_.push_back(At<float>(entry.dense.offset));
  for (const SlotEntry& slot : entry.slots) {
    SlotView view;
    uint64_t key_bytes = slot.keys.bytes;
    if (slot.bag == kVariableBags) {
      EMBER_RETURN_IF_ERROR(check(slot.offsets, offset_bytes));
      view.offsets = At<int64_t>(slot.offsets.offset);
      view.bag = -1;
      if (key_bytes % sizeof(Key) != 0) key_bytes = ~uint64_t{0};  // fails the check below
    } else {
      EMBER_RETURN_IF_ERROR(check(slot.offsets, 0));
      key_bytes = SaturatingMultiply(SaturatingMultiply(rows, sizeof(Key)), slot.bag);
      view.bag = static_cast<int64_t>(slot.bag);
    }
    EMBER_RETURN_IF_ERROR(check(slot.keys, key_bytes));
    // Only now is the offset known to lie in the file: a pointer made from
    // an unchecked offset may overflow (undefined even if never read).
    view.keys = At<Key>(slot.keys.offset);
    view.num_keys = static_cast<int64_t>(slot.keys.bytes / sizeof(Key));
    slots_.push_back(view);
  }
  first_row_.push_back(first_row_.back() + static_cast<int64_t>(rows));
  return Status::OK();
}

Status MappedColumnarFile::VerifyGroup(int64_t g) const {
  const int64_t per_group = SectionsPerGroup(shape_.num_slots);
  for (int64_t k = 0; k < per_group; ++k) {
    const int64_t i = g * per_group + k;
    const SectionRef& section = sections_[i];
    auto bad = [&](const char* what) {
      return Status::DataLoss(path_, ": row group ", g, " (rows ", first_row_[g], " to ",
                              first_row_[g + 1], "): ", what, " ", SectionName(k));
    };
    const uint64_t gap_begin =
        i == 0 ? kColumnarHeaderBytes : sections_[i - 1].offset + sections_[i - 1].bytes;
    if (!IsZero(map_->data() + gap_begin, section.offset - gap_begin)) {
      return bad("nonzero padding before");
    }
    if (XxHash64(map_->data() + section.offset, section.bytes) != section.hash) {
      return bad("checksum mismatch in");
    }
  }
  verified_[g].store(true, std::memory_order_relaxed);
  return Status::OK();
}

Status MappedColumnarFile::VerifyChecksums() const {
  for (int64_t g = 0; g < groups_; ++g) {
    if (!verified_[g].load(std::memory_order_relaxed)) EMBER_RETURN_IF_ERROR(VerifyGroup(g));
  }
  return Status::OK();
}

Status MappedColumnarFile::ReadRows(int64_t begin, int64_t end, Batch* out) const {
  if (begin < 0 || begin > end || end > rows_) {
    return Status::OutOfRange(path_, ": rows [", begin, ", ", end, ") are not within [0, ", rows_,
                              ")");
  }
  const int64_t n = end - begin;
  out->size = n;
  out->num_labels = shape_.num_labels;
  out->num_dense = shape_.num_dense;
  out->num_slots = shape_.num_slots;
  // resize, not clear + resize: a batch reused for ranges of one size is not
  // zero-filled again before it is overwritten.
  out->labels.resize(n * shape_.num_labels);
  out->dense.resize(n * shape_.num_dense);
  out->offsets.resize(n * shape_.num_slots + 1);
  out->offsets[0] = 0;
  if (n == 0) {
    out->keys.clear();
    return Status::OK();
  }
  const int64_t first_group = GroupOf(begin);
  const int64_t last_group = GroupOf(end - 1);
  if (options_.verify_checksums == ChecksumPolicy::kOnFirstRead) {
    for (int64_t g = first_group; g <= last_group; ++g) {
      if (!verified_[g].load(std::memory_order_relaxed)) EMBER_RETURN_IF_ERROR(VerifyGroup(g));
    }
  }
  int64_t total_keys = 0;
  for (int64_t g = first_group; g <= last_group; ++g) {
    EMBER_RETURN_IF_ERROR(CountKeys(g, begin, end, &total_keys));
  }
  out->keys.resize(total_keys + internal::kGatherSlackKeys);
  int64_t out_row = 0;
  int64_t key_cursor = 0;
  for (int64_t g = first_group; g <= last_group; ++g) {
    EMBER_RETURN_IF_ERROR(CopyRows(g, begin, end, out, &out_row, &key_cursor));
  }
  DCHECK_EQ(key_cursor, total_keys);
  out->keys.resize(total_keys);  // drops the gather's slack, keeps capacity
  return Status::OK();
}

Status MappedColumnarFile::CountKeys(int64_t g, int64_t begin, int64_t end, int64_t* keys) const {
  const auto [r0, r1] = RowsInGroup(g, begin, end);
  const SlotView* views = slots_.data() + g * shape_.num_slots;
  for (int s = 0; s < shape_.num_slots; ++s) {
    const int64_t slot_keys = internal::KeysInRows(views[s], r0, r1);
    if (slot_keys < 0) {
      return Status::DataLoss(path_, ": row group ", g, ": offsets of slot ", s,
                              " are out of bounds");
    }
    *keys += slot_keys;
  }
  return Status::OK();
}

Status MappedColumnarFile::CopyRows(int64_t g, int64_t begin, int64_t end, Batch* out,
                                    int64_t* out_row, int64_t* key_cursor) const {
  const auto [r0, r1] = RowsInGroup(g, begin, end);
  const int num_labels = shape_.num_labels;
  const int num_dense = shape_.num_dense;
  const int num_slots = shape_.num_slots;
  std::memcpy(out->labels.data() + *out_row * num_labels, labels_[g] + r0 * num_labels,
              (r1 - r0) * num_labels * sizeof(float));
  if (num_dense > 0) {  // without dense, data() may be null: not allowed even for 0 bytes
    std::memcpy(out->dense.data() + *out_row * num_dense, dense_[g] + r0 * num_dense,
                (r1 - r0) * num_dense * sizeof(float));
  }
  if (num_slots > 0 && !internal::GatherKeys(slots_.data() + g * num_slots, num_slots, r0, r1,
                                             out->offsets.data() + *out_row * num_slots + 1,
                                             out->keys.data(), key_cursor)) {
    return Status::DataLoss(path_, ": row group ", g,
                            ": offsets of a slot are inconsistent within rows ", first_row_[g] + r0,
                            " to ", first_row_[g] + r1);
  }
  *out_row += r1 - r0;
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<ColumnarFile>> OpenColumnar(const std::string& path,
                                                   const ColumnarReadOptions& options) {
  EMBER_ASSIGN_OR_RETURN(
      auto map, internal::MappedFile::Open(path, options.sequential
                                                     ? internal::MappedFile::Access::kSequential
                                                     : internal::MappedFile::Access::kRandom));
  auto file = std::make_unique<MappedColumnarFile>(path, options, std::move(map));
  EMBER_RETURN_IF_ERROR(file->Load());
  return std::unique_ptr<ColumnarFile>(std::move(file));
}

Result<Dataset> ReadColumnarDataset(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(auto file, OpenColumnar(path));
  Batch all;
  EMBER_RETURN_IF_ERROR(file->ReadRows(0, file->rows(), &all));
  return Dataset(std::move(all));
}

}  // namespace ember::io
