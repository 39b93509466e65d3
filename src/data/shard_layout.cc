#include "data/shard_layout.h"

#include <charconv>
#include <cstring>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "topspin/core/hash.h"

namespace topspin::shard_layout {
namespace {

using nlohmann::json;

constexpr size_t kTrailerVersionAt = 24;
constexpr size_t kTrailerMagicAt = 28;

std::optional<DType> DTypeFromName(std::string_view name) {
  for (unsigned b = 0; b <= 0xFF; ++b) {
    const auto dtype = DTypeFromByte(static_cast<uint8_t>(b));
    if (!dtype) break;
    if (name == DTypeName(*dtype)) return dtype;
  }
  return std::nullopt;
}

std::string KnownDTypeNames() {
  std::string out;
  for (unsigned b = 0; DTypeFromByte(static_cast<uint8_t>(b)); ++b) {
    out += fmt::format("{}{}", out.empty() ? "" : ", ", DTypeName(static_cast<DType>(b)));
  }
  return out;
}

std::optional<uint64_t> ParseHex64(std::string_view hex) {
  uint64_t value = 0;
  if (hex.size() != 16) return std::nullopt;
  const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), value, 16);
  if (ec != std::errc() || end != hex.data() + hex.size()) return std::nullopt;
  if (HexU64(value) != hex) return std::nullopt;  // lowercase, no sign
  return value;
}

// Reads a parsed footer; every failure names the JSON path of the field.
class FooterParser {
 public:
  FooterParser(const std::string& file, uint64_t footer_offset)
      : file_(file), offset_(footer_offset) {}

  Footer Parse(const json& root) {
    Footer footer;
    Object(root, "footer");
    const uint64_t version = U64(root, "version", "footer");
    if (version != kShardFormatVersion) {
      throw Bad("version", fmt::format("format version {} does not match the trailer's {}", version,
                                       kShardFormatVersion));
    }
    footer.schema = Schema(Field(root, "schema", "footer"));
    footer.rows = U64(root, "rows", "footer");
    const json& groups = Array(Field(root, "row_groups", "footer"), "row_groups");
    if (footer.schema.empty() && !groups.empty()) {
      throw Bad("row_groups", "a shard without columns cannot hold row groups");
    }
    next_chunk_ = kHeaderSize;
    uint64_t rows = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      footer.row_groups.push_back(RowGroup(groups[g], g, footer.schema.size()));
      if (__builtin_add_overflow(rows, footer.row_groups.back().rows, &rows)) {
        throw Bad("row_groups", "row counts overflow");
      }
    }
    if (rows != footer.rows) {
      throw Bad("rows", fmt::format("{} rows, but the row groups hold {}", footer.rows, rows));
    }
    if (next_chunk_ != offset_) {
      throw Bad("row_groups", fmt::format("the chunks end at byte {} but the footer starts at {}",
                                          next_chunk_, offset_));
    }
    return footer;
  }

 private:
  Error Bad(const std::string& path, const std::string& what,
            std::string hint = kDamagedHint) const {
    return ShardError(file_, offset_, fmt::format("footer: {}: {}", path, what), std::move(hint));
  }

  const json& Object(const json& j, const std::string& path) const {
    if (!j.is_object()) throw Bad(path, "expected an object");
    return j;
  }
  const json& Array(const json& j, const std::string& path) const {
    if (!j.is_array()) throw Bad(path, "expected an array");
    return j;
  }
  const json& Field(const json& obj, const char* key, const std::string& path) const {
    const auto it = obj.find(key);
    if (it == obj.end()) throw Bad(path, fmt::format("missing field \"{}\"", key));
    return *it;
  }
  uint64_t U64(const json& obj, const char* key, const std::string& path) const {
    const json& j = Field(obj, key, path);
    if (!j.is_number_unsigned()) {
      throw Bad(fmt::format("{}.{}", path, key), "expected a non-negative integer");
    }
    return j.get<uint64_t>();
  }
  std::string Str(const json& obj, const char* key, const std::string& path) const {
    const json& j = Field(obj, key, path);
    if (!j.is_string()) throw Bad(fmt::format("{}.{}", path, key), "expected a string");
    return j.get<std::string>();
  }

  std::vector<ColumnSpec> Schema(const json& j) const {
    Array(j, "schema");
    std::vector<ColumnSpec> schema;
    std::set<std::string> names;
    for (size_t i = 0; i < j.size(); ++i) {
      const std::string path = fmt::format("schema[{}]", i);
      Object(j[i], path);
      ColumnSpec spec;
      spec.name = Str(j[i], "name", path);
      if (spec.name.empty()) throw Bad(path + ".name", "empty column name");
      if (!names.insert(spec.name).second) {
        throw Bad(path + ".name", fmt::format("duplicate column \"{}\"", spec.name));
      }
      const std::string dtype = Str(j[i], "dtype", path);
      const auto parsed = DTypeFromName(dtype);
      if (!parsed) {
        throw Bad(path + ".dtype",
                  fmt::format("unknown dtype \"{}\" (known: {})", dtype, KnownDTypeNames()));
      }
      spec.dtype = *parsed;
      schema.push_back(std::move(spec));
    }
    return schema;
  }

  RowGroupInfo RowGroup(const json& j, size_t index, size_t columns) {
    const std::string path = fmt::format("row_groups[{}]", index);
    Object(j, path);
    RowGroupInfo group;
    group.rows = U64(j, "rows", path);
    if (group.rows == 0) throw Bad(path + ".rows", "a row group holds at least one row");
    const json& chunks = Array(Field(j, "chunks", path), path + ".chunks");
    if (chunks.size() != columns) {
      throw Bad(path + ".chunks", fmt::format("{} chunks for {} columns", chunks.size(), columns));
    }
    for (size_t c = 0; c < chunks.size(); ++c) {
      group.chunks.push_back(Chunk(chunks[c], fmt::format("{}.chunks[{}]", path, c), group.rows));
    }
    return group;
  }

  ChunkInfo Chunk(const json& j, const std::string& path, uint64_t rows) {
    Object(j, path);
    ChunkInfo chunk;
    chunk.offset = U64(j, "offset", path);
    chunk.stored_size = U64(j, "stored_size", path);
    chunk.raw_size = U64(j, "raw_size", path);
    chunk.null_count = U64(j, "null_count", path);
    const std::string codec = Str(j, "codec", path);
    const auto parsed = CodecFromName(codec);
    if (!parsed) {
      throw Bad(path + ".codec",
                fmt::format("unknown codec \"{}\" (known: none, zstd, zstd-split)", codec),
                "a newer topspin may have written it: upgrade topspin, or convert the data again");
    }
    chunk.codec = *parsed;
    const std::string checksum = Str(j, "checksum", path);
    const auto sum = ParseHex64(checksum);
    if (!sum) throw Bad(path + ".checksum", "expected 16 lowercase hex digits");
    chunk.checksum = *sum;
    CheckChunkPlacement(chunk, path, rows);
    if (j.contains("runs") || j.contains("longest_run")) CheckRuns(j, chunk, path, rows);
    return chunk;
  }

  // Optional, both or neither: 1 <= runs <= rows, and the longest run at
  // least an even share of the rows and at most what the other runs leave.
  void CheckRuns(const json& j, ChunkInfo& chunk, const std::string& path, uint64_t rows) {
    chunk.runs = U64(j, "runs", path);
    chunk.longest_run = U64(j, "longest_run", path);
    if (chunk.runs < 1 || chunk.runs > rows) {
      throw Bad(path + ".runs", fmt::format("{} runs in a row group of {} rows", chunk.runs, rows));
    }
    const uint64_t least = (rows + chunk.runs - 1) / chunk.runs, most = rows - chunk.runs + 1;
    if (chunk.longest_run < least || chunk.longest_run > most) {
      throw Bad(path + ".longest_run",
                fmt::format("a longest run of {} rows, but {} runs of {} rows need {} to {}",
                            chunk.longest_run, chunk.runs, rows, least, most));
    }
  }

  void CheckChunkPlacement(const ChunkInfo& chunk, const std::string& path, uint64_t rows) {
    if (chunk.offset != next_chunk_) {
      throw Bad(path + ".offset",
                fmt::format("chunk at byte {}, expected at byte {} (chunks are stored back to "
                            "back, in order)",
                            chunk.offset, next_chunk_));
    }
    if (chunk.stored_size < kChunkHeaderSize || chunk.raw_size < kChunkHeaderSize) {
      throw Bad(path, fmt::format("chunk sizes (stored {}, raw {}) below the {}-byte chunk header",
                                  chunk.stored_size, chunk.raw_size, kChunkHeaderSize));
    }
    if (chunk.stored_size > offset_ - chunk.offset) {
      throw Bad(path + ".stored_size",
                fmt::format("chunk of {} bytes at byte {} runs into the footer at byte {}",
                            chunk.stored_size, chunk.offset, offset_));
    }
    CheckChunkExpansion(chunk, path);
    if (chunk.null_count > rows) {
      throw Bad(path + ".null_count",
                fmt::format("{} nulls in a row group of {} rows", chunk.null_count, rows));
    }
    next_chunk_ += chunk.stored_size;
  }

  void CheckChunkExpansion(const ChunkInfo& chunk, const std::string& path) const {
    if (chunk.codec == Codec::kNone && chunk.raw_size != chunk.stored_size) {
      throw Bad(path, fmt::format("uncompressed chunk with stored size {} != raw size {}",
                                  chunk.stored_size, chunk.raw_size));
    }
    uint64_t limit = 0;
    if (IsZstd(chunk.codec) &&
        (__builtin_mul_overflow(chunk.stored_size - kChunkHeaderSize, kMaxZstdExpansion, &limit) ||
         chunk.raw_size - kChunkHeaderSize > limit)) {
      throw Bad(path + ".raw_size",
                fmt::format("raw size {} is more than zstd can expand {} stored bytes",
                            chunk.raw_size, chunk.stored_size));
    }
  }

  const std::string& file_;
  uint64_t offset_;
  uint64_t next_chunk_ = kHeaderSize;
};

}  // namespace

void PutU32(std::byte* out, uint32_t value) {
  std::memcpy(out, &value, sizeof value);
}
void PutU64(std::byte* out, uint64_t value) {
  std::memcpy(out, &value, sizeof value);
}
uint32_t GetU32(const std::byte* in) {
  uint32_t value;
  std::memcpy(&value, in, sizeof value);
  return value;
}
uint64_t GetU64(const std::byte* in) {
  uint64_t value;
  std::memcpy(&value, in, sizeof value);
  return value;
}

std::vector<std::byte> EncodeHeader(const Header& header) {
  std::vector<std::byte> out(kHeaderSize);
  std::memcpy(out.data(), kShardMagic, kMagicSize);
  PutU32(out.data() + 8, header.version);
  PutU32(out.data() + 12, header.flags);
  return out;
}

std::vector<std::byte> EncodeTrailer(const Trailer& trailer) {
  std::vector<std::byte> out(kTrailerSize);
  PutU64(out.data(), trailer.footer_offset);
  PutU64(out.data() + 8, trailer.footer_size);
  PutU64(out.data() + 16, trailer.footer_checksum);
  PutU32(out.data() + kTrailerVersionAt, trailer.version);
  std::memcpy(out.data() + kTrailerMagicAt, kShardMagic, kMagicSize);
  return out;
}

Header DecodeHeader(std::span<const std::byte> in) {
  return Header{.version = GetU32(in.data() + 8), .flags = GetU32(in.data() + 12)};
}

Trailer DecodeTrailer(std::span<const std::byte> in) {
  return Trailer{.footer_offset = GetU64(in.data()),
                 .footer_size = GetU64(in.data() + 8),
                 .footer_checksum = GetU64(in.data() + 16),
                 .version = GetU32(in.data() + kTrailerVersionAt)};
}

bool HasMagic(std::span<const std::byte> in) {
  return in.size() == kMagicSize && std::memcmp(in.data(), kShardMagic, kMagicSize) == 0;
}

void EncodeChunkHeader(const ChunkHeader& h, std::byte* out) {
  out[0] = std::byte{h.dtype};
  out[1] = std::byte{h.codec};
  std::memcpy(out + 2, &h.reserved16, 2);
  PutU32(out + 4, h.reserved32);
  PutU64(out + 8, h.rows);
  const Section* sections[] = {&h.validity, &h.offsets, &h.values};
  for (int i = 0; i < 3; ++i) {
    PutU64(out + 16 + 16 * i, sections[i]->raw);
    PutU64(out + 24 + 16 * i, sections[i]->stored);
  }
}

ChunkHeader DecodeChunkHeader(const std::byte* in) {
  ChunkHeader h;
  h.dtype = std::to_integer<uint8_t>(in[0]);
  h.codec = std::to_integer<uint8_t>(in[1]);
  std::memcpy(&h.reserved16, in + 2, 2);
  h.reserved32 = GetU32(in + 4);
  h.rows = GetU64(in + 8);
  Section* sections[] = {&h.validity, &h.offsets, &h.values};
  for (int i = 0; i < 3; ++i) {
    sections[i]->raw = GetU64(in + 16 + 16 * i);
    sections[i]->stored = GetU64(in + 24 + 16 * i);
  }
  return h;
}

std::string SerializeFooter(const Footer& footer) {
  using nlohmann::ordered_json;
  ordered_json schema = ordered_json::array();
  for (const auto& spec : footer.schema) {
    schema.push_back({{"name", spec.name}, {"dtype", DTypeName(spec.dtype)}});
  }
  ordered_json groups = ordered_json::array();
  for (const auto& group : footer.row_groups) {
    ordered_json chunks = ordered_json::array();
    for (const auto& c : group.chunks) {
      chunks.push_back({{"offset", c.offset},
                        {"stored_size", c.stored_size},
                        {"raw_size", c.raw_size},
                        {"codec", CodecName(c.codec)},
                        {"checksum", HexU64(c.checksum)},
                        {"null_count", c.null_count}});
      if (c.runs > 0) {
        chunks.back()["runs"] = c.runs;
        chunks.back()["longest_run"] = c.longest_run;
      }
    }
    groups.push_back({{"rows", group.rows}, {"chunks", std::move(chunks)}});
  }
  ordered_json root = {{"version", kShardFormatVersion},
                       {"rows", footer.rows},
                       {"schema", std::move(schema)},
                       {"row_groups", std::move(groups)}};
  return root.dump();
}

Footer ParseFooter(std::string_view text, const std::string& file, uint64_t footer_offset) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    if (const size_t at = what.find("] "); at != std::string::npos) what.erase(0, at + 2);
    const uint64_t byte =
        footer_offset + (e.byte > 0 ? std::min<uint64_t>(e.byte - 1, text.size()) : 0);
    throw ShardError(file, byte, "footer is not valid JSON: " + what);
  }
  return FooterParser(file, footer_offset).Parse(root);
}

const char* CodecName(Codec codec) {
  switch (codec) {
    case Codec::kZstd: return "zstd";
    case Codec::kZstdSplit: return "zstd-split";
    case Codec::kNone: break;
  }
  return "none";
}

std::optional<Codec> CodecFromName(std::string_view name) {
  if (name == "none") return Codec::kNone;
  if (name == "zstd") return Codec::kZstd;
  if (name == "zstd-split") return Codec::kZstdSplit;
  return std::nullopt;
}

std::optional<Codec> CodecFromByte(uint8_t byte) {
  if (byte > static_cast<uint8_t>(Codec::kZstdSplit)) return std::nullopt;
  return static_cast<Codec>(byte);
}

Error ShardError(const std::string& file, std::optional<uint64_t> byte_offset, std::string what,
                 std::string hint) {
  ErrorWhere where{.file = file};
  if (byte_offset) where.byte_offset = static_cast<int64_t>(*byte_offset);
  return DataError(std::move(what), std::move(where), std::move(hint));
}

}  // namespace topspin::shard_layout
