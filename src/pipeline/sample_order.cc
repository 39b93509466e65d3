#include "topspin/pipeline/sample_order.h"

#include <algorithm>
#include <bit>
#include <limits>

#include <fmt/format.h>

namespace topspin {
namespace {

constexpr uint64_t kGlobalStream = 0;
constexpr uint64_t kBlockStream = 1;
constexpr uint64_t kFirstWindowStream = 2;
constexpr uint64_t kMaxSamples = uint64_t{1} << 63;
constexpr uint64_t kNoSlot = std::numeric_limits<uint64_t>::max();

uint32_t Lo(uint64_t v) {
  return static_cast<uint32_t>(v);
}
uint32_t Hi(uint64_t v) {
  return static_cast<uint32_t>(v >> 32);
}

// Smallest even bit count >= 2 whose range covers [0, n).
int EvenBitsCovering(uint64_t n) {
  const int bits = static_cast<int>(std::bit_width(n - 1));
  return std::max(2, bits + (bits & 1));
}

// Where offset `o` of a window falls: local slot and offset in its block.
// All blocks of the window have `block_size` samples except the one in
// local slot `short_slot` (kNoSlot: none), which has `short_size`.
struct SlotOffset {
  uint64_t slot;
  uint64_t offset;
};
SlotOffset LocateInWindow(uint64_t o, uint64_t block_size, uint64_t short_slot,
                          uint64_t short_size) {
  if (short_slot == kNoSlot || o < short_slot * block_size) {
    return {o / block_size, o % block_size};
  }
  o -= short_slot * block_size;
  if (o < short_size) return {short_slot, o};
  o -= short_size;
  return {short_slot + 1 + o / block_size, o % block_size};
}

}  // namespace

// ---- KeyedPermutation ------------------------------------------------------

KeyedPermutation::KeyedPermutation(uint64_t n, uint64_t seed, uint64_t epoch, uint64_t stream)
    : n_(n) {
  if (n == 0) throw InternalError("KeyedPermutation over an empty range");
  half_bits_ = EvenBitsCovering(n) / 2;
  half_mask_ = static_cast<uint32_t>((uint64_t{1} << half_bits_) - 1);
  key_ = Philox4x32({Lo(epoch), Hi(epoch), Lo(stream), Hi(stream)}, {Lo(seed), Hi(seed)});
}

uint32_t KeyedPermutation::Round(uint32_t round, uint32_t half) const {
  return Philox4x32({half, round, key_[2], key_[3]}, {key_[0], key_[1]})[0] & half_mask_;
}

uint64_t KeyedPermutation::Forward(uint64_t x) const {
  uint32_t left = static_cast<uint32_t>(x >> half_bits_);
  uint32_t right = static_cast<uint32_t>(x) & half_mask_;
  for (uint32_t r = 0; r < kRounds; ++r) {
    const uint32_t next = left ^ Round(r, right);
    left = right;
    right = next;
  }
  return (uint64_t{left} << half_bits_) | right;
}

uint64_t KeyedPermutation::Backward(uint64_t x) const {
  uint32_t left = static_cast<uint32_t>(x >> half_bits_);
  uint32_t right = static_cast<uint32_t>(x) & half_mask_;
  for (uint32_t r = kRounds; r-- > 0;) {
    const uint32_t previous = right ^ Round(r, left);
    right = left;
    left = previous;
  }
  return (uint64_t{left} << half_bits_) | right;
}

void KeyedPermutation::CheckIndex(uint64_t i) const {
  if (i >= n_) throw InternalError(fmt::format("permutation index {} out of [0, {})", i, n_));
}

uint64_t KeyedPermutation::operator()(uint64_t i) const {
  CheckIndex(i);
  do {
    i = Forward(i);  // cycle walking: the cycle through i re-enters [0, n)
  } while (i >= n_);
  return i;
}

void KeyedPermutation::Apply(std::span<const uint64_t> in, uint64_t* out) const {
  const size_t count = in.size();
  for (uint64_t x : in) CheckIndex(x);
  // Up to 64 lanes of halves: every round runs Philox over all lanes at
  // once. After each pass of the network a lane whose value is in [0, n)
  // is done and takes the next input; the others walk on.
  constexpr size_t kLanes = 64;
  uint32_t left[kLanes], right[kLanes], f[kLanes];
  size_t slot[kLanes];
  size_t m = 0, next = 0;
  const auto refill = [&] {
    for (; m < kLanes && next < count; ++m, ++next) {
      const uint64_t x = in[next];
      left[m] = static_cast<uint32_t>(x >> half_bits_);
      right[m] = static_cast<uint32_t>(x) & half_mask_;
      slot[m] = next;
    }
  };
  refill();
  while (m > 0) {
    for (uint32_t r = 0; r < kRounds; ++r) {
      Philox4x32Word0(right, r, key_[2], key_[3], {key_[0], key_[1]}, m, f);
      for (size_t k = 0; k < m; ++k) {
        const uint32_t next_half = left[k] ^ (f[k] & half_mask_);
        left[k] = right[k];
        right[k] = next_half;
      }
    }
    size_t walking = 0;
    for (size_t k = 0; k < m; ++k) {
      const uint64_t v = (uint64_t{left[k]} << half_bits_) | right[k];
      if (v < n_) {
        out[slot[k]] = v;
      } else {
        left[walking] = left[k];
        right[walking] = right[k];
        slot[walking++] = slot[k];
      }
    }
    m = walking;
    refill();
  }
}

uint64_t KeyedPermutation::Inverse(uint64_t i) const {
  CheckIndex(i);
  do {
    i = Backward(i);
  } while (i >= n_);
  return i;
}

// ---- ShuffleMode -----------------------------------------------------------

const char* ShuffleModeName(ShuffleMode mode) {
  switch (mode) {
    case ShuffleMode::kNone: return "none";
    case ShuffleMode::kBlock: return "block";
    case ShuffleMode::kGlobal: return "global";
  }
  return "invalid";
}

ShuffleMode ParseShuffleMode(std::string_view name, ErrorWhere where) {
  for (ShuffleMode mode : {ShuffleMode::kNone, ShuffleMode::kBlock, ShuffleMode::kGlobal}) {
    if (name == ShuffleModeName(mode)) return mode;
  }
  if (where.field.empty()) where.field = "pipeline.shuffle";
  throw ConfigError(fmt::format("unknown shuffle mode \"{}\"", name), std::move(where),
                    "use one of: none, block, global");
}

// ---- SampleOrder -----------------------------------------------------------

SampleOrder::SampleOrder(uint64_t n, const SampleOrderOptions& options)
    : n_(n), mode_(options.mode), seed_(options.seed) {
  if (n == 0 || n > kMaxSamples) {
    throw DataError(fmt::format("cannot order {} samples", n), {},
                    n == 0 ? "the dataset is empty: check data.train" : "split the dataset");
  }
  if (options.block_size == 0 || options.window_blocks == 0) {
    throw ConfigError(fmt::format("shuffle block size {} and window {} must both be >= 1",
                                  options.block_size, options.window_blocks),
                      ErrorWhere{.field = "pipeline.shuffle"});
  }
  block_size_ = std::min(options.block_size, n);
  num_blocks_ = (n - 1) / block_size_ + 1;
  window_blocks_ = std::min(options.window_blocks, num_blocks_);
}

uint64_t SampleOrder::At(uint64_t epoch, uint64_t position) const {
  if (position >= n_) {
    throw InternalError(fmt::format("sample position {} out of [0, {})", position, n_));
  }
  switch (mode_) {
    case ShuffleMode::kNone: return position;
    case ShuffleMode::kGlobal: return KeyedPermutation(n_, seed_, epoch, kGlobalStream)(position);
    case ShuffleMode::kBlock: return BlockAt(epoch, position);
  }
  throw InternalError("unhandled shuffle mode");
}

void SampleOrder::AtMany(uint64_t epoch, std::span<const uint64_t> positions,
                         uint64_t* out) const {
  for (uint64_t p : positions) {
    if (p >= n_) throw InternalError(fmt::format("sample position {} out of [0, {})", p, n_));
  }
  switch (mode_) {
    case ShuffleMode::kNone:
      std::copy(positions.begin(), positions.end(), out);
      return;
    case ShuffleMode::kGlobal:
      if (!positions.empty()) KeyedPermutation(n_, seed_, epoch, kGlobalStream).Apply(positions, out);
      return;
    case ShuffleMode::kBlock:
      for (size_t k = 0; k < positions.size(); ++k) out[k] = BlockAt(epoch, positions[k]);
      return;
  }
  throw InternalError("unhandled shuffle mode");
}

// See the header for the construction. Shorthands: B block size, W blocks
// per window, span = W * B positions of a full window, d = B - (size of the
// short block), w_short = the window holding the short block.
uint64_t SampleOrder::BlockAt(uint64_t epoch, uint64_t position) const {
  const uint64_t b = block_size_, w_blocks = window_blocks_, span = w_blocks * b;
  const uint64_t short_size = n_ - (num_blocks_ - 1) * b, deficit = b - short_size;
  const uint64_t num_windows = (num_blocks_ - 1) / w_blocks + 1;
  const KeyedPermutation blocks(num_blocks_, seed_, epoch, kBlockStream);
  const uint64_t short_slot = blocks.Inverse(num_blocks_ - 1);
  const uint64_t w_short = short_slot / w_blocks;

  // Windows after w_short start `deficit` positions early.
  auto start = [&](uint64_t w) { return w * span - (w > w_short ? deficit : 0); };
  uint64_t w = position / span;
  if (w + 1 < num_windows && position >= start(w + 1)) ++w;

  const uint64_t first_slot = w * w_blocks;
  const uint64_t slots = std::min(w_blocks, num_blocks_ - first_slot);
  const uint64_t window_size = slots * b - (w == w_short ? deficit : 0);
  const KeyedPermutation within(window_size, seed_, epoch, kFirstWindowStream + w);
  const uint64_t local_short = w == w_short ? short_slot - first_slot : kNoSlot;
  const SlotOffset at = LocateInWindow(within(position - start(w)), b, local_short, short_size);
  return blocks(first_slot + at.slot) * b + at.offset;
}

// ---- Rank partitioning -----------------------------------------------------

BatchSlice RankSlice(uint64_t global_batch_size, int rank, int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw Error(ErrorKind::kDist,
                fmt::format("rank {} is not in a world of size {}", rank, world_size), {},
                "check the RANK and WORLD_SIZE the launcher set");
  }
  const auto w = static_cast<uint64_t>(world_size);
  if (global_batch_size == 0 || global_batch_size % w != 0) {
    const uint64_t lower = global_batch_size / w * w;
    throw ConfigError(
        fmt::format("global batch size {} is not divisible by the world size {}", global_batch_size,
                    world_size),
        ErrorWhere{.field = "pipeline.batch_size"},
        fmt::format("set pipeline.batch_size to a multiple of {} (world size), e.g. {}", w,
                    lower > 0 ? fmt::format("{} or {}", lower, lower + w) : fmt::format("{}", w)));
  }
  const uint64_t per_rank = global_batch_size / w;
  const auto r = static_cast<uint64_t>(rank);
  return {r * per_rank, (r + 1) * per_rank};
}

uint64_t BatchesPerEpoch(uint64_t n, uint64_t global_batch, bool drop_last) {
  if (global_batch == 0) {
    throw ConfigError("global batch size must be >= 1", ErrorWhere{.field = "pipeline.batch_size"});
  }
  return drop_last ? n / global_batch : n / global_batch + (n % global_batch != 0 ? 1 : 0);
}

}  // namespace topspin
