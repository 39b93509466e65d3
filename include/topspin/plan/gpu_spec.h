// The accelerators the planner knows: memory, dense peak FLOP/s, memory
// bandwidth and the links between them, from the vendors' datasheets.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace topspin {

struct GpuSpec {
  std::string name;            // the --gpu value: h100, h200, a100, ...
  std::string description;     // "NVIDIA H100 SXM 80GB"
  double memory_bytes = 0;     // what the device reports (nvidia-smi's total)
  double bf16_flops = 0;       // dense bf16 tensor-core FLOP/s (no 2:4 sparsity)
  double tf32_flops = 0;       // dense TF32 tensor-core FLOP/s (fp32 matmuls, train.tf32)
  double fp32_flops = 0;       // dense fp32 FLOP/s without TF32
  double hbm_bytes_per_s = 0;  // device memory bandwidth
  double intra_node_bytes_per_s = 0;  // per GPU, one direction (NVLink, else PCIe)
  double inter_node_bytes_per_s = 0;  // per GPU, one direction (the usual NIC per GPU)
  int gpus_per_node = 8;
};

// The peak a training run's matmuls get: bf16 for train.precision bf16,
// else TF32 when train.tf32 is on, else plain fp32.
double PeakFlops(const GpuSpec& gpu, bool bf16, bool tf32);

// Every known device, in a fixed order.
const std::vector<GpuSpec>& KnownGpus();

// The device called `name` (case-insensitive); Error{kUsage} naming --gpu
// and listing the known names otherwise.
const GpuSpec& FindGpu(std::string_view name);

}  // namespace topspin
