// The csv importer: RFC 4180 over memory-mapped files, parsed in parallel
// byte ranges straight into column buffers.
//
// Types are inferred from the first infer_rows rows unless --columns names
// them: int64 when every non-empty value is an integer, else float32 when
// every one is a number (float64 only when a value overflows float32; pass
// --columns NAME:float64 for full precision), else bool when every one is
// true/false, else string. A column with no value in the sample is float32.
// An empty field is null in every type. Numbers and bools may carry spaces
// around them; strings are kept as they are and must be UTF-8. An empty
// header cell names the column "column_N" (N counts from 1). Blank lines
// are skipped. Every input must start with the same header.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "data/csv_cursor.h"
#include "data/field_parse.h"
#include "data/importers.h"
#include "data/range_importer.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

constexpr std::string_view kBom = "\xEF\xBB\xBF";
constexpr std::string_view kOpenQuoteHint =
    "a quote left open across lines cannot be skipped (every line up to the next quote would be "
    "dropped): fix the quoting here; a field holding a quote must be quoted as a whole with the "
    "inner quotes doubled";

struct CsvColumn {
  ColumnSpec spec;
  bool given = false;  // from --columns rather than inferred
};

class CsvRecordParser final : public RecordParser {
 public:
  CsvRecordParser(std::vector<CsvColumn> columns, OnError on_error, size_t infer_rows)
      : columns_(std::move(columns)), on_error_(on_error), infer_rows_(infer_rows) {}
  // A parser for type inference: bad rows are ignored, not reported.
  static CsvRecordParser Sampler(std::vector<CsvColumn> columns) {
    CsvRecordParser parser(std::move(columns), OnError::kSkip, 0);
    parser.sampling_ = true;
    return parser;
  }

  void Parse(const InputFile& file, const ByteRange& range, ParsedRows* out,
             size_t max_rows) const override;

 private:
  bool ParseRecord(CsvCursor& cur, ParsedRows* out, std::string& scratch,
                   std::optional<RowFailure>& failure) const;
  // Throws or counts a failed row; a quote left open across lines is never
  // skipped (every line up to the next quote would silently go with it).
  void Report(const RowFailure& failure, const CsvCursor& cur, const CsvPos& start,
              SkipReport* skipped) const;
  bool AppendField(CsvCursor& cur, size_t col, ColumnBuffer& buffer, std::string& scratch,
                   bool* record_end, std::optional<RowFailure>& failure) const;
  bool AppendText(const CsvCursor& cur, const CsvField& field, size_t col, ColumnBuffer& buffer,
                  std::string& scratch, std::optional<RowFailure>& failure) const;
  bool AppendParsed(ColumnBuffer& buffer, std::string_view text) const;
  RowFailure BadValue(const CsvCursor& cur, const CsvField& field, size_t col,
                      std::string_view text) const;

  std::vector<CsvColumn> columns_;
  OnError on_error_;
  size_t infer_rows_;
  bool sampling_ = false;
};

void CsvRecordParser::Parse(const InputFile& file, const ByteRange& range, ParsedRows* out,
                            size_t max_rows) const {
  CsvCursor cur(file.text(), range.begin, range.end, range.first_line, file.name());
  std::string scratch;
  std::optional<RowFailure> failure;
  while (!cur.AtEnd() && out->rows() < max_rows) {
    if (cur.SkipBlankLine()) continue;
    const CsvPos start = cur.Mark();
    const size_t rows = out->rows();
    if (ParseRecord(cur, out, scratch, failure)) {
      out->lines.push_back(start.line);
      continue;
    }
    for (auto& column : out->columns) column.Truncate(rows);
    // A sampler counts bad rows (the import reports them) and stops only
    // at a quote left open across lines. Skipping by quote parity keeps the
    // sample independent of how the input was cut.
    Report(*failure, cur, start, &out->skipped);
    cur.SkipRecord(start);
  }
}

void CsvRecordParser::Report(const RowFailure& failure, const CsvCursor& cur, const CsvPos& start,
                             SkipReport* skipped) const {
  if (on_error_ == OnError::kSkip && failure.reason == "bad quoting" &&
      cur.RecordSpansLines(start)) {
    const Error& e = failure.error;
    throw Error(e.kind(), e.what_text(), e.where(), std::string(kOpenQuoteHint));
  }
  FailOrSkip(on_error_, failure, skipped);
}

bool CsvRecordParser::ParseRecord(CsvCursor& cur, ParsedRows* out, std::string& scratch,
                                  std::optional<RowFailure>& failure) const {
  const size_t n = columns_.size();
  size_t fields = 0;
  bool record_end = false;
  CsvPos extra;  // where the first field past the header's count starts
  while (!record_end) {
    if (fields < n) {
      if (!AppendField(cur, fields, out->columns[fields], scratch, &record_end, failure)) {
        return false;
      }
    } else {
      if (fields == n) extra = cur.Mark();
      CsvField field;
      if (!cur.ReadField(&field)) {
        failure = cur.failure();
        return false;
      }
      record_end = field.record_end;
    }
    ++fields;
  }
  if (fields == n) return true;
  const CsvPos at = fields > n ? extra : cur.last_field_end();
  failure.emplace(RowFailure{
      "wrong number of fields",
      DataError(fmt::format("expected {} fields (as in the header), got {}", n, fields),
                cur.Where(at),
                "quote fields that contain commas (\"a,b\"); or pass --on-error skip to drop "
                "such rows")});
  return false;
}

bool CsvRecordParser::AppendField(CsvCursor& cur, size_t col, ColumnBuffer& buffer,
                                  std::string& scratch, bool* record_end,
                                  std::optional<RowFailure>& failure) const {
  switch (buffer.dtype()) {
    case DType::kFloat32: {
      float v;
      if (cur.TryNumber(&v, record_end)) {
        buffer.AppendFixed(v);
        return true;
      }
      break;
    }
    case DType::kFloat64: {
      double v;
      if (cur.TryNumber(&v, record_end)) {
        buffer.AppendFixed(v);
        return true;
      }
      break;
    }
    case DType::kInt64: {
      int64_t v;
      if (cur.TryNumber(&v, record_end)) {
        buffer.AppendFixed(v);
        return true;
      }
      break;
    }
    default: break;
  }
  CsvField field;
  if (!cur.ReadField(&field)) {
    failure = cur.failure();
    return false;
  }
  *record_end = field.record_end;
  return AppendText(cur, field, col, buffer, scratch, failure);
}

bool CsvRecordParser::AppendText(const CsvCursor& cur, const CsvField& field, size_t col,
                                 ColumnBuffer& buffer, std::string& scratch,
                                 std::optional<RowFailure>& failure) const {
  if (field.raw.empty()) {
    buffer.AppendNull();
    return true;
  }
  if (buffer.dtype() == DType::kString) {
    const size_t bad = InvalidUtf8Offset(field.raw);
    if (bad != std::string_view::npos) {
      const CsvPos at = cur.PositionIn(field.start, field.raw.data() + bad);
      failure.emplace(
          RowFailure{"invalid UTF-8",
                     DataError(fmt::format("invalid UTF-8 (byte 0x{:02x}) in a string field",
                                           static_cast<unsigned char>(field.raw[bad])),
                               cur.Where(at, columns_[col].spec.name),
                               "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8), or pass "
                               "--on-error skip to drop such rows")});
      return false;
    }
    if (!field.escaped) {
      buffer.AppendString(field.raw);
    } else {
      buffer.FinishString(UnescapeCsv(field.raw, buffer.StartString(field.raw.size())));
    }
    return true;
  }
  std::string_view text = field.raw;
  if (field.escaped) {
    scratch.resize(field.raw.size());
    scratch.resize(UnescapeCsv(field.raw, scratch.data()));
    text = scratch;
  }
  text = TrimBlanks(text);
  if (text.empty()) {
    buffer.AppendNull();
    return true;
  }
  if (AppendParsed(buffer, text)) return true;
  failure.emplace(BadValue(cur, field, col, text));
  return false;
}

bool CsvRecordParser::AppendParsed(ColumnBuffer& buffer, std::string_view text) const {
  int64_t i = 0;
  switch (buffer.dtype()) {
    case DType::kFloat32: {
      float v;
      if (!ParseFloat32(text, &v)) return false;
      buffer.AppendFixed(v);
      return true;
    }
    case DType::kFloat64: {
      double v;
      if (!ParseFloat64(text, &v)) return false;
      buffer.AppendFixed(v);
      return true;
    }
    case DType::kInt64:
      if (!ParseInt64(text, &i)) return false;
      buffer.AppendFixed(i);
      return true;
    case DType::kInt32:
      if (!ParseInt64(text, &i) || i < INT32_MIN || i > INT32_MAX) return false;
      buffer.AppendFixed(static_cast<int32_t>(i));
      return true;
    case DType::kUInt8:
      if (!ParseInt64(text, &i) || i < 0 || i > 255) return false;
      buffer.AppendFixed(static_cast<uint8_t>(i));
      return true;
    case DType::kBool: {
      bool b;
      if (!ParseBool(text, true, &b)) return false;
      buffer.AppendFixed(static_cast<uint8_t>(b));
      return true;
    }
    default: return false;
  }
}

// The type to suggest for a value that does not parse as `dtype`.
DType SuggestType(DType dtype, std::string_view text) {
  double d;
  if (!ParseFloat64(text, &d)) return DType::kString;
  int64_t i;
  if (ParseInt64(text, &i) && dtype != DType::kInt64) return DType::kInt64;
  if (std::isfinite(d) && std::fabs(d) > FLT_MAX) return DType::kFloat64;
  return dtype == DType::kFloat32 ? DType::kFloat64 : DType::kFloat32;
}

RowFailure CsvRecordParser::BadValue(const CsvCursor& cur, const CsvField& field, size_t col,
                                     std::string_view text) const {
  const CsvColumn& column = columns_[col];
  const DType dtype = column.spec.dtype;
  // An integer too wide for its column: say so, and suggest a wider type
  // (string for int64, which is where ids that long belong).
  std::string_view digits = TrimBlanks(text);
  if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) digits.remove_prefix(1);
  const bool integer = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  const bool too_wide =
      integer && (dtype == DType::kInt64 || dtype == DType::kInt32 || dtype == DType::kUInt8);
  const DType suggest = too_wide ? (dtype == DType::kInt64 ? DType::kString : DType::kInt64)
                                 : SuggestType(dtype, text);
  const std::string origin =
      column.given ? "as given by --columns"
                   : fmt::format("the type inferred from the first {} rows", infer_rows_);
  return RowFailure{
      "bad value",
      DataError(fmt::format("{} {} ({})", QuoteForMessage(text),
                            too_wide ? fmt::format("is out of range for {}", DTypeName(dtype))
                                     : "is not " + DescribeDType(dtype),
                            origin),
                cur.Where(field.start, column.spec.name),
                fmt::format("pass --columns {}:{} to read the column as {}, or --on-error skip "
                            "to drop such rows",
                            column.spec.name, DTypeName(suggest), DTypeName(suggest)))};
}

// ---- header and inference ---------------------------------------------------

// Reads the header of `file` and sets its body start. Error kData when the
// file has no header or the header is malformed.
std::vector<std::string> ReadHeader(InputFile& file) {
  const std::string_view text = file.text();
  const size_t begin = text.starts_with(kBom) ? kBom.size() : 0;
  CsvCursor cur(text, begin, text.size(), 1, file.name());
  while (cur.SkipBlankLine()) {
  }
  if (cur.AtEnd()) {
    throw DataError("the file is empty: a csv file starts with a header row naming the columns",
                    ErrorWhere{.file = file.name(), .line = 1},
                    "add a header row such as \"label,qid,f1,f2\"");
  }
  std::vector<std::string> names;
  CsvField field;
  do {
    if (!cur.ReadField(&field)) throw cur.failure()->error;
    std::string name(field.raw);
    if (field.escaped) name.resize(UnescapeCsv(field.raw, name.data()));
    if (InvalidUtf8Offset(name) != std::string_view::npos) {
      throw DataError("a column name in the header is not UTF-8", cur.Where(field.start),
                      "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)");
    }
    if (name.empty()) name = fmt::format("column_{}", names.size() + 1);
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      throw DataError(fmt::format("column \"{}\" appears twice in the header", name),
                      cur.Where(field.start), "give every column a distinct name");
    }
    names.push_back(std::move(name));
  } while (!field.record_end);
  file.body_begin = static_cast<size_t>(cur.Mark().p - text.data());
  file.body_line = cur.Mark().line;
  return names;
}

DType InferType(const Column& sample) {
  bool all_int = true, all_float = true, all_bool = true, fits_float32 = true;
  size_t values = 0;
  for (size_t r = 0; r < sample.size(); ++r) {
    if (!sample.IsValid(r)) continue;
    const std::string_view text = TrimBlanks(sample.StringAt(r));
    if (text.empty()) continue;
    ++values;
    int64_t i;
    double d;
    bool b;
    all_int = all_int && ParseInt64(text, &i);
    if (all_float && !all_int) {
      all_float = ParseFloat64(text, &d);
      if (all_float && std::isfinite(d) && std::fabs(d) > FLT_MAX) fits_float32 = false;
    }
    all_bool = all_bool && ParseBool(text, false, &b);
  }
  if (values == 0) return DType::kFloat32;
  if (all_int) return DType::kInt64;
  if (all_float) return fits_float32 ? DType::kFloat32 : DType::kFloat64;
  if (all_bool) return DType::kBool;
  return DType::kString;
}

// Checks --columns against the header and returns the given types by column.
std::vector<std::optional<DType>> GivenTypes(const std::vector<std::string>& names,
                                             const ImportOptions& options,
                                             const std::string& file) {
  std::vector<std::optional<DType>> given(names.size());
  for (const auto& [name, dtype] : options.column_types) {
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      const auto guess = ClosestMatch(name, names);
      throw ConfigError(
          fmt::format("--columns names \"{}\", which is not a column of the file", name),
          ErrorWhere{.file = file, .line = 1},
          fmt::format("{}the columns are: {}",
                      guess ? fmt::format("did you mean \"{}\"? ", *guess) : "",
                      Join(names, ", ")));
    }
    if (dtype == DType::kTokensU16 || dtype == DType::kTokensU32) {
      throw ConfigError(
          fmt::format("--columns {}:{}: csv columns cannot be token lists", name, DTypeName(dtype)),
          ErrorWhere{.field = name}, "use float32, float64, int32, int64, uint8, bool or string");
    }
    given[static_cast<size_t>(it - names.begin())] = dtype;
  }
  return given;
}

std::vector<CsvColumn> InferColumns(const std::vector<std::string>& names,
                                    const std::vector<InputFile>& files,
                                    const std::vector<ByteRange>& ranges,
                                    const ImportOptions& options) {
  const auto given = GivenTypes(names, options, files.front().name());
  std::vector<CsvColumn> text_columns;
  std::vector<ColumnSpec> text_schema;
  for (const auto& name : names) {
    text_columns.push_back(CsvColumn{{name, DType::kString}, true});
    text_schema.push_back({name, DType::kString});
  }
  const CsvRecordParser sampler = CsvRecordParser::Sampler(text_columns);
  ParsedRows sample = ParseFirstRows(sampler, files, ranges, text_schema, options.infer_rows);
  // Nothing to infer from: say why, before a type inferred from nothing
  // (float32) makes a misleading error elsewhere.
  const bool all_given = std::all_of(given.begin(), given.end(),
                                     [](const std::optional<DType>& d) { return d.has_value(); });
  if (sample.rows() == 0 && !all_given && sample.skipped.rows > 0) {
    // Every sampled row is bad: parsing them again strictly throws the
    // first one's error, with its line, column and hint.
    const CsvRecordParser strict(text_columns, OnError::kFail, 0);
    ParseFirstRows(strict, files, ranges, text_schema, options.infer_rows);
  }
  if (sample.rows() == 0 && !all_given) {
    throw DataError("the file has a header but no data rows: nothing to import",
                    ErrorWhere{.file = files.front().name(), .line = 2},
                    "add rows, or pass --columns with every column's type to write an empty "
                    "dataset");
  }
  std::vector<CsvColumn> columns;
  for (size_t c = 0; c < names.size(); ++c) {
    const DType dtype = given[c] ? *given[c] : InferType(sample.columns[c].Build());
    columns.push_back(CsvColumn{{names[c], dtype}, given[c].has_value()});
  }
  return columns;
}

}  // namespace

std::unique_ptr<Importer> OpenCsvImporter(const std::vector<std::filesystem::path>& inputs,
                                          const ImportOptions& options,
                                          const ImportTuning& tuning) {
  auto pool = std::make_unique<ThreadPool>(ImportThreads(tuning));
  std::vector<InputFile> files = MapInputs(inputs);
  std::vector<std::string> names;
  std::vector<ByteRange> ranges;
  for (size_t i = 0; i < files.size(); ++i) {
    std::vector<std::string> header = ReadHeader(files[i]);
    if (i == 0) {
      names = std::move(header);
    } else if (header != names) {
      throw DataError(fmt::format("the header ({}) differs from the first input's ({})",
                                  Join(header, ","), Join(names, ",")),
                      ErrorWhere{.file = files[i].name(), .line = 1},
                      "convert files with different columns separately");
    }
    auto file_ranges = SplitIntoRanges(files[i].text(), i, files[i].body_begin, files[i].body_line,
                                       tuning.range_bytes, true, *pool);
    ranges.insert(ranges.end(), file_ranges.begin(), file_ranges.end());
  }
  std::vector<CsvColumn> columns = InferColumns(names, files, ranges, options);
  std::vector<ColumnSpec> schema;
  for (const auto& c : columns) schema.push_back(c.spec);
  auto parser =
      std::make_unique<CsvRecordParser>(std::move(columns), options.on_error, options.infer_rows);
  return std::make_unique<RangeImporter>(std::move(files), std::move(schema), std::move(parser),
                                         std::move(ranges), options, std::move(pool));
}

}  // namespace topspin
