#include "data/shard_chunk.h"

#include <cstring>
#include <new>

#include <fmt/format.h>

#include "topspin/core/hash.h"

namespace topspin::shard_layout {
namespace {

constexpr const char* kSectionNames[3] = {"validity", "offsets", "values"};
constexpr uint64_t kSectionFieldAt = 16;  // validity.raw; each section takes 16 bytes

struct DCtxFree {
  void operator()(ZSTD_DCtx* ctx) const { ZSTD_freeDCtx(ctx); }
};

// One decompression context per thread: the reader's const methods run
// concurrently, and creating a context per chunk costs more than a small chunk.
ZSTD_DCtx* ThreadDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxFree> ctx(ZSTD_createDCtx());
  if (!ctx) throw std::bad_alloc();
  return ctx.get();
}

const Section* Sections(const ChunkHeader& h, int i) {
  const Section* sections[3] = {&h.validity, &h.offsets, &h.values};
  return sections[i];
}

std::string DTypeByteName(uint8_t byte) {
  const auto dtype = DTypeFromByte(byte);
  return dtype ? DTypeName(*dtype) : "no such dtype";
}

// Section sizes must add up to the footer's stored and raw sizes, and each
// must be possible for its codec.
void CheckSectionStorage(const ChunkHeader& h, const ChunkInfo& info, const ChunkWhere& where) {
  uint64_t stored = kChunkHeaderSize, raw = kChunkHeaderSize;
  for (int i = 0; i < 3; ++i) {
    const Section& s = *Sections(h, i);
    const uint64_t at = where.offset + kSectionFieldAt + 16 * i;
    const auto fail = [&](const std::string& what) {
      return where.Fail(at, fmt::format("chunk header: {} section: {}", kSectionNames[i], what));
    };
    if (info.codec == Codec::kNone && s.stored != s.raw) {
      throw fail(fmt::format("uncompressed, yet stored size {} != raw size {}", s.stored, s.raw));
    }
    uint64_t limit = 0;
    if (info.codec == Codec::kZstd &&
        ((s.raw == 0) != (s.stored == 0) ||
         __builtin_mul_overflow(s.stored, kMaxZstdExpansion, &limit) || s.raw > limit)) {
      throw fail(fmt::format("raw size {} cannot come from {} zstd bytes", s.raw, s.stored));
    }
    if (__builtin_add_overflow(stored, s.stored, &stored) ||
        __builtin_add_overflow(raw, s.raw, &raw)) {
      throw fail("sizes overflow");
    }
  }
  if (stored != info.stored_size || raw != info.raw_size) {
    throw where.Fail(where.offset + kSectionFieldAt,
                     fmt::format("chunk header: sections add up to {} stored / {} raw bytes, the "
                                 "footer says {} / {}",
                                 stored, raw, info.stored_size, info.raw_size));
  }
}

// Each section must be exactly as large as the column's buffer needs.
// Runs after CheckSectionStorage, so every size is below info.raw_size.
void CheckSectionSizes(const ChunkHeader& h, const ColumnSpec& spec, uint64_t rows,
                       const ChunkWhere& where) {
  const auto fail = [&](int i, const std::string& what) {
    return where.Fail(where.offset + kSectionFieldAt + 16 * i,
                      fmt::format("chunk header: {} section: {}", kSectionNames[i], what));
  };
  const uint64_t bitmap = rows / 8 + (rows % 8 != 0 ? 1 : 0);
  if (h.validity.raw != 0 && h.validity.raw != bitmap) {
    throw fail(
        0, fmt::format("{} bytes, {} rows need {} (or 0: no nulls)", h.validity.raw, rows, bitmap));
  }
  const bool variable = IsVariableLength(spec.dtype);
  uint64_t offsets = 0;
  if (variable && __builtin_mul_overflow(rows + 1, uint64_t{8}, &offsets)) offsets = 0;
  if (h.offsets.raw != offsets || (variable && offsets == 0)) {
    throw fail(1, fmt::format("{} bytes, {} rows of {} need {}", h.offsets.raw, rows,
                              DTypeName(spec.dtype), offsets));
  }
  const uint64_t width = spec.dtype == DType::kString ? 1 : FixedWidth(spec.dtype);
  uint64_t values = 0;
  if (!variable && (__builtin_mul_overflow(rows, width, &values) || h.values.raw != values)) {
    throw fail(2, fmt::format("{} bytes, {} rows of {} need {}", h.values.raw, rows,
                              DTypeName(spec.dtype), rows * width));
  }
  if (variable && h.values.raw % width != 0) {
    throw fail(
        2, fmt::format("{} bytes is not a whole number of {}-byte tokens", h.values.raw, width));
  }
}

// Decodes section `i` (at byte `at` of the chunk) into `dst`, which has
// room for exactly s.raw bytes. Returns the offset of the next section.
uint64_t DecodeSection(std::span<const std::byte> stored, uint64_t at, const Section& s,
                       Codec codec, void* dst, int i, const ChunkWhere& where) {
  if (s.raw == 0) return at + s.stored;
  const std::byte* src = stored.data() + at;
  if (codec == Codec::kNone) {
    std::memcpy(dst, src, s.raw);
    return at + s.stored;
  }
  const size_t n = ZSTD_decompressDCtx(ThreadDCtx(), dst, s.raw, src, s.stored);
  if (ZSTD_isError(n)) {
    throw where.Fail(where.offset + at, fmt::format("{} section: zstd cannot decode it: {}",
                                                    kSectionNames[i], ZSTD_getErrorName(n)));
  }
  if (n != s.raw) {
    throw where.Fail(where.offset + at,
                     fmt::format("{} section: decodes to {} bytes, the chunk header says {}",
                                 kSectionNames[i], n, s.raw));
  }
  return at + s.stored;
}

// Column::FromBuffers checks offsets and bool values; its messages start
// with "column \"<name>\" (<dtype>): ", which ChunkWhere already says.
Column BuildColumn(const ColumnSpec& spec, uint64_t rows, std::vector<uint8_t> validity,
                   std::vector<std::byte> values, std::vector<uint64_t> offsets,
                   const ChunkWhere& where) {
  try {
    return Column::FromBuffers(spec, rows, std::move(validity), std::move(values),
                               std::move(offsets));
  } catch (const Error& e) {
    std::string what = e.what_text();
    const std::string prefix =
        fmt::format("column \"{}\" ({}): ", spec.name, DTypeName(spec.dtype));
    if (what.starts_with(prefix)) what.erase(0, prefix.size());
    throw where.Fail(where.offset, what);
  }
}

// A Column built through its API always passes; this guards the writer
// against a Column whose buffers were corrupted in memory.
void CheckColumnBuffers(const Column& c) {
  const size_t rows = c.size();
  const size_t width = c.dtype() == DType::kString ? 1 : FixedWidth(c.dtype());
  const bool ok = (c.validity().empty() || c.validity().size() == (rows + 7) / 8) &&
                  (IsVariableLength(c.dtype()) ? c.offsets().size() == rows + 1 &&
                                                     c.offsets().back() * width == c.values().size()
                                               : c.values().size() == rows * width);
  if (!ok) throw InternalError(fmt::format("column \"{}\": inconsistent buffers", c.name()));
}

}  // namespace

Error ChunkWhere::Fail(uint64_t byte, const std::string& what) const {
  return ShardError(file, byte,
                    fmt::format("column \"{}\" row group {}: {}", column, row_group, what));
}

// ---- writing ----------------------------------------------------------------

ChunkEncoder::ChunkEncoder(int zstd_level) : level_(zstd_level) {
  if (level_ > 0) {
    cctx_.reset(ZSTD_createCCtx());
    if (!cctx_) throw std::bad_alloc();
  }
}

void ChunkEncoder::EnsureScratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
}

std::span<const std::byte> ChunkEncoder::Encode(const Column& column, ChunkInfo& info) {
  CheckColumnBuffers(column);
  const std::span<const std::byte> raw[3] = {std::as_bytes(column.validity()),
                                             IsVariableLength(column.dtype())
                                                 ? std::as_bytes(column.offsets())
                                                 : std::span<const std::byte>{},
                                             column.values()};
  ChunkHeader h{.dtype = static_cast<uint8_t>(column.dtype()), .rows = column.size()};
  const uint64_t raw_size = kChunkHeaderSize + raw[0].size() + raw[1].size() + raw[2].size();
  Codec codec = level_ > 0 ? Codec::kZstd : Codec::kNone;
  size_t stored = StoreSections(raw, codec, h);
  if (codec == Codec::kZstd && stored >= raw_size) {
    codec = Codec::kNone;  // incompressible: store as is, read with memcpy
    stored = StoreSections(raw, codec, h);
  }
  h.codec = static_cast<uint8_t>(codec);
  EncodeChunkHeader(h, scratch_.data());
  info.stored_size = stored;
  info.raw_size = raw_size;
  info.codec = codec;
  info.checksum = Xxh3(scratch_.data(), stored);
  info.null_count = column.null_count();
  const DType t = column.dtype();
  if (t == DType::kInt32 || t == DType::kInt64 || t == DType::kString) {
    const ColumnRuns runs = CountRuns(column);
    info.runs = runs.runs;
    info.longest_run = runs.longest;
  } else {
    info.runs = info.longest_run = 0;
  }
  return {scratch_.data(), stored};
}

size_t ChunkEncoder::StoreSections(const std::span<const std::byte> (&raw)[3], Codec codec,
                                   ChunkHeader& h) {
  size_t need = kChunkHeaderSize;
  for (const auto& r : raw) {
    need += codec == Codec::kZstd && !r.empty() ? ZSTD_compressBound(r.size()) : r.size();
  }
  EnsureScratch(need);
  Section* sections[3] = {&h.validity, &h.offsets, &h.values};
  size_t at = kChunkHeaderSize;
  for (int i = 0; i < 3; ++i) {
    size_t n = raw[i].size();
    if (n > 0 && codec == Codec::kNone) {
      std::memcpy(scratch_.data() + at, raw[i].data(), n);
    } else if (n > 0) {
      n = ZSTD_compressCCtx(cctx_.get(), scratch_.data() + at, scratch_.size() - at, raw[i].data(),
                            raw[i].size(), level_);
      if (ZSTD_isError(n)) {
        throw InternalError(fmt::format("zstd compression failed: {}", ZSTD_getErrorName(n)));
      }
    }
    *sections[i] = Section{.raw = raw[i].size(), .stored = n};
    at += n;
  }
  return at;
}

// ---- reading ----------------------------------------------------------------

void VerifyChunkChecksum(std::span<const std::byte> stored, const ChunkInfo& info,
                         const ChunkWhere& where) {
  const uint64_t got = Xxh3(stored.data(), stored.size());
  if (got != info.checksum) {
    throw where.Fail(where.offset, fmt::format("checksum mismatch (expected {}, got {})",
                                               HexU64(info.checksum), HexU64(got)));
  }
}

ChunkHeader CheckChunkHeader(std::span<const std::byte> stored, const ChunkInfo& info,
                             const ColumnSpec& spec, uint64_t rows, const ChunkWhere& where) {
  // The footer guarantees stored.size() >= kChunkHeaderSize.
  const ChunkHeader h = DecodeChunkHeader(stored.data());
  if (h.dtype != static_cast<uint8_t>(spec.dtype)) {
    throw where.Fail(where.offset,
                     fmt::format("chunk header: dtype byte {} ({}), the schema says {}", h.dtype,
                                 DTypeByteName(h.dtype), DTypeName(spec.dtype)));
  }
  if (h.codec != static_cast<uint8_t>(info.codec)) {
    throw where.Fail(where.offset + 1,
                     fmt::format("chunk header: codec byte {}, the footer says {}", h.codec,
                                 CodecName(info.codec)));
  }
  if (h.reserved16 != 0 || h.reserved32 != 0) {
    throw where.Fail(where.offset + 2, "chunk header: reserved bytes are not zero");
  }
  if (h.rows != rows) {
    throw where.Fail(where.offset + 8,
                     fmt::format("chunk header: {} rows, the row group has {}", h.rows, rows));
  }
  CheckSectionStorage(h, info, where);
  CheckSectionSizes(h, spec, rows, where);
  return h;
}

Column DecodeChunk(std::span<const std::byte> stored, const ChunkInfo& info, const ColumnSpec& spec,
                   uint64_t rows, const ChunkWhere& where, Column::Buffers reuse) {
  const ChunkHeader h = CheckChunkHeader(stored, info, spec, rows, where);
  std::vector<uint8_t> validity = std::move(reuse.validity);
  std::vector<uint64_t> offsets = std::move(reuse.offsets);
  std::vector<std::byte> values = std::move(reuse.values);
  validity.resize(h.validity.raw);
  offsets.resize(h.offsets.raw / sizeof(uint64_t));
  values.resize(h.values.raw);
  uint64_t at = kChunkHeaderSize;
  at = DecodeSection(stored, at, h.validity, info.codec, validity.data(), 0, where);
  at = DecodeSection(stored, at, h.offsets, info.codec, offsets.data(), 1, where);
  DecodeSection(stored, at, h.values, info.codec, values.data(), 2, where);
  Column column =
      BuildColumn(spec, rows, std::move(validity), std::move(values), std::move(offsets), where);
  if (column.null_count() != info.null_count) {
    throw where.Fail(where.offset, fmt::format("{} null rows, the footer says {}",
                                               column.null_count(), info.null_count));
  }
  return column;
}

}  // namespace topspin::shard_layout
