#include "train/device_timer.h"

#include <deque>

#ifdef TOPSPIN_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#include <nvtx3/nvToolsExt.h>
#endif

namespace topspin {

#ifdef TOPSPIN_WITH_CUDA
struct DeviceTimer::Impl {
  ComputeDevice device;
  struct Span {
    std::string phase;
    at::cuda::CUDAEvent start{cudaEventDefault}, end{cudaEventDefault};
    nvtxRangeId_t range = 0;  // start/end ranges: spans need not nest
    bool closed = false;
  };
  std::deque<Span> spans;  // open or not yet collected, oldest first
  int first_id = 0;        // id of spans.front()

  c10::cuda::CUDAStream Stream() const {
    return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device.index));
  }
};

DeviceTimer::DeviceTimer(const ComputeDevice& device) : impl_(std::make_unique<Impl>()) {
  impl_->device = device;
}
DeviceTimer::~DeviceTimer() = default;
bool DeviceTimer::enabled() const { return impl_->device.cuda; }

int DeviceTimer::Begin(const char* phase) {
  if (!enabled()) return -1;
  auto& span = impl_->spans.emplace_back();
  span.phase = phase;
  span.range = nvtxRangeStartA(phase);
  span.start.record(impl_->Stream());
  return impl_->first_id + static_cast<int>(impl_->spans.size()) - 1;
}

void DeviceTimer::End(int id) {
  if (id < 0) return;
  auto& span = impl_->spans.at(static_cast<size_t>(id - impl_->first_id));
  nvtxRangeEnd(span.range);
  span.end.record(impl_->Stream());
  span.closed = true;
}

void DeviceTimer::Collect(std::map<std::string, double>& phases, bool wait) {
  if (!enabled()) return;
  auto& spans = impl_->spans;
  if (wait) {
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (it->closed) {
        it->end.synchronize();
        break;
      }
    }
  }
  while (!spans.empty() && spans.front().closed && spans.front().end.query()) {
    auto& s = spans.front();
    phases[s.phase] += s.start.elapsed_time(s.end) / 1e3;
    spans.pop_front();
    ++impl_->first_id;
  }
}
#else
struct DeviceTimer::Impl {};
DeviceTimer::DeviceTimer(const ComputeDevice&) : impl_(std::make_unique<Impl>()) {}
DeviceTimer::~DeviceTimer() = default;
bool DeviceTimer::enabled() const { return false; }
int DeviceTimer::Begin(const char*) { return -1; }
void DeviceTimer::End(int) {}
void DeviceTimer::Collect(std::map<std::string, double>&, bool) {}
#endif

}  // namespace topspin
