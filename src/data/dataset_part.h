// Convert parts (`topspin convert --part K/N`) and their merge (`topspin
// dataset merge`), internal to the data module.
//
// A part is an ordinary dataset directory (manifest.json and shards) that
// also holds
//   part.json        which share of which input list it is (InputShare),
//                    rows per input, and the SHA-256 of the two files below;
//   part-stats.bin   the per-column ColumnStatsBuilder states (Serialize),
//                    so that statistics merge exactly rather than from
//                    the finished numbers;
//   part-groups.bin  the part's group keys with the input each came from,
//                    so that merge can refuse a group split across parts.
// MergeParts (topspin/data/merge.h) reads them; nothing else does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "topspin/data/column_stats.h"
#include "topspin/data/importer.h"
#include "topspin/data/manifest.h"

namespace topspin {

inline constexpr const char* kPartFile = "part.json";
inline constexpr const char* kPartStatsFile = "part-stats.bin";
inline constexpr const char* kPartGroupsFile = "part-groups.bin";

// A group value: null, an int64 or a string.
using GroupKey = std::variant<std::monostate, int64_t, std::string>;

struct PartGroup {
  GroupKey key;
  uint32_t input = 0;  // index into the part's inputs
};

// Writes the three part files into `dir` (the dataset directory being
// committed). `rows_per_input[i]` counts the rows imported from
// share.inputs[i].
void WritePartFiles(const std::filesystem::path& dir, const InputShare& share,
                    const std::vector<uint64_t>& rows_per_input,
                    const std::vector<ColumnStatsBuilder>& stats,
                    const std::vector<PartGroup>& groups);

}  // namespace topspin
