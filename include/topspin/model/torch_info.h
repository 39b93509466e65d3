// What LibTorch this build runs on: version, CUDA, BLAS. Used by
// `topspin version` and written into every run directory. The header stays
// free of torch includes so callers compile fast.
#pragma once

#include <string>

namespace topspin {

struct TorchInfo {
  std::string version;  // e.g. "1.13.1"
  bool cuda_available = false;
  int cuda_devices = 0;
  std::string blas_library;        // resolved path of the BLAS loaded in this process
  bool blas_is_optimized = false;  // OpenBLAS or MKL (reference BLAS is ~14x slower)
  int intra_op_threads = 0;
};

TorchInfo GetTorchInfo();

}  // namespace topspin
