// topspin version: what this binary is and what it runs on.
#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/build_info.h"
#include "topspin/core/hash.h"
#include "topspin/core/omp_wait.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/ddp/comm.h"
#include "topspin/model/torch_info.h"
#endif

namespace topspin::cli {

void RegisterVersion(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print version, git commit, LibTorch, CUDA, cuDNN, NCCL, the GPUs and BLAS");
  cmd->callback([] {
    fmt::print("topspin {}\n", build::kVersion);
    fmt::print("  commit    {}\n", build::kGitCommit);
    fmt::print("  build     {} ({})\n", build::kBuildType, build::kCompiler);
    fmt::print("  crc32c    {}\n", Crc32cHasHardware() ? "sse4.2" : "portable");
#ifdef TOPSPIN_HAVE_TORCH
    const TorchInfo torch = GetTorchInfo();
    fmt::print("  libtorch  {} ({} intra-op threads)\n", torch.version, torch.intra_op_threads);
    if (torch.built_with_cuda) {
      const std::string nccl = NcclVersion();
      fmt::print("  cuda      built for CUDA {}, cuDNN {}, NCCL {}\n", torch.cuda_version,
                 torch.cudnn_version.empty() ? "none" : torch.cudnn_version,
                 nccl.empty() ? "none" : nccl);
    } else {
      fmt::print("  cuda      not built in (a CPU-only LibTorch)\n");
    }
    if (torch.gpus.empty()) {
      fmt::print("  gpus      none visible{}\n", torch.built_with_cuda ? " (training runs on the CPU)" : "");
    }
    for (size_t i = 0; i < torch.gpus.size(); ++i) {
      const GpuInfo& g = torch.gpus[i];
      fmt::print("  gpu {}     {}, {:.1f} GiB, compute capability {}.{}\n", i, g.name,
                 double(g.memory_bytes) / double(1 << 30), g.major, g.minor);
    }
    fmt::print("  blas      {}{}{}\n", torch.blas.empty() ? "unknown" : torch.blas,
               torch.blas_library.empty() ? "" : " (" + torch.blas_library + ")",
               torch.blas_is_optimized ? ""
                                       : "  (WARNING: not MKL/OpenBLAS; matmul is ~14x slower)");
    fmt::print("  openmp    {}\n", OmpWaitSetting());
#else
    fmt::print("  libtorch  not built in (configure with LibTorch to train)\n");
    fmt::print("  cuda      no\n");
#endif
  });
}

}  // namespace topspin::cli
