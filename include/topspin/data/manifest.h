// manifest.json: the description of a dataset directory (docs/FORMAT.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "topspin/data/column.h"
#include "topspin/data/column_stats.h"

namespace topspin {

inline constexpr uint32_t kManifestVersion = 1;
inline constexpr const char* kManifestFile = "manifest.json";

struct ShardEntry {
  std::string file;  // relative to the dataset directory
  uint64_t rows = 0;
  uint64_t groups = 0;  // 0 when the dataset has no group column
  uint64_t row_groups = 0;
  uint64_t bytes = 0;      // file size
  uint64_t raw_bytes = 0;  // uncompressed column data
  std::string sha256;
};

// Statistics of group (list) lengths, for ranking datasets.
struct GroupStats {
  uint64_t groups = 0;
  uint64_t min_length = 0, max_length = 0;
  double mean_length = 0;
};

struct Manifest {
  uint32_t version = kManifestVersion;
  std::vector<ColumnSpec> schema;
  std::string label_column;  // may be empty
  std::string group_column;  // may be empty
  std::vector<ShardEntry> shards;
  std::map<std::string, ColumnStats> stats;  // by column name
  GroupStats group_stats;                    // groups == 0 without a group column
  std::string created_by;                    // "topspin 0.1.0 convert ..."
  // Text datasets: the tokenizer that made column "tokens" ("bytes",
  // "sentencepiece:/abs/path/m.model"); empty otherwise or when unknown.
  std::string tokenizer;
  uint64_t rows() const;
  uint64_t bytes() const;
  uint64_t raw_bytes() const;
  uint64_t row_groups() const;

  // JSON text of the manifest (stable key order, 2-space indent).
  std::string ToJson() const;
  // Parses and validates; errors are Error{kData} naming `source`, the
  // field and what is wrong.
  static Manifest FromJson(const std::string& text, const std::string& source);
  // Reads <dir>/manifest.json.
  static Manifest Load(const std::filesystem::path& dir);
};

// How `schema` differs from `reference`, column by column, for errors:
// 'column "qid" is int32 here and int64 in the reference; column "f9" is
// missing'. Empty when they are equal (same columns, types and order).
std::string DescribeSchemaDifference(const std::vector<ColumnSpec>& schema,
                                     const std::vector<ColumnSpec>& reference);

}  // namespace topspin
