#include "topspin/model/torch_info.h"

#include <fstream>
#include <string>

#include <torch/torch.h>
#include <torch/version.h>

namespace topspin {
namespace {

// The BLAS shared object mapped into this process, from /proc/self/maps.
// On Debian, libblas.so.3 is an alternative; the resolved path tells
// whether it is OpenBLAS or the slow reference implementation.
std::string LoadedBlasLibrary() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::string found;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const auto name = path.substr(path.rfind('/') + 1);
    if (name.starts_with("libopenblas") || name.starts_with("libmkl_rt") ||
        name.starts_with("libblas") || name.starts_with("libblis")) {
      found = path;
      if (path.find("openblas") != std::string::npos || path.find("mkl") != std::string::npos)
        break;
    }
  }
  return found;
}

}  // namespace

TorchInfo GetTorchInfo() {
  TorchInfo info;
  info.version = TORCH_VERSION;
  info.cuda_available = torch::cuda::is_available();
  info.cuda_devices = info.cuda_available ? static_cast<int>(torch::cuda::device_count()) : 0;
  info.blas_library = LoadedBlasLibrary();
  info.blas_is_optimized = info.blas_library.find("openblas") != std::string::npos ||
                           info.blas_library.find("mkl") != std::string::npos ||
                           info.blas_library.find("blis") != std::string::npos;
  info.intra_op_threads = at::get_num_threads();
  return info;
}

}  // namespace topspin
