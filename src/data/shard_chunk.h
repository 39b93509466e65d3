// Internal: encoding and decoding of one column chunk (docs/FORMAT.md,
// "Chunks"). ShardWriter encodes, ShardReader checks and decodes.
#pragma once

#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/shard_layout.h"
#include "topspin/core/error.h"
#include "topspin/data/column.h"
#include "topspin/data/shard.h"

namespace topspin::shard_layout {

// Where a chunk sits, for error messages:
// "<file>: byte <b>: column \"<column>\" row group <row_group>: <what>".
// Holds references: keep it shorter-lived than the strings.
struct ChunkWhere {
  const std::string& file;
  const std::string& column;
  size_t row_group = 0;
  uint64_t offset = 0;  // of the chunk's first byte in the file

  [[nodiscard]] Error Fail(uint64_t byte, const std::string& what) const;
};

// Turns columns into stored chunk bytes. Owns a zstd compression context
// and a scratch buffer, reused across chunks. Not thread-safe.
class ChunkEncoder {
 public:
  // zstd_level 0 stores chunks uncompressed; byte_planes false never
  // writes codec zstd-split.
  explicit ChunkEncoder(int zstd_level, bool byte_planes = true);
  ChunkEncoder(const ChunkEncoder&) = delete;
  ChunkEncoder& operator=(const ChunkEncoder&) = delete;

  // Encodes `column` (at least one row, a consistent Column). Returns the
  // stored bytes (valid until the next call) and fills every field of
  // `info` but `offset`. Values 2, 4 or 8 bytes wide are stored as byte
  // planes (zstd-split) when their first kPlanesSample values compress
  // smaller that way; a chunk that zstd does not shrink is stored
  // uncompressed.
  std::span<const std::byte> Encode(const Column& column, ChunkInfo& info);

 private:
  // Whether the first kPlanesSample values compress smaller as byte planes;
  // leaves their planes in split_ (the whole chunk's when it is that small).
  bool PlanesAreSmaller(std::span<const std::byte> values, size_t width);
  size_t StoreSections(const std::span<const std::byte> (&raw)[3], Codec codec, ChunkHeader& h);
  void EnsureScratch(size_t bytes);

  static constexpr size_t kPlanesSample = 8192;
  std::vector<std::byte> split_;  // the values as byte planes
  std::vector<std::byte> probe_;  // a sample's compressed bytes, to compare sizes

  struct CCtxFree {
    void operator()(ZSTD_CCtx* ctx) const { ZSTD_freeCCtx(ctx); }
  };
  int level_;
  bool byte_planes_;
  std::unique_ptr<ZSTD_CCtx, CCtxFree> cctx_;
  std::vector<std::byte> scratch_;
};

// The value width whose bytes codec zstd-split stores as planes: 2, 4 or 8
// for fixed-width and token dtypes of that width, else 0 (not split).
size_t SplitWidth(DType dtype);

// n values of `width` bytes as byte planes: out[k * n + i] = in[i * width + k].
void SplitBytePlanes(const std::byte* in, size_t n, size_t width, std::byte* out);

// The inverse: out[i * width + k] = in[k * n + i].
void JoinBytePlanes(const std::byte* in, size_t n, size_t width, std::byte* out);

// Throws when xxh3-64(stored) != info.checksum.
void VerifyChunkChecksum(std::span<const std::byte> stored, const ChunkInfo& info,
                         const ChunkWhere& where);

// Decodes the chunk header of `stored` and checks it against the footer's
// `info`, the column's `spec` and the row group's `rows`: every section
// size is then the exact size its buffer needs and they add up to
// info.stored_size / info.raw_size.
ChunkHeader CheckChunkHeader(std::span<const std::byte> stored, const ChunkInfo& info,
                             const ColumnSpec& spec, uint64_t rows, const ChunkWhere& where);

// Decodes `stored` (checked with CheckChunkHeader) into a Column,
// decompressing each section straight into the Column's buffer; `reuse`
// supplies that memory when its capacity suffices. Thread-safe (one zstd
// context per thread).
Column DecodeChunk(std::span<const std::byte> stored, const ChunkInfo& info, const ColumnSpec& spec,
                   uint64_t rows, const ChunkWhere& where, Column::Buffers reuse = {});

}  // namespace topspin::shard_layout
