// bench pipeline: the "shop transform" workload through our pipeline
// against the same transform in a PyTorch DataLoader
// (bench/peers/pipeline_pytorch.py), plus the language-model window stream
// against memcpy.
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/benches.h"
#include "cli/run_command.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/rng.h"
#include "topspin/data/dataset.h"
#include "topspin/data/gen_shop.h"
#include "topspin/perf/memory.h"
#include "topspin/pipeline/pipeline.h"
#include "topspin/pipeline/shop_features.h"

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;
using Seconds = std::chrono::duration<double>;

double MiB(uint64_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

}  // namespace

// The peer's inputs: the transform as data (the same columns, ops and
// constants' sources as ShopDenseChains / ShopSparseChains).
std::string ShopPeerSpecJson(uint64_t seed) {
  nlohmann::json dense = nlohmann::json::array(), hash = nlohmann::json::array();
  const auto& heavy = ShopHeavyTailedColumns();
  const auto& categorical = ShopCategoricalColumns();
  for (const auto& name : ShopFeatureNames()) {
    if (std::find(categorical.begin(), categorical.end(), name) != categorical.end()) continue;
    dense.push_back(
        {{"column", name}, {"log1p", std::find(heavy.begin(), heavy.end(), name) != heavy.end()}});
  }
  for (const auto& name : categorical)
    hash.push_back({{"column", name}, {"slots", kShopHashSlots}});
  return nlohmann::json{{"group", "qid"},
                        {"label", "label"},
                        {"clip", 5.0},
                        {"seed", seed},
                        {"dense", dense},
                        {"bucketize",
                         {{{"column", "price"}, {"buckets", kShopBuckets}},
                          {{"column", "delivery_days"}, {"buckets", kShopBuckets}}}},
                        {"hash", hash}}
      .dump();
}

namespace {

nlohmann::json RunPeer(const fs::path& csv, const fs::path& spec, const PipelineBenchOptions& o) {
  const fs::path script = o.peer_script;
  if (!fs::exists(script)) {
    throw IoError(fmt::format("the PyTorch peer script is missing"),
                  ErrorWhere{.file = script.string()},
                  "run from the repository root or pass --peer-script");
  }
  const std::string command = fmt::format(
      "{} '{}' '{}' '{}' --workers {} --batch {} --seed {} 2>&1", PeerPython(), script.string(),
      csv.string(), spec.string(), o.peer_workers, o.batch_queries, o.seed);
  const auto [status, output] = RunCommand(command);
  const auto line = output.rfind("{\"configs\"");
  if (status != 0 || line == std::string::npos) {
    throw IoError(fmt::format("the PyTorch peer failed: {}", output.substr(0, 600)),
                  ErrorWhere{.file = script.string()},
                  "install the benchmark peers: scripts/install-deps.sh --bench");
  }
  return nlohmann::json::parse(output.substr(line));
}

// Our pipeline as the benchmark runs it: global shuffle, two epochs.
PipelineOptions TwoEpochs(const PipelineBenchOptions& o, uint64_t batch_size) {
  return PipelineOptions{.threads = o.threads,
                         .prefetch = o.prefetch,
                         .batch_size = batch_size,
                         .shuffle = ShuffleMode::kGlobal,
                         .seed = o.seed,
                         .max_epochs = 2};
}

struct OursResult {
  double epoch_docs_per_s[2] = {0, 0};
  uint64_t rss_at[2][2] = {};  // [epoch][10%, 100%]
  PipelineStats stats;
};

OursResult RunOurs(const fs::path& dir, const PipelineBenchOptions& o) {
  const RankingSpec spec{.dataset = dir, .dense = ShopDenseChains(), .sparse = ShopSparseChains()};
  const PipelineOptions options = TwoEpochs(o, o.batch_queries);
  OursResult r;
  auto start = std::chrono::steady_clock::now();
  Pipeline p(spec, options);
  const uint64_t per_epoch = p.batches_per_epoch();
  uint64_t docs = 0;
  for (uint64_t k = 0; BatchPtr b = p.Next(); ++k) {
    docs += b->num_docs;
    const uint64_t e = b->epoch, i = b->index + 1;
    if (i == per_epoch / 10) r.rss_at[e][0] = CurrentRssBytes();
    if (i == per_epoch) {
      r.rss_at[e][1] = CurrentRssBytes();
      const auto now = std::chrono::steady_clock::now();
      r.epoch_docs_per_s[e] = static_cast<double>(docs) / Seconds(now - start).count();
      docs = 0;
      start = now;
    }
  }
  r.stats = p.Stats();
  return r;
}

// Zipf-like u16 tokens (compressible, like real token streams) in
// documents of 100..2000 tokens, 256 documents (~1 MiB) per row group.
fs::path WriteTokens(const fs::path& dir, uint64_t tokens, int zstd_level) {
  DatasetWriterOptions w{.out = dir, .schema = {{"tokens", DType::kTokensU16}}};
  w.zstd_level = zstd_level;
  w.row_group_rows = 256;
  DatasetWriter writer(w);
  PhiloxStream rng(9);
  Table t = Table::Empty(w.schema);
  std::vector<uint32_t> doc;
  for (uint64_t at = 0; at < tokens;) {
    doc.resize(std::min<uint64_t>(tokens - at, 100 + rng.NextBelow(1900)));
    for (auto& v : doc) {
      const double u = rng.NextDouble();
      v = static_cast<uint32_t>(std::min(65535.0, std::exp(u * u * std::log(50000.0))));
    }
    t.columns[0].AppendTokens(doc);
    at += doc.size();
    if (t.rows() == 4096) {
      writer.Append(t);
      t = Table::Empty(w.schema);
    }
  }
  writer.Append(t);
  writer.Commit();
  return dir;
}

// GB/s of int32 window batches in each of two epochs: the first reads,
// decodes and caches every row group; the second assembles from the cache.
struct LmResult {
  double gbps[2] = {0, 0};
  uint64_t tokens = 0;  // per epoch
  PipelineStats stats;
};
LmResult RunLanguageModel(const fs::path& dir, const PipelineBenchOptions& o) {
  const LanguageModelSpec spec{.dataset = dir, .seq_len = o.seq_len};
  const PipelineOptions options = TwoEpochs(o, o.lm_batch);
  LmResult r;
  auto start = std::chrono::steady_clock::now();
  Pipeline p(spec, options);
  uint64_t bytes = 0;
  while (BatchPtr b = p.Next()) {
    bytes += b->tokens().size_bytes();
    if (b->index + 1 == p.batches_per_epoch()) {
      const auto now = std::chrono::steady_clock::now();
      r.gbps[b->epoch] = static_cast<double>(bytes) / 1e9 / Seconds(now - start).count();
      r.tokens = bytes / 4;
      bytes = 0;
      start = now;
    }
  }
  r.stats = p.Stats();
  return r;
}

double MemcpyGBps(size_t bytes) {
  std::vector<char> src(bytes, 1), dst(bytes);
  const double s = BestSeconds(3, [&] { std::memcpy(dst.data(), src.data(), bytes); });
  return static_cast<double>(bytes) / 1e9 / s;
}

// Writing memory nobody touched before (fresh 1 MiB allocations, kept until
// the end): what filling a cache costs per byte on this machine, page
// faults included.
double FirstTouchGBps(size_t bytes) {
  constexpr size_t kChunk = size_t{1} << 20;
  std::vector<std::unique_ptr<char[]>> chunks;
  const auto start = std::chrono::steady_clock::now();
  for (size_t at = 0; at < bytes; at += kChunk) {
    chunks.emplace_back(new char[kChunk]);
    std::memset(chunks.back().get(), 1, kChunk);
  }
  return static_cast<double>(bytes) / 1e9 /
         Seconds(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

BenchTable RunPipelineBench(const PipelineBenchOptions& o) {
  fs::create_directories(o.scratch);
  const fs::path shards = o.scratch / "bench-pipeline-shop", csv = o.scratch / "bench-pipeline.csv";
  const fs::path spec = o.scratch / "bench-pipeline-spec.json",
                 tokens = o.scratch / "bench-pipeline-tokens";
  for (const auto& p : {shards, csv, spec, tokens}) fs::remove_all(p);
  BenchStages stages("pipeline", 4);
  stages.Begin(fmt::format("data: gen shop {} queries", o.queries));
  const ShopOptions shop{.queries = o.queries, .seed = o.seed};
  DatasetWriterOptions writer;
  writer.threads = o.threads;
  const Manifest m = WriteShopShards(shards, shop, writer);

  stages.Begin("ours: the shop transform, two epochs");
  const OursResult ours = RunOurs(shards, o);
  stages.Begin(fmt::format("PyTorch DataLoader peer, num_workers {}", o.peer_workers));
  WriteShopCsv(csv, shop);
  WriteFileAtomic(spec, ShopPeerSpecJson(o.seed));
  const nlohmann::json peer = RunPeer(csv, spec, o);
  const double peer_best = peer["best"]["docs_per_s"].get<double>();
  std::string peer_configs;
  for (const auto& c : peer["configs"]) {
    peer_configs += fmt::format("{}num_workers {}: {:.0f}", peer_configs.empty() ? "" : ", ",
                                c["num_workers"].get<int>(), c["docs_per_s"].get<double>());
  }
  stages.Begin(fmt::format("language-model windows, T = {}, and the memcpy limit", o.seq_len));
  WriteTokens(tokens, o.lm_tokens, 3);
  const LmResult lm = RunLanguageModel(tokens, o);
  const uint64_t lm_tokens = lm.tokens;
  const double memcpy_gbps = MemcpyGBps(lm_tokens * 4);
  const double first_touch_gbps = FirstTouchGBps(lm_tokens * 4);

  const auto busy = [](const PipelineStats& stats) {
    std::string out;
    for (const auto& s : stats.stages) {
      out += fmt::format("{}{} {:.2f} s", out.empty() ? "" : ", ", s.name, s.busy_s);
    }
    return out + fmt::format("; consumer waited {:.2f} s of {:.2f} s", stats.consumer_wait_s,
                             stats.elapsed_s);
  };
  BenchTable t{
      "pipeline",
      fmt::format(
          "gen shop {} queries ({} docs), batch {} queries, {} threads, prefetch {}, "
          "global shuffle; 48 dense + 6 sparse outputs. PyTorch docs/s by {}. Our "
          "stage busy time over both epochs: {}. LM: {} tokens per epoch, T = {}, batch {}; {}",
          o.queries, m.rows(), o.batch_queries, o.threads, o.prefetch, peer_configs,
          busy(ours.stats), lm_tokens, o.seq_len, o.lm_batch, busy(lm.stats)),
      {}};
  const std::string best_name =
      fmt::format("PyTorch DataLoader (num_workers {})", peer["best"]["num_workers"].get<int>());
  t.rows.push_back({"shop transform, epoch 1 (read+decode+transform+batch)",
                    ours.epoch_docs_per_s[0], best_name, peer_best, "docs/s"});
  t.rows.push_back({"shop transform, epoch 2 (transformed row groups cached)",
                    ours.epoch_docs_per_s[1], best_name, peer_best, "docs/s"});
  for (int e = 0; e < 2; ++e) {
    t.rows.push_back({fmt::format("RSS at 100% of epoch {}", e + 1), MiB(ours.rss_at[e][1]),
                      fmt::format("RSS at 10% of epoch {}", e + 1), MiB(ours.rss_at[e][0]), "MiB",
                      Better::kSame});
  }
  for (int e = 0; e < 2; ++e) {
    t.rows.push_back({fmt::format("LM windows, T = {}, int32, epoch {}{}", o.seq_len, e + 1,
                                  e == 0 ? " (read+decode)" : " (cached)"),
                      lm.gbps[e], "memcpy, 1 thread", memcpy_gbps, "GB/s"});
  }
  t.rows.push_back({"first-touch write of fresh memory, 1 thread", first_touch_gbps,
                    "memcpy, 1 thread", memcpy_gbps, "GB/s"});
  for (const auto& p : {shards, csv, spec, tokens}) fs::remove_all(p);
  return t;
}

}  // namespace topspin::cli
