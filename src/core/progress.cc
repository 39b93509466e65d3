#include "topspin/core/progress.h"

#include <unistd.h>

#include <cmath>

#include <fmt/format.h>

namespace topspin {
namespace {

// The bar on screen (its last drawing, "\r\033[2K..."), empty when none.
std::mutex g_line_mu;
std::string g_line;  // guarded by g_line_mu

}  // namespace

void WithProgressLineCleared(const std::function<void()>& write) {
  std::lock_guard lock(g_line_mu);
  if (!g_line.empty()) {
    std::fputs("\r\033[2K", stderr);
    std::fflush(stderr);
  }
  write();
  if (!g_line.empty()) {
    std::fputs(g_line.c_str(), stderr);
    std::fflush(stderr);
  }
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(seconds + 0.5);
  const int64_t days = s / 86400;
  s %= 86400;
  const std::string hms = fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return days > 0 ? fmt::format("{}d {:0>8}", days, hms) : hms;
}

std::string FormatCount(double value) {
  static constexpr const char* kSuffix[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  while (std::abs(value) >= 999.5 && i < 5) {
    value /= 1000.0;
    ++i;
  }
  if (i == 0)
    return value == std::floor(value) ? fmt::format("{:.0f}", value) : fmt::format("{:.2f}", value);
  return fmt::format("{:.{}f}{}", value, std::abs(value) < 10 ? 2 : (std::abs(value) < 100 ? 1 : 0),
                     kSuffix[i]);
}

std::string FormatProgressLine(const std::string& label, uint64_t done, uint64_t total,
                               double elapsed_s, const std::string& unit, bool final,
                               int bar_width) {
  const double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0.0;
  const std::string rate_text =
      fmt::format("{}{}/s", FormatCount(rate), unit.empty() ? "" : " " + unit);
  if (total == 0) {
    return fmt::format("{}  {}  {}  {} {}", label, FormatCount(static_cast<double>(done)),
                       rate_text, final ? "took" : "elapsed", FormatDuration(elapsed_s));
  }
  const double fraction = std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
  std::string bar;
  if (bar_width > 0) {
    const int filled = static_cast<int>(fraction * bar_width);
    bar = "[" + std::string(filled, '=') + (filled < bar_width ? ">" : "") +
          std::string(std::max(0, bar_width - filled - 1), ' ') + "]  ";
  }
  const double eta = rate > 0 ? static_cast<double>(total - std::min(done, total)) / rate : -1;
  return fmt::format("{}  {}{:5.1f}%  {}/{}  {}  {}", label, bar, 100.0 * fraction, done, total,
                     rate_text,
                     final ? "took " + FormatDuration(elapsed_s) : "ETA " + FormatDuration(eta));
}

Progress::Progress(std::string label, uint64_t total, ProgressOptions options)
    : label_(std::move(label)), total_(total), options_(std::move(options)) {
  tty_ = options_.is_tty.value_or(::isatty(STDERR_FILENO) == 1);
  if (!options_.sink) {
    on_stderr_ = true;
    options_.sink = [](const std::string& line) {
      std::fputs(line.c_str(), stderr);
      std::fflush(stderr);
    };
  }
  start_s_ = Now();
  last_draw_s_ = start_s_;
}

Progress::~Progress() {
  Finish();
}

double Progress::Now() const {
  if (options_.now_s) return options_.now_s();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Progress::Update(uint64_t done) {
  std::lock_guard lock(mu_);
  if (finished_) return;
  done_ = std::max(done_, done);
  const double now = Now();
  const double interval = tty_ ? options_.tty_interval_s : options_.interval_s;
  if (now - last_draw_s_ < interval) return;
  last_draw_s_ = now;
  DrawLocked(false);
}

void Progress::Add(uint64_t items) {
  uint64_t done;
  {
    std::lock_guard lock(mu_);
    done = done_ + items;
  }
  Update(done);
}

void Progress::Finish() {
  std::lock_guard lock(mu_);
  if (finished_) return;
  finished_ = true;
  DrawLocked(true);
}

void Progress::Complete() {
  std::lock_guard lock(mu_);
  if (finished_) return;
  total_ = done_;
  finished_ = true;
  DrawLocked(true);
}

void Progress::DrawLocked(bool final) {
  const std::string line = FormatProgressLine(label_, done_, total_, Now() - start_s_,
                                              options_.unit, final, tty_ ? 24 : 0);
  if (tty_) {
    const std::string drawn = "\r\033[2K" + line + (final ? "\n" : "");
    if (!on_stderr_) return options_.sink(drawn);
    std::lock_guard lock(g_line_mu);
    options_.sink(drawn);
    g_line = final ? std::string() : drawn;
  } else {
    options_.sink(line + "\n");
  }
}

}  // namespace topspin
