#include "topspin/pipeline/pipeline.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>
#include <thread>
#include <chrono>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "data/shard_test_util.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/data/dataset.h"
#include "topspin/data/gen_shop.h"
#include "topspin/core/files.h"
#include "topspin/demo_config.h"
#include "topspin/perf/trace.h"
#include "topspin/pipeline/pipeline_config.h"
#include "topspin/pipeline/shop_features.h"
#include "topspin/pipeline/transform.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

// A gen shop dataset with small row groups (many units), written once.
const fs::path& ShopDir() {
  static testing::TempDir dir;
  static const fs::path path = [] {
    const fs::path p = dir / "shop";
    DatasetWriterOptions w;
    w.row_group_rows = 700;
    w.shard_bytes = 200 << 10;  // several shards
    WriteShopShards(p, ShopOptions{.queries = 300, .seed = 5, .threads = 1}, w);
    return p;
  }();
  return path;
}

RankingSpec ShopSpec(const fs::path& dir = ShopDir()) {
  return RankingSpec{.dataset = dir,
                     .dense = {"price: impute(mean, flag) | log1p | standardize | clip(-5, 5)",
                               "rating_avg: impute(median, flag)", "sales_30d: log1p"},
                     .sparse = {"qid: cast", "brand: hash(1024)", "price: bucketize(16)",
                                "brand x category: cross(4096)"}};
}

// Everything a batch holds, comparable byte for byte.
struct Snapshot {
  uint64_t epoch, index;
  std::vector<float> dense, labels;
  std::vector<int64_t> sparse, offsets;
  std::vector<int32_t> tokens;
  bool operator==(const Snapshot&) const = default;
};

Snapshot Take(const Batch& b) {
  return {b.epoch,
          b.index,
          {b.dense().begin(), b.dense().end()},
          {b.labels().begin(), b.labels().end()},
          {b.sparse().begin(), b.sparse().end()},
          {b.offsets().begin(), b.offsets().end()},
          {b.tokens().begin(), b.tokens().end()}};
}

template <typename Spec>
std::vector<Snapshot> Collect(const Spec& spec, PipelineOptions o, size_t max_batches = 1 << 20,
                              PipelineState start = {}) {
  Pipeline p(spec, o, start);
  std::vector<Snapshot> out;
  while (out.size() < max_batches) {
    BatchPtr b = p.Next();
    if (!b) break;
    out.push_back(Take(*b));
  }
  return out;
}

// The qids of a ranking batch's lists (sparse column 0 is "qid: cast").
std::vector<int64_t> Qids(const Snapshot& s) {
  std::vector<int64_t> q;
  const size_t c = 4;
  for (size_t i = 0; i + 1 < s.offsets.size(); ++i) q.push_back(s.sparse[s.offsets[i] * c]);
  return q;
}

PipelineOptions Options(int threads, ShuffleMode mode = ShuffleMode::kGlobal) {
  return PipelineOptions{.threads = threads,
                         .prefetch = 3,
                         .batch_size = 16,
                         .shuffle = mode,
                         .window_blocks = 3,
                         .seed = 42,
                         .max_epochs = 2};
}

TEST(Pipeline, BatchesAreIdenticalForAnyThreadCount) {
  for (ShuffleMode mode : {ShuffleMode::kNone, ShuffleMode::kBlock, ShuffleMode::kGlobal}) {
    SCOPED_TRACE(ShuffleModeName(mode));
    const auto one = Collect(ShopSpec(), Options(1, mode));
    ASSERT_EQ(one.size(), 2 * (300 / 16));
    for (int threads : {2, 3, 8}) EXPECT_TRUE(Collect(ShopSpec(), Options(threads, mode)) == one);
  }
}

// The AutoTuner's trials change threads and prefetch while the pipeline
// runs: the workers in use follow, and the batches stay the same.
TEST(Pipeline, ParallelismChangesWhileRunningAndTheBatchesDoNot) {
  const auto reference = Collect(ShopSpec(), Options(1));
  PipelineOptions o = Options(4);
  o.prefetch = 8;
  Pipeline p(ShopSpec(), o);
  EXPECT_EQ(p.Stats().active_threads, 4);
  const std::vector<std::pair<int, int>> settings = {{1, 1}, {3, 2}, {2, 8}, {4, 1}, {1, 5}};
  std::vector<Snapshot> got;
  for (size_t i = 0; BatchPtr b = p.Next(); ++i) {
    got.push_back(Take(*b));
    b.reset();
    if (i % 5 == 0) {
      const auto [threads, prefetch] = settings[(i / 5) % settings.size()];
      p.SetParallelism(threads, prefetch);
      const PipelineStats s = p.Stats();
      EXPECT_EQ(s.active_threads, threads);
      EXPECT_EQ(s.queue_capacity, size_t(prefetch));
      EXPECT_LE(s.queue_ready, size_t(8));
    }
  }
  EXPECT_TRUE(got == reference);
  EXPECT_THROW(p.SetParallelism(5, 1), Error);  // more than it was built with
  EXPECT_THROW(p.SetParallelism(1, 9), Error);
  EXPECT_THROW(p.SetParallelism(0, 1), Error);
}

// Parked workers take no work: with one worker in use, the others' busy
// time stops growing.
TEST(Pipeline, ParkedWorkersDoNoWork) {
  PipelineOptions o = Options(3);
  o.max_epochs = 6;
  Pipeline p(ShopSpec(), o);
  p.SetParallelism(1, 3);
  BatchPtr first = p.Next();
  first.reset();
  // A job a parked worker began before the call finishes within this.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const PipelineStats before = p.Stats();
  while (BatchPtr b = p.Next()) {
  }
  const PipelineStats after = p.Stats();
  double others = 0;
  for (size_t w = 1; w < 3; ++w) others += after.workers[w].busy_s - before.workers[w].busy_s;
  EXPECT_EQ(others, 0.0);
  EXPECT_GT(after.workers[0].busy_s, before.workers[0].busy_s);
}

TEST(Pipeline, EverySampleExactlyOncePerEpoch) {
  for (bool drop_last : {true, false}) {
    PipelineOptions o = Options(2);
    o.drop_last = drop_last;
    const auto batches = Collect(ShopSpec(), o);
    std::map<uint64_t, std::multiset<int64_t>> seen;
    for (const auto& b : batches) {
      for (int64_t q : Qids(b)) seen[b.epoch].insert(q);
      EXPECT_EQ(b.offsets.front(), 0);
      EXPECT_TRUE(std::is_sorted(b.offsets.begin(), b.offsets.end()));
    }
    ASSERT_EQ(seen.size(), 2u);
    for (const auto& [epoch, qids] : seen) {
      EXPECT_EQ(qids.size(), drop_last ? 300u / 16 * 16 : 300u);
      EXPECT_EQ(std::set<int64_t>(qids.begin(), qids.end()).size(), qids.size());  // no repeats
    }
    EXPECT_EQ(batches.back().offsets.size() - 1, drop_last ? 16u : 300u % 16);
  }
  // Two epochs of a global shuffle differ in order.
  const auto b = Collect(ShopSpec(), Options(2));
  EXPECT_NE(Qids(b[0]), Qids(b[300 / 16]));
}

TEST(Pipeline, RankSlicesUnionToTheWorldOneBatch) {
  PipelineOptions o = Options(2);
  o.drop_last = false;
  const auto world1 = Collect(ShopSpec(), o);
  for (int world : {2, 4}) {
    std::vector<std::vector<Snapshot>> ranks;
    for (int r = 0; r < world; ++r) {
      o.rank = r;
      o.world_size = world;
      ranks.push_back(Collect(ShopSpec(), o));
      ASSERT_EQ(ranks.back().size(), world1.size());  // every rank steps together
    }
    for (size_t k = 0; k < world1.size(); ++k) {
      std::vector<int64_t> joined;
      for (int r = 0; r < world; ++r) {
        const auto q = Qids(ranks[r][k]);
        joined.insert(joined.end(), q.begin(), q.end());
      }
      EXPECT_EQ(joined, Qids(world1[k])) << "world " << world << " batch " << k;
    }
  }
}

TEST(Pipeline, ResumesFromStateWithTheBatchesThatWouldHaveFollowed) {
  const auto all = Collect(ShopSpec(), Options(2));
  for (size_t k : {size_t{0}, size_t{1}, size_t{7}, size_t{300 / 16}, size_t{25}}) {
    PipelineState state;
    {
      Pipeline p(ShopSpec(), Options(3));
      for (size_t i = 0; i < k; ++i) ASSERT_TRUE(p.Next());
      state = p.state();
    }  // destroyed mid-epoch with work in flight
    const auto rest = Collect(ShopSpec(), Options(2), 1 << 20, state);
    ASSERT_EQ(rest.size(), all.size() - k) << k;
    EXPECT_TRUE(std::equal(rest.begin(), rest.end(), all.begin() + static_cast<long>(k))) << k;
  }
  PipelineState wrong{.seed = 1, .epoch = 1};
  EXPECT_THROW(Pipeline(ShopSpec(), Options(1), wrong), Error);
}

TEST(Pipeline, TraceHasASpanPerStageOnEachWorkerTrack) {
  TraceRecorder trace;
  PipelineOptions o = Options(2);
  o.trace = &trace;
  o.max_epochs = 1;
  {
    Pipeline p(ShopSpec(), o);
    while (p.Next()) {
    }
  }
  testing::TempDir dir;
  trace.Write(dir / "t.json");
  const std::string json = ReadFile(dir / "t.json");
  for (const char* name : {"\"read\"", "\"decode\"", "\"transform\"", "\"assemble\"",
                           "\"rank 0 loader 0\"", "\"rank 0 loader 1\""}) {
    EXPECT_NE(json.find(name), std::string::npos) << name;
  }
  EXPECT_GT(trace.size(), 4u);
}

TEST(Pipeline, StatisticsFromAnotherManifestFixTheConstants) {
  // Evaluation data is transformed with the training data's statistics:
  // shifting the statistics' mean shifts every standardized value.
  const Manifest own = Manifest::Load(ShopDir());
  auto shifted = std::make_shared<Manifest>(own);
  ColumnStats& price = shifted->stats.at("price");
  price.mean += 2 * price.std;
  const RankingSpec base{.dataset = ShopDir(), .dense = {"price: impute(0) | standardize"}};
  RankingSpec other = base;
  other.statistics = shifted;
  PipelineOptions o = Options(2);
  o.shuffle = ShuffleMode::kNone;
  Pipeline a(base, o), b(other, o);
  const BatchPtr x = a.Next(), y = b.Next();
  ASSERT_EQ(x->dense().size(), y->dense().size());
  for (size_t i = 0; i < x->dense().size(); ++i) {
    EXPECT_NEAR(y->dense()[i], x->dense()[i] - 2.0f, 1e-4) << i;
  }
  // Statistics of another schema are refused.
  auto narrow = std::make_shared<Manifest>(own);
  narrow->schema.pop_back();
  other.statistics = narrow;
  EXPECT_THROW(Pipeline(other, o), Error);
}

TEST(Pipeline, TransformedValuesMatchTheRawRows) {
  // Raw rows by qid, straight from the dataset.
  DatasetReader reader(ShopDir());
  std::map<int64_t, std::vector<std::pair<double, double>>> raw;  // (price, label)
  for (size_t s = 0; s < reader.num_shards(); ++s) {
    for (size_t g = 0; g < reader.shard(s).num_row_groups(); ++g) {
      const Table t = reader.shard(s).ReadRowGroup(g, {"qid", "price", "label"});
      for (size_t r = 0; r < t.rows(); ++r) {
        raw[t.columns[0].Values<int64_t>()[r]].emplace_back(t.columns[1].AsDouble(r),
                                                            t.columns[2].AsDouble(r));
      }
    }
  }
  RankingSpec spec{.dataset = ShopDir(), .dense = {"price: clip(0, 50)"}, .sparse = {"qid: cast"}};
  Pipeline p(spec, Options(2));
  EXPECT_EQ(p.dense_names(), std::vector<std::string>{"price"});
  EXPECT_EQ(p.layout().dense_dim, 1u);
  size_t lists = 0;
  while (BatchPtr b = p.Next()) {
    const auto offsets = b->offsets();
    for (size_t i = 0; i + 1 < offsets.size(); ++i, ++lists) {
      const auto& rows = raw.at(b->sparse()[offsets[i]]);
      ASSERT_EQ(size_t(offsets[i + 1] - offsets[i]), rows.size());
      for (size_t j = 0; j < rows.size(); ++j) {
        EXPECT_EQ(b->dense()[offsets[i] + j], std::min<float>(rows[j].first, 50));
        EXPECT_EQ(b->labels()[offsets[i] + j], float(rows[j].second));
      }
    }
  }
  EXPECT_EQ(lists, 2 * (300 / 16 * 16));
}

// Cached units keep missing flags as bits and ids as int32 when they fit
// (ranking_source.cc); what a batch holds must still be exactly what the
// chains compute on the raw rows: more than 8 flags (two flag bytes), a
// value-only chain between flagged ones, and ids wider than int32.
TEST(Pipeline, BatchesEqualTheChainsOnTheRawRowsWhateverTheCachedWidths) {
  const std::vector<std::string> dense = {
      "price: impute(mean, flag) | log1p | standardize | clip(-5, 5)",
      "rating_avg: impute(median, flag)", "sales_30d: log1p",
      "sales_7d: impute(0, flag)", "review_count: impute(max, flag) | log1p",
      "rating_count: impute(min, flag)", "delivery_days: impute(mean, flag)",
      "seller_rating: impute(mean, flag)", "return_rate: impute(0, flag)",
      "discount: impute(mean, flag)", "ctr: impute(0, flag)"};
  for (const uint64_t slots : {uint64_t{1} << 20, uint64_t{1} << 40}) {
    SCOPED_TRACE(fmt::format("hash slots {}", slots));
    const std::vector<std::string> sparse = {fmt::format("brand: hash({})", slots),
                                             "price: bucketize(16)", "qid: cast"};
    const RankingSpec spec{.dataset = ShopDir(), .dense = dense, .sparse = sparse};
    PipelineOptions o = Options(2);
    o.shuffle = ShuffleMode::kNone;
    o.max_epochs = 1;
    o.drop_last = false;
    std::vector<float> got_dense;
    std::vector<int64_t> got_sparse;
    Pipeline p(spec, o);
    while (BatchPtr b = p.Next()) {
      got_dense.insert(got_dense.end(), b->dense().begin(), b->dense().end());
      got_sparse.insert(got_sparse.end(), b->sparse().begin(), b->sparse().end());
    }
    // The same chains, resolved as the pipeline resolves them, run on each
    // row group of the dataset in order.
    DatasetReader reader(ShopDir());
    std::vector<FeatureChain> dense_chains, sparse_chains;
    for (const auto& d : dense) {
      dense_chains.push_back(ParseFeatureChain(d, FeatureKind::kDense, "d"));
      ResolveFeatureChain(dense_chains.back(), reader.manifest(), o.seed);
    }
    for (const auto& t : sparse) {
      sparse_chains.push_back(ParseFeatureChain(t, FeatureKind::kSparse, "s"));
      ResolveFeatureChain(sparse_chains.back(), reader.manifest(), o.seed);
    }
    const size_t f = p.layout().dense_dim, c = sparse.size();
    ASSERT_EQ(f, 2 * dense.size() - 1);
    std::vector<float> want_dense;
    std::vector<int64_t> want_sparse;
    for (size_t s = 0; s < reader.num_shards(); ++s) {
      for (size_t g = 0; g < reader.shard(s).num_row_groups(); ++g) {
        const Table t = reader.shard(s).ReadRowGroup(g);
        const size_t rows = t.rows(), at = want_dense.size() / f;
        want_dense.resize((at + rows) * f);
        want_sparse.resize((at + rows) * c);
        size_t col = 0;
        for (const auto& chain : dense_chains) {
          RunDenseChain(chain, t.columns[reader.shard(s).ColumnIndex(chain.columns[0])], 0, rows,
                        want_dense.data() + at * f + col, f);
          col += chain.width();
        }
        for (size_t k = 0; k < c; ++k) {
          RunSparseChain(sparse_chains[k],
                         t.columns[reader.shard(s).ColumnIndex(sparse_chains[k].columns[0])],
                         nullptr, 0, rows, want_sparse.data() + at * c + k, c);
        }
      }
    }
    ASSERT_EQ(got_dense.size(), want_dense.size());
    EXPECT_EQ(0, std::memcmp(got_dense.data(), want_dense.data(), got_dense.size() * 4));
    EXPECT_EQ(got_sparse, want_sparse);
    const bool wide = std::any_of(want_sparse.begin(), want_sparse.end(),
                                  [](int64_t v) { return v > std::numeric_limits<int32_t>::max(); });
    EXPECT_EQ(wide, slots > (uint64_t{1} << 31));
    // Flags with a missing value, by flag index: bits in both flag bytes are exercised.
    std::set<size_t> flagged;
    for (size_t col = 0, k = 0, flag = 0; k < dense_chains.size(); col += dense_chains[k++].width()) {
      if (dense_chains[k].width() != 2) continue;
      for (size_t i = col + 1; i < want_dense.size(); i += f) {
        if (want_dense[i] != 0) flagged.insert(flag);
      }
      ++flag;
    }
    EXPECT_GE(flagged.size(), 2u);
    EXPECT_GE(*flagged.rbegin(), 8u);
  }
}

TEST(Pipeline, ASmallCacheGivesTheSameBatches) {
  PipelineOptions o = Options(2);
  std::vector<Snapshot> big;
  {
    testing::LogCapture log;
    big = Collect(ShopSpec(), o);
    EXPECT_EQ(log.text(), "");  // the dataset fits: nothing to say
  }
  o.cache_bytes = 1;  // nothing fits: every unit loads just in time for its batch
  {
    testing::LogCapture log;
    EXPECT_TRUE(Collect(ShopSpec(), o) == big);
    // Said once, with why and what to set. Units let go and loaded again
    // for the same epoch may also be said (once), depending on how the
    // workers' loads interleave with the batches.
    const std::string text = log.text();
    const auto count = [&](const std::string& what) {
      size_t n = 0;
      for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
      return n;
    };
    EXPECT_EQ(count("over pipeline.cache_mib"), 1u) << text;
    EXPECT_NE(text.find("pipeline.shuffle: block"), std::string::npos) << text;
    EXPECT_LE(count("again for the same epoch"), 1u) << text;
    EXPECT_EQ(count("pipeline:"), 1u + count("again for the same epoch")) << text;
  }
  Pipeline p(ShopSpec(), Options(2));
  while (p.Next()) {
  }
  const PipelineStats s = p.Stats();
  EXPECT_EQ(s.batches, big.size());
  EXPECT_GT(s.cache_hits, 0u);
  EXPECT_EQ(s.cache_reloads, 0u);  // everything fits: each unit loads once
  ASSERT_EQ(s.stages.size(), 4u);
  for (const auto& stage : s.stages) {
    EXPECT_GT(stage.items, 0u) << stage.name;
    EXPECT_GT(stage.bytes, 0u) << stage.name;
  }
  EXPECT_EQ(s.stages[3].items, big.size());  // one assembly per batch
  EXPECT_EQ(s.workers.size(), 2u);
}

// A global shuffle over many row groups with a cache smaller than the
// data: a unit is let go between the batches of one epoch that use it and
// transformed again. The batches stay the same; the reloads are counted
// in the stats and said once, with what to set.
TEST(Pipeline, UnitsTransformedAgainForOneEpochAreCountedAndSaid) {
  testing::TempDir dir;
  DatasetWriterOptions w;
  w.row_group_rows = 100;  // about 3 lists a unit: ~110 units
  w.threads = 1;
  WriteShopShards(dir / "shop", ShopOptions{.queries = 300, .seed = 5, .threads = 1}, w);
  const RankingSpec spec = ShopSpec(dir / "shop");
  PipelineOptions o = Options(1);
  o.batch_size = 4;
  o.prefetch = 1;
  const uint64_t units = Manifest::Load(dir / "shop").row_groups();
  ASSERT_GT(units, 50u);
  const auto run = [&](const PipelineOptions& opt, std::vector<Snapshot>& out) {
    Pipeline p(spec, opt);
    while (BatchPtr b = p.Next()) out.push_back(Take(*b));
    return p.Stats();
  };
  std::vector<Snapshot> fits, tight;
  {
    testing::LogCapture log;
    const PipelineStats s = run(o, fits);
    EXPECT_EQ(s.cache_reloads, 0u);
    EXPECT_EQ(s.cache_loads, units);  // once each; epoch 2 from the cache
    EXPECT_EQ(log.text(), "");
  }
  o.cache_bytes = 64 << 10;  // a few units of ~110
  testing::LogCapture log;
  const PipelineStats s = run(o, tight);
  EXPECT_TRUE(tight == fits);
  // Each epoch loads every unit once; every load beyond that is a reload.
  EXPECT_EQ(s.cache_loads, 2 * units + s.cache_reloads);
  EXPECT_GT(s.cache_reloads, units);
  const std::string text = log.text(), said = "transformed a row group again for the same epoch";
  EXPECT_NE(text.find(said), std::string::npos) << text;
  EXPECT_EQ(text.find(said), text.rfind(said)) << text;
  EXPECT_NE(text.find("pipeline.shuffle: block"), std::string::npos) << text;
  EXPECT_EQ(text.find("over pipeline.cache_mib"), std::string::npos) << text;  // in flight fits
}

// A copy of `from` with one byte flipped inside the first row group's
// `column` chunk.
fs::path DamagedCopy(const testing::TempDir& dir, const fs::path& from = ShopDir(),
                     const std::string& column = "price") {
  const fs::path copy = dir / "damaged";
  fs::copy(from, copy);
  DatasetReader reader(copy);
  const ShardReader& shard = reader.shard(0);
  const ChunkInfo& info = shard.row_group(0).chunks[shard.ColumnIndex(column)];
  std::fstream f(shard.path(), std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(info.offset + info.stored_size / 2));
  f.put('\x5a' ^ static_cast<char>(f.peek()));
  return copy;
}

// The run fails in the consumer with a data error naming the shard, the
// damaged column and row group 0, and the checksum.
void ExpectChecksumError(const RankingSpec& spec, const PipelineOptions& o,
                         const std::string& column) {
  try {
    Collect(spec, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData);
    EXPECT_NE(e.Message().find("shard-"), std::string::npos) << e.Message();
    EXPECT_NE(e.Message().find(fmt::format("column \"{}\" row group 0", column)),
              std::string::npos)
        << e.Message();
    EXPECT_NE(e.Message().find("checksum mismatch"), std::string::npos) << e.Message();
  }
}

TEST(Pipeline, ADamagedRowGroupFailsInTheConsumerOrIsSkipped) {
  testing::TempDir dir;
  const fs::path damaged = DamagedCopy(dir);
  PipelineOptions o = Options(2, ShuffleMode::kNone);
  o.max_epochs = 1;
  ExpectChecksumError(ShopSpec(damaged), o, "price");
  o.on_error = OnError::kSkip;
  Pipeline p(ShopSpec(damaged), o);
  size_t lists = 0;
  while (BatchPtr b = p.Next()) lists += b->num_lists;
  EXPECT_EQ(p.Stats().skipped_units, 1u);
  EXPECT_LT(lists, 300u / 16 * 16);
  EXPECT_GT(lists, 200u);
}

// One row group of ~9,000 rows: with more workers than units, idle workers
// take the load's columns and blocks of rows (LoadHelpers), so a piece may
// run, and fail, on any of them. The batches are the same as on one
// worker, and a damaged chunk still fails the run naming it.
TEST(Pipeline, OneRowGroupSharedByIdleWorkersGivesTheSameBatchesAndErrors) {
  testing::TempDir dir;
  const fs::path one = dir / "one";
  DatasetWriterOptions w;
  w.row_group_rows = 1 << 20;
  WriteShopShards(one, ShopOptions{.queries = 250, .seed = 8, .threads = 1}, w);
  ASSERT_EQ(DatasetReader(one).shard(0).num_row_groups(), 1u);
  ASSERT_GT(DatasetReader(one).manifest().rows(), 2 * 4096u);  // three pieces of rows
  const auto reference = Collect(ShopSpec(one), Options(1));
  ASSERT_FALSE(reference.empty());
  for (int threads : {2, 4}) EXPECT_TRUE(Collect(ShopSpec(one), Options(threads)) == reference);

  // Damage the stored bytes of "brand": its checksum fails in the read's
  // piece for that column, on whichever worker runs it.
  const fs::path damaged = DamagedCopy(dir, one, "brand");
  for (int threads : {1, 4}) {
    PipelineOptions o = Options(threads);
    o.max_epochs = 1;
    ExpectChecksumError(ShopSpec(damaged), o, "brand");
  }
}

// A copy of `from` with `mutate(chunk, rows)` applied, in every shard's
// footer, to each row group's chunk of the group column "qid".
fs::path CopyWithGroupChunks(const testing::TempDir& dir, const std::string& name,
                             const std::function<void(nlohmann::json&, uint64_t)>& mutate,
                             const fs::path& from = ShopDir()) {
  const fs::path copy = dir / name;
  fs::copy(from, copy);
  const DatasetReader reader(copy);
  const size_t qid = reader.shard(0).ColumnIndex("qid");
  for (size_t s = 0; s < reader.num_shards(); ++s) {
    testing::RewriteFooter(reader.shard(s).path(), [&](nlohmann::json& footer) {
      for (auto& group : footer["row_groups"]) {
        mutate(group["chunks"][qid], group["rows"].get<uint64_t>());
      }
    });
  }
  return copy;
}

// Lists are counted from the footer's runs of the group column; shards
// from before they were recorded are indexed by decoding it, to the same
// batches. A footer whose runs disagree with the data fails the run.
TEST(Pipeline, ListsCountedFromTheFooterOrTheGroupColumnAlike) {
  testing::TempDir dir;
  {
    const DatasetReader reader(ShopDir());
    const ChunkInfo& qid = reader.shard(0).row_group(0).chunks[reader.shard(0).ColumnIndex("qid")];
    ASSERT_GT(qid.runs, 1u);  // recorded by the writer
  }
  const fs::path old = CopyWithGroupChunks(dir, "old", [](nlohmann::json& chunk, uint64_t) {
    chunk.erase("runs");
    chunk.erase("longest_run");
  });
  EXPECT_EQ(DatasetReader(old).shard(0).row_group(0).chunks[0].runs, 0u);
  EXPECT_TRUE(Collect(ShopSpec(old), Options(2)) == Collect(ShopSpec(), Options(2)));

  PipelineOptions o = Options(2);
  o.max_epochs = 1;
  const fs::path more = CopyWithGroupChunks(dir, "more", [](nlohmann::json& chunk, uint64_t rows) {
    const uint64_t runs = chunk["runs"].get<uint64_t>();
    if (runs + chunk["longest_run"].get<uint64_t>() <= rows) {  // within the footer's checks
      chunk["runs"] = runs + 1;
    }
  });
  try {
    Collect(ShopSpec(more), o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData);
    EXPECT_NE(e.Message().find("when the pipeline opened it"), std::string::npos)
        << e.Message();
    EXPECT_NE(e.Message().find("shard-"), std::string::npos) << e.Message();
  }
  const fs::path shorter = CopyWithGroupChunks(dir, "shorter", [](nlohmann::json& chunk, uint64_t rows) {
    const uint64_t runs = chunk["runs"].get<uint64_t>();
    chunk["longest_run"] = (rows + runs - 1) / runs;  // the least the footer check lets pass
  });
  try {
    Collect(ShopSpec(shorter), o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData);
    EXPECT_NE(e.Message().find("the footer's longest_run"), std::string::npos) << e.Message();
  }
}

TEST(Pipeline, StopsPromptlyMidEpochAndBatchesOutliveIt) {
  PipelineOptions o = Options(4);
  o.prefetch = 8;
  o.max_epochs = 0;  // endless
  BatchPtr kept(nullptr, BatchReturn{nullptr});
  {
    Pipeline p(ShopSpec(), o);
    kept = p.Next();
    ASSERT_TRUE(kept);
  }
  EXPECT_GT(kept->num_docs, 0u);  // still valid: the pool lives while a batch does
  for (int i = 0; i < 20; ++i) Pipeline p(ShopSpec(), o);  // start and stop at once
}

TEST(Pipeline, BadOptionsAreConfigErrors) {
  PipelineOptions o = Options(1);
  o.batch_size = 1000;  // more than the 300 lists
  EXPECT_THROW(Pipeline(ShopSpec(), o), Error);
  o = Options(1);
  o.world_size = 3;  // 16 % 3 != 0
  EXPECT_THROW(Pipeline(ShopSpec(), o), Error);
  RankingSpec bad = ShopSpec();
  bad.dense.push_back("pricee: log1p");
  try {
    Pipeline p(bad, Options(1));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.Message().find("did you mean \"price\""), std::string::npos) << e.Message();
    EXPECT_NE(e.Message().find("pipeline.dense[3]"), std::string::npos) << e.Message();
  }
}

TEST(Pipeline, BuildsFromAYamlConfig) {
  const std::string yaml = fmt::format(R"yaml(
run:
  seed: 42
data:
  train: {}
pipeline:
  threads: 3
  prefetch: 3
  batch_size: 16
  shuffle: global
  window_blocks: 3
  dense:
    - "price: impute(mean, flag) | log1p | standardize | clip(-5, 5)"
    - "rating_avg: impute(median, flag)"
    - "sales_30d: log1p"
  sparse: ["qid: cast", "brand: hash(1024)", "price: bucketize(16)", "brand x category: cross(4096)"]
)yaml",
                                       ShopDir().string());
  const Settings settings = Settings::From(Config::Parse(yaml, "test.yaml", {}, TopspinSchema()));
  PipelineOptions o = PipelineOptionsFrom(settings);
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(o.seed, 42u);
  o.max_epochs = 2;
  EXPECT_TRUE(Collect(RankingSpecFrom(settings, "data.train"), o) ==
              Collect(ShopSpec(), Options(2)));
  try {
    RankingSpecFrom(settings, "data.valid");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.Message().find("--set data.valid=DIR"), std::string::npos) << e.Message();
  }
}

TEST(Pipeline, TheDemoConfigCarriesTheShopTransform) {
  const PipelineConfig p =
      PipelineConfig::From(Config::Parse(build::kDemoConfig, "demo.yaml", {}, TopspinSchema()));
  EXPECT_EQ(p.dense, ShopDenseChains());
  EXPECT_EQ(p.sparse, ShopSparseChains());
}

// ---- language model ------------------------------------------------------------

constexpr uint32_t kTokenModulus = 65521;

// Documents of varied length (some empty) whose tokens are their stream
// positions mod 65521.
fs::path TokenDataset(const testing::TempDir& dir, uint64_t tokens) {
  const fs::path p = dir / "tokens";
  DatasetWriterOptions w{.out = p, .schema = {{"tokens", DType::kTokensU16}}};
  w.row_group_rows = 37;
  DatasetWriter writer(w);
  Table t = Table::Empty(w.schema);
  uint64_t at = 0;
  for (uint64_t doc = 0; at < tokens; ++doc) {
    // Every fifth document is empty: an empty list in the token column.
    std::vector<uint32_t> row(doc % 5 == 0 ? 0
                                           : std::min<uint64_t>(tokens - at, 1 + doc * 7 % 300));
    for (auto& v : row) v = static_cast<uint32_t>(at++ % kTokenModulus);
    t.columns[0].AppendTokens(row);
  }
  writer.Append(t);
  writer.Commit();
  return p;
}

TEST(Pipeline, LanguageModelWindowsAreContiguousAndDeterministic) {
  testing::TempDir dir;
  const uint64_t total = 50000;
  const LanguageModelSpec spec{.dataset = TokenDataset(dir, total), .seq_len = 64};
  PipelineOptions o = Options(1);
  o.batch_size = 8;
  const auto one = Collect(spec, o);
  {
    Pipeline p(spec, o);
    EXPECT_EQ(p.samples_per_epoch(), (total - 64) / 64);
  }
  const size_t windows = (total - 64) / 64;
  ASSERT_EQ(one.size(), 2 * (windows / 8));
  std::map<uint64_t, std::set<uint32_t>> starts;
  for (const auto& b : one) {
    ASSERT_EQ(b.tokens.size(), 8u * 65);
    for (size_t r = 0; r < 8; ++r) {
      const int32_t* w = b.tokens.data() + r * 65;
      for (int i = 1; i < 65; ++i) {
        ASSERT_EQ(uint32_t(w[i]), (uint32_t(w[i - 1]) + 1) % kTokenModulus) << "batch " << b.index;
      }
      starts[b.epoch].insert(uint32_t(w[0]));
    }
  }
  for (const auto& [epoch, s] : starts) EXPECT_EQ(s.size(), windows / 8 * 8);  // all distinct
  for (int threads : {2, 3}) {
    o.threads = threads;
    EXPECT_TRUE(Collect(spec, o) == one);
  }
}

}  // namespace
}  // namespace topspin
