// The "core" benchmark workload: how fast the primitives that every shard
// read and every config hash go through are, against memcpy (the memory
// bandwidth limit) and std::mt19937_64 (the RNG people use by default).
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "topspin/core/hash.h"
#include "topspin/core/rng.h"
#include "topspin/core/sha256.h"
#include "topspin/perf/bench_table.h"

namespace topspin {
namespace {

volatile uint64_t g_sink;  // keeps results alive so the compiler cannot drop the work

double GBps(size_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

}  // namespace

BenchTable RunCoreBench(size_t bytes, int repeats) {
  std::vector<uint8_t> src(bytes), dst(bytes);
  PhiloxStream fill(1);
  for (auto& b : src) b = static_cast<uint8_t>(fill.NextU32());

  const double memcpy_s = BestSeconds(repeats, [&] {
    std::memcpy(dst.data(), src.data(), bytes);
    g_sink = dst[bytes / 2];
  });
  const double memcpy_gbps = GBps(bytes, memcpy_s);
  BenchTable t{"core", fmt::format("{} MiB buffer, best of {} runs, 1 thread", bytes >> 20, repeats),
               {}};
  const auto add_hash = [&](const char* name, auto&& fn) {
    const double s = BestSeconds(repeats, [&] { g_sink = fn(); });
    t.rows.push_back({name, GBps(bytes, s), "memcpy", memcpy_gbps, "GB/s"});
  };
  add_hash(Crc32cHasHardware() ? "crc32c (sse4.2)" : "crc32c (no sse4.2)",
           [&] { return Crc32c(src.data(), bytes); });
  add_hash("crc32c (portable)", [&] { return Crc32cPortable(src.data(), bytes); });
  add_hash("xxh3-64", [&] { return Xxh3(src.data(), bytes); });
  const auto sha256 = [&](bool portable) {
    Sha256 sha(portable);
    sha.Update(src.data(), bytes);
    return static_cast<uint8_t>(sha.HexDigest()[0]);
  };
  add_hash(Sha256::HasHardware() ? "sha256 (sha extensions)" : "sha256 (no sha extensions)",
           [&] { return sha256(false); });
  add_hash("sha256 (portable)", [&] { return sha256(true); });

  const size_t draws = bytes / 8;
  const double philox_s = BestSeconds(repeats, [&] {
    PhiloxStream rng(7);
    uint64_t acc = 0;
    for (size_t i = 0; i < draws; ++i) acc += rng.NextU64();
    g_sink = acc;
  });
  const double mt_s = BestSeconds(repeats, [&] {
    std::mt19937_64 rng(7);
    uint64_t acc = 0;
    for (size_t i = 0; i < draws; ++i) acc += rng();
    g_sink = acc;
  });
  t.rows.push_back({"philox4x32-10 u64", static_cast<double>(draws) / philox_s / 1e6,
                    "std::mt19937_64", static_cast<double>(draws) / mt_s / 1e6, "M/s"});
  return t;
}

}  // namespace topspin
