#include "topspin/core/log.h"

#include <mutex>

#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "topspin/core/error.h"
#include "topspin/core/progress.h"

namespace topspin {
namespace {

constexpr const char* kPattern = "%Y-%m-%d %H:%M:%S.%e [%^%l%$] %v";

spdlog::level::level_enum ParseLevel(std::string_view level) {
  for (int i = spdlog::level::trace; i <= spdlog::level::off; ++i) {
    const auto lvl = static_cast<spdlog::level::level_enum>(i);
    if (spdlog::level::to_string_view(lvl) == level) return lvl;
  }
  throw ConfigError(fmt::format("unknown log level \"{}\"", level),
                    ErrorWhere{.field = "log-level"},
                    "use one of trace, debug, info, warn, error, off");
}

// The console sink: each line is written with any progress bar erased and
// drawn again after it (core/progress.h), so the two never share a line.
class ConsoleSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  ConsoleSink() : inner_(std::make_shared<spdlog::sinks::stderr_color_sink_mt>()) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    WithProgressLineCleared([&] {
      inner_->log(msg);
      inner_->flush();
    });
  }
  void flush_() override { inner_->flush(); }
  void set_pattern_(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter_(std::unique_ptr<spdlog::formatter> f) override {
    inner_->set_formatter(std::move(f));
  }

 private:
  std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> inner_;
};

}  // namespace

void InitLogging(std::string_view level) {
  const auto lvl = ParseLevel(level);
  if (spdlog::get("topspin") == nullptr) {
    auto logger = std::make_shared<spdlog::logger>("topspin", std::make_shared<ConsoleSink>());
    spdlog::register_logger(logger);
    spdlog::set_default_logger(logger);
  }
  spdlog::set_pattern(kPattern);
  spdlog::set_level(lvl);
}

void SetLogLevel(std::string_view level) {
  spdlog::set_level(ParseLevel(level));
}

void SetLogRank(int rank) {
  spdlog::set_pattern(rank < 0 ? std::string(kPattern)
                               : fmt::format("%Y-%m-%d %H:%M:%S.%e [%^%l%$] [rank {}] %v", rank));
}

}  // namespace topspin
