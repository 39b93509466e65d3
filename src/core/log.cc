#include "topspin/core/log.h"

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "topspin/core/error.h"

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

}  // namespace

void InitLogging(std::string_view level) {
  const auto lvl = ParseLevel(level);
  if (spdlog::get("topspin") == nullptr) {
    auto logger = spdlog::stderr_color_mt("topspin");
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
