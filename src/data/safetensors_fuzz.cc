// libFuzzer entry point for SafetensorsFile: any bytes must open and read
// every tensor to the last byte, or throw topspin::Error; never crash, hang
// or read out of bounds. Seeds (small valid files from WriteSafetensors)
// live in tests/fuzz/safetensors_fuzz/.
//
// The bytes go to an anonymous in-memory file (memfd), opened through
// /proc/self/fd: SafetensorsFile::Open reads paths, and a memfd keeps the
// disk out of the loop.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include <sys/mman.h>

#include "topspin/core/error.h"
#include "topspin/data/safetensors.h"

namespace {

// One memfd per process, rewritten for every input.
const std::string& InputPath(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("safetensors_fuzz", MFD_CLOEXEC);
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

// Touches every byte of every tensor and checks the promises of the header.
void ReadEverything(const topspin::SafetensorsFile& file) {
  unsigned sum = 0;
  for (const auto& t : file.tensors()) {
    if (file.Find(t.name) != &t) ::abort();
    if (t.bytes.size() != t.num_elements() * topspin::SafetensorsDTypeSize(t.dtype)) ::abort();
    for (std::byte b : t.bytes) sum += std::to_integer<unsigned>(b);
  }
  for (const auto& [key, value] : file.metadata()) sum += key.size() + value.size();
  [[maybe_unused]] static volatile unsigned sink;
  sink = sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto file = topspin::SafetensorsFile::Open(InputPath(data, size));
    ReadEverything(file);
  } catch (const topspin::Error&) {
  }
  return 0;
}
