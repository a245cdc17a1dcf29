#pragma once

// The checksums of Ember's files: XXH64, which new checkpoints and bundles
// (and columnar files) write, and Fnv1a64Words, which files written before
// it used (and engine/model_hash.h computes). A manifest names the
// checksum its hashes were made with (FileChecksumName), so that a reader
// verifies old and new files alike.

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace ember {

// XXH64 of `size` bytes at `data` with `seed`: the 64-bit xxHash of Yann
// Collet, as Debian's libxxhash computes it (its header inlined into
// checksum.cc, nothing linked).
uint64_t XxHash64(const void* data, size_t size, uint64_t seed = 0);

// XXH64 (seed 0) of bytes given in pieces: equal to XxHash64 of them all.
class XxHash64Stream {
 public:
  XxHash64Stream();
  void Update(const char* data, size_t size);
  uint64_t Digest() const;

 private:
  // libxxhash's XXH64_state_t (88 bytes in 0.8), kept opaque here.
  alignas(8) unsigned char state_[96];
};

// The legacy 64-bit hash of checkpoint and bundle files (and the model
// hash's): FNV-1a over the bytes taken as little-endian 64-bit words (the
// tail zero-padded into one last word), the length mixed in, then
// SplitMix64's finaliser. Changing any single word always changes it.
class Fnv1a64Words {
 public:
  void Update(const char* data, size_t size);
  uint64_t Digest() const;

 private:
  uint64_t state_ = 0xcbf29ce484222325ULL;
  uint64_t length_ = 0;
  uint64_t tail_ = 0;  // Bytes of an incomplete word, little-endian.
  int tail_bytes_ = 0;
};

// A checksum a manifest can name.
enum class FileChecksum {
  kXxh64,         // "xxh64": what new files are written with.
  kFnv1a64Words,  // "fnv1a64-words": files written before xxh64 (legacy).
};

// "xxh64" or "fnv1a64-words".
const char* FileChecksumName(FileChecksum checksum);
// The checksum named `name`; InvalidArgument naming it otherwise.
Result<FileChecksum> FileChecksumNamed(const std::string& name);

// The checksum `checksum` of bytes given in pieces.
class FileHasher {
 public:
  explicit FileHasher(FileChecksum checksum) : checksum_(checksum) {}
  void Update(const char* data, size_t size);
  uint64_t Digest() const;

 private:
  FileChecksum checksum_;
  XxHash64Stream xxh64_;
  Fnv1a64Words fnv_;
};

// The checksum `checksum` of `size` bytes at `data`.
uint64_t FileChecksumOf(FileChecksum checksum, const char* data, size_t size);

}  // namespace ember
