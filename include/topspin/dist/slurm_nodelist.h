// SLURM's compact job descriptions, expanded: host lists
// ("gpu[01-03,07],cpu3") and per-node task counts ("4(x2),3").
// DetectLaunchEnv (topspin/dist/launch_env.h) reads SLURM jobs with these;
// they are public for tests and tools.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace topspin {

// The most hosts a job may have: a longer host list is rejected here, and a
// longer SM_HOSTS by DetectLaunchEnv.
inline constexpr size_t kMaxJobHosts = 65536;

// Expands a SLURM host list such as "gpu[01-03,07],cpu3" into
// {"gpu01", "gpu02", "gpu03", "gpu07", "cpu3"}. Zero padding of a range is
// kept (the width of its first number). Each host may hold at most one
// bracket group, with text before and after it ("rack[1-2]-ib"); several
// groups in one host ("a[1-2]-b[3]") are rejected. Throws topspin::Error
// (kDist) on a malformed list or one expanding to more than 65536 hosts.
std::vector<std::string> ExpandSlurmNodeList(std::string_view list);

// Expands SLURM_TASKS_PER_NODE, e.g. "4(x2),3" -> {4, 4, 3}: one entry per
// node. Throws topspin::Error (kDist) on a malformed value.
std::vector<int> ExpandSlurmTasksPerNode(std::string_view value);

}  // namespace topspin
