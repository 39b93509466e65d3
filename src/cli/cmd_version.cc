// topspin version: what this binary is and what it runs on.
#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/build_info.h"
#include "topspin/core/hash.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/model/torch_info.h"
#endif

namespace topspin::cli {

void RegisterVersion(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print version, git commit, LibTorch, CUDA and BLAS");
  cmd->callback([] {
    fmt::print("topspin {}\n", build::kVersion);
    fmt::print("  commit    {}\n", build::kGitCommit);
    fmt::print("  build     {} ({})\n", build::kBuildType, build::kCompiler);
    fmt::print("  crc32c    {}\n", Crc32cHasHardware() ? "sse4.2" : "portable");
#ifdef TOPSPIN_HAVE_TORCH
    const TorchInfo torch = GetTorchInfo();
    fmt::print("  libtorch  {} ({} intra-op threads)\n", torch.version, torch.intra_op_threads);
    fmt::print("  cuda      {}\n",
               torch.cuda_available ? fmt::format("yes, {} device(s)", torch.cuda_devices) : "no");
    fmt::print("  blas      {}{}\n", torch.blas_library.empty() ? "unknown" : torch.blas_library,
               torch.blas_is_optimized ? ""
                                       : "  (WARNING: not OpenBLAS/MKL; matmul is ~14x slower: "
                                         "apt-get install libopenblas0-pthread)");
#else
    fmt::print("  libtorch  not built in (configure with LibTorch to train)\n");
    fmt::print("  cuda      no\n");
#endif
  });
}

}  // namespace topspin::cli
