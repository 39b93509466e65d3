// The planner's argument check: Error{kConfig} naming the field, its value
// and the rule it breaks, unless `ok`.
#pragma once

namespace topspin {

void Require(bool ok, const char* field, double value, const char* rule);

}  // namespace topspin
