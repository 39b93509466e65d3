#include "topspin/core/rng.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "topspin/core/simd.h"

namespace topspin {
namespace {

__extension__ using U128 = unsigned __int128;

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1
constexpr int kRounds = 10;

// One Philox round on the counter (c0, c1, c2, c3) with round key (k0, k1).
inline void PhiloxRound(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0,
                        uint32_t k1) {
  const uint64_t p0 = uint64_t{kMul0} * c0, p1 = uint64_t{kMul1} * c2;
  c0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
  c1 = static_cast<uint32_t>(p1);
  c2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
  c3 = static_cast<uint32_t>(p0);
}

}  // namespace

PhiloxCounter Philox4x32(PhiloxCounter c, PhiloxKey k) {
  for (int round = 0; round < kRounds; ++round) {
    if (round > 0) {
      k[0] += kWeyl0;
      k[1] += kWeyl1;
    }
    PhiloxRound(c[0], c[1], c[2], c[3], k[0], k[1]);
  }
  return c;
}

TOPSPIN_VECTOR_CLONES
void Philox4x32Word0(const uint32_t* c0_in, uint32_t c1_in, uint32_t c2_in, uint32_t c3_in,
                     PhiloxKey key, size_t n, uint32_t* out) {
  // Up to 64 lanes, a multiple of 16: each round is one loop over the
  // lanes' four words, which the compiler turns into vector multiplies.
  constexpr size_t kLanes = 64, kWidth = 16;
  alignas(64) uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (size_t at = 0; at < n; at += kLanes) {
    const size_t m = std::min(kLanes, n - at), lanes = (m + kWidth - 1) / kWidth * kWidth;
    for (size_t i = 0; i < lanes; ++i) {
      c0[i] = i < m ? c0_in[at + i] : 0;
      c1[i] = c1_in;
      c2[i] = c2_in;
      c3[i] = c3_in;
    }
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < kRounds; ++round) {
      if (round > 0) {
        k0 += kWeyl0;
        k1 += kWeyl1;
      }
      for (size_t i = 0; i < lanes; ++i) PhiloxRound(c0[i], c1[i], c2[i], c3[i], k0, k1);
    }
    for (size_t i = 0; i < m; ++i) out[at + i] = c0[i];
  }
}

PhiloxStream::PhiloxStream(uint64_t seed, uint64_t stream)
    : key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}, stream_(stream) {}

void PhiloxStream::Seek(uint64_t index) {
  position_ = index;
}

uint32_t PhiloxStream::NextU32() {
  const uint64_t block = position_ >> 2;
  if (block != block_index_) {
    // counter = (block index, stream id): 2^64 blocks per stream.
    block_ = Philox4x32({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                         static_cast<uint32_t>(stream_), static_cast<uint32_t>(stream_ >> 32)},
                        key_);
    block_index_ = block;
  }
  return block_[position_++ & 3];
}

uint64_t PhiloxStream::NextU64() {
  const uint64_t lo = NextU32();
  return lo | (uint64_t{NextU32()} << 32);
}

float PhiloxStream::NextFloat() {
  return static_cast<float>(NextU32() >> 8) * 0x1.0p-24f;
}

double PhiloxStream::NextDouble() {
  return static_cast<double>(NextU64() >> 11) * 0x1.0p-53;
}

uint64_t PhiloxStream::NextBelow(uint64_t bound) {
  // Lemire, "Fast Random Integer Generation in an Interval" (2019).
  U128 m = static_cast<U128>(NextU64()) * bound;
  auto low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = -bound % bound;
    while (low < threshold) {
      m = static_cast<U128>(NextU64()) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double PhiloxStream::NextNormal() {
  const double u1 = 1.0 - NextDouble();  // (0, 1]: log is finite
  const double u2 = NextDouble();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace topspin
