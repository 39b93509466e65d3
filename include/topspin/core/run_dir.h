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

// An exclusive lock on a run directory, so that two trainings never write
// one run: flock(2) on <dir>/.lock, which holds the holder's pid. The
// kernel drops it when the holder exits, however it exits: a lock is never
// stale. Held for the object's lifetime; inherited descriptors are closed on
// exec. A second locker gets Error{kIo} naming the directory and the
// holder's pid. Flock is advisory and per host: every host of a multi-host
// job writes the same shared directory, and only node 0 takes the lock.
class RunDirLock {
 public:
  explicit RunDirLock(const std::filesystem::path& dir);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace topspin
