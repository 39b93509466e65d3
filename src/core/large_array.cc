#include "topspin/core/large_array.h"

#include <cstdlib>
#include <new>

#include <sys/mman.h>

namespace topspin::large_array_internal {

constexpr size_t kHugePage = size_t{2} << 20;

void* Allocate(size_t bytes) {
  const bool huge = bytes >= kHugePage;
  const size_t align = huge ? kHugePage : 64;
  const size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw std::bad_alloc();
  if (huge) (void)madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure is harmless
  return p;
}

void Free(void* p) {
  std::free(p);
}

}  // namespace topspin::large_array_internal
