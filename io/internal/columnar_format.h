#pragma once

// The byte layout of the columnar format (documented in io/columnar.h):
// constants and the encoding of the header, index entries and trailer.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember::io::internal {

inline constexpr char kColumnarMagic[8] = {'E', 'M', 'B', 'E', 'R', 'C', 'O', 'L'};
inline constexpr char kColumnarEndMagic[8] = {'E', 'M', 'B', 'E', 'R', 'E', 'N', 'D'};
inline constexpr uint32_t kColumnarVersion = 1;
inline constexpr int64_t kColumnarHeaderBytes = 128;
inline constexpr int64_t kColumnarTrailerBytes = 32;
inline constexpr int64_t kColumnarAlignment = 64;
// An index entry: 64 bytes, then 56 per slot.
inline constexpr int64_t kGroupEntryBytes = 64;
inline constexpr int64_t kSlotEntryBytes = 56;
// The bag size of a slot whose bags vary within a group.
inline constexpr uint64_t kVariableBags = ~uint64_t{0};

inline int64_t AlignUp(int64_t offset) {
  return (offset + kColumnarAlignment - 1) / kColumnarAlignment * kColumnarAlignment;
}

inline int64_t GroupEntryBytes(int64_t num_slots) {
  return kGroupEntryBytes + kSlotEntryBytes * num_slots;
}

struct ColumnarHeader {
  uint32_t num_labels = 0;
  uint32_t num_dense = 0;
  uint32_t num_slots = 0;
  uint32_t slot_bits = 0;
  uint64_t rows = 0;
  uint64_t groups = 0;
  uint64_t rows_per_group = 0;
  uint64_t index_offset = 0;
  uint64_t index_bytes = 0;
  uint64_t index_hash = 0;
  uint64_t file_bytes = 0;
};

// The 128 header bytes, checksum included.
std::string EncodeHeader(const ColumnarHeader& header);
// The checksum stored in header bytes [120, 128).
uint64_t HeaderHash(const unsigned char* header);
// Parses the first kColumnarHeaderBytes of `bytes` (`size` of them
// available). InvalidArgument for a wrong magic or version, DataLoss for a
// short file, a bad checksum or nonzero reserved bytes; messages start with
// `path`. Field ranges are checked by the caller.
Result<ColumnarHeader> DecodeHeader(const std::string& path, const unsigned char* bytes,
                                    int64_t size);

// A contiguous run of bytes of the file and its checksum.
struct SectionRef {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t hash = 0;
};

struct SlotEntry {
  SectionRef offsets;
  SectionRef keys;
  uint64_t bag = kVariableBags;
};

struct GroupEntry {
  uint64_t first_row = 0;
  uint64_t rows = 0;
  SectionRef labels;
  SectionRef dense;
  std::vector<SlotEntry> slots;
};

// Appends the GroupEntryBytes(entry.slots.size()) bytes of `entry`.
void AppendGroupEntry(const GroupEntry& entry, std::string* index);
// Reads an entry of `num_slots` slots at `bytes`.
// REQUIRES: GroupEntryBytes(num_slots) bytes readable there.
void DecodeGroupEntry(const unsigned char* bytes, int num_slots, GroupEntry* entry);

// The 32 trailer bytes.
std::string EncodeTrailer(uint64_t index_offset, uint64_t file_bytes, uint64_t header_hash);

}  // namespace ember::io::internal
