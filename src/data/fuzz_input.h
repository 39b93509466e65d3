// For libFuzzer targets of readers that open paths: the input bytes in an
// anonymous in-memory file (memfd), opened through /proc/self/fd, so the
// disk stays out of the loop. Header-only; never linked into the library.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <sys/mman.h>

namespace topspin::fuzzing {

// One memfd per process, rewritten for every input; returns its path.
inline const std::string& InputPath(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("topspin_fuzz", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) ::abort();  // the harness itself is broken
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) ::abort();
    done += static_cast<size_t>(n);
  }
  return path;
}

}  // namespace topspin::fuzzing
