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
#include "topspin/ddp/zero3.h"
#include "topspin/dist/launch_env.h"
#include "topspin/model/gpt.h"
#include "topspin/train/flat_params.h"

namespace topspin::cli {
namespace {

// ZeRO-3's brackets in the GPT's forward.
struct Zero3Hooks : Gpt::UnitHooks {
  explicit Zero3Hooks(Zero3& z) : zero(z) {}
  void Before(size_t unit) override { zero.Gather(unit); }
  at::Tensor After(size_t unit, const at::Tensor& output) override {
    return zero.Release(unit, output);
  }
  Zero3& zero;
};

}  // namespace

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
  // What one collective costs here, before any training: 4 floats summed.
  double allreduce_us = 0;
  if (comm) {
    auto tiny = torch::zeros({4});
    for (int i = 0; i < 20; ++i) comm->AllReduceSum(tiny);
    const auto begin = std::chrono::steady_clock::now();
    constexpr int kIters = 200;
    for (int i = 0; i < kIters; ++i) comm->AllReduceSum(tiny);
    allreduce_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - begin).count() /
        kIters;
  }
  const GptShape shape = BenchGptShape();
  Gpt gpt(shape, /*seed=*/1);
  // ZeRO-3: the parameters live as shards in Zero3, gathered per unit of
  // o.wrap_blocks blocks; otherwise in one flat buffer.
  std::unique_ptr<Zero3> zero3;
  std::unique_ptr<Zero3Hooks> hooks;
  std::unique_ptr<FlatParams> flat_params;
  if (o.zero >= 3) {
    if (!comm) throw Error(ErrorKind::kUsage, "bench dist: ZeRO-3 needs several ranks");
    zero3 = std::make_unique<Zero3>(*comm, gpt.Units(o.wrap_blocks), Zero3::Options{});
    hooks = std::make_unique<Zero3Hooks>(*zero3);
    gpt.SetUnitHooks(hooks.get(), o.wrap_blocks);
  } else {
    flat_params = std::make_unique<FlatParams>(gpt.module(), nullptr, /*flat_grads=*/o.zero < 2);
  }
  const int64_t total = zero3 ? zero3->numel() : flat_params->numel();
  auto [offset, numel] = o.zero >= 3   ? std::pair<int64_t, int64_t>{0, zero3->shard_params().numel()}
                         : o.zero >= 1 ? ShardRange(total, world, rank)
                                       : std::pair<int64_t, int64_t>{0, total};
  DenseOptimizer optimizer(numel, {});
  std::unique_ptr<GradBuckets> buckets;
  if (comm && !zero3) {
    FlatParams& flat = *flat_params;
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
    if (buckets) buckets->Arm();
    if (zero3) zero3->Arm();
    gpt.LossSum(windows.narrow(0, rank * per_rank, per_rank)).backward();
    if (buckets) buckets->Finish();
    if (zero3) {
      zero3->Finish();
      at::Tensor grads = zero3->shard_grads().div(double(o.batch * t));
      optimizer.Step(zero3->shard_params(), grads, 1e-4);
      continue;
    }
    FlatParams& flat = *flat_params;
    at::Tensor grads = o.zero >= 2 ? buckets->shard_grads() : flat.grads().narrow(0, offset, numel);
    grads.div_(double(o.batch * t));
    at::Tensor shard = flat.params().narrow(0, offset, numel);
    optimizer.Step(shard, grads, 1e-4);
    if (o.zero >= 1) flat.params().copy_(torch::cat(comm->AllGatherRows(shard)));
    flat.ZeroGrad();
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // A fingerprint of the trained parameters: every ZeRO stage must train
  // the same model (a collective: every rank computes it).
  double param_abs_sum = 0;
  if (zero3) {
    auto part = torch::tensor({zero3->shard_params().abs().sum().item<double>()}, torch::kDouble);
    comm->AllReduceSum(part);
    param_abs_sum = part.item<double>();
  } else {
    param_abs_sum = flat_params->params().abs().sum().item<double>();
  }
  if (rank != 0) return;
  int64_t optimizer_bytes = 0;
  for (const auto& s : optimizer.state()) optimizer_bytes += s.nbytes();
  const nlohmann::json out{
      {"tokens_per_s", double(o.steps) * double(o.batch * t) / secs},
      {"sync_share", comm ? (comm->blocked_seconds() - blocked_start) / secs : 0.0},
      {"allreduce_us", allreduce_us},
      {"params", total},
      {"param_abs_sum", param_abs_sum},
      {"param_bytes", zero3 ? zero3->shard_params().nbytes() : flat_params->params().nbytes()},
      {"grad_bytes", zero3           ? zero3->shard_grads().nbytes()
                     : o.zero >= 2   ? buckets->shard_grads().nbytes()
                                     : flat_params->grads().nbytes()},
      {"optimizer_bytes", optimizer_bytes},
      // ZeRO-2: gradient staging; ZeRO-3: gathered unit parameters.
      {"staging_peak_bytes", zero3     ? zero3->peak_gathered_bytes()
                             : buckets ? buckets->peak_staging_bytes()
                                       : 0}};
  WriteFileAtomic(o.out, out.dump());
}

}  // namespace topspin::cli

#else

namespace topspin::cli {
void RunGptDistRank(const GptDistOptions&) {
  throw Error(ErrorKind::kUsage, "bench dist needs the LibTorch build", {},
              "run scripts/install-deps.sh (the torch wheel into .venv/) and rebuild");
}
}  // namespace topspin::cli

#endif
