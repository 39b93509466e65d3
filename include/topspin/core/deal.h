// Splitting a few unequal tasks over threads that take contiguous ranges.
#pragma once

#include <cstdint>
#include <vector>

namespace topspin {

// at::parallel_for gives each of `parts` threads one contiguous range of
// indices. DealLargestFirst returns a task order for it: the tasks sorted by
// size, largest first (ties keep their index order), dealt round-robin, so
// that thread t's range holds tasks t, t + parts, ... of the sorted list and
// no thread gets the two largest while another gets the two smallest. Exact
// when parts divides the task count; close otherwise.
std::vector<int64_t> DealLargestFirst(const std::vector<int64_t>& sizes, int parts);

}  // namespace topspin
