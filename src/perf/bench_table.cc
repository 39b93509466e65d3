#include "topspin/perf/bench_table.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace topspin {

std::string FormatBenchTable(const BenchTable& t) {
  std::string out = fmt::format("bench {}: {}\n", t.workload, t.setup);
  out += fmt::format("{:<28} {:>12} {:<20} {:>12} {:<10} {:>7}\n", "case", "ours", "peer", "peer",
                     "unit", "ratio");
  for (const auto& r : t.rows) {
    out += fmt::format("{:<28} {:>12.3f} {:<20} {:>12.3f} {:<10} {:>6.2f}x\n", r.case_name, r.ours,
                       r.peer_name, r.peer, r.unit, r.ratio());
  }
  return out;
}

std::string BenchTableJson(const BenchTable& t) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : t.rows) {
    rows.push_back({{"case", r.case_name},
                    {"ours", r.ours},
                    {"peer", r.peer_name},
                    {"peer_value", r.peer},
                    {"unit", r.unit},
                    {"ratio", r.ratio()}});
  }
  return nlohmann::json{{"workload", t.workload}, {"setup", t.setup}, {"rows", rows}}.dump(2) +
         "\n";
}


std::vector<double> BestSecondsInterleaved(int repeats,
                                           const std::vector<std::function<void()>>& cases) {
  for (const auto& fn : cases) fn();  // warm-up round
  std::vector<double> best(cases.size(), 1e300);
  for (int round = 0; round < repeats; ++round) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      cases[i]();
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      best[i] = std::min(best[i], s);
    }
  }
  return best;
}

}  // namespace topspin
