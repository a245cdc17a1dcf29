#include "io/internal/columnar_format.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/checksum.h"

namespace ember::io::internal {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the columnar format is little-endian and is read by casting mapped bytes");

// Offsets of the header fields (see io/columnar.h).
constexpr int kVersionAt = 8;
constexpr int kHeaderBytesAt = 12;
constexpr int kNumLabelsAt = 16;
constexpr int kNumDenseAt = 20;
constexpr int kNumSlotsAt = 24;
constexpr int kSlotBitsAt = 28;
constexpr int kRowsAt = 32;
constexpr int kGroupsAt = 40;
constexpr int kRowsPerGroupAt = 48;
constexpr int kIndexOffsetAt = 56;
constexpr int kIndexBytesAt = 64;
constexpr int kIndexHashAt = 72;
constexpr int kFileBytesAt = 80;
constexpr int kReservedAt = 88;
constexpr int kHeaderHashAt = 120;

void PutU32(uint32_t value, unsigned char* at) { std::memcpy(at, &value, sizeof(value)); }
void PutU64(uint64_t value, unsigned char* at) { std::memcpy(at, &value, sizeof(value)); }

uint32_t GetU32(const unsigned char* at) {
  uint32_t value;
  std::memcpy(&value, at, sizeof(value));
  return value;
}

uint64_t GetU64(const unsigned char* at) {
  uint64_t value;
  std::memcpy(&value, at, sizeof(value));
  return value;
}

void PutSection(const SectionRef& section, unsigned char* at) {
  PutU64(section.offset, at);
  PutU64(section.bytes, at + 8);
  PutU64(section.hash, at + 16);
}

SectionRef GetSection(const unsigned char* at) {
  return SectionRef{GetU64(at), GetU64(at + 8), GetU64(at + 16)};
}

}  // namespace

std::string EncodeHeader(const ColumnarHeader& header) {
  std::string bytes(kColumnarHeaderBytes, '\0');
  auto* at = reinterpret_cast<unsigned char*>(bytes.data());
  std::memcpy(at, kColumnarMagic, sizeof(kColumnarMagic));
  PutU32(kColumnarVersion, at + kVersionAt);
  PutU32(static_cast<uint32_t>(kColumnarHeaderBytes), at + kHeaderBytesAt);
  PutU32(header.num_labels, at + kNumLabelsAt);
  PutU32(header.num_dense, at + kNumDenseAt);
  PutU32(header.num_slots, at + kNumSlotsAt);
  PutU32(header.slot_bits, at + kSlotBitsAt);
  PutU64(header.rows, at + kRowsAt);
  PutU64(header.groups, at + kGroupsAt);
  PutU64(header.rows_per_group, at + kRowsPerGroupAt);
  PutU64(header.index_offset, at + kIndexOffsetAt);
  PutU64(header.index_bytes, at + kIndexBytesAt);
  PutU64(header.index_hash, at + kIndexHashAt);
  PutU64(header.file_bytes, at + kFileBytesAt);
  PutU64(HeaderHash(at), at + kHeaderHashAt);
  return bytes;
}

uint64_t HeaderHash(const unsigned char* header) { return XxHash64(header, kHeaderHashAt); }

Result<ColumnarHeader> DecodeHeader(const std::string& path, const unsigned char* bytes,
                                    int64_t size) {
  // The magic first: a file of another kind is not a damaged columnar file.
  const int64_t magic_bytes = static_cast<int64_t>(sizeof(kColumnarMagic));
  if (size > 0 && std::memcmp(bytes, kColumnarMagic, std::min(size, magic_bytes)) != 0) {
    return Status::InvalidArgument(path, ": not an Ember columnar file (bad magic)");
  }
  if (size < kColumnarHeaderBytes) {
    return Status::DataLoss(path, ": truncated: ", size, " bytes, shorter than the ",
                            kColumnarHeaderBytes, "-byte header");
  }
  const uint32_t version = GetU32(bytes + kVersionAt);
  if (version != kColumnarVersion) {
    return Status::InvalidArgument(path, ": columnar format version ", version,
                                   " is not supported (this build reads version ", kColumnarVersion,
                                   ")");
  }
  if (GetU64(bytes + kHeaderHashAt) != HeaderHash(bytes)) {
    return Status::DataLoss(path, ": header checksum mismatch");
  }
  const uint32_t header_bytes = GetU32(bytes + kHeaderBytesAt);
  if (header_bytes != kColumnarHeaderBytes) {
    return Status::DataLoss(path, ": header size ", header_bytes, ", expected ",
                            kColumnarHeaderBytes);
  }
  for (int at = kReservedAt; at < kHeaderHashAt; ++at) {
    if (bytes[at] != 0) return Status::DataLoss(path, ": reserved header byte ", at, " is not 0");
  }
  ColumnarHeader header;
  header.num_labels = GetU32(bytes + kNumLabelsAt);
  header.num_dense = GetU32(bytes + kNumDenseAt);
  header.num_slots = GetU32(bytes + kNumSlotsAt);
  header.slot_bits = GetU32(bytes + kSlotBitsAt);
  header.rows = GetU64(bytes + kRowsAt);
  header.groups = GetU64(bytes + kGroupsAt);
  header.rows_per_group = GetU64(bytes + kRowsPerGroupAt);
  header.index_offset = GetU64(bytes + kIndexOffsetAt);
  header.index_bytes = GetU64(bytes + kIndexBytesAt);
  header.index_hash = GetU64(bytes + kIndexHashAt);
  header.file_bytes = GetU64(bytes + kFileBytesAt);
  return header;
}

void AppendGroupEntry(const GroupEntry& entry, std::string* index) {
  const size_t start = index->size();
  index->resize(start + GroupEntryBytes(static_cast<int64_t>(entry.slots.size())), '\0');
  auto* at = reinterpret_cast<unsigned char*>(index->data()) + start;
  PutU64(entry.first_row, at);
  PutU64(entry.rows, at + 8);
  PutSection(entry.labels, at + 16);
  PutSection(entry.dense, at + 40);
  at += kGroupEntryBytes;
  for (const SlotEntry& slot : entry.slots) {
    PutSection(slot.offsets, at);
    PutSection(slot.keys, at + 24);
    PutU64(slot.bag, at + 48);
    at += kSlotEntryBytes;
  }
}

void DecodeGroupEntry(const unsigned char* bytes, int num_slots, GroupEntry* entry) {
  entry->first_row = GetU64(bytes);
  entry->rows = GetU64(bytes + 8);
  entry->labels = GetSection(bytes + 16);
  entry->dense = GetSection(bytes + 40);
  entry->slots.resize(num_slots);
  const unsigned char* at = bytes + kGroupEntryBytes;
  for (SlotEntry& slot : entry->slots) {
    slot.offsets = GetSection(at);
    slot.keys = GetSection(at + 24);
    slot.bag = GetU64(at + 48);
    at += kSlotEntryBytes;
  }
}

std::string EncodeTrailer(uint64_t index_offset, uint64_t file_bytes, uint64_t header_hash) {
  std::string bytes(kColumnarTrailerBytes, '\0');
  auto* at = reinterpret_cast<unsigned char*>(bytes.data());
  PutU64(index_offset, at);
  PutU64(file_bytes, at + 8);
  PutU64(header_hash, at + 16);
  std::memcpy(at + 24, kColumnarEndMagic, sizeof(kColumnarEndMagic));
  return bytes;
}

}  // namespace ember::io::internal
