#include "topspin/core/sha256.h"

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {
namespace {

// FIPS 180-4 examples (NIST CSRC "SHA256.pdf") and the long-message vector.
TEST(Sha256, MatchesFips180Vectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million_a(1000000, 'a');
  EXPECT_EQ(Sha256Hex(million_a),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// The SHA-extension path (where the CPU has it) and the portable one give
// the same digests at every length around block boundaries and for many
// blocks fed in odd pieces.
TEST(Sha256, HardwareAndPortablePathsAgree) {
  std::vector<uint8_t> buf(64 * 40 + 7);
  uint64_t x = 88172645463325252ull;
  for (auto& b : buf) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  for (size_t n : {size_t{0}, size_t{1}, size_t{55}, size_t{56}, size_t{63}, size_t{64},
                   size_t{65}, size_t{127}, size_t{128}, size_t{129}, size_t{1000}, buf.size()}) {
    Sha256 fast, portable(true);
    fast.Update(buf.data(), n / 3);
    fast.Update(buf.data() + n / 3, n - n / 3);
    portable.Update(buf.data(), n);
    ASSERT_EQ(fast.HexDigest(), portable.HexDigest()) << n << " bytes";
  }
  Sha256 portable(true);
  portable.Update("abc");
  EXPECT_EQ(portable.HexDigest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::printf("SHA extensions on this CPU: %s\n", Sha256::HasHardware() ? "yes" : "no");
}

TEST(Sha256, PaddingBoundaries) {
  // 55, 56 and 64 bytes straddle the one-block / two-block padding cases;
  // values from `printf 'a%.0s' {1..N} | sha256sum`.
  EXPECT_EQ(Sha256Hex(std::string(55, 'a')),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(Sha256Hex(std::string(56, 'a')),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(Sha256Hex(std::string(64, 'a')),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Sha256, IncrementalEqualsOneShotAtEverySplit) {
  std::vector<uint8_t> buf(200);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 37 + 11);
  const std::string whole = Sha256Hex(buf.data(), buf.size());
  for (size_t split = 0; split <= buf.size(); ++split) {
    Sha256 sha;
    sha.Update(buf.data(), split);
    sha.Update(buf.data() + split, buf.size() - split);
    ASSERT_EQ(sha.HexDigest(), whole) << "split at " << split;
  }
  Sha256 bytewise;
  for (uint8_t b : buf) bytewise.Update(&b, 1);
  EXPECT_EQ(bytewise.HexDigest(), whole);
}

TEST(Sha256, HexDigestResetsForTheNextMessage) {
  Sha256 sha;
  sha.Update("garbage");
  sha.HexDigest();
  sha.Update("abc");
  EXPECT_EQ(sha.HexDigest(), Sha256Hex("abc"));
}

TEST(Sha256, FileMatchesInMemoryDigest) {
  testing::TempDir dir;
  std::string contents;
  for (int i = 0; i < 100000; ++i) contents += static_cast<char>(i * 7);
  WriteFileAtomic(dir / "blob", contents);
  EXPECT_EQ(Sha256File(dir / "blob"), Sha256Hex(contents));
  WriteFileAtomic(dir / "empty", "");
  EXPECT_EQ(Sha256File(dir / "empty"), Sha256Hex(""));
}

TEST(Sha256, MissingFileIsAnIoErrorNamingThePath) {
  testing::TempDir dir;
  try {
    Sha256File(dir / "absent");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(e.Message().find("absent"), std::string::npos) << e.Message();
  }
}

}  // namespace
}  // namespace topspin
