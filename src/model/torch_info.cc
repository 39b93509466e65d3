#include "topspin/model/torch_info.h"

#include <fstream>
#include <string>

#include <ATen/Version.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/version.h>
#ifdef TOPSPIN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace topspin {
namespace {

// The BLAS shared object mapped into this process, from /proc/self/maps
// (the torch wheel links MKL statically: then there is none).
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

// "KEY=value" from at::show_config()'s build settings line.
std::string ConfigValue(const std::string& config, const std::string& key) {
  const auto at = config.find(key + "=");
  if (at == std::string::npos) return "";
  const auto start = at + key.size() + 1;
  const auto end = config.find_first_of(", \n", start);
  return config.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// 90100 -> "9.1.0"; CUDA runtimes 13000 -> "13.0".
std::string CudnnVersion(long v) {
  return v <= 0 ? "" : fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}
std::string CudaVersion(long v) { return v <= 0 ? "" : fmt::format("{}.{}", v / 1000, v / 10 % 100); }

}  // namespace

TorchInfo GetTorchInfo() {
  TorchInfo info;
  info.version = TORCH_VERSION;
  const auto& hooks = at::detail::getCUDAHooks();
  info.built_with_cuda = hooks.hasCUDA() || hooks.versionCUDART() > 0;
#ifdef TOPSPIN_WITH_CUDA
  info.built_with_cuda = true;
#endif
  if (info.built_with_cuda) {
    info.cuda_version = CudaVersion(hooks.versionCUDART());
    info.cudnn_version = CudnnVersion(hooks.versionCuDNN());
  }
  info.cuda_available = torch::cuda::is_available();
  info.cuda_devices = info.cuda_available ? static_cast<int>(torch::cuda::device_count()) : 0;
#ifdef TOPSPIN_WITH_CUDA
  for (int i = 0; i < info.cuda_devices; ++i) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
    info.gpus.push_back({p->name, static_cast<int64_t>(p->totalGlobalMem), p->major, p->minor});
  }
#endif
  const std::string config = at::show_config();
  info.blas = ConfigValue(config, "BLAS_INFO");
  info.blas_library = LoadedBlasLibrary();
  const std::string blas = info.blas + " " + info.blas_library;
  info.blas_is_optimized = blas.find("mkl") != std::string::npos ||
                           blas.find("openblas") != std::string::npos ||
                           blas.find("blis") != std::string::npos;
  info.intra_op_threads = at::get_num_threads();
  return info;
}

}  // namespace topspin
