// bench order: how well each shuffle mode mixes, and what a lookup costs,
// against std::shuffle (mt19937_64) of the same n in the same run.
#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "cli/benches.h"
#include "topspin/pipeline/shuffle_quality.h"

namespace topspin::cli {
namespace {

volatile uint64_t g_order_sink;

}  // namespace

BenchTable RunOrderBench(const OrderBenchOptions& o) {
  const uint64_t n = o.samples;
  std::vector<uint64_t> a(n), b(n);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 0);
  std::mt19937_64 rng(o.seed);
  const double shuffle_s = BestSeconds(1, [&] { std::shuffle(a.begin(), a.end(), rng); });
  std::shuffle(b.begin(), b.end(), rng);
  const ShuffleQuality ideal = MeasureShuffleQuality(
      n, [&](uint64_t p) { return a[p]; }, [&](uint64_t p) { return b[p]; }, o.block_size,
      o.batch_size);
  BenchTable t{"order",
               fmt::format("{} samples, blocks of {} (a row group), windows of {} blocks, "
                           "batches of {}; peer: std::shuffle with mt19937_64",
                           n, o.block_size, o.window_blocks, o.batch_size),
               {}};
  for (ShuffleMode mode : {ShuffleMode::kNone, ShuffleMode::kBlock, ShuffleMode::kGlobal}) {
    const SampleOrder order(n, {.mode = mode,
                                .seed = o.seed,
                                .block_size = o.block_size,
                                .window_blocks = o.window_blocks});
    const ShuffleQuality q = MeasureShuffleQuality(order, 0, o.block_size, o.batch_size);
    const double lookup_s = BestSeconds(1, [&] {
      uint64_t sum = 0;
      for (uint64_t p = 0; p < n; ++p) sum += order.At(0, p);
      g_order_sink = sum;
    });
    const std::string m = ShuffleModeName(mode);
    const auto row = [&](const std::string& what, double ours, double peer, const char* unit) {
      // The quality figures should match std::shuffle's; lookups are throughput.
      t.rows.push_back({m + ": " + what, ours, "std::shuffle", peer, unit,
                        *unit == '\0' ? Better::kSame : Better::kHigher});
    };
    row("mean displacement / n", q.mean_displacement, ideal.mean_displacement, "");
    row("rank correlation (position, sample)", q.rank_correlation, ideal.rank_correlation, "");
    row("neighbours kept", q.adjacent_kept, ideal.adjacent_kept, "");
    row("epoch-to-epoch rank correlation", q.epoch_correlation, ideal.epoch_correlation, "");
    row("row groups per batch", q.blocks_per_batch, ideal.blocks_per_batch, "");
    row("positions per second", double(n) / lookup_s / 1e6, double(n) / shuffle_s / 1e6, "M/s");
  }
  return t;
}

}  // namespace topspin::cli
