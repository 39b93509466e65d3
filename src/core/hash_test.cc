#include "topspin/core/hash.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "topspin/core/rng.h"

namespace topspin {
namespace {

TEST(Crc32c, MatchesPublishedCheckValue) {
  // The standard CRC catalogue check value for "123456789".
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
}

TEST(Crc32c, MatchesRfc3720Vectors) {
  // iSCSI (RFC 3720, B.4): 32 bytes of zeros, of 0xFF, and ascending 0..31.
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), ascending(32);
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(ascending.data(), ascending.size()), 0x46DD794Eu);
}

TEST(Crc32c, HardwareAndPortableAgreeAtEveryLengthAndAlignment) {
  PhiloxStream rng(7);
  std::vector<uint8_t> buf(1000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng.NextU32());
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t len = 0; len + offset <= 300; len += 7) {
      ASSERT_EQ(Crc32c(buf.data() + offset, len), Crc32cPortable(buf.data() + offset, len))
          << "offset " << offset << " len " << len;
    }
  }
}

TEST(Crc32c, ContinuesARunningChecksum) {
  const std::string s = "hello, topspin checksums";
  const uint32_t whole = Crc32c(s);
  const uint32_t part = Crc32c(s.data(), 5);
  EXPECT_EQ(Crc32c(s.data() + 5, s.size() - 5, part), whole);
}

TEST(Xxh3, MatchesReferenceValues) {
  // XXH3_64bits of the empty input, from the xxHash reference.
  EXPECT_EQ(Xxh3("", 0), 0x2D06800538D394C2ull);
  EXPECT_NE(Xxh3("a"), Xxh3("b"));
  EXPECT_NE(Xxh3("a", 1), Xxh3("a", 2));  // seeded
  EXPECT_EQ(HexU64(0x2D06800538D394C2ull), "2d06800538d394c2");
}

}  // namespace
}  // namespace topspin
