#include "core/checksum.h"

#include <cstring>

// Debian's xxHash (libxxhash-dev), inlined into this file: no library to
// link or to ship in the device pack.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/random.h"

namespace ember {
namespace {

constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

constexpr char kXxh64Name[] = "xxh64";
constexpr char kFnv1a64WordsName[] = "fnv1a64-words";

}  // namespace

uint64_t XxHash64(const void* data, size_t size, uint64_t seed) {
  return XXH64(data, size, seed);
}

static_assert(sizeof(XXH64_state_t) <= sizeof(XxHash64Stream),
              "XxHash64Stream must hold libxxhash's XXH64_state_t");
static_assert(alignof(XXH64_state_t) <= 8, "XxHash64Stream aligns its state to 8 bytes");

XxHash64Stream::XxHash64Stream() {
  XXH64_reset(reinterpret_cast<XXH64_state_t*>(state_), 0);
}

void XxHash64Stream::Update(const char* data, size_t size) {
  XXH64_update(reinterpret_cast<XXH64_state_t*>(state_), data, size);
}

uint64_t XxHash64Stream::Digest() const {
  return XXH64_digest(reinterpret_cast<const XXH64_state_t*>(state_));
}

void Fnv1a64Words::Update(const char* data, size_t size) {
  length_ += size;
  while (size > 0 && tail_bytes_ > 0) {
    tail_ |= uint64_t{static_cast<unsigned char>(*data++)} << (8 * tail_bytes_);
    --size;
    if (++tail_bytes_ == 8) {
      state_ = (state_ ^ tail_) * kFnvPrime;
      tail_ = 0;
      tail_bytes_ = 0;
    }
  }
  for (; size >= 8; size -= 8, data += 8) {
    uint64_t word;
    std::memcpy(&word, data, 8);
    state_ = (state_ ^ word) * kFnvPrime;
  }
  for (; size > 0; --size) {
    tail_ |= uint64_t{static_cast<unsigned char>(*data++)} << (8 * tail_bytes_++);
  }
}

uint64_t Fnv1a64Words::Digest() const {
  uint64_t state = state_;
  if (tail_bytes_ > 0) state = (state ^ tail_) * kFnvPrime;
  return Mix64((state ^ length_) * kFnvPrime);
}

const char* FileChecksumName(FileChecksum checksum) {
  return checksum == FileChecksum::kXxh64 ? kXxh64Name : kFnv1a64WordsName;
}

Result<FileChecksum> FileChecksumNamed(const std::string& name) {
  if (name == kXxh64Name) return FileChecksum::kXxh64;
  if (name == kFnv1a64WordsName) return FileChecksum::kFnv1a64Words;
  return Status::InvalidArgument("checksum \"", name, "\" is not one this Ember knows (",
                                 kXxh64Name, ", ", kFnv1a64WordsName, ")");
}

void FileHasher::Update(const char* data, size_t size) {
  if (checksum_ == FileChecksum::kXxh64) {
    xxh64_.Update(data, size);
  } else {
    fnv_.Update(data, size);
  }
}

uint64_t FileHasher::Digest() const {
  return checksum_ == FileChecksum::kXxh64 ? xxh64_.Digest() : fnv_.Digest();
}

uint64_t FileChecksumOf(FileChecksum checksum, const char* data, size_t size) {
  if (checksum == FileChecksum::kXxh64) return XxHash64(data, size);
  Fnv1a64Words fnv;
  fnv.Update(data, size);
  return fnv.Digest();
}

}  // namespace ember
