#include "topspin/core/hash.h"

#include <xxhash.h>

#include <array>
#include <cstring>

#include <fmt/format.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace topspin {

uint64_t Xxh3(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

std::string HexU64(uint64_t value) {
  return fmt::format("{:016x}", value);
}

namespace {

constexpr uint32_t kCrc32cPoly = 0x82F63B78u;  // reflected Castagnoli

// kTable[k][b]: CRC of byte b followed by k zero bytes (slicing-by-8).
using Crc32cTable = std::array<std::array<uint32_t, 256>, 8>;

constexpr Crc32cTable MakeCrc32cTable() {
  Crc32cTable t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1u) ? kCrc32cPoly : 0u);
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  }
  return t;
}

constexpr Crc32cTable kTable = MakeCrc32cTable();

uint32_t Crc32cPortableRaw(const uint8_t* p, size_t n, uint32_t c) {
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);  // little-endian host assumed (x86_64, aarch64)
    w ^= c;
    c = kTable[7][w & 0xFF] ^ kTable[6][(w >> 8) & 0xFF] ^ kTable[5][(w >> 16) & 0xFF] ^
        kTable[4][(w >> 24) & 0xFF] ^ kTable[3][(w >> 32) & 0xFF] ^ kTable[2][(w >> 40) & 0xFF] ^
        kTable[1][(w >> 48) & 0xFF] ^ kTable[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ kTable[0][(c ^ *p++) & 0xFF];
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t Crc32cHardwareRaw(const uint8_t* p, size_t n,
                                                             uint32_t c) {
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c64 = __builtin_ia32_crc32di(c64, w);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c64);
  while (n-- > 0) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}

bool DetectSse42() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & bit_SSE4_2) != 0;
}
#endif

}  // namespace

bool Crc32cHasHardware() {
#if defined(__x86_64__)
  static const bool has = DetectSse42();
  return has;
#else
  return false;
#endif
}

uint32_t Crc32cPortable(const void* data, size_t size, uint32_t crc) {
  return ~Crc32cPortableRaw(static_cast<const uint8_t*>(data), size, ~crc);
}

uint32_t Crc32c(const void* data, size_t size, uint32_t crc) {
#if defined(__x86_64__)
  if (Crc32cHasHardware()) return ~Crc32cHardwareRaw(static_cast<const uint8_t*>(data), size, ~crc);
#endif
  return Crc32cPortable(data, size, crc);
}

}  // namespace topspin
