// bench read: how close shard reads come to the decompression limit.
#include <zstd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "cli/benches.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/thread_pool.h"
#include "topspin/data/dataset.h"
#include "topspin/data/gen_shop.h"

namespace topspin::cli {
namespace {

volatile uint64_t g_sink;
constexpr size_t kChunkHeaderBytes = 64;  // docs/FORMAT.md, "Chunk header"

struct ChunkRef {
  size_t shard, row_group, column;
};

// The projection a ranker reads: every numeric column (features, label, qid).
std::vector<std::string> Projection(const Manifest& m) {
  std::vector<std::string> names;
  for (const auto& spec : m.schema) {
    if (IsNumeric(spec.dtype) || spec.dtype == DType::kBool) names.push_back(spec.name);
  }
  return names;
}

std::vector<ChunkRef> ProjectedChunks(const DatasetReader& ds,
                                      const std::vector<std::string>& names) {
  std::vector<ChunkRef> out;
  for (size_t s = 0; s < ds.num_shards(); ++s) {
    const ShardReader& shard = ds.shard(s);
    for (size_t rg = 0; rg < shard.num_row_groups(); ++rg) {
      for (const auto& name : names) out.push_back({s, rg, shard.ColumnIndex(name)});
    }
  }
  return out;
}

uint64_t RawBytes(const DatasetReader& ds, const std::vector<ChunkRef>& chunks) {
  uint64_t bytes = 0;
  for (const auto& c : chunks)
    bytes += ds.shard(c.shard).row_group(c.row_group).chunks[c.column].raw_size;
  return bytes;
}

// Ours: read (decompress + verify + decode) every projected row group on
// `threads` threads, each decoding into its own reused table as the
// pipeline's readers do.
class OursRead {
 public:
  OursRead(const DatasetReader& ds, const std::vector<std::string>& names, int threads)
      : ds_(ds), pool_(static_cast<size_t>(threads)), scratch_(static_cast<size_t>(threads)) {
    for (size_t s = 0; s < ds.num_shards(); ++s) {
      std::vector<size_t> columns;
      for (const auto& name : names) columns.push_back(ds.shard(s).ColumnIndex(name));
      for (size_t rg = 0; rg < ds.shard(s).num_row_groups(); ++rg) {
        groups_.push_back({s, rg, columns});
      }
    }
  }

  void operator()() {
    std::atomic<uint64_t> rows{0};
    std::vector<std::future<void>> done;
    for (size_t t = 0; t < scratch_.size(); ++t) {
      done.push_back(pool_.Submit([&, t] {
        for (size_t i = t; i < groups_.size(); i += scratch_.size()) {
          const Group& g = groups_[i];
          ds_.shard(g.shard).ReadRowGroupInto(g.row_group, g.columns, scratch_[t]);
          rows += scratch_[t].rows();
        }
      }));
    }
    for (auto& f : done) f.get();
    g_sink = rows.load();
  }

 private:
  struct Group {
    size_t shard, row_group;
    std::vector<size_t> columns;
  };
  const DatasetReader& ds_;
  ThreadPool pool_;
  std::vector<Table> scratch_;  // one per thread
  std::vector<Group> groups_;
};

// Limit: ZSTD_decompressDCtx of the same stored chunks into a reused
// buffer (no checksum, no decode), chunks dealt round-robin to `threads`
// threads with a context each. One thread is the limit; more
// threads show how far this machine itself scales zstd.
class ZstdLimit {
 public:
  ZstdLimit(const DatasetReader& ds, std::vector<ChunkRef> chunks, int threads)
      : ds_(ds), chunks_(std::move(chunks)), pool_(static_cast<size_t>(threads)) {
    for (size_t s = 0; s < ds.num_shards(); ++s) files_.emplace_back(ds.shard(s).path());
    for (int t = 0; t < threads; ++t) workers_.emplace_back();
  }

  void operator()() {
    std::atomic<uint64_t> total{0};
    std::vector<std::future<void>> done;
    for (size_t t = 0; t < workers_.size(); ++t) {
      done.push_back(pool_.Submit([&, t] { total += Decompress(t); }));
    }
    for (auto& f : done) f.get();
    g_sink = total.load();
  }

 private:
  struct DCtxFree {
    void operator()(ZSTD_DCtx* ctx) const { ZSTD_freeDCtx(ctx); }
  };
  struct Worker {
    std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx{ZSTD_createDCtx()};
    std::vector<char> out;
  };

  uint64_t Decompress(size_t t) {
    Worker& w = workers_[t];
    uint64_t total = 0;
    for (size_t i = t; i < chunks_.size(); i += workers_.size()) {
      const ChunkRef& c = chunks_[i];
      const ChunkInfo& info = ds_.shard(c.shard).row_group(c.row_group).chunks[c.column];
      if (w.out.size() < info.raw_size + 64) w.out.resize(info.raw_size + 64);
      // A chunk is a 64-byte header, then one zstd frame per section
      // (validity, offsets, values); docs/FORMAT.md.
      const std::byte* p = files_[c.shard].data() + info.offset + kChunkHeaderBytes;
      const std::byte* end = files_[c.shard].data() + info.offset + info.stored_size;
      if (!IsZstd(info.codec)) {
        std::memcpy(w.out.data(), p, static_cast<size_t>(end - p));
        total += static_cast<uint64_t>(end - p);
        continue;
      }
      while (p < end) {
        const size_t frame = ZSTD_findFrameCompressedSize(p, static_cast<size_t>(end - p));
        const size_t n = ZSTD_isError(frame) ? frame
                                             : ZSTD_decompressDCtx(w.dctx.get(), w.out.data(),
                                                                   w.out.size(), p, frame);
        if (ZSTD_isError(n)) {
          throw InternalError(fmt::format("bench read: zstd: {}", ZSTD_getErrorName(n)));
        }
        total += n;
        p += frame;
      }
    }
    return total;
  }

  const DatasetReader& ds_;
  std::vector<ChunkRef> chunks_;
  ThreadPool pool_;
  std::vector<MmapFile> files_;
  std::vector<Worker> workers_;
};

}  // namespace

BenchTable RunReadBench(const DataBenchOptions& o) {
  const auto dir = o.scratch / "bench-read-shop";
  std::filesystem::remove_all(dir);
  ShopOptions shop;
  shop.queries = o.queries;
  DatasetWriterOptions writer;
  writer.zstd_level = o.zstd_level;
  writer.byte_planes = o.byte_planes;
  writer.threads = o.threads;
  WriteShopShards(dir, shop, writer);
  const DatasetReader ds(dir);
  const auto names = Projection(ds.manifest());
  const auto chunks = ProjectedChunks(ds, names);
  const uint64_t bytes = RawBytes(ds, chunks);
  const double gb = static_cast<double>(bytes) / 1e9;

  // Every case once per round, so a noisy neighbour slows all of them alike.
  // Case order: memcpy, then zstd and ours at 1..threads.
  std::vector<char> src(bytes, 1), dst(bytes);
  std::vector<std::function<void()>> cases = {[&] {
    std::memcpy(dst.data(), src.data(), bytes);
    g_sink = static_cast<uint64_t>(dst[bytes / 2]);
  }};
  std::vector<std::unique_ptr<ZstdLimit>> zstd;
  std::vector<std::unique_ptr<OursRead>> ours;
  for (int threads = 1; threads <= o.threads; ++threads) {
    zstd.push_back(std::make_unique<ZstdLimit>(ds, chunks, threads));
    ours.push_back(std::make_unique<OursRead>(ds, names, threads));
    cases.push_back(std::ref(*zstd.back()));
    cases.push_back(std::ref(*ours.back()));
  }
  const std::vector<double> best = BestSecondsInterleaved(o.repeats, cases);
  const auto per_thread = [&](size_t case_index, int threads) {
    return gb / best[case_index] / threads;
  };
  const double memcpy_gbps = gb / best[0];
  const double zstd_gbps = per_thread(1, 1);
  BenchTable t{"read",
               fmt::format("gen shop {} queries, {} rows, {} of {} columns projected, {} decoded, "
                           "zstd level {}{}, best of {} interleaved rounds; GB/s per thread",
                           o.queries, ds.manifest().rows(), names.size(),
                           ds.manifest().schema.size(), FormatBytes(bytes), o.zstd_level,
                           o.byte_planes ? " (numbers also tried as byte planes)" : ", plain zstd",
                           o.repeats),
               {}};
  for (int threads = 1; threads <= o.threads; ++threads) {
    const size_t at = 1 + 2 * static_cast<size_t>(threads - 1);
    const std::string n = fmt::format("{} thread{}", threads, threads > 1 ? "s" : "");
    t.rows.push_back({"read+verify, " + n, per_thread(at + 1, threads), "zstd decompress, 1 thread",
                      zstd_gbps, "GB/s"});
    if (threads > 1) {
      t.rows.push_back({"zstd decompress, " + n, per_thread(at, threads),
                        "zstd decompress, 1 thread", zstd_gbps, "GB/s"});
    }
  }
  t.rows.push_back(
      {"zstd decompress, 1 thread", zstd_gbps, "memcpy, 1 thread", memcpy_gbps, "GB/s"});
  std::filesystem::remove_all(dir);
  return t;
}

}  // namespace topspin::cli
