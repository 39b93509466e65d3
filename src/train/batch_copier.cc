#include "train/batch_copier.h"

#ifdef TOPSPIN_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <deque>
#include <optional>

#include "topspin/core/error.h"

namespace topspin {

BatchTensors WrapHost(Batch& b) {
  if (b.layout().kind == BatchKind::kLanguageModel) {
    BatchTensors t;
    t.tokens = torch::from_blob(b.tokens_data(),
                                {static_cast<int64_t>(b.num_lists),
                                 static_cast<int64_t>(b.layout().seq_len) + 1},
                                torch::kInt);
    return t;
  }
  const auto n = static_cast<int64_t>(b.num_docs);
  const auto f = static_cast<int64_t>(b.layout().dense_dim);
  const auto c = static_cast<int64_t>(b.layout().sparse_dim);
  return {
      torch::from_blob(b.dense_data(), {n, f}, torch::kFloat),
      torch::from_blob(b.sparse_data(), {n, c}, torch::kLong),
      torch::from_blob(b.labels_data(), {n}, torch::kFloat),
      torch::from_blob(b.offsets_data(), {static_cast<int64_t>(b.num_lists) + 1}, torch::kLong)};
}

namespace {

// A DeviceBatch with `b`'s sizes and place in the order, no tensors yet.
DeviceBatch Describe(const Batch& b) {
  DeviceBatch out;
  out.num_docs = b.num_docs;
  out.num_lists = b.num_lists;
  out.epoch = b.epoch;
  out.index = b.index;
  return out;
}

}  // namespace

#ifdef TOPSPIN_WITH_CUDA
struct BatchCopier::Impl {
  ComputeDevice device;
  std::optional<c10::cuda::CUDAStream> copy_stream;
  // A host batch until its copy has completed.
  struct Parked {
    BatchPtr batch;
    std::vector<torch::Tensor> extra;
    std::shared_ptr<at::cuda::CUDAEvent> copied;
  };
  ReleaseQueue<Parked> parked;
  // Copies launched and not yet used, by ticket.
  std::deque<std::pair<int64_t, std::shared_ptr<at::cuda::CUDAEvent>>> launched;
  int64_t next_ticket = 0;

  DeviceBatch Copy(BatchPtr batch, std::vector<torch::Tensor> extra) {
    DeviceBatch out = Describe(*batch);
    out.ticket = next_ticket++;
    const BatchTensors host = WrapHost(*batch);
    auto copied = std::make_shared<at::cuda::CUDAEvent>(cudaEventDisableTiming);
    {
      c10::cuda::CUDAStreamGuard guard(*copy_stream);
      const torch::Device to(torch::kCUDA, static_cast<c10::DeviceIndex>(device.index));
      const auto copy = [&](const torch::Tensor& t) {
        return t.defined() ? t.to(to, /*non_blocking=*/true) : t;
      };
      out.t = {copy(host.dense), copy(host.sparse), copy(host.labels), copy(host.offsets),
               copy(host.tokens)};
      for (const auto& t : extra) out.extra.push_back(copy(t));
      copied->record(*copy_stream);
    }
    launched.emplace_back(out.ticket, copied);
    parked.Push(
        Parked{std::move(batch), std::move(extra), copied}, [copied] { return copied->query(); },
        [copied] { copied->synchronize(); });
    parked.Poll();
    return out;
  }

  void Use(DeviceBatch& b, DeviceTimer& timer) {
    while (!launched.empty() && launched.front().first < b.ticket) launched.pop_front();
    if (launched.empty() || launched.front().first != b.ticket) {
      throw InternalError("BatchCopier::Use: a batch this copier did not copy, or used twice");
    }
    const auto compute =
        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device.index));
    const int span = timer.Begin("h2d");
    launched.front().second->block(compute);  // the GPU waits, the host does not
    timer.End(span);
    launched.pop_front();
    for (auto* t : {&b.t.dense, &b.t.sparse, &b.t.labels, &b.t.offsets, &b.t.tokens}) {
      if (t->defined()) t->record_stream(compute);
    }
    for (auto& t : b.extra) {
      if (t.defined()) t.record_stream(compute);
    }
  }
};
#else
struct BatchCopier::Impl {
  ComputeDevice device;
  struct Parked {};
  ReleaseQueue<Parked> parked;
  DeviceBatch Copy(BatchPtr, std::vector<torch::Tensor>) {
    throw InternalError("BatchCopier: CUDA in a build without CUDA");
  }
  void Use(DeviceBatch&, DeviceTimer&) {}
};
#endif

BatchCopier::BatchCopier(const ComputeDevice& device) : impl_(std::make_unique<Impl>()) {
  impl_->device = device;
#ifdef TOPSPIN_WITH_CUDA
  if (device.cuda) {
    impl_->copy_stream =
        c10::cuda::getStreamFromPool(/*isHighPriority=*/false, static_cast<c10::DeviceIndex>(device.index));
  }
#endif
}

BatchCopier::~BatchCopier() {
  try {
    impl_->parked.Drain();
  } catch (const std::exception&) {
    // A failed copy was reported by the step that used it.
  }
}

DeviceBatch BatchCopier::Copy(BatchPtr batch, std::vector<torch::Tensor> extra) {
  if (!batch) throw InternalError("BatchCopier::Copy: no batch");
  if (!impl_->device.cuda) {
    DeviceBatch out = Describe(*batch);
    out.t = WrapHost(*batch);
    out.host = std::move(batch);
    out.extra = std::move(extra);
    return out;
  }
  return impl_->Copy(std::move(batch), std::move(extra));
}

void BatchCopier::Use(DeviceBatch& batch, DeviceTimer& timer) {
  if (impl_->device.cuda) impl_->Use(batch, timer);
}

size_t BatchCopier::InFlight() { return impl_->parked.Poll(); }

}  // namespace topspin
