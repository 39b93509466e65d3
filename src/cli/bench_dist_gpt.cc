// bench dist, tiny GPT part: one rank of a data-parallel GPT job. Every
// parameter of a GPT is dense, so this is where bucketing, overlap and
// ZeRO's sharding of gradients and optimizer state carry weight (the
// ranker's dense part is 32k parameters). The ranks train on synthetic
// tokens: throughput and memory do not depend on what the tokens say.
#include "cli/benches.h"
#include "topspin/core/error.h"

#ifdef TOPSPIN_HAVE_TORCH

#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "topspin/core/allocator_policy.h"
#include "topspin/core/files.h"
#include "topspin/ddp/comm.h"
#include "topspin/ddp/grad_sync.h"
#include "topspin/dist/launch_env.h"
#include "topspin/model/gpt.h"
#include "topspin/train/flat_params.h"

namespace topspin::cli {

void RunGptDistRank(const GptDistOptions& o) {
  KeepHeapMemory();
  LimitBlasThreads(1);  // LibTorch's intra-op threads parallelise
  torch::set_num_threads(o.threads);
  const LaunchEnv env = DetectLaunchEnv();
  std::unique_ptr<Comm> comm;
  if (env.world_size > 1) {
    CommOptions co;
    co.file_store = o.store;
    co.timeout = std::chrono::seconds(120);
    comm = Comm::Connect(env, co);
  }
  const int world = env.world_size, rank = env.rank;
  if (o.batch % world != 0) {
    throw Error(ErrorKind::kUsage,
                fmt::format("bench dist: a global batch of {} sequences does not split over {} "
                            "ranks",
                            o.batch, world),
                {.field = "--gpt-batch"}, "give a multiple of the world size");
  }
  const GptShape shape = BenchGptShape();
  Gpt gpt(shape, /*seed=*/1);
  FlatParams flat(gpt.module(), nullptr, /*flat_grads=*/o.zero < 2);
  auto [offset, numel] = o.zero >= 1 ? ShardRange(flat.numel(), world, rank)
                                     : std::pair<int64_t, int64_t>{0, flat.numel()};
  DenseOptimizer optimizer(numel, {});
  std::unique_ptr<GradBuckets> buckets;
  if (comm) {
    std::vector<std::pair<int64_t, int64_t>> slots;
    for (const auto& s : flat.slots()) slots.emplace_back(s.offset, s.numel);
    buckets = std::make_unique<GradBuckets>(
        *comm, flat.parameters(), slots, flat.grads(),
        GradBuckets::Options{.bucket_bytes = o.bucket_bytes,
                             .overlap = o.overlap,
                             .shard_grads = o.zero >= 2});
  }
  const int64_t per_rank = o.batch / world, t = shape.context;
  auto generator = at::detail::createCPUGenerator(/*seed_in=*/7);
  constexpr int kWarmup = 3;
  std::chrono::steady_clock::time_point start;
  double blocked_start = 0;
  for (int step = 0; step < kWarmup + o.steps; ++step) {
    if (step == kWarmup) {
      start = std::chrono::steady_clock::now();
      blocked_start = comm ? comm->blocked_seconds() : 0;
    }
    // The global batch, the same on every rank; each trains its rows.
    const auto windows = torch::randint(shape.vocab, {o.batch, t + 1}, generator, torch::kLong);
    const auto loss = gpt.LossSum(windows.narrow(0, rank * per_rank, per_rank));
    if (buckets) buckets->Arm();
    loss.backward();
    if (buckets) buckets->Finish();
    at::Tensor grads = o.zero >= 2 ? buckets->shard_grads() : flat.grads().narrow(0, offset, numel);
    grads.div_(double(o.batch * t));
    at::Tensor shard = flat.params().narrow(0, offset, numel);
    optimizer.Step(shard, grads, 1e-4);
    if (o.zero >= 1) flat.params().copy_(torch::cat(comm->AllGatherRows(shard)));
    flat.ZeroGrad();
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (rank != 0) return;
  int64_t optimizer_bytes = 0;
  for (const auto& s : optimizer.state()) optimizer_bytes += s.nbytes();
  const nlohmann::json out{
      {"tokens_per_s", double(o.steps) * double(o.batch * t) / secs},
      {"sync_share", comm ? (comm->blocked_seconds() - blocked_start) / secs : 0.0},
      {"params", flat.numel()},
      {"grad_bytes", o.zero >= 2 ? buckets->shard_grads().nbytes() : flat.grads().nbytes()},
      {"optimizer_bytes", optimizer_bytes},
      {"staging_peak_bytes", buckets ? buckets->peak_staging_bytes() : 0},
      {"buckets", buckets ? buckets->num_buckets() : 0}};
  WriteFileAtomic(o.out, out.dump());
}

}  // namespace topspin::cli

#else

namespace topspin::cli {
void RunGptDistRank(const GptDistOptions&) {
  throw Error(ErrorKind::kUsage, "bench dist needs the LibTorch build", {},
              "install libtorch-dev (scripts/install-deps.sh) and rebuild");
}
}  // namespace topspin::cli

#endif
