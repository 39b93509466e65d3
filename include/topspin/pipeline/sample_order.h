// Deterministic sample order: which sample comes at which position of an
// epoch, as a pure function of (seed, epoch, position).
//
// Nothing here holds per-sample state: every lookup is O(1) memory and O(1)
// expected time, so the order is the same for any thread count, any world
// size and after any resume, and loader state is a few integers (epoch and
// position). A global batch b of an epoch is positions [b * G, (b + 1) * G)
// for global batch size G, whatever the world size; rank r of W takes the
// slice RankSlice(G, r, W) of it.
//
// All classes here are immutable after construction and thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "topspin/core/error.h"
#include "topspin/core/rng.h"

namespace topspin {

// A keyed pseudo-random bijection of [0, n), for any n >= 1.
//
// Construction: let b be the smallest even number >= 2 with 2^b >= n, and
// h = b / 2. A b-bit value x is split into halves L = x >> h and
// R = x & (2^h - 1), and a balanced Feistel network applies kRounds rounds
//   (L, R) -> (R, L ^ F(round, R))
// then joins (L << h) | R. Each round is invertible whatever F is, so the
// network permutes [0, 2^b). The round function is
//   F(round, R) = Philox4x32({R, round, k2, k3}, {k0, k1})[0] & (2^h - 1)
// where (k0, k1, k2, k3) = Philox4x32({epoch, stream}, seed) is derived once
// per permutation (64-bit values split into two little-endian 32-bit words).
// Cycle walking keeps the result inside [0, n): the network is applied
// again to its own output until the value is < n. Because 2^b < 4n for
// n > 1, a lookup takes fewer than 4 walks on average.
//
// Different (seed, epoch, stream) give independent permutations; `stream`
// lets one (seed, epoch) own several (e.g. one per shuffle window).
class KeyedPermutation {
 public:
  static constexpr int kRounds = 8;

  // n >= 1; throws Error kInternal for n == 0.
  KeyedPermutation(uint64_t n, uint64_t seed, uint64_t epoch, uint64_t stream = 0);

  uint64_t size() const { return n_; }

  // The image of i; i < n (Error kInternal otherwise).
  uint64_t operator()(uint64_t i) const;
  // out[k] = (*this)(in[k]) for every k (each in[k] < n): the same
  // values, the network's rounds run over many inputs at once.
  void Apply(std::span<const uint64_t> in, uint64_t* out) const;
  // The j with (*this)(j) == i; i < n (Error kInternal otherwise).
  uint64_t Inverse(uint64_t i) const;

 private:
  uint64_t Forward(uint64_t x) const;   // one pass of the network on [0, 2^b)
  uint64_t Backward(uint64_t x) const;  // its inverse
  uint32_t Round(uint32_t round, uint32_t half) const;
  void CheckIndex(uint64_t i) const;

  uint64_t n_;
  int half_bits_;       // h
  uint32_t half_mask_;  // 2^h - 1
  PhiloxCounter key_;   // (k0, k1, k2, k3) above
};

// How an epoch orders its samples (config field "pipeline.shuffle").
enum class ShuffleMode {
  kNone,    // position p is sample p, every epoch
  kBlock,   // blocks of consecutive samples shuffled, then samples within windows
  kGlobal,  // one KeyedPermutation of all n samples per epoch
};

// "none", "block", "global".
const char* ShuffleModeName(ShuffleMode mode);
// Inverse of ShuffleModeName. Throws Error kConfig for any other name, at
// `where` with its field set to "pipeline.shuffle" when it has none.
ShuffleMode ParseShuffleMode(std::string_view name, ErrorWhere where = {});

struct SampleOrderOptions {
  ShuffleMode mode = ShuffleMode::kBlock;
  uint64_t seed = 0;
  // Block mode only: samples per block (e.g. rows of a shard row group) and
  // blocks per shuffle window. Both >= 1; values above the number of
  // samples (blocks) act as that number.
  uint64_t block_size = 1024;
  uint64_t window_blocks = 16;
};

// The order of n samples in every epoch.
//
// Block mode, for block size B and window size W (in blocks):
//  1. Samples are cut into nb = ceil(n / B) blocks of B consecutive samples;
//     the last block is short when B does not divide n.
//  2. A KeyedPermutation P of [0, nb) (stream 1) orders the blocks: slot s
//     of the epoch holds block P(s). The short block can land in any slot.
//  3. Slots are grouped into windows of W consecutive slots (the last
//     window has nb mod W slots when W does not divide nb). Window w holds
//     the samples of its blocks, m_w of them (m_w < W * B only for the last
//     window and the window holding the short block).
//  4. Within window w, a KeyedPermutation of [0, m_w) (stream 2 + w)
//     shuffles the samples of its blocks.
// Hence every block's samples occupy positions inside one window's span of
// at most W * B consecutive positions, and a reader needs at most W blocks
// resident at a time. Locating the window of a position is O(1): only the
// window holding the short block (found with P.Inverse) shifts the start of
// the windows after it.
class SampleOrder {
 public:
  // 1 <= n <= 2^63 (Error kData otherwise); block_size and window_blocks
  // >= 1 (Error kConfig otherwise).
  SampleOrder(uint64_t n, const SampleOrderOptions& options);

  uint64_t size() const { return n_; }
  ShuffleMode mode() const { return mode_; }

  // The sample index at `position` (< n, Error kInternal otherwise) of
  // `epoch`. Every epoch is a permutation of [0, n).
  uint64_t At(uint64_t epoch, uint64_t position) const;
  // out[k] = At(epoch, positions[k]) for every k (each < n).
  void AtMany(uint64_t epoch, std::span<const uint64_t> positions, uint64_t* out) const;

 private:
  uint64_t BlockAt(uint64_t epoch, uint64_t position) const;

  uint64_t n_;
  ShuffleMode mode_;
  uint64_t seed_;
  uint64_t block_size_;     // B, clamped to n
  uint64_t num_blocks_;     // nb
  uint64_t window_blocks_;  // W, clamped to nb
};

// Positions [begin, end) within one global batch.
struct BatchSlice {
  uint64_t begin = 0;
  uint64_t end = 0;

  uint64_t size() const { return end - begin; }
  bool operator==(const BatchSlice&) const = default;
};

// The positions within a global batch of `global_batch_size` samples that
// rank `rank` of `world_size` takes: [rank * G / W, (rank + 1) * G / W).
// The slices of all ranks are disjoint, equal in size and cover the batch.
// For the last, partial batch of an epoch (drop_last false) callers skip
// positions past the end of the epoch, so late ranks may get fewer samples.
// Throws Error kConfig when G == 0 or G is not a multiple of W (the hint
// names pipeline.batch_size and W), Error kDist unless 0 <= rank < W.
BatchSlice RankSlice(uint64_t global_batch_size, int rank, int world_size);

// Global batches in an epoch of n samples: floor(n / G) with drop_last,
// ceil(n / G) without. Throws Error kConfig when G == 0.
uint64_t BatchesPerEpoch(uint64_t n, uint64_t global_batch, bool drop_last);

}  // namespace topspin
