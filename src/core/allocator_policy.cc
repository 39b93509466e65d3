#include "topspin/core/allocator_policy.h"

#include <dlfcn.h>
#include <malloc.h>

namespace topspin {

void KeepHeapMemory() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(0x7fffffff));
  mallopt(M_TOP_PAD, 64 << 20);
}

bool LimitBlasThreads(int threads) {
  using SetThreads = void (*)(int);
  auto* set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set == nullptr) return false;
  set(threads);
  return true;
}

}  // namespace topspin
