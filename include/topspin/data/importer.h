// Importers: files people already have -> tables of typed columns.
//
//   csv    header row, RFC 4180 quoting, CRLF or LF, UTF-8 BOM skipped,
//          types inferred from the first `infer_rows` rows unless given,
//          an empty field is null.
//   jsonl  one flat JSON object per line; a nested value is an error
//          naming the field; keys missing from a line are null.
//   letor  "label qid:N idx:val ... # comment" (LETOR / SVMlight); sparse
//          indices become dense float32 columns f1..fK (missing: null),
//          plus float32 "label" and int64 "qid".
//   parquet  Parquet files or directories of them (Spark output, hive-style
//          key=value/ folders whose keys become columns): src/parquet/,
//          built when pyarrow's Arrow C++ is found; see docs/PARQUET.md.
//   text   each file is one UTF-8 document (BOM dropped; empty files give
//          no row) -> column "tokens" (tokens_u16 when the tokenizer's
//          vocab <= 65536, else tokens_u32) of its token ids plus the
//          tokenizer's end-of-text token; a document longer than 2^20
//          tokens continues in further rows of at most 2^20. Invalid UTF-8
//          is Error{kData} at file:line:column (on_error skip: the document
//          is skipped, reason "invalid UTF-8"). No label/group columns.
//
// Every malformed input is Error{kData} with file, line and column and the
// offending text, unless on_error is kSkip: then the row is skipped and
// counted in skipped() by reason.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "topspin/core/error.h"
#include "topspin/data/column.h"

namespace topspin {

struct ImportOptions {
  std::string format;               // csv | jsonl | letor | parquet | text
  std::string label_column;         // optional
  std::string group_column;         // optional: ranking query id
  std::map<std::string, DType> column_types;  // overrides inference (--columns name:type,...)
  std::vector<std::string> columns;  // parquet: the columns to read, in order (empty: all)
  OnError on_error = OnError::kFail;
  size_t chunk_rows = 65536;        // rows per table returned by Next()
  size_t infer_rows = 10000;        // rows sampled for type inference (csv, jsonl)
  std::string tokenizer = "bytes";  // text: "bytes", "sentencepiece:MODEL", "gpt2:DIR"
  // convert --part K/N: import only share `part` of `parts` (SelectShare);
  // parts == 0 (the default): the whole input, not a part.
  uint32_t part = 0, parts = 0;
};

// The share of the inputs one importer reads. `topspin convert --part K/N`
// cuts the whole input list (in order; for directories, the files found in
// them, sorted) into N contiguous runs of files and imports run K, so parts
// 0..N-1 in order hold every row in the order a single convert reads them.
struct InputShare {
  uint32_t part = 0, parts = 1;
  uint64_t first_input = 0;   // index of the first selected input in the whole list
  uint64_t total_inputs = 0;  // inputs in the whole list
  std::string fingerprint;    // XXH3 (hex) of the whole list's names and sizes
  std::vector<std::filesystem::path> inputs;  // the selected ones, in order
};

// Share `part` of `parts` of `inputs` (files; `sizes` their bytes, for the
// fingerprint): inputs [part * F / parts, (part + 1) * F / parts) of F.
// Spark writes partitions of about equal size, so equal file counts are
// equal work. Error kUsage when parts == 0, part >= parts, or parts > F
// (a share would be empty).
InputShare SelectShare(const std::vector<std::filesystem::path>& inputs,
                       const std::vector<uint64_t>& sizes, uint32_t part, uint32_t parts);
// The share options.part/options.parts name (parts == 0: all of them).
InputShare SelectShare(const std::vector<std::filesystem::path>& inputs,
                       const std::vector<uint64_t>& sizes, const ImportOptions& options);

// Row ids: a row's input and its position in that input (line number, or
// row index for Parquet), as (input << 40) + position, with `input` counted
// in the whole input list. They key the statistics sample (column_stats.h),
// so a part of a convert samples its rows exactly as the whole would.
inline uint64_t ImportRowId(uint64_t input, uint64_t position) {
  return (input << 40) + position;
}

struct SkipReport {
  uint64_t rows = 0;                         // rows skipped in all
  std::map<std::string, uint64_t> reasons;   // reason -> rows
  std::vector<std::string> examples;         // the first few messages, with file:line
};

class Importer {
 public:
  virtual ~Importer() = default;
  // Known after construction (inference reads ahead as needed).
  virtual const std::vector<ColumnSpec>& schema() const = 0;
  // Fills `chunk` (replacing its content) with up to chunk_rows rows; false
  // when the input is exhausted (and `chunk` is empty).
  virtual bool Next(Table* chunk) = 0;
  // Input bytes consumed so far and in all (for progress).
  virtual uint64_t bytes_read() const = 0;
  virtual uint64_t bytes_total() const = 0;
  // The input position ("file:line") of row `row` of the last chunk, for
  // error messages of later stages (group contiguity).
  virtual std::string RowLocation(size_t row) const = 0;
  virtual const SkipReport& skipped() const = 0;
  // The tokenizer spec a text importer encodes with, its model path
  // absolute (Manifest::tokenizer); empty for other formats.
  virtual std::string tokenizer() const { return {}; }
  // The input (index into share().inputs) the rows of the last chunk come
  // from: a chunk never spans inputs.
  virtual size_t chunk_input() const { return 0; }
  // ImportRowId of each row of the last chunk; empty when the importer has
  // no stable ids (text): rows are then keyed by their index in the dataset.
  virtual void ChunkRowIds(std::vector<uint64_t>* ids) const { ids->clear(); }
  // True when rows of different inputs never share a row group (csv, jsonl,
  // letor, parquet): Convert ends a row group at the first group start of
  // each new input, so that a part's row groups are those of the whole.
  virtual bool breaks_at_inputs() const { return false; }

  const InputShare& share() const { return share_; }
  void set_share(InputShare share) { share_ = std::move(share); }

 private:
  InputShare share_;
};

// Opens the right importer for options.format over the inputs, in order.
// Unknown formats are Error{kConfig} with a suggestion.
std::unique_ptr<Importer> OpenImporter(const std::vector<std::filesystem::path>& inputs,
                                       const ImportOptions& options);

}  // namespace topspin
