// Datasets: a directory of shards plus manifest.json.
//
// DatasetWriter turns a stream of tables (from an importer or a generator)
// into shards of about `shard_bytes` raw bytes, split into row groups of
// about `row_group_rows` rows, computes per-column statistics, and commits
// atomically: everything is written under <out>.incomplete/ and renamed to
// <out> by Commit(), so an interrupted write never looks complete.
//
// Groups: with a group column, every group's rows stay contiguous and are
// never split across row groups or shards (a row group may run past
// row_group_rows to finish a group). Callers must deliver a group's rows
// contiguously (possibly across Append calls); importers check this and
// report the input line where a group reappears.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "topspin/data/column.h"
#include "topspin/data/manifest.h"
#include "topspin/data/shard.h"

namespace topspin {

struct DatasetWriterOptions {
  std::filesystem::path out;  // the final directory; must not exist
  std::vector<ColumnSpec> schema;
  std::string label_column;  // optional; must be in the schema
  std::string group_column;  // optional; must be in the schema (int64 or string)
  uint64_t shard_bytes = uint64_t{128} << 20;  // target raw bytes per shard
  uint64_t row_group_rows = 65536;             // target rows per row group
  int zstd_level = 3;                          // 0: uncompressed
  bool byte_planes = true;                     // ShardWriterOptions::byte_planes
  int threads = 1;                             // compression/stats threads
  std::string created_by;
  std::string tokenizer;  // Manifest::tokenizer
};

class DatasetWriter {
 public:
  explicit DatasetWriter(DatasetWriterOptions options);
  ~DatasetWriter();  // without Commit(): leaves <out>.incomplete/, never <out>
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // rows.schema() must equal options.schema. Not thread-safe. `row_ids`:
  // one id per row, keying the statistics sample (ColumnStatsBuilder), or
  // empty: each row's id is then its index in the dataset.
  void Append(const Table& rows, std::span<const uint64_t> row_ids = {});
  // The row group being filled closes at the next group start (at the next
  // row without a group column), however few rows it has: Convert calls it
  // where one input file ends and the next begins.
  void BreakRowGroup();
  uint64_t rows_appended() const;
  // Called by Commit with the directory being written (before its rename),
  // the manifest and the per-column statistics builders (schema order), to
  // add files of its own (a convert part's part.json).
  using CommitHook = std::function<void(const std::filesystem::path& dir, const Manifest& manifest,
                                        const std::vector<ColumnStatsBuilder>& stats)>;
  // Flushes, writes manifest.json, renames to `out`; returns the manifest.
  Manifest Commit(const CommitHook& hook = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Opens a dataset: reads and validates the manifest, opens shards lazily.
// Thread-safe for concurrent reads.
class DatasetReader {
 public:
  explicit DatasetReader(std::filesystem::path dir);
  ~DatasetReader();

  const std::filesystem::path& dir() const;
  const Manifest& manifest() const;
  size_t num_shards() const;
  const ShardReader& shard(size_t index) const;  // opened on first use
  // Checks every shard's SHA-256 against the manifest and every chunk's
  // checksum; throws Error{kData} naming the first damaged shard, column,
  // row group and byte offset.
  void Verify() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace topspin
