#include "topspin/core/fault.h"

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "topspin/core/error.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

using Faults = std::map<std::string, std::chrono::milliseconds, std::less<>>;

Faults Parse(std::string_view spec) {
  Faults faults;
  for (const std::string& entry : Split(spec, ',')) {
    if (entry.empty()) continue;
    const auto eq = entry.find('=');
    const std::string action = eq == std::string::npos ? "" : entry.substr(eq + 1);
    int64_t ms = -1;
    if (action.starts_with("delay:") && action.ends_with("ms")) {
      const std::string_view n(action.data() + 6, action.size() - 8);
      const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), ms);
      if (ec != std::errc() || end != n.data() + n.size()) ms = -1;
    }
    if (ms < 0) {
      throw ConfigError(fmt::format("fault \"{}\" is not point=delay:<N>ms", entry),
                        {.field = "TOPSPIN_FAULTS"},
                        "e.g. TOPSPIN_FAULTS=comm.wait=delay:20ms (include/topspin/core/fault.h)");
    }
    faults[entry.substr(0, eq)] = std::chrono::milliseconds(ms);
  }
  return faults;
}

}  // namespace

void InjectFault(std::string_view point) {
  const char* spec = std::getenv("TOPSPIN_FAULTS");
  if (spec == nullptr || *spec == 0) return;
  const Faults faults = Parse(spec);
  if (const auto it = faults.find(point); it != faults.end()) std::this_thread::sleep_for(it->second);
}

}  // namespace topspin
