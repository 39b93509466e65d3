// What LibTorch this build runs on: version, CUDA, cuDNN, the GPUs, BLAS.
// Used by `topspin version` and written into every run directory. The
// header stays free of torch includes so callers compile fast.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace topspin {

struct GpuInfo {
  std::string name;  // e.g. "NVIDIA H200"
  int64_t memory_bytes = 0;
  int major = 0, minor = 0;  // compute capability
};

struct TorchInfo {
  std::string version;       // e.g. "2.11.0"
  bool built_with_cuda = false;
  std::string cuda_version;  // the CUDA runtime LibTorch was built for, e.g. "13.0" ("" without)
  std::string cudnn_version; // e.g. "9.19.0" ("" without)
  bool cuda_available = false;
  int cuda_devices = 0;
  std::vector<GpuInfo> gpus;       // the visible GPUs
  std::string blas;                // LibTorch's BLAS (at::show_config()'s BLAS_INFO), e.g. "mkl"
  std::string blas_library;        // a BLAS shared object mapped into this process, if any
  bool blas_is_optimized = false;  // MKL, OpenBLAS or BLIS (reference BLAS is ~14x slower)
  int intra_op_threads = 0;
};

TorchInfo GetTorchInfo();

}  // namespace topspin
