// Fault injection, for tests that need a slow or failing component on
// purpose (a stalled collective, a slow loader) instead of hoping a loaded
// machine produces one.
//
// TOPSPIN_FAULTS names points in the code and what happens each time
// execution passes them; child processes (ranks) inherit it:
//
//   TOPSPIN_FAULTS="comm.wait=delay:20ms,loader.batch=delay:30ms"
//
// Points: comm.wait (every wait on a collective, inside the time counted as
// blocked), loader.batch (every batch a loader worker assembles, inside the
// assemble stage's busy time).
// Actions: delay:<N>ms sleeps N milliseconds.
//
// Unset, as in every real run, InjectFault costs one getenv (it is called per
// batch and per collective, not per element). Read at every call, so a test
// may set it before the run it slows. A malformed TOPSPIN_FAULTS is a config
// error naming the entry.
#pragma once

#include <string_view>

namespace topspin {

// Applies the faults TOPSPIN_FAULTS sets for `point`. Thread-safe.
void InjectFault(std::string_view point);

}  // namespace topspin
