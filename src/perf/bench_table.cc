#include "topspin/perf/bench_table.h"

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

}  // namespace topspin
