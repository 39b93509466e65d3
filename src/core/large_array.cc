#include "topspin/core/large_array.h"

#include <cstdint>
#include <cstdlib>
#include <new>

#include <sys/mman.h>

namespace topspin::large_array_internal {

namespace {

constexpr size_t kMapped = size_t{2} << 20;  // from here on, arrays are mapped and populated
constexpr size_t kPage = 4096;

// Linux 5.14 and later; older kernels refuse it and pages fault on first touch.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

size_t MappedBytes(size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

}  // namespace

void* Allocate(size_t bytes) {
  if (bytes < kMapped) {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  const size_t mapped = MappedBytes(bytes);
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  PopulateForWrite(p, mapped);
  return p;
}

void Free(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes < kMapped) {
    std::free(p);
  } else {
    (void)munmap(p, MappedBytes(bytes));
  }
}

}  // namespace topspin::large_array_internal

namespace topspin {

void PopulateForWrite(void* p, size_t bytes) {
  constexpr size_t kWorthIt = size_t{64} << 10;
  if (bytes < kWorthIt) return;
  constexpr uintptr_t kPage = large_array_internal::kPage;
  const uintptr_t first = (reinterpret_cast<uintptr_t>(p) + kPage - 1) / kPage * kPage;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(p) + bytes) / kPage * kPage;
  if (last > first) {
    (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
  }
}

}  // namespace topspin
