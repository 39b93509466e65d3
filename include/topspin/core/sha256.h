// SHA-256 (FIPS 180-4): the cryptographic digest recorded for every shard
// and checkpoint file, so a copy can be checked end to end with standard
// tools (`sha256sum` prints the same lowercase hex).
//
// Digests are 64 lowercase hex characters. The free functions are pure and
// thread-safe; a Sha256 object is not (use one per thread).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace topspin {

// Incremental hashing: Update() any number of times, then HexDigest() once.
// Feeding the same bytes in any split gives the same digest as one call.
// Blocks are compressed with the CPU's SHA extensions (x86 SHA-NI, about 8x
// the portable code) where it has them, else by portable C++; both give
// the same digests. `portable` forces the portable code (tests, benches).
class Sha256 {
 public:
  Sha256() : Sha256(false) {}
  explicit Sha256(bool portable);
  static bool HasHardware();

  void Update(const void* data, size_t size);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // Pads, finishes and returns the digest. The object is reset afterwards,
  // ready to hash a new message.
  std::string HexDigest();

 private:
  void Reset();
  void CompressBlocks(const uint8_t* blocks, size_t count);

  bool hardware_;
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;       // bytes in buffer_, < 64
  uint64_t total_bytes_ = 0;  // message length so far
};

// One-shot digests.
std::string Sha256Hex(const void* data, size_t size);
std::string Sha256Hex(std::string_view s);

// Digest of a whole file, read through a memory map. Throws Error{kIo}
// naming the path when the file cannot be opened.
std::string Sha256File(const std::filesystem::path& path);

}  // namespace topspin
