#include "plan/require.h"

#include <fmt/format.h>

#include "topspin/core/error.h"

namespace topspin {

void Require(bool ok, const char* field, double value, const char* rule) {
  if (ok) return;
  throw ConfigError(fmt::format("{} is {}, but must be {}", field, value, rule),
                    ErrorWhere{.field = field}, fmt::format("give {} {}", field, rule));
}

}  // namespace topspin
