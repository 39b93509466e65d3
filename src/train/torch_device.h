// The LibTorch device of a ComputeDevice (topspin/train/device.h stays
// torch-free; the train module's .cc files use this).
#pragma once

#include <c10/core/Device.h>

#include "topspin/train/device.h"

namespace topspin {

inline c10::Device TorchDevice(const ComputeDevice& d) {
  return d.cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(d.index))
                : c10::Device(c10::kCPU);
}

}  // namespace topspin
