// Benchmark results: every `topspin bench <workload>` prints one table whose
// rows compare our figure with a peer or limit measured in the same run,
// and can write the same rows as JSON (--json FILE).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace topspin {

// Which way a row's figure is good: throughput (higher), latency or
// overhead (lower), or a check that ours equals the peer or formula (same).
enum class Better { kHigher, kLower, kSame };
const char* BetterName(Better better);  // "higher", "lower", "same"

struct BenchRow {
  std::string case_name;  // what was measured, e.g. "crc32c (sse4.2)"
  double ours = 0;        // our figure, in `unit`
  std::string peer_name;  // e.g. "memcpy"
  double peer = 0;        // the peer's figure, same unit, same run
  std::string unit;       // e.g. "GB/s"
  Better better = Better::kHigher;
  // ours / peer; 0 where it means nothing (a peer of 0, a negative figure,
  // or figures 10^4 apart: a share near zero against one that is not).
  double ratio() const;
};

struct BenchTable {
  std::string workload;  // e.g. "core"
  std::string setup;     // one line: sizes, threads, repeats
  std::vector<BenchRow> rows;
};

// A text table, each column as wide as its widest cell, numbers right
// aligned with precision by magnitude; the ratio column says "-" where
// ratio() is 0.
std::string FormatBenchTable(const BenchTable& table);
// {"workload":..., "setup":..., "rows":[{"case":..., "ours":..., ...}]}
std::string BenchTableJson(const BenchTable& table);

// Best (minimum) wall time in seconds of `repeats` runs of fn, after one
// warm-up run.
template <typename F>
double BestSeconds(int repeats, F&& fn);

// The same for several cases measured in rounds (every case once per
// round, after one warm-up round), so ours and its peer see the same
// machine conditions on a shared or noisy host. Returns one best time per
// case, in order.
std::vector<double> BestSecondsInterleaved(int repeats,
                                           const std::vector<std::function<void()>>& cases);

// The "core" workload: checksum, hash and RNG throughput against memcpy
// and std::mt19937_64 on a buffer of `bytes`.
BenchTable RunCoreBench(size_t bytes, int repeats);

}  // namespace topspin

#include <chrono>

template <typename F>
double topspin::BestSeconds(int repeats, F&& fn) {
  fn();
  double best = 1e300;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = s < best ? s : best;
  }
  return best;
}
