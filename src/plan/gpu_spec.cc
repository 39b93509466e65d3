#include "topspin/plan/gpu_spec.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "topspin/core/error.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

// Datasheet figures (dense, no sparsity). Memory is the total nvidia-smi
// reports. Links: NVLink 4 is 900 GB/s both ways per H100/H200 (450 one
// way), NVLink 3 600 (300); the NIC is one 400 Gb/s NDR (H100, H200) or
// 200 Gb/s HDR (A100) InfiniBand port per GPU, 100 Gb/s Ethernet per
// GPU for L4 nodes, whose GPUs talk over PCIe 4.0 x16 (32 GB/s).
const std::vector<GpuSpec>& KnownGpus() {
  static const std::vector<GpuSpec> gpus = {
      {"h100", "NVIDIA H100 SXM 80GB", 81559 * kMiB, 989.4e12, 494.7e12, 66.9e12, 3.35e12, 450e9, 50e9, 8},
      {"h200", "NVIDIA H200 SXM 141GB", 143771 * kMiB, 989.4e12, 494.7e12, 66.9e12, 4.8e12, 450e9, 50e9, 8},
      {"a100", "NVIDIA A100 SXM 80GB", 81920 * kMiB, 312e12, 156e12, 19.5e12, 2.039e12, 300e9, 25e9, 8},
      {"a100-40gb", "NVIDIA A100 SXM 40GB", 40960 * kMiB, 312e12, 156e12, 19.5e12, 1.555e12, 300e9, 25e9, 8},
      {"l4", "NVIDIA L4 24GB", 23034 * kMiB, 121e12, 60e12, 30.3e12, 0.3e12, 32e9, 12.5e9, 8},
  };
  return gpus;
}

double PeakFlops(const GpuSpec& gpu, bool bf16, bool tf32) {
  return bf16 ? gpu.bf16_flops : tf32 ? gpu.tf32_flops : gpu.fp32_flops;
}

const GpuSpec& FindGpu(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::vector<std::string> names;
  for (const GpuSpec& g : KnownGpus()) {
    if (g.name == lower) return g;
    names.push_back(g.name);
  }
  const auto guess = ClosestMatch(lower, names);
  throw Error(ErrorKind::kUsage, fmt::format("unknown --gpu \"{}\"", name),
              ErrorWhere{.field = "--gpu"},
              fmt::format("{}known: {}", guess ? fmt::format("did you mean \"{}\"? ", *guess) : "",
                          Join(names, ", ")));
}

}  // namespace topspin
