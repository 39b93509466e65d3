// bench read: how close shard reads come to the decompression limit.
#include <zstd.h>

#include <atomic>
#include <cstring>
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
// `threads` threads, row groups dealt round-robin.
double OursSeconds(const DatasetReader& ds, const std::vector<std::string>& names, int threads,
                   int repeats) {
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t s = 0; s < ds.num_shards(); ++s) {
    for (size_t rg = 0; rg < ds.shard(s).num_row_groups(); ++rg) groups.emplace_back(s, rg);
  }
  ThreadPool pool(static_cast<size_t>(threads));
  return BestSeconds(repeats, [&] {
    std::atomic<uint64_t> rows{0};
    pool.ParallelFor(0, groups.size(), [&](size_t i) {
      const Table t = ds.shard(groups[i].first).ReadRowGroup(groups[i].second, names, true);
      rows += t.rows();
    });
    g_sink = rows.load();
  });
}

// Limit: ZSTD_decompressDCtx of the same stored chunks, one thread, into a
// reused buffer (no checksum, no decode).
double ZstdSeconds(const DatasetReader& ds, const std::vector<ChunkRef>& chunks, int repeats) {
  std::vector<MmapFile> files;
  for (size_t s = 0; s < ds.num_shards(); ++s) files.emplace_back(ds.shard(s).path());
  std::vector<char> out;
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  const double s = BestSeconds(repeats, [&] {
    uint64_t total = 0;
    for (const auto& c : chunks) {
      const ChunkInfo& info = ds.shard(c.shard).row_group(c.row_group).chunks[c.column];
      if (out.size() < info.raw_size + 64) out.resize(info.raw_size + 64);
      // A chunk is a 64-byte header, then one zstd frame per section
      // (validity, offsets, values); docs/FORMAT.md.
      const std::byte* p = files[c.shard].data() + info.offset + kChunkHeaderBytes;
      const std::byte* end = files[c.shard].data() + info.offset + info.stored_size;
      if (info.codec != Codec::kZstd) {
        std::memcpy(out.data(), p, static_cast<size_t>(end - p));
        total += static_cast<uint64_t>(end - p);
        continue;
      }
      while (p < end) {
        const size_t frame = ZSTD_findFrameCompressedSize(p, static_cast<size_t>(end - p));
        const size_t n = ZSTD_isError(frame) ? frame : ZSTD_decompressDCtx(dctx, out.data(), out.size(), p, frame);
        if (ZSTD_isError(n)) {
          throw InternalError(fmt::format("bench read: zstd: {}", ZSTD_getErrorName(n)));
        }
        total += n;
        p += frame;
      }
    }
    g_sink = total;
  });
  ZSTD_freeDCtx(dctx);
  return s;
}

double MemcpySeconds(uint64_t bytes, int repeats) {
  std::vector<char> src(bytes, 1), dst(bytes);
  return BestSeconds(repeats, [&] {
    std::memcpy(dst.data(), src.data(), bytes);
    g_sink = static_cast<uint64_t>(dst[bytes / 2]);
  });
}

}  // namespace

BenchTable RunReadBench(const DataBenchOptions& o) {
  const auto dir = o.scratch / "bench-read-shop";
  std::filesystem::remove_all(dir);
  ShopOptions shop;
  shop.queries = o.queries;
  DatasetWriterOptions writer;
  writer.zstd_level = o.zstd_level;
  writer.threads = o.threads;
  WriteShopShards(dir, shop, writer);
  const DatasetReader ds(dir);
  const auto names = Projection(ds.manifest());
  const auto chunks = ProjectedChunks(ds, names);
  const uint64_t bytes = RawBytes(ds, chunks);
  const double gb = static_cast<double>(bytes) / 1e9;

  const double zstd_gbps = gb / ZstdSeconds(ds, chunks, o.repeats);
  const double memcpy_gbps = gb / MemcpySeconds(bytes, o.repeats);
  BenchTable t{
      "read",
      fmt::format("gen shop {} queries, {} rows, {} of {} columns projected, {} decoded, "
                  "zstd level {}, best of {}",
                  o.queries, ds.manifest().rows(), names.size(), ds.manifest().schema.size(),
                  FormatBytes(bytes), o.zstd_level, o.repeats),
      {}};
  for (int threads = 1; threads <= o.threads; ++threads) {
    const double per_thread = gb / OursSeconds(ds, names, threads, o.repeats) / threads;
    const std::string name =
        fmt::format("read+verify, {} thread{}", threads, threads > 1 ? "s" : "");
    t.rows.push_back(
        {name + " (per thread)", per_thread, "zstd decompress, 1 thread", zstd_gbps, "GB/s"});
  }
  t.rows.push_back(
      {"zstd decompress, 1 thread", zstd_gbps, "memcpy, 1 thread", memcpy_gbps, "GB/s"});
  std::filesystem::remove_all(dir);
  return t;
}

}  // namespace topspin::cli
