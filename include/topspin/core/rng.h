// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11,
// "Parallel Random Numbers: As Easy as 1, 2, 3"), bit-compatible with
// Random123's philox4x32_10.
//
// A counter-based generator is a pure function of (key, counter): the n-th
// number of a stream is computed directly, without generating the n-1
// before it. topspin uses this for everything that must reproduce across
// restarts, thread counts and world sizes: key = seed, counter = (purpose,
// epoch, sample index, ...).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace topspin {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// One Philox4x32-10 block: 4 independent uniform 32-bit words.
PhiloxCounter Philox4x32(PhiloxCounter counter, PhiloxKey key);
// Word 0 of Philox4x32({c0[i], c1, c2, c3}, key) for each i < n, into
// out[i]: the same bits as n calls, computed in vector lanes.
void Philox4x32Word0(const uint32_t* c0, uint32_t c1, uint32_t c2, uint32_t c3, PhiloxKey key,
                     size_t n, uint32_t* out);

// A stream of random numbers for one (seed, stream id). Cheap to create;
// not thread-safe (give each thread its own). Seek() jumps anywhere in O(1).
class PhiloxStream {
 public:
  // seed: the user's seed; stream: which independent stream of that seed
  // (e.g. a hash of "shuffle" and the epoch).
  explicit PhiloxStream(uint64_t seed, uint64_t stream = 0);

  uint32_t NextU32();
  uint64_t NextU64();
  // Uniform in [0, 1) with 24 (float) / 53 (double) random bits.
  float NextFloat();
  double NextDouble();
  // Uniform in [0, bound) without modulo bias (Lemire's method). bound > 0.
  uint64_t NextBelow(uint64_t bound);
  // Standard normal (Box-Muller).
  double NextNormal();

  // Positions the stream at its `index`-th 32-bit word.
  void Seek(uint64_t index);
  uint64_t position() const { return position_; }

 private:
  PhiloxKey key_;
  uint64_t stream_;
  uint64_t position_ = 0;  // index of the next 32-bit word
  PhiloxCounter block_{};
  uint64_t block_index_ = ~uint64_t{0};
};

}  // namespace topspin
