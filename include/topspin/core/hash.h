// Non-cryptographic hashes used for checksums, config hashes and feature
// hashing. All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace topspin {

// XXH3 64-bit (xxhash library), optionally seeded. Stable across platforms.
uint64_t Xxh3(const void* data, size_t size, uint64_t seed = 0);
inline uint64_t Xxh3(std::string_view s, uint64_t seed = 0) {
  return Xxh3(s.data(), s.size(), seed);
}

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI,
// ext4 and LevelDB. Uses SSE4.2 crc32 instructions when the CPU has them,
// a slicing-by-8 table otherwise; both give identical results.
// Pass the previous result as `crc` to continue a running checksum.
uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);
inline uint32_t Crc32c(std::string_view s) {
  return Crc32c(s.data(), s.size());
}
// The portable table version, exposed for tests and benchmarks.
uint32_t Crc32cPortable(const void* data, size_t size, uint32_t crc = 0);
bool Crc32cHasHardware();

// 16 lowercase hex digits.
std::string HexU64(uint64_t value);

}  // namespace topspin
