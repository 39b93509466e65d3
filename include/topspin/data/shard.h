// Shard files: the columnar, checksummed, compressed unit of a dataset.
// docs/FORMAT.md is the byte-level specification; this header is the API.
//
// A shard holds row groups; a row group holds one chunk per column; each
// chunk is compressed (zstd or none) and checksummed (xxh3-64 of the stored
// bytes). A footer (JSON) records the schema and the chunk index; magic
// bytes and the format version sit at both ends of the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "topspin/core/files.h"
#include "topspin/data/column.h"

namespace topspin {

inline constexpr uint32_t kShardFormatVersion = 1;
inline constexpr char kShardMagic[9] = "TSPSHARD";  // 8 bytes on disk, no terminator
inline constexpr const char* kShardExtension = ".tshard";

// How a chunk's sections are stored (docs/FORMAT.md, "Chunks"). kZstdSplit is
// zstd whose values section was first split into byte planes (byte k of
// every value, then byte k + 1): for numbers the high bytes compress to
// almost nothing and the low bytes become raw zstd blocks, so the chunk is
// as small or smaller and decodes faster than plain zstd.
enum class Codec : uint8_t { kNone = 0, kZstd = 1, kZstdSplit = 2 };

// Whether chunks of `codec` hold zstd frames.
inline constexpr bool IsZstd(Codec codec) {
  return codec == Codec::kZstd || codec == Codec::kZstdSplit;
}

struct ShardWriterOptions {
  int zstd_level = 3;  // 0 = store uncompressed; 1..19 zstd levels
  // Also try numbers as byte planes (codec zstd-split) and keep the
  // smaller; false writes only codecs none and zstd, which topspin
  // releases before codec zstd-split can read.
  bool byte_planes = true;
};

// Where one chunk lives (the footer's chunk index, one per column per row group).
struct ChunkInfo {
  uint64_t offset = 0;        // byte offset of the stored bytes in the file
  uint64_t stored_size = 0;   // bytes on disk
  uint64_t raw_size = 0;      // bytes after decompression
  Codec codec = Codec::kNone;
  uint64_t checksum = 0;      // xxh3-64 of the stored bytes
  uint64_t null_count = 0;
  // The chunk's runs of equal consecutive values (CountRuns), recorded for
  // int32, int64 and string columns: a ranking dataset's lists per row
  // group without decoding its group column. 0 when not recorded (older
  // shards, other dtypes).
  uint64_t runs = 0;
  uint64_t longest_run = 0;
};

struct RowGroupInfo {
  uint64_t rows = 0;
  std::vector<ChunkInfo> chunks;  // one per schema column, in schema order
};

// What a finished shard holds; the dataset manifest records it.
struct ShardSummary {
  std::filesystem::path path;
  uint64_t rows = 0;
  uint64_t row_groups = 0;
  uint64_t file_bytes = 0;
  uint64_t raw_bytes = 0;  // sum of chunk raw sizes (uncompressed column data)
  std::string sha256;      // of the whole file, lowercase hex
};

// Writes one shard. Row groups are appended in order; Finish() writes the
// footer and trailer and makes the file durable (AtomicFileWriter: the shard
// appears complete at `path` or not at all). Not thread-safe.
class ShardWriter {
 public:
  ShardWriter(std::filesystem::path path, std::vector<ColumnSpec> schema,
              ShardWriterOptions options = {});
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // rows.schema() must equal the writer's schema (Error{kInternal} if not).
  // An empty table writes nothing.
  void WriteRowGroup(const Table& rows);
  uint64_t rows_written() const;
  uint64_t bytes_written() const;
  ShardSummary Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads one shard through a memory map. Opening checks the magic bytes,
// version, trailer and footer checksum; reads check each chunk's checksum
// and decoded layout. Every error is Error{kData} naming the file, the
// column and row group where relevant, and the byte offset. All const
// methods are thread-safe.
class ShardReader {
 public:
  explicit ShardReader(const std::filesystem::path& path);
  ~ShardReader();
  ShardReader(ShardReader&&) noexcept;
  ShardReader& operator=(ShardReader&&) noexcept;

  const std::filesystem::path& path() const;
  const std::vector<ColumnSpec>& schema() const;
  uint64_t rows() const;
  size_t num_row_groups() const;
  const RowGroupInfo& row_group(size_t index) const;
  // Index of `name` in the schema; throws Error{kData} naming the shard and
  // the available columns when absent.
  size_t ColumnIndex(const std::string& name) const;

  // Decodes one chunk. verify=false skips the checksum (the layout is
  // always checked). The buffers of `reuse` (any column, e.g. the previous
  // row group's) hold the result when they are large enough.
  Column ReadChunk(size_t row_group, size_t column, bool verify = true, Column reuse = {}) const;
  // Decodes the projected columns of a row group, in the order given
  // (empty: every column).
  Table ReadRowGroup(size_t row_group, const std::vector<std::string>& columns = {},
                     bool verify = true) const;
  // The hot-loop form: decodes the columns at schema indices `columns`
  // into `table`, reusing the memory of the columns it already holds. A
  // reader thread that keeps one Table allocates nothing in steady state,
  // so threads do not serialise on the allocator and page faults. After
  // an error the table holds no meaningful data (reuse it or drop it).
  void ReadRowGroupInto(size_t row_group, std::span<const size_t> columns, Table& table,
                        bool verify = true) const;
  // Lets go of the row group's stored bytes once they are decoded: the
  // mapped pages leave this process's RSS (the page cache keeps them), so
  // reading a dataset does not grow memory by its size. Any thread.
  void ReleaseRowGroup(size_t row_group) const;
  // Checks the checksums of the chunks at schema indices `columns` of a
  // row group (the read half of ReadRowGroupInto(..., verify = true), for
  // callers that time reading and decoding apart). Returns their stored bytes.
  uint64_t VerifyRowGroup(size_t row_group, std::span<const size_t> columns) const;
  // Checks every chunk; throws on the first damaged one.
  void VerifyAll() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace topspin
