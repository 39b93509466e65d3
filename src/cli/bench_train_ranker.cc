// bench train-ranker: our ranker training against the same model in
// PyTorch (bench/peers/ranker_pytorch.py) and XGBoost rank:ndcg
// (bench/peers/ranker_xgboost.py) on the same data, in the same run.
#include "cli/benches.h"
#include "topspin/core/error.h"

#ifdef TOPSPIN_HAVE_TORCH

#include <algorithm>
#include <chrono>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli/run_command.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/data/dataset.h"
#include "topspin/data/gen_shop.h"
#include "topspin/model/ranker.h"
#include "topspin/pipeline/shop_features.h"
#include "topspin/train/device.h"
#include "topspin/train/ranker_trainer.h"

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

nlohmann::json PeerJson(const std::string& command, const fs::path& script) {
  return nlohmann::json::parse(cli::RunPeer(command, script.string()));
}

// The middle value (the mean of the middle two for an even count).
double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// "a; b; c" with each value as {:.0f}.
std::string JoinRounded(const std::vector<double>& v) {
  std::string out;
  for (double x : v) out += fmt::format("{}{:.0f}", out.empty() ? "" : "; ", x);
  return out;
}

// The tightest compute limit of a training step: the dense layers' GEMMs
// of one batch of `docs` documents at their own shapes (forward X W^T + b;
// backward dW = dY^T X and dX = dY W, no dX for the first layer), run back
// to back into preallocated outputs on this thread count, nothing else.
// Returns documents per second. Small shapes run well below the 1024^3
// peak, so this is the ceiling any implementation on this BLAS meets.
double MatmulAtShapeDocsPerS(const RankerOptions& o, int64_t docs) {
  std::vector<std::pair<int64_t, int64_t>> layers;  // (in, out)
  int64_t in = o.dense_dim;
  for (int64_t w : o.bottom) layers.emplace_back(std::exchange(in, w), w);
  in += static_cast<int64_t>(o.table_sizes.size()) * o.embedding_dim;
  for (int64_t w : o.top) layers.emplace_back(std::exchange(in, w), w);
  layers.emplace_back(in, 1);
  struct Buffers {
    at::Tensor x, w, b, y, dy, dw, dx;
  };
  std::vector<Buffers> bufs;
  for (const auto& [i, out] : layers) {
    bufs.push_back({torch::randn({docs, i}), torch::randn({out, i}), torch::randn({out}),
                    torch::empty({docs, out}), torch::randn({docs, out}), torch::empty({out, i}),
                    torch::empty({docs, i})});
  }
  const auto step = [&] {
    for (auto& b : bufs) at::addmm_out(b.y, b.b, b.x, b.w.t());
    for (size_t l = 0; l < bufs.size(); ++l) {
      auto& b = bufs[l];
      at::mm_out(b.dw, b.dy.t(), b.x);
      if (l > 0) at::mm_out(b.dx, b.dy, b.w);
    }
  };
  for (int i = 0; i < 20; ++i) step();  // warm up
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 100; ++i) step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 100.0 * double(docs) / s);
  }
  return best;
}

}  // namespace

BenchTable RunTrainRankerBench(const TrainRankerBenchOptions& o) {
  fs::create_directories(o.scratch);
  const fs::path train = o.scratch / "bench-train", valid = o.scratch / "bench-valid";
  const fs::path train_csv = o.scratch / "bench-train.csv",
                 valid_csv = o.scratch / "bench-valid.csv";
  const fs::path spec = o.scratch / "bench-train-spec.json", run = o.scratch / "bench-train-run";
  for (const auto& p : {train, valid, train_csv, valid_csv, spec, run}) fs::remove_all(p);
  BenchStages stages("train-ranker", 1 + 2 * o.repeats + (o.trees ? 2 : 0));
  stages.Begin(fmt::format("data: gen shop {} + {} queries, shards and CSV", o.queries,
                           o.valid_queries));
  const ShopOptions train_shop{.queries = o.queries, .seed = o.seed};
  const ShopOptions valid_shop{.queries = o.valid_queries, .seed = o.seed + 1000};
  const Manifest m = WriteShopShards(train, train_shop);
  WriteShopShards(valid, valid_shop);
  WriteShopCsv(train_csv, train_shop);
  WriteShopCsv(valid_csv, valid_shop);
  WriteFileAtomic(spec, ShopPeerSpecJson(m, o.seed));

  // Ours: the peer's settings (AdamW 3e-3 without decay, lazy Adam = SparseAdam
  // at the same rate, softmax loss, batches of o.batch lists, clip 1).
  const uint64_t steps =
      static_cast<uint64_t>(o.epochs) * (m.group_stats.groups / static_cast<uint64_t>(o.batch));
  const std::string yaml = fmt::format(
      R"yaml(
run: {{seed: {}}}
data: {{train: "{}", valid: "{}"}}
pipeline: {{threads: {}, batch_size: {}, shuffle: global, dense: {}, sparse: {}}}
model: {{embedding_dim: 16, bottom: [64], top: [128, 64], loss: softmax}}
optim: {{lr: 0.003, weight_decay: 0.0, schedule: constant, warmup_steps: 0, sparse: lazy_adam,
         sparse_lr: 0.003, clip_norm: 1.0}}
train: {{steps: {}, log_every: 100, eval_every: 0, checkpoint_every: 0, torch_threads: {}}}
)yaml",
      o.seed, train.string(), valid.string(), o.threads, o.batch, YamlList(ShopDenseChains()),
      YamlList(ShopSparseChains()), steps, o.torch_threads);
  const Config config =
      Config::Parse(yaml, "<bench train-ranker>", {"train.device=" + o.device}, TopspinSchema());
  const RankerOptions model{.dense_dim = 48,
                            .table_sizes = {17, 17, 262144, 262144, 262144, 262144},
                            .embedding_dim = 16};
  const double flops_per_doc = 3.0 * double(Ranker(model).ForwardFlopsPerDoc());
  const auto docs_per_batch =
      static_cast<int64_t>(double(m.rows()) / double(m.group_stats.groups) * o.batch);
  const bool cpu = o.device == "cpu";
  const fs::path torch_peer = o.peers / "ranker_pytorch.py",
                 xgb_peer = o.peers / "ranker_xgboost.py";

  // Rounds of ours, the peer and the floors, interleaved, so that a change in
  // the machine's speed during the bench lands on all of them. Round 1 keeps
  // ours' phases and NDCG and the peer's sweep; later rounds run the peer's
  // best trial only.
  struct Rounds {
    std::vector<double> ours, peer, peak, shape;
  } rounds;
  RankerTrainResult ours;
  nlohmann::json pt;
  for (int r = 0; r < o.repeats; ++r) {
    const std::string of = o.repeats > 1 ? fmt::format(" (round {}/{})", r + 1, o.repeats) : "";
    stages.Begin(fmt::format("ours: {} steps on {}{}", steps, o.device, of));
    fs::remove_all(run);  // a fresh run, not a resume
    // The config's train.torch_threads, as `topspin train` applies it (before
    // 2026-12-06 this passed 1, so ours trained on one LibTorch thread while
    // the table said 2).
    ApplyProcessPolicy(Settings::From(config).train.torch_threads);
    const RankerTrainResult result = TrainRanker(config, {.run_dir = run});
    stages.Begin(fmt::format("PyTorch peer ({}){}", torch_peer.string(), of));
    const nlohmann::json peer = PeerJson(
        fmt::format("{} '{}' '{}' '{}' '{}' --epochs {} --batch {} --seed {} "
                    "--device {} --threads-grid {} --workers {} 2>&1",
                    PeerPython(), torch_peer.string(), train_csv.string(), valid_csv.string(),
                    spec.string(), o.epochs, o.batch, o.seed,
                    TrainConfig::From(config).device == "cuda" ? "cuda" : "cpu",
                    r == 0 ? o.peer_threads : std::to_string(pt["threads"].get<int>()),
                    r == 0 ? o.peer_workers : std::to_string(pt["num_workers"].get<int>())),
        torch_peer);
    if (r == 0) {
      ours = result;
      pt = peer;
    }
    rounds.ours.push_back(result.items_per_s);
    rounds.peer.push_back(peer["docs_per_s"].get<double>());
    if (cpu) {  // the floors are the CPU's matmul rates
      // The peak the profiler's MFU is measured against, on the peer's
      // threads; the step's own matmuls at their shapes on ours.
      torch::set_num_threads(o.threads);
      rounds.peak.push_back(MeasureMatmulPeak(ComputeDevice{}, /*bf16=*/false) / flops_per_doc);
      torch::set_num_threads(o.torch_threads);
      rounds.shape.push_back(MatmulAtShapeDocsPerS(model, docs_per_batch));
    }
  }
  const double ours_docs_per_s = MedianOf(rounds.ours);

  const auto trees = [&](const char* library) {
    stages.Begin(fmt::format("{} peer ({}, up to {} rounds, early stopping)", library,
                             xgb_peer.string(), o.xgb_rounds));
    return PeerJson(fmt::format("{} '{}' '{}' '{}' --library {} --rounds {} --depths {} "
                                "--leaves {} --etas {} --threads {} 2>&1",
                                PeerPython(), xgb_peer.string(), train_csv.string(),
                                valid_csv.string(), library, o.xgb_rounds, o.xgb_depths,
                                o.lgb_leaves, o.tree_etas, o.threads),
                    xgb_peer);
  };
  const nlohmann::json xgb = o.trees ? trees("xgboost") : nlohmann::json(),
                       lgb = o.trees ? trees("lightgbm") : nlohmann::json();
  const auto describe = [](const nlohmann::json& peer) {
    std::string grid;
    for (const auto& g : peer["grid"]) {
      grid += fmt::format("{}{} -> {:.4f} ({} rounds, {:.0f} s)", grid.empty() ? "" : "; ",
                          g["params"].dump(), g["ndcg10"].get<double>(), g["rounds"].get<int>(),
                          g["seconds"].get<double>());
    }
    return grid;
  };

  BenchTable t{
      "train-ranker",
      fmt::format("gen shop {} train / {} held-out queries ({} docs), {} epoch(s) = {} "
                  "steps of {} lists, {} threads; 48 dense + 6 sparse features, tables "
                  "4 x 2^18 x 16. PyTorch peer: num_workers {}, torch threads {} (fastest of "
                  "{}). XGBoost grid: {}. LightGBM grid: {}. Our phases (round 1): {}. "
                  "Docs/s by round ({}; the table shows medians): ours {}; PyTorch {}{}",
                  o.queries, o.valid_queries, m.rows(), o.epochs, steps, o.batch, o.threads,
                  pt["num_workers"].get<int>(), pt["threads"].get<int>(), pt["trials"].dump(),
                  o.trees ? describe(xgb) : "not run (--no-trees)",
                  o.trees ? describe(lgb) : "not run (--no-trees)", DescribePhases(ours),
                  o.repeats, JoinRounded(rounds.ours), JoinRounded(rounds.peer),
                  cpu ? fmt::format("; matmul peak {}; matmuls at their shapes {}",
                                    JoinRounded(rounds.peak), JoinRounded(rounds.shape))
                      : ""),
      {}};
  t.rows.push_back({"ranker training", ours_docs_per_s, "PyTorch (per-batch loader, SparseAdam)",
                    MedianOf(rounds.peer), "docs/s"});
  if (cpu) {
    t.rows.push_back({"ranker training", ours_docs_per_s, "compute floor (matmul peak)",
                      MedianOf(rounds.peak), "docs/s"});
    t.rows.push_back({"ranker training", ours_docs_per_s,
                      fmt::format("the step's matmuls alone, at their shapes ({} docs, {} "
                                  "thread(s))",
                                  docs_per_batch, o.torch_threads),
                      MedianOf(rounds.shape), "docs/s"});
  }
  t.rows.push_back({"held-out NDCG@10", ours.valid_ndcg10, "PyTorch (same epochs)",
                    pt["ndcg10"].get<double>(), ""});
  for (const auto& [peer, name] : {std::pair{&xgb, "XGBoost rank:ndcg"},
                                   std::pair{&lgb, "LightGBM lambdarank"}}) {
    if (peer->is_null()) continue;
    t.rows.push_back({"held-out NDCG@10", ours.valid_ndcg10,
                      fmt::format("{}, categorical ids ({:.0f} s)", name,
                                  (*peer)["seconds"].get<double>()),
                      (*peer)["ndcg10"].get<double>(), ""});
  }
  for (const auto& p : {train, valid, train_csv, valid_csv, spec, run}) fs::remove_all(p);
  return t;
}

}  // namespace topspin::cli

#else

namespace topspin::cli {
BenchTable RunTrainRankerBench(const TrainRankerBenchOptions&) {
  throw Error(ErrorKind::kUsage, "bench train-ranker needs the LibTorch build", {},
              "run scripts/install-deps.sh (the torch wheel into .venv/) and rebuild");
}
}  // namespace topspin::cli

#endif
