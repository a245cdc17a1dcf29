#include "core/checksum.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "core/random.h"

namespace ember {
namespace {

// The reference values of xxHash's own sanity check (xxhsum, seed 0 and
// 2654435761) and of its documentation.
TEST(XxHash64Test, MatchesTheReferenceVectors) {
  constexpr uint32_t kPrime = 2654435761U;
  unsigned char buffer[101];
  uint32_t generator = kPrime;
  for (unsigned char& byte : buffer) {
    byte = static_cast<unsigned char>(generator >> 24);
    generator *= generator;
  }
    EXPECT_EQ(0xEF46DB3751D8E999ULL, XxHash64(nullptr, 0, 0));
  EXPECT_EQ(0xAC75FDA2929B17EFULL, XxHash64(nullptr, 0, kPrime));
  EXPECT_EQ(0x4FCE394CC88952D8ULL, XxHash64(buffer, 1, 0));
  EXPECT_EQ(0x739840CB819FA723ULL, XxHash64(buffer, 1, kPrime));
  EXPECT_EQ(0xCFFA8DB881BC3A3DULL, XxHash64(buffer, 14, 0));
  EXPECT_EQ(0x5B9611585EFCC9CBULL, XxHash64(buffer, 14, kPrime));
  EXPECT_EQ(0x0EAB543384F878ADULL, XxHash64(buffer, 101, 0));
  EXPECT_EQ(0xCAA65939306F1E21ULL, XxHash64(buffer, 101, kPrime));
  EXPECT_EQ(0x44BC2CF5AD770999ULL, XxHash64("abc", 3, 0));
  const char* text = "Nobody inspects the spammish repetition";
  EXPECT_EQ(0xFBCEA83C8A378BF1ULL, XxHash64(text, std::strlen(text), 0));
}


TEST(XxHash64Test, AStreamInPiecesEqualsTheWholeBuffer) {
  std::string bytes(1000, '\0');
  RandomStream random(5);
  for (char& c : bytes) c = static_cast<char>(random.NextBelow(256));
  for (size_t piece : {1u, 3u, 31u, 32u, 33u, 999u, 1000u}) {
    XxHash64Stream stream;
    for (size_t begin = 0; begin < bytes.size(); begin += piece) {
      stream.Update(bytes.data() + begin, std::min(piece, bytes.size() - begin));
    }
    EXPECT_EQ(XxHash64(bytes.data(), bytes.size()), stream.Digest()) << "pieces of " << piece;
  }
  EXPECT_EQ(XxHash64(nullptr, 0), XxHash64Stream().Digest());
}

TEST(Fnv1a64WordsTest, DoesNotDependOnHowTheBytesAreSplit) {
  std::string bytes(1000, '\0');
  RandomStream random(3);
  for (char &c : bytes) c = static_cast<char>(random.NextBelow(256));
  Fnv1a64Words whole;
  whole.Update(bytes.data(), bytes.size());
  for (size_t piece : {1u, 3u, 7u, 8u, 13u, 999u}) {
    Fnv1a64Words pieces;
    for (size_t begin = 0; begin < bytes.size(); begin += piece) {
      pieces.Update(bytes.data() + begin, std::min(piece, bytes.size() - begin));
    }
    EXPECT_EQ(whole.Digest(), pieces.Digest()) << "pieces of " << piece;
  }
}

TEST(Fnv1a64WordsTest, ChangesWithAnyFlippedByteAndWithLength) {
  std::string bytes(64, 'x');
  Fnv1a64Words original;
  original.Update(bytes.data(), bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] ^= 1;
    Fnv1a64Words hash;
    hash.Update(flipped.data(), flipped.size());
    EXPECT_NE(original.Digest(), hash.Digest()) << "byte " << i;
  }
  const std::string longer = bytes + std::string(1, '\0');
  Fnv1a64Words with_zero;
  with_zero.Update(longer.data(), longer.size());
  EXPECT_NE(original.Digest(), with_zero.Digest());
}

TEST(FileChecksumTest, NamesReadBackAndUnknownNamesAreRefused) {
  for (FileChecksum checksum : {FileChecksum::kXxh64, FileChecksum::kFnv1a64Words}) {
    Result<FileChecksum> named = FileChecksumNamed(FileChecksumName(checksum));
    ASSERT_TRUE(named.ok()) << named.status();
    EXPECT_EQ(checksum, *named);
  }
  EXPECT_EQ(std::string("xxh64"), FileChecksumName(FileChecksum::kXxh64));
  EXPECT_EQ(StatusCode::kInvalidArgument, FileChecksumNamed("crc32").status().code());
}

TEST(FileChecksumTest, AHasherComputesTheChecksumItIsGiven) {
  const std::string text = "Nobody inspects the spammish repetition";
  for (FileChecksum checksum : {FileChecksum::kXxh64, FileChecksum::kFnv1a64Words}) {
    FileHasher hasher(checksum);
    hasher.Update(text.data(), 10);
    hasher.Update(text.data() + 10, text.size() - 10);
    EXPECT_EQ(FileChecksumOf(checksum, text.data(), text.size()), hasher.Digest());
  }
  EXPECT_EQ(0xFBCEA83C8A378BF1ULL, FileChecksumOf(FileChecksum::kXxh64, text.data(), text.size()));
}

}  // namespace
}  // namespace ember
