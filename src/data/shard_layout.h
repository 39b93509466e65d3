// Internal: the byte layout of a shard file, shared by ShardWriter and
// ShardReader. docs/FORMAT.md is the specification; the constants and
// structs below are its code form. Everything on disk is little-endian.
//
//   [0, 16)                       header: magic[8] "TSPSHARD", u32 version, u32 flags (0)
//   [16, footer_offset)           chunks, row group by row group, column by column,
//                                 back to back (no gaps, no padding)
//   [footer_offset, size - 36)    footer: UTF-8 JSON (schema + chunk index)
//   [size - 36, size)             trailer: u64 footer_offset, u64 footer_size,
//                                 u64 footer_xxh3, u32 version, magic[8]
//
// A chunk's stored bytes: a 64-byte chunk header, then the validity,
// offsets and values sections in that order, each raw or one zstd frame.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "topspin/core/error.h"
#include "topspin/data/shard.h"

static_assert(std::endian::native == std::endian::little,
              "the shard format is little-endian and is read with memcpy: port the codecs first");

namespace topspin::shard_layout {

inline constexpr size_t kMagicSize = 8;
inline constexpr size_t kHeaderSize = 16;       // magic, u32 version, u32 flags
inline constexpr size_t kTrailerSize = 36;      // 3 x u64, u32 version, magic
inline constexpr size_t kChunkHeaderSize = 64;  // see ChunkHeader
inline constexpr uint64_t kMaxZstdExpansion =
    32768;                                  // raw <= stored * this (RLE blocks: 4 B -> 128 KiB)
inline constexpr uint32_t kKnownFlags = 0;  // version 1 defines no flags

inline constexpr const char* kDamagedHint = "the file is damaged: re-run topspin convert";
inline constexpr const char* kTruncatedHint =
    "the file is truncated or damaged (an interrupted copy?): copy it again or re-run topspin "
    "convert";

// ---- little-endian scalars ----------------------------------------------

void PutU32(std::byte* out, uint32_t value);
void PutU64(std::byte* out, uint64_t value);
uint32_t GetU32(const std::byte* in);
uint64_t GetU64(const std::byte* in);

// ---- header and trailer -------------------------------------------------

struct Header {
  uint32_t version = kShardFormatVersion;
  uint32_t flags = 0;
};
struct Trailer {
  uint64_t footer_offset = 0;
  uint64_t footer_size = 0;
  uint64_t footer_checksum = 0;  // xxh3-64 of the footer bytes
  uint32_t version = kShardFormatVersion;
};

std::vector<std::byte> EncodeHeader(const Header& header);
std::vector<std::byte> EncodeTrailer(const Trailer& trailer);
// Decoding only splits fields; the reader checks them (magic included).
// in.size() must be kHeaderSize / kTrailerSize.
Header DecodeHeader(std::span<const std::byte> in);
Trailer DecodeTrailer(std::span<const std::byte> in);
bool HasMagic(std::span<const std::byte> in);  // in.size() == kMagicSize

// ---- chunk header --------------------------------------------------------

// One section of a chunk: its size after decoding and its size on disk.
struct Section {
  uint64_t raw = 0;
  uint64_t stored = 0;
};

// The first 64 bytes of every chunk (offsets relative to the chunk):
//   0 u8 dtype   1 u8 codec   2 u16 reserved (0)   4 u32 reserved (0)
//   8 u64 rows
//   16 u64 validity.raw  24 u64 validity.stored
//   32 u64 offsets.raw   40 u64 offsets.stored
//   48 u64 values.raw    56 u64 values.stored
struct ChunkHeader {
  uint8_t dtype = 0;
  uint8_t codec = 0;
  uint16_t reserved16 = 0;
  uint32_t reserved32 = 0;
  uint64_t rows = 0;
  Section validity, offsets, values;
};
void EncodeChunkHeader(const ChunkHeader& header, std::byte* out);  // writes kChunkHeaderSize
ChunkHeader DecodeChunkHeader(const std::byte* in);                 // reads kChunkHeaderSize

// ---- footer ---------------------------------------------------------------

struct Footer {
  std::vector<ColumnSpec> schema;
  uint64_t rows = 0;
  std::vector<RowGroupInfo> row_groups;
};

// Compact JSON, keys in a fixed order (the bytes are deterministic).
// Column names must be valid UTF-8 (ShardWriter checks).
std::string SerializeFooter(const Footer& footer);

// Parses and validates a footer read from `file` at byte `footer_offset`:
// types and ranges of every field, unique non-empty column names, known
// dtypes and codecs, chunk sizes within what the codec allows, row counts
// that add up, and chunks that tile [kHeaderSize, footer_offset) exactly
// in order. Throws Error{kData} naming the file, the footer offset and the
// JSON path of the bad field.
Footer ParseFooter(std::string_view json, const std::string& file, uint64_t footer_offset);

// "none" / "zstd" / "zstd-split"; nullopt for any other name.
const char* CodecName(Codec codec);
std::optional<Codec> CodecFromName(std::string_view name);
std::optional<Codec> CodecFromByte(uint8_t byte);

// Error{kData} at `file`, byte `byte_offset`, with the damaged-file hint
// unless another is given.
[[nodiscard]] Error ShardError(const std::string& file, std::optional<uint64_t> byte_offset,
                               std::string what, std::string hint = kDamagedHint);

}  // namespace topspin::shard_layout
