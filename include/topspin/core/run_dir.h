// Run directories: where one run's outputs live.
//
//   <parent>/<name>-001/   config.yaml (resolved), config.hash, and later
//                          metrics, checkpoints, traces, profiles.
//
// The number is the next free one; creating it is race-free between
// processes (mkdir either creates or fails). Files inside are written with
// WriteFileAtomic, so a crash never leaves a half-written config.
#pragma once

#include <filesystem>
#include <string>

#include "topspin/core/config.h"

namespace topspin {

// Creates <parent>/<name>-NNN with the smallest free NNN >= 1 (parent is
// created when missing) and writes config.yaml and config.hash into it.
// Throws Error{kIo} naming the path on failure.
std::filesystem::path CreateRunDirectory(const std::filesystem::path& parent,
                                         const std::string& name, const Config& config);

}  // namespace topspin
