// ShardReader: opens a shard through a memory map, checks its frame
// (header, trailer, footer checksum and index) once, then decodes chunks on
// demand (data/shard_layout.h, docs/FORMAT.md).
#include <fmt/format.h>

#include "data/shard_chunk.h"
#include "data/shard_layout.h"
#include "topspin/core/error.h"
#include "topspin/core/hash.h"
#include "topspin/core/strings.h"
#include "topspin/data/shard.h"

namespace topspin {
namespace {

using namespace shard_layout;

std::string MagicText(std::span<const std::byte> magic) {
  std::string out;
  for (std::byte b : magic) {
    const auto c = std::to_integer<unsigned char>(b);
    out +=
        c >= 0x20 && c < 0x7F ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  }
  return out;
}

void CheckHeader(std::span<const std::byte> bytes, const std::string& file) {
  if (!HasMagic(bytes.first(kMagicSize))) {
    throw ShardError(file, 0,
                     fmt::format("not a topspin shard: the file starts with \"{}\", not \"{}\"",
                                 MagicText(bytes.first(kMagicSize)), kShardMagic),
                     "check the path (shards end in .tshard); if it is one, it is damaged: "
                     "re-run topspin convert");
  }
  const Header header = DecodeHeader(bytes.first(kHeaderSize));
  if (header.version > kShardFormatVersion && header.version < 0x10000) {
    throw ShardError(file, 8,
                     fmt::format("shard format version {} is newer than this topspin reads ({})",
                                 header.version, kShardFormatVersion),
                     "upgrade topspin, or re-run topspin convert with this version");
  }
  if (header.version != kShardFormatVersion) {
    throw ShardError(file, 8,
                     fmt::format("unknown shard format version {} (this topspin reads {})",
                                 header.version, kShardFormatVersion));
  }
  if ((header.flags & ~kKnownFlags) != 0) {
    throw ShardError(file, 12, fmt::format("unknown header flags 0x{:08x}", header.flags));
  }
}

Trailer CheckTrailer(std::span<const std::byte> bytes, const std::string& file) {
  const uint64_t at = bytes.size() - kTrailerSize;
  if (!HasMagic(bytes.last(kMagicSize))) {
    throw ShardError(file, bytes.size() - kMagicSize,
                     "the file does not end with the shard magic \"TSPSHARD\"", kTruncatedHint);
  }
  const Trailer trailer = DecodeTrailer(bytes.last(kTrailerSize));
  if (trailer.version != kShardFormatVersion) {
    throw ShardError(file, at + 24,
                     fmt::format("the trailer says format version {}, the header {}",
                                 trailer.version, kShardFormatVersion));
  }
  if (trailer.footer_offset < kHeaderSize || trailer.footer_offset > at ||
      trailer.footer_size != at - trailer.footer_offset) {
    throw ShardError(file, at,
                     fmt::format("the trailer places the footer at byte {} with {} bytes, which "
                                 "does not end at the trailer (byte {})",
                                 trailer.footer_offset, trailer.footer_size, at),
                     kTruncatedHint);
  }
  return trailer;
}

Footer ReadFooter(std::span<const std::byte> bytes, const Trailer& trailer,
                  const std::string& file) {
  const auto footer = bytes.subspan(trailer.footer_offset, trailer.footer_size);
  const uint64_t got = Xxh3(footer.data(), footer.size());
  if (got != trailer.footer_checksum) {
    throw ShardError(file, trailer.footer_offset,
                     fmt::format("footer checksum mismatch (expected {}, got {})",
                                 HexU64(trailer.footer_checksum), HexU64(got)));
  }
  const std::string_view text(reinterpret_cast<const char*>(footer.data()), footer.size());
  return ParseFooter(text, file, trailer.footer_offset);
}

}  // namespace

struct ShardReader::Impl {
  explicit Impl(const fs::path& p) : path(p), file_name(p.string()), file(p) {
    const auto bytes = file.bytes();
    if (bytes.size() < kHeaderSize + kTrailerSize) {
      throw ShardError(file_name, std::nullopt,
                       fmt::format("{} bytes is too short for a shard (at least {})", bytes.size(),
                                   kHeaderSize + kTrailerSize),
                       kTruncatedHint);
    }
    CheckHeader(bytes, file_name);
    footer = ReadFooter(bytes, CheckTrailer(bytes, file_name), file_name);
  }

  void CheckRowGroup(size_t row_group) const {
    if (row_group >= footer.row_groups.size()) {
      throw ShardError(file_name, std::nullopt,
                       fmt::format("row group {} out of range: the shard has {}", row_group,
                                   footer.row_groups.size()),
                       "the manifest and the shard disagree, or the caller asked for a row "
                       "group that does not exist");
    }
  }

  void CheckColumn(size_t column) const {
    if (column >= footer.schema.size()) {
      throw ShardError(file_name, std::nullopt,
                       fmt::format("column index {} out of range: the shard has {} columns", column,
                                   footer.schema.size()),
                       "see the shard's columns with topspin inspect");
    }
  }

  ChunkWhere Where(size_t row_group, size_t column) const {
    return ChunkWhere{.file = file_name,
                      .column = footer.schema[column].name,
                      .row_group = row_group,
                      .offset = footer.row_groups[row_group].chunks[column].offset};
  }

  // The chunk's stored bytes; the footer check keeps them inside the file.
  std::span<const std::byte> Stored(const ChunkInfo& info) const {
    return file.bytes().subspan(info.offset, info.stored_size);
  }

  fs::path path;
  std::string file_name;
  MmapFile file;
  Footer footer;
};

ShardReader::ShardReader(const std::filesystem::path& path) : impl_(std::make_unique<Impl>(path)) {}
ShardReader::~ShardReader() = default;
ShardReader::ShardReader(ShardReader&&) noexcept = default;
ShardReader& ShardReader::operator=(ShardReader&&) noexcept = default;

const std::filesystem::path& ShardReader::path() const {
  return impl_->path;
}
const std::vector<ColumnSpec>& ShardReader::schema() const {
  return impl_->footer.schema;
}
uint64_t ShardReader::rows() const {
  return impl_->footer.rows;
}
size_t ShardReader::num_row_groups() const {
  return impl_->footer.row_groups.size();
}

const RowGroupInfo& ShardReader::row_group(size_t index) const {
  impl_->CheckRowGroup(index);
  return impl_->footer.row_groups[index];
}

size_t ShardReader::ColumnIndex(const std::string& name) const {
  const auto& schema = impl_->footer.schema;
  for (size_t i = 0; i < schema.size(); ++i) {
    if (schema[i].name == name) return i;
  }
  std::vector<std::string> names;
  for (const auto& spec : schema) names.push_back(spec.name);
  const auto guess = ClosestMatch(name, names);
  throw DataError(
      fmt::format("no column \"{}\" in the shard (columns: {})", name, Join(names, ", ")),
      ErrorWhere{.file = impl_->file_name},
      guess ? fmt::format("did you mean \"{}\"?", *guess) : "check the column names in the config");
}

void ShardReader::ReleaseRowGroup(size_t row_group) const {
  const Impl& s = *impl_;
  s.CheckRowGroup(row_group);
  const auto& chunks = s.footer.row_groups[row_group].chunks;
  if (chunks.empty()) return;
  uint64_t begin = chunks.front().offset, end = begin;
  for (const ChunkInfo& c : chunks) {
    begin = std::min(begin, c.offset);
    end = std::max(end, c.offset + c.stored_size);
  }
  s.file.DropPages(begin, end - begin);
}

Column ShardReader::ReadChunk(size_t row_group, size_t column, bool verify, Column reuse) const {
  const Impl& s = *impl_;
  s.CheckRowGroup(row_group);
  s.CheckColumn(column);
  const RowGroupInfo& group = s.footer.row_groups[row_group];
  const ChunkInfo& info = group.chunks[column];
  const ChunkWhere where = s.Where(row_group, column);
  const auto stored = s.Stored(info);
  if (verify) VerifyChunkChecksum(stored, info, where);
  return DecodeChunk(stored, info, s.footer.schema[column], group.rows, where,
                     reuse.TakeBuffers());
}

Table ShardReader::ReadRowGroup(size_t row_group, const std::vector<std::string>& columns,
                                bool verify) const {
  std::vector<size_t> indices;
  if (columns.empty()) {
    indices.resize(impl_->footer.schema.size());
    for (size_t c = 0; c < indices.size(); ++c) indices[c] = c;
  } else {
    indices.reserve(columns.size());
    for (const auto& name : columns) indices.push_back(ColumnIndex(name));  // fail before decoding
  }
  Table table;
  ReadRowGroupInto(row_group, indices, table, verify);
  return table;
}

void ShardReader::ReadRowGroupInto(size_t row_group, std::span<const size_t> columns, Table& table,
                                   bool verify) const {
  impl_->CheckRowGroup(row_group);
  for (size_t c : columns) impl_->CheckColumn(c);
  table.columns.resize(columns.size());
  for (size_t i = 0; i < columns.size(); ++i) {
    table.columns[i] = ReadChunk(row_group, columns[i], verify, std::move(table.columns[i]));
  }
}

uint64_t ShardReader::VerifyRowGroup(size_t row_group, std::span<const size_t> columns) const {
  const Impl& s = *impl_;
  s.CheckRowGroup(row_group);
  uint64_t bytes = 0;
  for (size_t c : columns) {
    s.CheckColumn(c);
    const ChunkInfo& info = s.footer.row_groups[row_group].chunks[c];
    VerifyChunkChecksum(s.Stored(info), info, s.Where(row_group, c));
    bytes += info.stored_size;
  }
  return bytes;
}

void ShardReader::VerifyAll() const {
  const Impl& s = *impl_;
  for (size_t g = 0; g < s.footer.row_groups.size(); ++g) {
    const RowGroupInfo& group = s.footer.row_groups[g];
    for (size_t c = 0; c < group.chunks.size(); ++c) {
      const ChunkWhere where = s.Where(g, c);
      VerifyChunkChecksum(s.Stored(group.chunks[c]), group.chunks[c], where);
      CheckChunkHeader(s.Stored(group.chunks[c]), group.chunks[c], s.footer.schema[c], group.rows,
                       where);
    }
  }
}

}  // namespace topspin
