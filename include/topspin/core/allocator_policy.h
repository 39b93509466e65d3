// Process-wide memory and BLAS policies for training processes.
//
// KeepHeapMemory(): glibc serves blocks above 128 KiB-32 MiB with fresh
// mmap()s and returns them with munmap() when freed, so a training step
// that allocates the same temporaries every time pays page faults and
// zeroing for all of them, every step. On this project's VMs that tripled
// the ranker's step time (docs/BENCHMARKS.md). This sets M_MMAP_THRESHOLD
// to 1 GiB and M_TRIM_THRESHOLD to 2 GiB so freed blocks stay in the heap
// and the next step reuses them; the memory high-water mark is unchanged.
//
// LimitBlasThreads(n): OpenBLAS's pthread build spins (sched_yield) in its
// own n threads next to LibTorch's and the input pipeline's; limits it
// through openblas_set_num_threads when that symbol is loaded. Returns
// false when no OpenBLAS is loaded.
#pragma once

namespace topspin {

void KeepHeapMemory();
bool LimitBlasThreads(int threads);

}  // namespace topspin
