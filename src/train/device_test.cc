#include "topspin/train/device.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "topspin/core/error.h"
#include "train/batch_copier.h"
#include "train/device_timer.h"

namespace topspin {
namespace {

BatchLayout SmallLayout() {
  return {.kind = BatchKind::kRanking, .max_lists = 2, .max_docs = 6, .dense_dim = 3,
          .sparse_dim = 2};
}

TEST(ComputeDevice, AutoPicksTheGpuOfTheLocalRankWhenOneIsVisible) {
  EXPECT_FALSE(ResolveDevice("auto", 0, 0).cuda);
  EXPECT_EQ(ResolveDevice("auto", 0, 3).Name(), "cpu");
  EXPECT_EQ(ResolveDevice("auto", 2, 0).Name(), "cuda:0");
  EXPECT_EQ(ResolveDevice("auto", 2, 3).Name(), "cuda:1");  // local rank 3 of 2 GPUs
  EXPECT_EQ(ResolveDevice("cuda", 8, 5).index, 5);
  EXPECT_FALSE(ResolveDevice("cpu", 8, 0).cuda);
}

TEST(ComputeDevice, CudaWithoutAGpuIsAConfigErrorNamingTheKey) {
  try {
    ResolveDevice("cuda", 0, 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_NE(std::string(e.what()).find("train.device"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ResolveDevice("tpu", 1, 0), Error);
}

// A stand-in for CUDA events: the host-side logic of the copier (a buffer
// goes back to its pool only after its copy completed, in order) without
// a GPU.
TEST(ReleaseQueue, PoolBuffersReturnOnlyAfterTheirCopiesComplete) {
  auto pool = BatchPool::Create(SmallLayout(), 3, HostAllocator());
  ReleaseQueue<BatchPtr> queue;
  std::vector<bool> copied(3, false);
  int waited = 0;
  for (int i = 0; i < 3; ++i) {
    BatchPtr b = pool->TryAcquire();
    ASSERT_TRUE(b);
    queue.Push(std::move(b), [&copied, i] { return bool(copied[size_t(i)]); },
               [&copied, &waited, i] {
                 copied[size_t(i)] = true;
                 ++waited;
               });
  }
  EXPECT_EQ(pool->free(), 0u);
  EXPECT_FALSE(pool->TryAcquire());  // every buffer is still read by a copy
  copied[1] = true;                  // a later copy done first: order is kept
  EXPECT_EQ(queue.Poll(), 3u);
  EXPECT_EQ(pool->free(), 0u);
  copied[0] = true;
  EXPECT_EQ(queue.Poll(), 1u);  // 0 and 1 released
  EXPECT_EQ(pool->free(), 2u);
  queue.Drain();  // waits for 2
  EXPECT_EQ(waited, 1);
  EXPECT_EQ(pool->free(), 3u);
  EXPECT_EQ(queue.size(), 0u);
}

TEST(BatchCopier, OnTheCpuTensorsViewThePoolAndTheBatchReturnsWithThem) {
  auto pool = BatchPool::Create(SmallLayout(), 1, HostAllocator());
  BatchPtr b = pool->TryAcquire();
  b->num_lists = 2;
  b->num_docs = 5;
  b->epoch = 4;
  b->index = 7;
  b->dense_data()[0] = 2.5f;
  float* memory = b->dense_data();
  BatchCopier copier(ComputeDevice{});
  DeviceTimer timer(ComputeDevice{});
  EXPECT_FALSE(timer.enabled());
  {
    DeviceBatch d = copier.Copy(std::move(b));
    copier.Use(d, timer);
    EXPECT_EQ(d.t.dense.data_ptr<float>(), memory);  // no copy
    EXPECT_EQ(d.t.dense.sizes(), (std::vector<int64_t>{5, 3}));
    EXPECT_EQ(d.t.offsets.numel(), 3);
    EXPECT_EQ(d.epoch, 4u);
    EXPECT_EQ(d.index, 7u);
    EXPECT_EQ(pool->free(), 0u);
  }
  EXPECT_EQ(pool->free(), 1u);
  EXPECT_EQ(copier.InFlight(), 0u);
}

// ---- on a GPU (skipped without one) -----------------------------------------

#define SKIP_WITHOUT_GPU()                                                     \
  if (VisibleGpus() == 0) GTEST_SKIP() << "no GPU visible to this process"

TEST(CudaDevice, PinnedBuffersAreAlignedAndReusable) {
  SKIP_WITHOUT_GPU();
  auto pinned = PinnedAllocator();
  EXPECT_STREQ(pinned->name(), "cuda-pinned");
  auto pool = BatchPool::Create(SmallLayout(), 4, pinned);
  BatchPtr b = pool->TryAcquire();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->dense_data()) % 64, 0u);
  b.reset();
  EXPECT_EQ(pool->free(), 4u);
}

TEST(CudaDevice, CopiedBatchesMatchTheHostAndBuffersComeBack) {
  SKIP_WITHOUT_GPU();
  const ComputeDevice gpu = ResolveDevice("cuda", VisibleGpus(), 0);
  UseDevice(gpu);
  auto pool = BatchPool::Create(SmallLayout(), 2, PinnedAllocator());
  BatchCopier copier(gpu);
  DeviceTimer timer(gpu);
  std::vector<DeviceBatch> on_gpu;
  std::vector<torch::Tensor> expected;
  for (int i = 0; i < 2; ++i) {
    BatchPtr b = pool->TryAcquire();
    b->num_lists = 2;
    b->num_docs = 6;
    for (size_t k = 0; k < 18; ++k) b->dense_data()[k] = float(i * 100 + int(k));
    expected.push_back(WrapHost(*b).dense.clone());
    on_gpu.push_back(copier.Copy(std::move(b)));
  }
  for (auto& d : on_gpu) copier.Use(d, timer);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(on_gpu[i].t.dense.is_cuda());
    EXPECT_TRUE(torch::equal(on_gpu[i].t.dense.cpu(), expected[i]));
  }
  torch::cuda::synchronize();
  EXPECT_EQ(copier.InFlight(), 0u);
  EXPECT_EQ(pool->free(), 2u);  // both copies done: both buffers back
}

TEST(CudaDevice, PhasesAreTimedWithEvents) {
  SKIP_WITHOUT_GPU();
  const ComputeDevice gpu = ResolveDevice("cuda", VisibleGpus(), 0);
  UseDevice(gpu);
  DeviceTimer timer(gpu);
  ASSERT_TRUE(timer.enabled());
  const auto a = torch::randn({2048, 2048}, torch::Device(torch::kCUDA, gpu.index));
  const int span = timer.Begin("forward");
  for (int i = 0; i < 8; ++i) (void)torch::mm(a, a);
  timer.End(span);
  std::map<std::string, double> phases;
  timer.Collect(phases, /*wait=*/true);
  EXPECT_GT(phases["forward"], 0.0);
  EXPECT_LT(phases["forward"], 10.0);
}

}  // namespace
}  // namespace topspin
