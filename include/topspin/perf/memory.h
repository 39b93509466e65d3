// Process memory: resident set size (RSS) now and at its peak.
//
// Linux reports both in /proc/self/status (VmRSS, VmHWM); elsewhere, or when
// /proc is unreadable, CurrentRssBytes() returns 0 and PeakRssBytes() falls
// back to getrusage(RUSAGE_SELF).ru_maxrss, which ResetPeakRss() cannot
// lower. All functions are thread-safe and never throw.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace topspin {

// Resident set size of this process in bytes (VmRSS); 0 when unavailable.
uint64_t CurrentRssBytes();

// Highest RSS in bytes since the process started or since the last
// successful ResetPeakRss() (VmHWM). Always >= CurrentRssBytes() on Linux.
uint64_t PeakRssBytes();

// Lowers the peak to the current RSS by writing "5" to /proc/self/clear_refs
// (Linux >= 4.0), so a phase's peak can be measured on its own. Returns
// false when the file cannot be written (not Linux, no permission, a
// sandbox that lacks it); the peak then keeps counting from before.
bool ResetPeakRss();

// Bytes this process can still allocate without swapping or being killed:
// MemAvailable of /proc/meminfo, lowered to what the cgroup v2 limit
// (memory.max less memory.current) leaves. 0 when unknown.
uint64_t AvailableMemoryBytes();

// The value of `key` ("VmRSS") in /proc/<pid>/status text, in bytes: the
// line "VmRSS:   1234 kB" gives 1234 * 1024. nullopt when the key is
// missing or its line is malformed. Exposed for tests.
std::optional<uint64_t> ParseProcStatusBytes(std::string_view status, std::string_view key);

}  // namespace topspin
