// TOPSPIN_VECTOR_CLONES: a function compiled for x86-64-v4 (AVX-512), v3
// (AVX2) and the baseline, the one for this CPU picked at load time (GCC
// target_clones). One binary runs everywhere and uses the wide units where
// they exist. Only on functions with external linkage; a no-op elsewhere
// (clang, other architectures, sanitizer builds).
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TOPSPIN_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TOPSPIN_VECTOR_CLONES
#endif
