// Multi-process tests: each TEST(...Rank, ...) is a worker that runs only
// when a parent test starts this binary as ranks (SpawnAndSupervise), with
// TOPSPIN_TEST_DIR set; run alone (as ctest does) it skips.
#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/ddp/comm.h"
#include "topspin/ddp/grad_sync.h"
#include "topspin/ddp/zero3.h"
#include "topspin/dist/spawn.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

const char* TestDir() { return std::getenv("TOPSPIN_TEST_DIR"); }

std::unique_ptr<Comm> Join(LaunchEnv env = DetectLaunchEnv(), std::string token = "") {
  CommOptions o;
  o.timeout = std::chrono::seconds(30);
  // One store file per worker test: the ranks of a test share it.
  o.file_store = fs::path(TestDir()) /
                 (std::string("store.") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  o.token = std::move(token);
  return Comm::Connect(env, o);
}

// Runs the worker tests matching `filter` as `n` ranks; true when all pass.
bool RunRanks(int n, const std::string& filter, const fs::path& dir) {
  SpawnOptions o;
  o.argv = {"/proc/self/exe", "--gtest_filter=" + filter};
  o.nproc = n;
  o.grace_s = 5;
  o.extra_env = {{"TOPSPIN_TEST_DIR", dir.string()}};
  const SpawnResult r = SpawnAndSupervise(o);
  EXPECT_EQ(r.exit_code, 0) << r.cause;
  return r.exit_code == 0;
}

// A two-layer MLP whose parameters view one flat buffer (as FlatParams does).
struct FlatMlp {
  torch::nn::Sequential net{torch::nn::Linear(6, 5), torch::nn::ReLU(), torch::nn::Linear(5, 1)};
  at::Tensor params, grads;
  std::vector<at::Tensor> leaves;
  std::vector<std::pair<int64_t, int64_t>> slots;
  // Without flat_grads the gradients are autograd's own (ZeRO-2).
  explicit FlatMlp(bool flat_grads = true) {
    torch::manual_seed(3);
    net = torch::nn::Sequential(torch::nn::Linear(6, 5), torch::nn::ReLU(), torch::nn::Linear(5, 1));
    int64_t total = 0;
    for (auto& p : net->parameters()) total += p.numel();
    params = torch::empty({total});
    grads = torch::zeros({total});
    int64_t at = 0;
    for (auto& p : net->parameters()) {
      const auto n = p.numel();
      params.narrow(0, at, n).copy_(p.detach().flatten());
      p.set_data(params.narrow(0, at, n).view(p.sizes()));
      if (flat_grads) p.mutable_grad() = grads.narrow(0, at, n).view(p.sizes());
      leaves.push_back(p);
      slots.emplace_back(at, n);
      at += n;
    }
  }
  void Backward(int rank) {
    torch::manual_seed(100 + rank);
    net->forward(torch::randn({7, 6})).pow(2).sum().backward();
  }
};

TEST(DdpRank, BucketsSumGradientsDuringBackward) {
  if (TestDir() == nullptr) GTEST_SKIP() << "worker: runs under DataParallel tests";
  auto comm = Join();
  // Expected: the sum of every rank's gradients, computed here alone.
  FlatMlp reference;
  for (int r = 0; r < comm->world_size(); ++r) reference.Backward(r);
  FlatMlp model;
  GradBuckets buckets(*comm, model.leaves, model.slots, model.grads,
                      {.bucket_bytes = 16, .overlap = true});
  EXPECT_GT(buckets.num_buckets(), 1u);
  for (int pass = 0; pass < 2; ++pass) {  // the hooks re-arm
    model.grads.zero_();
    buckets.Arm();
    model.Backward(comm->rank());
    buckets.Finish();
    EXPECT_TRUE(torch::allclose(model.grads, reference.grads, 1e-5, 1e-6)) << "pass " << pass;
  }
}

TEST(DdpRank, BucketsReduceScatterIntoShards) {
  if (TestDir() == nullptr) GTEST_SKIP() << "worker: runs under DataParallel tests";
  auto comm = Join();
  FlatMlp reference;
  for (int r = 0; r < comm->world_size(); ++r) reference.Backward(r);
  const auto [offset, numel] = ShardRange(reference.grads.numel(), comm->world_size(), comm->rank());
  for (const bool overlap : {true, false}) {
    FlatMlp model(/*flat_grads=*/false);
    // 4-float buckets: most cross a shard boundary or hold several pieces.
    GradBuckets buckets(*comm, model.leaves, model.slots, at::Tensor(),
                        {.bucket_bytes = 16, .overlap = overlap, .shard_grads = true});
    EXPECT_GT(buckets.num_buckets(), 2u);
    ASSERT_EQ(buckets.shard_grads().numel(), numel);
    for (int pass = 0; pass < 2; ++pass) {  // the hooks re-arm
      buckets.Arm();
      model.Backward(comm->rank());
      buckets.Finish();
      EXPECT_TRUE(torch::allclose(buckets.shard_grads(), reference.grads.narrow(0, offset, numel),
                                  1e-5, 1e-6))
          << "overlap " << overlap << " pass " << pass;
      // The full gradients were moved out and freed.
      for (const auto& p : model.leaves) EXPECT_FALSE(p.grad().defined());
    }
    // At most two staging buffers (Options::max_staged) alive at once.
    std::vector<int64_t> sizes;
    for (size_t b = 0; b < buckets.num_buckets(); ++b) sizes.push_back(buckets.bucket(b).second * 4);
    std::sort(sizes.rbegin(), sizes.rend());
    EXPECT_GT(buckets.peak_staging_bytes(), 0);
    EXPECT_LE(buckets.peak_staging_bytes(), sizes[0] + sizes[1]);
  }
}

// Three linear layers, each a ZeRO-3 unit.
struct ThreeLayers {
  std::vector<torch::nn::Linear> layers;
  ThreeLayers() {
    torch::manual_seed(5);
    layers = {torch::nn::Linear(6, 7), torch::nn::Linear(7, 5), torch::nn::Linear(5, 1)};
  }
  std::vector<std::vector<at::Tensor>> Units() {
    std::vector<std::vector<at::Tensor>> units;
    for (auto& l : layers) units.push_back(l->parameters());
    return units;
  }
  // The loss of rank r's batch; `zero` brackets each layer when given.
  at::Tensor Loss(int rank, Zero3* zero) {
    torch::manual_seed(200 + rank);
    auto x = torch::randn({9, 6});
    for (size_t u = 0; u < layers.size(); ++u) {
      if (zero) zero->Gather(u);
      x = layers[u]->forward(x);
      if (u + 1 < layers.size()) x = torch::relu(x);
      if (zero) x = zero->Release(u, x);
    }
    return x.pow(2).sum();
  }
};

TEST(DdpRank, Zero3GathersJustInTimeAndReducesShards) {
  if (TestDir() == nullptr) GTEST_SKIP() << "worker: runs under DataParallel tests";
  auto comm = Join();
  const int w = comm->world_size(), rank = comm->rank();
  ThreeLayers reference;
  for (int r = 0; r < w; ++r) reference.Loss(r, nullptr).backward();
  ThreeLayers model;
  Zero3 zero(*comm, model.Units(), {});
  int64_t unit_bytes = 0, expected_numel = 0;
  for (auto& l : reference.layers) {
    int64_t n = 0;
    for (const auto& p : l->parameters()) n += p.numel();
    unit_bytes += (n + w - 1) / w * w * 4;
    expected_numel += n;
  }
  EXPECT_EQ(zero.numel(), expected_numel);
  EXPECT_EQ(zero.gathered_bytes(), 0);  // only shards are resident
  for (int pass = 0; pass < 2; ++pass) {
    zero.Arm();
    model.Loss(rank, &zero).backward();
    zero.Finish();
    EXPECT_EQ(zero.gathered_bytes(), 0) << "pass " << pass;
    // Each rank's pieces of the summed gradient, unit by unit.
    int64_t at = 0;
    for (auto& l : reference.layers) {
      std::vector<at::Tensor> flat;
      for (const auto& p : l->parameters()) flat.push_back(p.grad().reshape({-1}));
      auto unit = torch::cat(flat);
      const int64_t piece = (unit.numel() + w - 1) / w;
      unit = torch::cat({unit, torch::zeros({piece * w - unit.numel()})});
      EXPECT_TRUE(torch::allclose(zero.shard_grads().narrow(0, at, piece),
                                  unit.narrow(0, rank * piece, piece), 1e-5, 1e-6))
          << "pass " << pass;
      at += piece;
    }
    for (auto& l : model.layers) {
      for (const auto& p : l->parameters()) EXPECT_FALSE(p.grad().defined());
    }
  }
  // Never all three layers gathered at once: reshard after forward, gather
  // again just before each layer's backward.
  EXPECT_GT(zero.peak_gathered_bytes(), 0);
  EXPECT_LT(zero.peak_gathered_bytes(), unit_bytes);
  // Without resharding after forward every unit stays gathered until its
  // backward: the same gradients, all three units at the peak.
  ThreeLayers kept;
  Zero3 keep(*comm, kept.Units(), {.reshard_after_forward = false});
  keep.Arm();
  kept.Loss(rank, &keep).backward();
  keep.Finish();
  EXPECT_TRUE(torch::equal(keep.shard_grads(), zero.shard_grads()));
  EXPECT_EQ(keep.peak_gathered_bytes(), unit_bytes);
  EXPECT_EQ(keep.gathered_bytes(), 0);
}

TEST(DdpRank, SyncRowsSumsTouchedRowsOnBothPaths) {
  if (TestDir() == nullptr) GTEST_SKIP() << "worker: runs under DataParallel tests";
  auto comm = Join();
  const int w = comm->world_size();
  // Rank r touches ids {r, r + 3, 7} of each table, gradient rows id + r.
  auto local = [](int r) {
    const auto ids = torch::tensor({int64_t(r), int64_t(r + 3), int64_t(7)});
    return RowGrads{ids, (ids.to(torch::kFloat) + r).unsqueeze(1).repeat({1, 4})};
  };
  std::vector<at::Tensor> all_ids, all_grads;
  for (int r = 0; r < w; ++r) {
    all_ids.push_back(local(r).ids);
    all_grads.push_back(local(r).grads);
  }
  const RowGrads expected = CoalesceRows(torch::cat(all_ids), torch::cat(all_grads));
  // Table 1 (10^6 rows) goes sparse; table 0 (8 rows) dense from world 3
  // (8 <= world x 3 docs), sparse at world 2.
  const auto got = SyncRows(*comm, {local(comm->rank()), local(comm->rank())}, {8, 1000000}, 3);
  for (const auto& g : got) {
    EXPECT_TRUE(torch::equal(g.ids, expected.ids));
    EXPECT_TRUE(torch::allclose(g.grads, expected.grads));
  }
  // With every rank's row count known up front (one collective, no size
  // exchange) and work done while the rows travel: the same sums.
  const int64_t count = SparseRowCount({3, 3}, {8, 1000000}, w, 3);
  EXPECT_EQ(count, 8 <= w * 3 ? 3 : 6);  // the sparse tables' rows: table 0 is dense from world 3
  bool ran = false;
  const std::vector<int64_t> counts(static_cast<size_t>(w), count);
  const auto again = SyncRows(*comm, {local(comm->rank()), local(comm->rank())}, {8, 1000000}, 3,
                              &counts, [&] { ran = true; });
  EXPECT_TRUE(ran);
  for (size_t c = 0; c < again.size(); ++c) {
    EXPECT_TRUE(torch::equal(again[c].ids, got[c].ids));
    EXPECT_TRUE(torch::equal(again[c].grads, got[c].grads));
  }
}

TEST(DdpRank, WrongJobTokenIsRefused) {
  if (TestDir() == nullptr) GTEST_SKIP() << "worker: runs under DataParallel tests";
  LaunchEnv env = DetectLaunchEnv();
  env.num_nodes = 2;  // as if across hosts: the token is checked
  const std::string token = env.rank == 1 ? "wrong" : "secret";
  try {
    Join(env, token);
    ADD_FAILURE() << "joined with a wrong token in the job";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDist);
    WriteFileAtomic(fs::path(TestDir()) / ("error." + std::to_string(env.rank)), e.Message());
  }
}

TEST(DataParallel, BucketsAndRowSync) {
  for (int world : {2, 3}) {
    testing::TempDir dir;
    EXPECT_TRUE(RunRanks(world, "DdpRank.Bucket*:DdpRank.SyncRows*:DdpRank.Zero3*", dir.path()))
        << world;
  }
}

TEST(DataParallel, WrongTokenNamesTheRank) {
  testing::TempDir dir;
  ASSERT_TRUE(RunRanks(2, "DdpRank.WrongJobToken*", dir.path()));
  for (int r : {0, 1}) {
    const std::string msg = ReadFile(dir / ("error." + std::to_string(r)));
    EXPECT_NE(msg.find("rank 1 was refused"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace topspin
