#include "topspin/train/device.h"

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <torch/torch.h>
#ifdef TOPSPIN_WITH_CUDA
#include <ATen/core/CachingHostAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "topspin/core/error.h"

namespace topspin {

std::string ComputeDevice::Name() const {
  return cuda ? fmt::format("cuda:{}", index) : std::string("cpu");
}

ComputeDevice ResolveDevice(const std::string& setting, int visible_gpus, int local_rank) {
  if (setting == "cpu" || (setting == "auto" && visible_gpus <= 0)) return {};
  if (setting != "auto" && setting != "cuda") {
    throw ConfigError(fmt::format("\"{}\" is not a device", setting),
                      ErrorWhere{.field = "train.device"}, "use auto, cpu or cuda");
  }
  if (visible_gpus <= 0) {
    throw ConfigError("train.device is cuda, but no GPU is visible to this process",
                      ErrorWhere{.field = "train.device"},
                      "check nvidia-smi and CUDA_VISIBLE_DEVICES, or set train.device auto "
                      "(the CPU when there is no GPU)");
  }
  return {.cuda = true, .index = std::max(0, local_rank) % visible_gpus};
}

void UseDevice(const ComputeDevice& device) {
  if (!device.cuda) return;
#ifdef TOPSPIN_WITH_CUDA
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device.index));
#endif
}

void AllowTf32(const ComputeDevice& device, bool on) {
  if (!device.cuda) return;
  at::globalContext().setAllowTF32CuBLAS(on);
  at::globalContext().setAllowTF32CuDNN(on);
}

int VisibleGpus() {
  return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

namespace {

#ifdef TOPSPIN_WITH_CUDA
// LibTorch's caching host allocator hands out DataPtrs; the pool wants raw
// pointers, so the DataPtrs wait here until Free.
class PinnedBufferAllocator final : public BufferAllocator {
 public:
  void* Allocate(size_t bytes) override {
    at::DataPtr block = at::getHostAllocator(at::kCUDA)->allocate(bytes == 0 ? 64 : bytes);
    void* p = block.get();
    if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 64 != 0) throw std::bad_alloc();
    std::lock_guard lock(mu_);
    blocks_.emplace(p, std::move(block));
    return p;
  }
  void Free(void* p, size_t) override {
    std::lock_guard lock(mu_);
    blocks_.erase(p);  // back to LibTorch's cache
  }
  const char* name() const override { return "cuda-pinned"; }

 private:
  std::mutex mu_;
  std::map<void*, at::DataPtr> blocks_;  // guarded by mu_
};
#endif

}  // namespace

std::shared_ptr<BufferAllocator> PinnedAllocator() {
  if (VisibleGpus() == 0) {
    throw ConfigError("pinned batch buffers need a visible GPU",
                      ErrorWhere{.field = "pipeline.pinned_memory"},
                      "pinned memory only matters for host-to-device copies; on the CPU it is "
                      "ignored");
  }
#ifdef TOPSPIN_WITH_CUDA
  return std::make_shared<PinnedBufferAllocator>();
#else
  throw InternalError("PinnedAllocator: GPU visible in a build without CUDA");
#endif
}

}  // namespace topspin
