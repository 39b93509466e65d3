#include "topspin/perf/bench_table.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace topspin {

const char* BetterName(Better better) {
  switch (better) {
    case Better::kHigher: return "higher";
    case Better::kLower: return "lower";
    case Better::kSame: return "same";
  }
  return "?";
}

double BenchRow::ratio() const {
  if (!(peer > 0) || !(ours >= 0) || !std::isfinite(ours) || !std::isfinite(peer)) return 0;
  const double r = ours / peer;
  return r > 1e4 || r < 1e-4 ? 0 : r;
}

namespace {

// 12345678 (whole numbers as they are), 1234.5, 12.345, 0.01234.
std::string FormatFigure(double v) {
  if (!std::isfinite(v)) return fmt::format("{}", v);
  const double a = std::abs(v);
  if (v == std::floor(v) && a < 1e15) return fmt::format("{:.0f}", v);
  if (a >= 1000) return fmt::format("{:.1f}", v);
  if (a >= 1) return fmt::format("{:.3f}", v);
  return fmt::format("{:.4g}", v);
}

}  // namespace

std::string FormatBenchTable(const BenchTable& t) {
  std::vector<std::array<std::string, 7>> cells = {
      {"case", "ours", "peer", "peer", "unit", "better", "ratio"}};
  for (const auto& r : t.rows) {
    const double ratio = r.ratio();
    cells.push_back({r.case_name, FormatFigure(r.ours), r.peer_name, FormatFigure(r.peer), r.unit,
                     BetterName(r.better), ratio > 0 ? fmt::format("{:.2f}x", ratio) : "-"});
  }
  // Display width: UTF-8 lead bytes only ("µs" is three bytes, two columns).
  const auto columns = [](const std::string& text) {
    size_t w = 0;
    for (unsigned char ch : text) w += (ch & 0xC0) != 0x80;
    return w;
  };
  std::array<size_t, 7> width{};
  for (const auto& row : cells) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], columns(row[c]));
  }
  constexpr std::array<bool, 7> right = {false, true, false, true, false, false, true};
  std::string out = fmt::format("bench {}: {}\n", t.workload, t.setup);
  for (const auto& row : cells) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - columns(row[c]), ' ');
      line += (c ? "  " : "") + (right[c] ? pad + row[c] : row[c] + pad);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
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
                    {"better", BetterName(r.better)},
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
