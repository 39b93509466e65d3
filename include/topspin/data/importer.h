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
#include <string>
#include <vector>

#include "topspin/core/error.h"
#include "topspin/data/column.h"

namespace topspin {

struct ImportOptions {
  std::string format;               // csv | jsonl | letor | text
  std::string label_column;         // optional
  std::string group_column;         // optional: ranking query id
  std::map<std::string, DType> column_types;  // overrides inference (--columns name:type,...)
  OnError on_error = OnError::kFail;
  size_t chunk_rows = 65536;        // rows per table returned by Next()
  size_t infer_rows = 10000;        // rows sampled for type inference (csv, jsonl)
  std::string tokenizer = "bytes";  // text: "bytes", "sentencepiece:MODEL", "gpt2:DIR"
};

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
};

// Opens the right importer for options.format over the inputs, in order.
// Unknown formats are Error{kConfig} with a suggestion.
std::unique_ptr<Importer> OpenImporter(const std::vector<std::filesystem::path>& inputs,
                                       const ImportOptions& options);

}  // namespace topspin
