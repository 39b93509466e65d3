#include "data/shard_chunk.h"

#include <algorithm>
#include <cstring>
#include <new>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <fmt/format.h>

#include "topspin/core/hash.h"
#include "topspin/core/large_array.h"
#include "topspin/core/simd.h"

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
    if (IsZstd(info.codec) &&
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
  if (h.codec == static_cast<uint8_t>(Codec::kZstdSplit) && SplitWidth(spec.dtype) == 0) {
    throw fail(2, fmt::format("codec zstd-split on a {} column, whose values are not 2, 4 or "
                              "8 bytes wide",
                              DTypeName(spec.dtype)));
  }
}

// Decodes section `i` (at byte `at` of the chunk) into `dst`, which has
// room for exactly s.raw bytes; `split_width` > 0 for a values section
// stored as byte planes of values that wide. Returns the offset of the
// next section.
uint64_t DecodeSection(std::span<const std::byte> stored, uint64_t at, const Section& s,
                       Codec codec, void* dst, int i, const ChunkWhere& where,
                       size_t split_width = 0) {
  if (s.raw == 0) return at + s.stored;
  const std::byte* src = stored.data() + at;
  if (codec == Codec::kNone) {
    std::memcpy(dst, src, s.raw);
    return at + s.stored;
  }
  // Byte planes go through this thread's scratch (it stays in cache), then
  // are interleaved into `dst`.
  thread_local std::vector<std::byte> planes;
  void* out = dst;
  if (split_width > 0) {
    if (planes.size() < s.raw) planes.resize(s.raw);
    out = planes.data();
  }
  const size_t n = ZSTD_decompressDCtx(ThreadDCtx(), out, s.raw, src, s.stored);
  if (ZSTD_isError(n)) {
    throw where.Fail(where.offset + at, fmt::format("{} section: zstd cannot decode it: {}",
                                                    kSectionNames[i], ZSTD_getErrorName(n)));
  }
  if (n != s.raw) {
    throw where.Fail(where.offset + at,
                     fmt::format("{} section: decodes to {} bytes, the chunk header says {}",
                                 kSectionNames[i], n, s.raw));
  }
  if (split_width > 0) {
    JoinBytePlanes(planes.data(), s.raw / split_width, split_width, static_cast<std::byte*>(dst));
  }
  return at + s.stored;
}

// Sizes a reused buffer for a chunk's `n` decoded elements. Row groups end
// at group boundaries, so one column's chunks differ by a few rows: a
// buffer that must grow reserves 1/8 more, so that the next chunk fits;
// its old contents are not copied (they are about to be overwritten); and
// the pages for the `n` elements are populated in one call, not faulted
// in one at a time (the headroom stays untouched, so a column read once
// holds no more memory than it uses). Without this, a pipeline worker's
// reused table grew (and copied) every column twice in its first loads
// (docs/BENCHMARKS.md, "pipeline").
template <typename T>
void SizeForDecode(std::vector<T>& v, size_t n) {
  if (v.capacity() < n) {
    std::vector<T>().swap(v);  // give the old buffer back first
    v.reserve(n + n / 8);
    PopulateForWrite(v.data(), n * sizeof(T));
  }
  v.resize(n);
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

size_t SplitWidth(DType dtype) {
  const size_t w = FixedWidth(dtype);  // 0 for strings
  return w == 2 || w == 4 || w == 8 ? w : 0;
}

namespace {

// Each value read whole and its bytes stored to their planes: loops that
// vectorise (truncating stores), unlike a byte gather per plane.
template <typename T>
void SplitPlanes(const std::byte* in, size_t n, std::byte* out) {
  auto* planes = reinterpret_cast<uint8_t*>(out);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, in + i * sizeof(T), sizeof(T));
    for (size_t k = 0; k < sizeof(T); ++k) planes[k * n + i] = static_cast<uint8_t>(v >> (8 * k));
  }
}

}  // namespace

TOPSPIN_VECTOR_CLONES
void SplitBytePlanes(const std::byte* in, size_t n, size_t width, std::byte* out) {
  switch (width) {
    case 2: return SplitPlanes<uint16_t>(in, n, out);
    case 4: return SplitPlanes<uint32_t>(in, n, out);
    case 8: return SplitPlanes<uint64_t>(in, n, out);
    default:
      for (size_t k = 0; k < width; ++k) {
        for (size_t i = 0; i < n; ++i) out[k * n + i] = in[i * width + k];
      }
  }
}

namespace {

// Rows [first, n) of JoinBytePlanes, one value at a time.
void JoinBytePlanesScalar(const std::byte* in, size_t n, size_t width, size_t first,
                          std::byte* out) {
  for (size_t i = first; i < n; ++i) {
    for (size_t k = 0; k < width; ++k) out[i * width + k] = in[k * n + i];
  }
}

}  // namespace

void JoinBytePlanes(const std::byte* in, size_t n, size_t width, std::byte* out) {
  size_t i = 0;
#if defined(__SSE2__)
  // 16 values a round: unpacking pairs of planes byte by byte, then the
  // pairs 16 and 32 bits at a time, interleaves them (SSE2, every x86-64).
  const auto load = [&](size_t k) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + k * n + i));
  };
  const auto store = [&](size_t at, __m128i v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i * width + 16 * at), v);
  };
  if (width == 2) {
    for (; i + 16 <= n; i += 16) {
      const __m128i a = load(0), b = load(1);
      store(0, _mm_unpacklo_epi8(a, b));
      store(1, _mm_unpackhi_epi8(a, b));
    }
  } else if (width == 4) {
    for (; i + 16 <= n; i += 16) {
      const __m128i a = load(0), b = load(1), c = load(2), d = load(3);
      const __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
      const __m128i cd0 = _mm_unpacklo_epi8(c, d), cd1 = _mm_unpackhi_epi8(c, d);
      store(0, _mm_unpacklo_epi16(ab0, cd0));
      store(1, _mm_unpackhi_epi16(ab0, cd0));
      store(2, _mm_unpacklo_epi16(ab1, cd1));
      store(3, _mm_unpackhi_epi16(ab1, cd1));
    }
  } else if (width == 8) {
    for (; i + 16 <= n; i += 16) {
      __m128i low[4], high[4];  // bytes 0-3 and 4-7 of 4 values each
      for (size_t half = 0; half < 2; ++half) {
        const size_t k = 4 * half;
        const __m128i a = load(k), b = load(k + 1), c = load(k + 2), d = load(k + 3);
        const __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
        const __m128i cd0 = _mm_unpacklo_epi8(c, d), cd1 = _mm_unpackhi_epi8(c, d);
        __m128i* q = half == 0 ? low : high;
        q[0] = _mm_unpacklo_epi16(ab0, cd0);
        q[1] = _mm_unpackhi_epi16(ab0, cd0);
        q[2] = _mm_unpacklo_epi16(ab1, cd1);
        q[3] = _mm_unpackhi_epi16(ab1, cd1);
      }
      for (size_t j = 0; j < 4; ++j) {
        store(2 * j, _mm_unpacklo_epi32(low[j], high[j]));
        store(2 * j + 1, _mm_unpackhi_epi32(low[j], high[j]));
      }
    }
  }
#endif
  JoinBytePlanesScalar(in, n, width, i, out);
}

Error ChunkWhere::Fail(uint64_t byte, const std::string& what) const {
  return ShardError(file, byte,
                    fmt::format("column \"{}\" row group {}: {}", column, row_group, what));
}

// ---- writing ----------------------------------------------------------------

ChunkEncoder::ChunkEncoder(int zstd_level, bool byte_planes)
    : level_(zstd_level), byte_planes_(byte_planes) {
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
  // Values 2, 4 or 8 bytes wide are stored as byte planes when their first
  // kPlanesSample values compress smaller that way (a tie goes to the
  // planes, which decode faster): the exact choice for a chunk that small;
  // for a chunk of 65,536 rows the two samples cost a quarter more
  // compression, where compressing both whole would double it.
  const size_t width = byte_planes_ ? SplitWidth(column.dtype()) : 0;
  std::span<const std::byte> sections[3] = {raw[0], raw[1], raw[2]};
  if (codec == Codec::kZstd && width > 0 && !raw[2].empty() && PlanesAreSmaller(raw[2], width)) {
    if (split_.size() != raw[2].size()) {  // the sample held only the first values
      split_.resize(raw[2].size());
      SplitBytePlanes(raw[2].data(), raw[2].size() / width, width, split_.data());
    }
    sections[2] = split_;
    codec = Codec::kZstdSplit;
  }
  size_t stored = StoreSections(sections, codec, h);
  if (IsZstd(codec) && stored >= raw_size) {
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

bool ChunkEncoder::PlanesAreSmaller(std::span<const std::byte> values, size_t width) {
  const size_t n = std::min(values.size() / width, kPlanesSample);
  const std::span<const std::byte> plain = values.first(n * width);
  split_.resize(plain.size());
  SplitBytePlanes(plain.data(), n, width, split_.data());
  probe_.resize(ZSTD_compressBound(plain.size()));
  const auto size = [&](std::span<const std::byte> bytes) {
    const size_t got = ZSTD_compressCCtx(cctx_.get(), probe_.data(), probe_.size(), bytes.data(),
                                         bytes.size(), level_);
    if (ZSTD_isError(got)) {
      throw InternalError(fmt::format("zstd compression failed: {}", ZSTD_getErrorName(got)));
    }
    return got;
  };
  return size(split_) <= size(plain);
}

size_t ChunkEncoder::StoreSections(const std::span<const std::byte> (&raw)[3], Codec codec,
                                   ChunkHeader& h) {
  size_t need = kChunkHeaderSize;
  for (const auto& r : raw) {
    need += IsZstd(codec) && !r.empty() ? ZSTD_compressBound(r.size()) : r.size();
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
  SizeForDecode(validity, h.validity.raw);
  SizeForDecode(offsets, h.offsets.raw / sizeof(uint64_t));
  SizeForDecode(values, h.values.raw);
  uint64_t at = kChunkHeaderSize;
  at = DecodeSection(stored, at, h.validity, info.codec, validity.data(), 0, where);
  at = DecodeSection(stored, at, h.offsets, info.codec, offsets.data(), 1, where);
  DecodeSection(stored, at, h.values, info.codec, values.data(), 2, where,
                info.codec == Codec::kZstdSplit ? SplitWidth(spec.dtype) : 0);
  Column column =
      BuildColumn(spec, rows, std::move(validity), std::move(values), std::move(offsets), where);
  if (column.null_count() != info.null_count) {
    throw where.Fail(where.offset, fmt::format("{} null rows, the footer says {}",
                                               column.null_count(), info.null_count));
  }
  return column;
}

}  // namespace topspin::shard_layout
