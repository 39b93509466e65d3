// How long LibTorch's OpenMP threads spin before they sleep.
//
// Between two parallel regions (one GEMM and the next) libgomp's threads
// spin, by default for 300,000 iterations, before they sleep on a futex. On
// a machine where other work wants the cores (the input pipeline's threads,
// a compiler, another job), a spinning thread holds a core that the thread
// everyone waits for needs, and every region's barrier waits for the
// scheduler. Measured on this project's 2-core VM while two compile jobs ran
// (docs/BENCHMARKS.md, 2026-12-06): ranker training at 2 LibTorch threads
// fell to 22k-26k docs/s with libgomp's default, against 77k-142k with
// GOMP_SPINCOUNT=10000 and 186k-195k on one thread. On the quiet machine
// the two spin counts measured the same within its noise.
//
// libgomp reads GOMP_SPINCOUNT and OMP_WAIT_POLICY once, when it is loaded,
// which is before main() runs, and has no call to change them later. So the
// commands that train re-execute topspin once with GOMP_SPINCOUNT set, unless
// the user set either variable (theirs wins).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace topspin {

inline constexpr std::string_view kOmpSpinCountDefault = "10000";

// Marks a process that topspin re-executed with its default, so that the
// re-executed process does not do it again and can say where the value came
// from. Child processes inherit it with GOMP_SPINCOUNT.
inline constexpr std::string_view kOmpDefaultMarker = "TOPSPIN_OMP_DEFAULT";

// Whether `topspin <command>` runs LibTorch compute, and so gets the default.
bool OmpWaitMatters(std::string_view command);

// The decision, apart from the exec: true when the process should re-execute
// itself with GOMP_SPINCOUNT = kOmpSpinCountDefault. `getenv` looks up one
// variable (nullptr when unset); `command` is the subcommand word.
bool ShouldSetOmpWait(const std::function<const char*(const char*)>& getenv,
                      std::string_view command);

// Called first in main(): re-executes /proc/self/exe with the default when
// ShouldSetOmpWait says so. Returns only when it does not (or exec fails,
// where the process carries on with libgomp's default).
void ApplyOmpWaitDefault(int argc, char** argv);

// One line for `topspin version`: the wait policy in effect and where it
// came from.
std::string OmpWaitSetting();

}  // namespace topspin
