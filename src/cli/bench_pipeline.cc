// bench pipeline: the "shop transform" workload through our pipeline
// against the same transform in a PyTorch DataLoader
// (bench/peers/pipeline_pytorch.py), plus the language-model window stream
// against memcpy.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <malloc.h>
#include <numeric>
#include <thread>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/benches.h"
#include "cli/run_command.h"
#include "pipeline/source.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/large_array.h"
#include "topspin/core/rng.h"
#include "topspin/core/thread_pool.h"
#include "topspin/data/dataset.h"
#include "topspin/data/gen_shop.h"
#include "topspin/perf/memory.h"
#include "topspin/pipeline/pipeline.h"
#include "topspin/pipeline/shop_features.h"
#include "topspin/pipeline/transform.h"

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;
using Seconds = std::chrono::duration<double>;
constexpr uint64_t kCheckQueries = 256;  // lists the peers' transform is checked on

double MiB(uint64_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

}  // namespace

// The peers' inputs: the shop transform's constants as our pipeline resolves
// them from `m` (the training data's statistics), so the peers compute the
// same function and bench pipeline can check that they do.
std::string ShopPeerSpecJson(const Manifest& m, uint64_t seed) {
  nlohmann::json dense = nlohmann::json::array(), buckets = nlohmann::json::array(),
                 hash = nlohmann::json::array();
  for (const auto& text : ShopDenseChains()) {
    FeatureChain chain = ParseFeatureChain(text, FeatureKind::kDense, "shop");
    ResolveFeatureChain(chain, m, seed);
    nlohmann::json c{{"column", chain.columns[0]}, {"log1p", false}};
    for (const auto& s : chain.steps) {
      switch (s.op) {
        case TransformOp::kImpute: c["fill"] = static_cast<float>(s.a); break;
        case TransformOp::kLog1p: c["log1p"] = true; break;
        case TransformOp::kStandardize:
          c["mean"] = static_cast<float>(s.a);
          c["inv_std"] = static_cast<float>(s.b);
          break;
        case TransformOp::kClip:
          c["lo"] = static_cast<float>(s.a);
          c["hi"] = static_cast<float>(s.b);
          break;
        default: throw InternalError("ShopPeerSpecJson: an op the peers do not run");
      }
    }
    dense.push_back(c);
  }
  for (const auto& text : ShopSparseChains()) {
    FeatureChain chain = ParseFeatureChain(text, FeatureKind::kSparse, "shop");
    ResolveFeatureChain(chain, m, seed);
    const TransformStep& s = chain.steps.back();
    if (s.op == TransformOp::kBucketize) {
      buckets.push_back({{"column", chain.columns[0]}, {"buckets", s.count}, {"edges", s.edges}});
    } else if (s.op == TransformOp::kHash) {
      hash.push_back({{"column", chain.columns[0]}, {"slots", s.count}, {"seed", s.seed}});
    } else {
      throw InternalError("ShopPeerSpecJson: an op the peers do not run");
    }
  }
  return nlohmann::json{{"group", m.group_column},
                        {"label", m.label_column},
                        {"dense", dense},
                        {"bucketize", buckets},
                        {"hash", hash}}
      .dump();
}

namespace {

// The peers (pipeline_pytorch.py: in memory and from Parquet), after they
// check that their transform equals ours on our first `check_queries` lists.
nlohmann::json RunPeers(const fs::path& csv, const fs::path& spec, const fs::path& check,
                        const fs::path& parquet, uint64_t row_group_rows,
                        const PipelineBenchOptions& o) {
  const fs::path script = o.peer_script;
  if (!fs::exists(script)) {
    throw IoError(fmt::format("the PyTorch peer script is missing"),
                  ErrorWhere{.file = script.string()},
                  "run from the repository root or pass --peer-script");
  }
  const std::string command = fmt::format(
      "{} '{}' '{}' '{}' --workers {} --batch {} --seed {} --check '{}' --check-queries {} "
      "--parquet-dir '{}' --row-group-rows {} 2>&1",
      PeerPython(), script.string(), csv.string(), spec.string(), o.peer_workers, o.batch_queries,
      o.seed, check.string(), kCheckQueries, parquet.string(), row_group_rows);
  return nlohmann::json::parse(RunPeer(command, script.string()));
}

// Our first kCheckQueries lists in dataset order, as the files
// shop_transform.check reads (PREFIX.dense.f32 etc.).
void WriteCheckBatch(const fs::path& dir, const fs::path& prefix, uint64_t seed) {
  const RankingSpec spec{.dataset = dir, .dense = ShopDenseChains(), .sparse = ShopSparseChains()};
  Pipeline p(spec, {.threads = 1, .prefetch = 1, .batch_size = kCheckQueries,
                    .shuffle = ShuffleMode::kNone, .seed = seed, .max_epochs = 1});
  BatchPtr b = p.Next();
  const auto write = [&](const char* suffix, const auto& span) {
    WriteFileAtomic(prefix.string() + suffix,
                    std::string_view(reinterpret_cast<const char*>(span.data()), span.size_bytes()));
  };
  write(".dense.f32", b->dense());
  write(".sparse.i64", b->sparse());
  write(".labels.f32", b->labels());
  write(".offsets.i64", b->offsets());
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
  uint64_t rss_before = 0;
  uint64_t rss_at[2][2] = {};  // [epoch][10%, 100%]
  PipelineStats stats;
  double growth_mib(int epoch) const { return MiB(rss_at[epoch][1] - rss_before); }
};

OursResult RunOurs(const fs::path& dir, const PipelineBenchOptions& o, size_t cache_bytes,
                   ShuffleMode shuffle = ShuffleMode::kGlobal, uint64_t epochs = 2) {
  const RankingSpec spec{.dataset = dir, .dense = ShopDenseChains(), .sparse = ShopSparseChains()};
  PipelineOptions options = TwoEpochs(o, o.batch_queries);
  options.cache_bytes = cache_bytes;
  options.shuffle = shuffle;
  options.max_epochs = epochs;
  OursResult r;
  // Heap memory earlier runs freed would otherwise be reused unseen, and
  // this run's RSS growth would look smaller than it is.
  ::malloc_trim(0);
  r.rss_before = CurrentRssBytes();
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
fs::path WriteTokens(const fs::path& dir, uint64_t tokens, int zstd_level, bool byte_planes) {
  DatasetWriterOptions w{.out = dir, .schema = {{"tokens", DType::kTokensU16}}};
  w.zstd_level = zstd_level;
  w.byte_planes = byte_planes;
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
// With `batches` set: GB/s over the first that many batches of epoch 1
// alone, in gbps[0].
struct LmResult {
  double gbps[2] = {0, 0};
  uint64_t tokens = 0;  // per epoch
  PipelineStats stats;
};
LmResult RunLanguageModel(const fs::path& dir, const PipelineBenchOptions& o,
                          size_t cache_bytes = PipelineOptions{}.cache_bytes,
                          ShuffleMode shuffle = ShuffleMode::kGlobal, uint64_t batches = 0) {
  const LanguageModelSpec spec{.dataset = dir, .seq_len = o.seq_len};
  PipelineOptions options = TwoEpochs(o, o.lm_batch);
  options.cache_bytes = cache_bytes;
  options.shuffle = shuffle;
  LmResult r;
  auto start = std::chrono::steady_clock::now();
  Pipeline p(spec, options);
  uint64_t bytes = 0;
  while (BatchPtr b = p.Next()) {
    bytes += b->tokens().size_bytes();
    if (batches != 0 && b->index + 1 == batches) {
      r.gbps[0] = static_cast<double>(bytes) / 1e9 /
                  Seconds(std::chrono::steady_clock::now() - start).count();
      r.stats = p.Stats();
      return r;
    }
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

// Writing memory nobody touched before, allocated as cached units are
// (LargeArray, 8 MiB each, kept until the end): what filling the cache
// costs per byte on this machine, the kernel's zeroing of each new page
// included. Measured before anything else runs, so the heap holds no freed
// memory to reuse.
double FirstTouchGBps(size_t bytes) {
  constexpr size_t kChunk = size_t{8} << 20;
  std::vector<LargeArray<char>> chunks;
  const auto start = std::chrono::steady_clock::now();
  for (size_t at = 0; at < bytes; at += kChunk) {
    chunks.emplace_back(kChunk);
    std::memset(chunks.back().data(), 1, kChunk);
  }
  return static_cast<double>(bytes) / 1e9 /
         Seconds(std::chrono::steady_clock::now() - start).count();
}

// The decode limit: documents per second that `threads` threads decode
// (zstd, every column) into tables they reuse, the best of three passes
// after a warm one; no read checksums, no transform, no batches.
double DecodeLimitDocsPerS(const fs::path& dir, int threads) {
  const DatasetReader reader(dir);
  std::vector<std::pair<size_t, size_t>> groups;  // (shard, row group)
  for (size_t s = 0; s < reader.num_shards(); ++s) {
    for (size_t g = 0; g < reader.shard(s).num_row_groups(); ++g) groups.emplace_back(s, g);
  }
  std::vector<size_t> columns(reader.manifest().schema.size());
  std::iota(columns.begin(), columns.end(), size_t{0});
  std::vector<Table> tables(static_cast<size_t>(threads));
  const auto pass = [&] {
    std::atomic<size_t> next{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        for (size_t k; (k = next++) < groups.size();) {
          reader.shard(groups[k].first)
              .ReadRowGroupInto(groups[k].second, columns, tables[size_t(t)], /*verify=*/false);
        }
      });
    }
    for (auto& w : workers) w.join();
  };
  pass();
  return static_cast<double>(reader.manifest().rows()) / BestSeconds(3, pass);
}

// The load floor: documents per second of `threads` threads loading every
// row group once (read, decode, transform into fresh cached units, kept to
// the end as epoch 1 keeps them), balanced perfectly (a shared counter), no
// planning and no batches; the best of three passes. Epoch 1 cannot beat it:
// it does this work and then assembles.
double LoadFloorDocsPerS(const RankingSpec& spec, uint64_t docs, int threads) {
  using namespace pipeline_internal;
  struct Serial final : LoadHelpers {
    void For(Stage, size_t n, const std::function<void(size_t)>& fn) override {
      for (size_t i = 0; i < n; ++i) fn(i);
    }
  };
  PipelineOptions options;
  options.threads = threads;
  const auto source = MakeRankingSource(spec, options);
  ThreadPool pool(static_cast<size_t>(threads));
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    StageCounters counters;
    std::vector<std::shared_ptr<const Unit>> units(source->units());
    std::atomic<size_t> next{0};
    const auto start = std::chrono::steady_clock::now();
    pool.ParallelFor(0, pool.size(), [&](size_t) {
      Table table;
      std::atomic<uint64_t> busy{0};
      StageClock clock(counters, busy);
      Serial serial;
      for (size_t u; (u = next++) < units.size();) units[u] = source->Load(u, table, clock, serial);
    });
    const double s = Seconds(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(docs) / s);
  }
  return best;
}

// How many of the dataset's row groups the first batch of epoch 1 draws
// from under the bench's global shuffle: no list of it can be assembled
// before all of them are loaded, so epoch 1 loads first and assembles after.
std::pair<size_t, size_t> FirstBatchUnits(const RankingSpec& spec, const PipelineBenchOptions& o) {
  using namespace pipeline_internal;
  const auto source = MakeRankingSource(spec, PipelineOptions{});
  const SampleOrder order(
      source->samples(),
      {.mode = ShuffleMode::kGlobal, .seed = o.seed, .block_size = source->block_size()});
  std::vector<uint64_t> positions(std::min<uint64_t>(o.batch_queries, source->samples()));
  std::iota(positions.begin(), positions.end(), uint64_t{0});
  std::vector<uint64_t> samples(positions.size());
  order.AtMany(0, positions, samples.data());
  std::vector<size_t> units;
  for (uint64_t sample : samples) source->UnitsOf(0, sample, units);
  std::sort(units.begin(), units.end());
  units.erase(std::unique(units.begin(), units.end()), units.end());
  return {units.size(), source->units()};
}

}  // namespace

BenchTable RunPipelineBench(const PipelineBenchOptions& o) {
  fs::create_directories(o.scratch);
  const fs::path shards = o.scratch / "bench-pipeline-shop", csv = o.scratch / "bench-pipeline.csv";
  const fs::path small = o.scratch / "bench-pipeline-shop-small",
                 medium = o.scratch / "bench-pipeline-shop-blocks",
                 large = o.scratch / "bench-pipeline-shop-blocks-large";
  const fs::path spec = o.scratch / "bench-pipeline-spec.json",
                 check = o.scratch / "bench-pipeline-ours",
                 parquet = o.scratch / "bench-pipeline-parquet",
                 tokens = o.scratch / "bench-pipeline-tokens";
  const auto clean = [&] {
    for (const auto& p : {shards, small, medium, large, csv, spec, parquet, tokens}) {
      fs::remove_all(p);
    }
    for (const char* s : {".dense.f32", ".sparse.i64", ".labels.f32", ".offsets.i64"}) {
      fs::remove(check.string() + s);
    }
  };
  clean();
  BenchStages stages("pipeline", 6);
  const double first_touch_gbps = FirstTouchGBps(size_t{256} << 20);
  stages.Begin(fmt::format("data: gen shop {}, {} and {} queries", o.queries, o.queries / 10,
                           o.queries * 10));
  const ShopOptions shop{.queries = o.queries, .seed = o.seed};
  DatasetWriterOptions writer;
  writer.threads = o.threads;
  writer.byte_planes = o.byte_planes;
  const Manifest m = WriteShopShards(shards, shop, writer);
  WriteShopShards(small, {.queries = std::max<uint64_t>(1, o.queries / 10), .seed = o.seed}, writer);
  // Block shuffle's datasets: row groups of 8192 rows, so that even the
  // smaller one has more row groups than a window.
  DatasetWriterOptions blocks = writer;
  blocks.row_group_rows = 8192;
  WriteShopShards(medium, shop, blocks);
  const Manifest large_m =
      WriteShopShards(large, {.queries = o.queries * 10, .seed = o.seed}, blocks);

  stages.Begin("ours: the shop transform, two epochs; RSS at two sizes and two caches");
  const size_t default_cache = PipelineOptions{}.cache_bytes, small_cache = o.small_cache_mib << 20;
  // Epoch 1 happens once per pipeline. The peers report their best of two
  // epochs and the decode limit its best of three passes, so ours is the
  // best of three fresh pipelines, each filling its cache anew.
  OursResult ours = RunOurs(shards, o, default_cache);
  for (int run = 1; run < 3; ++run) {
    OursResult again = RunOurs(shards, o, default_cache);
    if (again.epoch_docs_per_s[0] > ours.epoch_docs_per_s[0]) ours = std::move(again);
  }
  const OursResult ours_small_data = RunOurs(small, o, default_cache);
  const OursResult ours_small_cache = RunOurs(shards, o, small_cache);
  // Block shuffle over 10x the data: memory is bounded by the cache or one
  // window of row groups, whatever the dataset size.
  const OursResult block_large = RunOurs(large, o, small_cache, ShuffleMode::kBlock, 1);
  const OursResult block_large_big_cache = RunOurs(large, o, default_cache, ShuffleMode::kBlock, 1);
  const OursResult block = RunOurs(medium, o, small_cache, ShuffleMode::kBlock, 1);
  const double decode_limit = DecodeLimitDocsPerS(shards, o.threads);
  const RankingSpec shop_spec{
      .dataset = shards, .dense = ShopDenseChains(), .sparse = ShopSparseChains()};
  const double load_floor = LoadFloorDocsPerS(shop_spec, m.rows(), o.threads);
  const auto [first_batch_units, units] = FirstBatchUnits(shop_spec, o);

  stages.Begin(fmt::format("PyTorch peers (in memory and Parquet), num_workers {}",
                           o.peer_workers));
  WriteShopCsv(csv, shop);
  WriteFileAtomic(spec, ShopPeerSpecJson(m, o.seed));
  WriteCheckBatch(shards, check, o.seed);
  const uint64_t row_group_rows = DatasetReader(shards).shard(0).row_group(0).rows;
  const nlohmann::json peer = RunPeers(csv, spec, check, parquet, row_group_rows, o);
  const auto configs = [](const nlohmann::json& sweep) {
    std::string out;
    for (const auto& c : sweep["configs"]) {
      out += fmt::format("{}num_workers {}: {:.0f}", out.empty() ? "" : ", ",
                         c["num_workers"].get<int>(), c["docs_per_s"].get<double>());
    }
    return out;
  };
  stages.Begin(fmt::format("language-model windows, T = {}, and the memcpy limit", o.seq_len));
  WriteTokens(tokens, o.lm_tokens, 3, o.byte_planes);
  LmResult lm = RunLanguageModel(tokens, o);  // the best of 3 fresh pipelines, as for the shop
  for (int run = 1; run < 3; ++run) {
    LmResult again = RunLanguageModel(tokens, o);
    if (again.gbps[0] > lm.gbps[0]) lm = std::move(again);
  }
  const uint64_t lm_tokens = lm.tokens;
  const double memcpy_gbps = MemcpyGBps(lm_tokens * 4);
  // The same stream with a cache that holds half the decoded tokens: a
  // global shuffle lets row groups go that later windows of the epoch
  // need, and loads them again (the pipeline warns); block shuffle does
  // not. The first lm_capped_batches batches of epoch 1 each.
  const size_t lm_half_cache = std::max<size_t>(size_t{1} << 20, lm_tokens);  // 2 B a u16 token
  const uint64_t lm_units = Manifest::Load(tokens).row_groups();
  const uint64_t capped =
      std::min<uint64_t>(o.lm_capped_batches, lm_tokens / o.seq_len / o.lm_batch);
  const LmResult lm_global_half =
      RunLanguageModel(tokens, o, lm_half_cache, ShuffleMode::kGlobal, capped);
  const LmResult lm_block_half =
      RunLanguageModel(tokens, o, lm_half_cache, ShuffleMode::kBlock, capped);

  const auto busy = [](const PipelineStats& stats) {
    std::string out;
    for (const auto& s : stats.stages) {
      out += fmt::format("{}{} {:.2f} s", out.empty() ? "" : ", ", s.name, s.busy_s);
    }
    return out + fmt::format("; consumer waited {:.2f} s of {:.2f} s", stats.consumer_wait_s,
                             stats.elapsed_s);
  };
  const nlohmann::json& verified = peer["check"];
  BenchTable t{
      "pipeline",
      fmt::format(
          "gen shop {} queries ({} docs; RSS also at {} and {} queries, {} docs; shards {}, "
          "{} on disk), batch {} "
          "queries, {} threads, prefetch {}, global shuffle; 48 dense + 6 sparse outputs; ours "
          "the best of 3 fresh pipelines. Peers' docs/s (best of {} epochs) in "
          "memory by {}; from Parquet by {}. Check: the peers' transform of our first {} lists "
          "({} docs) equals ours (dense max |diff| {:.2g}, sparse and label mismatches {}, {}). "
          "Our stage busy time over both epochs: {}. LM (best of 3 fresh pipelines): {} tokens "
          "per epoch, T = {}, batch {}; {}",
          o.queries, m.rows(), o.queries / 10, o.queries * 10, large_m.rows(),
          o.byte_planes ? "zstd with byte planes" : "plain zstd (--no-byte-planes)",
          FormatBytes(m.bytes()), o.batch_queries, o.threads, o.prefetch, 2,
          configs(peer["memory"]), configs(peer["parquet"]), verified["lists"].get<int>(),
          verified["docs"].get<int>(),
          std::max(verified["dense_max_abs_diff"].get<double>(),
                   peer["check_parquet"]["dense_max_abs_diff"].get<double>()),
          verified["sparse_mismatches"].get<int>(), verified["label_mismatches"].get<int>(),
          busy(ours.stats), lm_tokens, o.seq_len, o.lm_batch, busy(lm.stats)),
      {}};
  const auto best = [&](const char* sweep, const char* what) {
    const auto& b = peer[sweep]["best"];
    return std::pair{fmt::format("PyTorch DataLoader, {} (num_workers {})", what,
                                 b["num_workers"].get<int>()),
                     b["docs_per_s"].get<double>()};
  };
  const auto [memory_name, memory_best] = best("memory", "in memory, per batch");
  const auto [parquet_name, parquet_best] = best("parquet", "pyarrow Parquet, per batch");
  const std::string epoch1 = "shop transform, epoch 1 (read+decode+transform+batch)";
  t.rows.push_back({epoch1, ours.epoch_docs_per_s[0], memory_name, memory_best, "docs/s"});
  t.rows.push_back({epoch1, ours.epoch_docs_per_s[0], parquet_name, parquet_best, "docs/s"});
  t.rows.push_back({epoch1, ours.epoch_docs_per_s[0],
                    fmt::format("decode limit ({} threads, zstd into reused tables)", o.threads),
                    decode_limit, "docs/s"});
  t.rows.push_back({epoch1, ours.epoch_docs_per_s[0],
                    fmt::format("load floor ({} threads read, decode and transform every row "
                                "group, perfectly balanced; no batches)",
                                o.threads),
                    load_floor, "docs/s"});
  // Under a global shuffle nothing is assembled before the last load, so
  // epoch 1 takes at least the load floor's time plus the time to assemble
  // every batch from the cache, which epoch 2 measures (the same threads,
  // prefetch and consumer). Overlapping them would need the whole epoch's
  // batches in memory, which the pipeline's memory bound rules out.
  const double serial_limit = 1.0 / (1.0 / load_floor + 1.0 / ours.epoch_docs_per_s[1]);
  const std::string serial_name = fmt::format(
      "global-shuffle limit: the load floor, then every batch assembled at epoch 2's rate (the "
      "first batch draws from {} of {} row groups)",
      first_batch_units, units);
  t.rows.push_back({epoch1, ours.epoch_docs_per_s[0], serial_name, serial_limit, "docs/s"});
  t.rows.push_back({"global-shuffle limit of epoch 1 (load floor, then assembly at epoch 2's rate)",
                    serial_limit, memory_name, memory_best, "docs/s"});
  // Every unit is transformed once (the cache holds them all), so what the
  // transform stage produced is what the cache was filled with.
  const auto transformed = std::find_if(ours.stats.stages.begin(), ours.stats.stages.end(),
                                        [](const StageStats& s) { return s.name == "transform"; });
  const double cached_bytes_per_doc =
      static_cast<double>(transformed->bytes) / static_cast<double>(m.rows());
  t.rows.push_back({epoch1, ours.epoch_docs_per_s[0],
                    fmt::format("zeroing the cache alone ({} threads x fresh-memory rate / {:.0f} "
                                "cached bytes per doc)",
                                o.threads, cached_bytes_per_doc),
                    o.threads * first_touch_gbps * 1e9 / cached_bytes_per_doc, "docs/s"});
  t.rows.push_back({"shop transform, epoch 2 (cache of transformed row groups; the peer has none)",
                    ours.epoch_docs_per_s[1], memory_name, memory_best, "docs/s"});
  const uint64_t small_mib = small_cache >> 20, default_mib = default_cache >> 20;
  t.rows.push_back({fmt::format("RSS growth over epoch 1, global, {} queries", o.queries),
                    ours.growth_mib(0), fmt::format("{} queries", o.queries / 10),
                    ours_small_data.growth_mib(0), "MiB", Better::kSame});
  t.rows.push_back({fmt::format("RSS growth over epoch 1, global, cache_mib {}", small_mib),
                    ours_small_cache.growth_mib(0), fmt::format("cache_mib {}", default_mib),
                    ours.growth_mib(0), "MiB", Better::kSame});
  t.rows.push_back({fmt::format("RSS growth over epoch 1, block (window {}, row groups of 8192), "
                                "cache_mib {}, {} queries",
                                PipelineOptions{}.window_blocks, small_mib, o.queries * 10),
                    block_large.growth_mib(0), fmt::format("{} queries", o.queries),
                    block.growth_mib(0), "MiB", Better::kSame});
  t.rows.push_back({fmt::format("RSS growth over epoch 1, block, {} queries, cache_mib {}",
                                o.queries * 10, small_mib),
                    block_large.growth_mib(0), fmt::format("cache_mib {}", default_mib),
                    block_large_big_cache.growth_mib(0), "MiB", Better::kSame});
  t.rows.push_back({fmt::format("block shuffle epoch 1, {} queries, cache_mib {}", o.queries * 10,
                                small_mib),
                    block_large.epoch_docs_per_s[0], "global shuffle epoch 1, cache_mib 2048",
                    ours.epoch_docs_per_s[0], "docs/s"});
  t.rows.push_back({"RSS at 100% of epoch 2", MiB(ours.rss_at[1][1]), "RSS at 10% of epoch 1",
                    MiB(ours.rss_at[0][0]), "MiB", Better::kSame});
  for (int e = 0; e < 2; ++e) {
    t.rows.push_back({fmt::format("LM windows, T = {}, int32, epoch {}{}", o.seq_len, e + 1,
                                  e == 0 ? " (read+decode)" : " (cached)"),
                      lm.gbps[e], "memcpy, 1 thread", memcpy_gbps, "GB/s"});
  }
  // Epoch 1 must fill the cache with the decoded tokens, in fresh memory.
  const double lm_cached_bytes_per_token =
      static_cast<double>(lm.stats.cache_resident_bytes) / static_cast<double>(lm_tokens);
  t.rows.push_back({fmt::format("LM windows, T = {}, int32, epoch 1 (read+decode)", o.seq_len),
                    lm.gbps[0],
                    fmt::format("zeroing the cache alone ({} threads x fresh-memory rate, {:.1f} "
                                "cached bytes per 4-byte token)",
                                o.threads, lm_cached_bytes_per_token),
                    o.threads * first_touch_gbps * 4 / lm_cached_bytes_per_token, "GB/s"});
  const auto loads = [&](const LmResult& r) {
    return fmt::format("{} loads of {} row groups, {} again for the same epoch",
                       r.stats.cache_loads, lm_units, r.stats.cache_reloads);
  };
  t.rows.push_back({fmt::format("LM windows, first {} batches, cache_mib {} (half the tokens), "
                                "block shuffle ({})",
                                capped, lm_half_cache >> 20, loads(lm_block_half)),
                    lm_block_half.gbps[0],
                    fmt::format("global shuffle ({})", loads(lm_global_half)),
                    lm_global_half.gbps[0], "GB/s"});
  t.rows.push_back({"first-touch write of fresh memory (256 MiB), 1 thread", first_touch_gbps,
                    "memcpy, 1 thread", memcpy_gbps, "GB/s"});
  clean();
  return t;
}

}  // namespace topspin::cli
