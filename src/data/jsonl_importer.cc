// The jsonl importer: one flat JSON object per line, lines parsed in
// parallel byte ranges (a JSON string cannot hold a raw newline, so every
// '\n' ends a record).
//
// The schema is every key of the first infer_rows objects, in first-seen
// order, plus keys named only by --columns (after them, in name order).
// Types: int64 when every value is an integer, float32 when every value is
// a number (float64 when one overflows float32), bool when every value is
// true/false, else string (numbers and bools in a string column are stored
// as their JSON text). A key with only nulls is float32. A key missing
// from a line, or null, is null. A nested object or array, a key that is
// not in the schema, and a value that does not fit its column are errors
// naming the key and line. Blank lines are skipped.
#include <cfloat>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/field_parse.h"
#include "data/importers.h"
#include "data/range_importer.h"

namespace topspin {
namespace {

using Json = nlohmann::ordered_json;

struct JsonColumn {
  ColumnSpec spec;
  bool given = false;  // from --columns rather than inferred
};

bool IsBlank(std::string_view line) {
  return TrimBlanks(line).empty();
}

// Parses one line; on a syntax error returns the failure instead.
std::optional<RowFailure> ParseJsonLine(std::string_view line, const ErrorWhere& where, Json* out) {
  try {
    *out = Json::parse(line.begin(), line.end());
    return std::nullopt;
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    const size_t colon = what.find(": ", what.find("column"));
    if (colon != std::string::npos) what = what.substr(colon + 2);
    ErrorWhere at = where;
    at.column = std::max<int64_t>(1, static_cast<int64_t>(e.byte));
    return RowFailure{"invalid JSON",
                      DataError("invalid JSON: " + what, at,
                                "every line must be one JSON object; pass --on-error skip to "
                                "drop lines that are not")};
  }
}

std::optional<RowFailure> NotAnObject(const Json& value, const ErrorWhere& where) {
  if (value.is_object()) return std::nullopt;
  return RowFailure{
      "not an object",
      DataError(fmt::format("the line holds {}, not a JSON object", QuoteForMessage(value.dump())),
                where, "write one object per line, e.g. {\"label\": 1, \"qid\": 7}")};
}

class JsonlRecordParser final : public RecordParser {
 public:
  JsonlRecordParser(std::vector<JsonColumn> columns, OnError on_error, size_t infer_rows)
      : columns_(std::move(columns)), on_error_(on_error), infer_rows_(infer_rows) {
    for (size_t c = 0; c < columns_.size(); ++c) index_[columns_[c].spec.name] = c;
  }

  void Parse(const InputFile& file, const ByteRange& range, ParsedRows* out,
             size_t max_rows) const override {
    std::vector<const Json*> slots;
    const std::string name = file.name();
    ForEachLine(file.text(), range, [&](std::string_view line, int64_t number) {
      if (out->rows() >= max_rows) return false;
      if (IsBlank(line)) return true;
      const ErrorWhere where{.file = name, .line = number};
      const size_t rows = out->rows();
      std::optional<RowFailure> failure = ParseRow(line, where, slots, out);
      if (!failure) {
        out->lines.push_back(number);
        return true;
      }
      for (auto& column : out->columns) column.Truncate(rows);
      FailOrSkip(on_error_, *failure, &out->skipped);
      return true;
    });
  }

 private:
  std::optional<RowFailure> ParseRow(std::string_view line, const ErrorWhere& where,
                                     std::vector<const Json*>& slots, ParsedRows* out) const;
  std::optional<RowFailure> CheckKey(const std::string& key, const Json& value,
                                     const ErrorWhere& where) const;
  RowFailure BadValue(const JsonColumn& column, const Json& value, ErrorWhere where) const;

  std::vector<JsonColumn> columns_;
  std::unordered_map<std::string, size_t> index_;
  OnError on_error_;
  size_t infer_rows_;
};

bool AppendJson(ColumnBuffer& buffer, const Json& value) {
  const DType dtype = buffer.dtype();
  if (dtype == DType::kString) {
    if (value.is_string()) {
      buffer.AppendString(value.get_ref<const std::string&>());
    } else {
      buffer.AppendString(value.dump());
    }
    return true;
  }
  if (dtype == DType::kBool) {
    if (!value.is_boolean()) return false;
    buffer.AppendFixed(static_cast<uint8_t>(value.get<bool>()));
    return true;
  }
  if (!value.is_number()) return false;
  if (dtype == DType::kFloat32 || dtype == DType::kFloat64) {
    const double d = value.get<double>();
    if (dtype == DType::kFloat64) {
      buffer.AppendFixed(d);
    } else if (std::isfinite(d) && std::fabs(d) > FLT_MAX) {
      return false;
    } else {
      buffer.AppendFixed(static_cast<float>(d));
    }
    return true;
  }
  if (!value.is_number_integer()) return false;
  if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{INT64_MAX}) return false;
  const auto i = value.get<int64_t>();
  switch (dtype) {
    case DType::kInt64: buffer.AppendFixed(i); return true;
    case DType::kInt32:
      if (i < INT32_MIN || i > INT32_MAX) return false;
      buffer.AppendFixed(static_cast<int32_t>(i));
      return true;
    case DType::kUInt8:
      if (i < 0 || i > 255) return false;
      buffer.AppendFixed(static_cast<uint8_t>(i));
      return true;
    default: return false;
  }
}

std::optional<RowFailure> JsonlRecordParser::ParseRow(std::string_view line,
                                                      const ErrorWhere& where,
                                                      std::vector<const Json*>& slots,
                                                      ParsedRows* out) const {
  Json row;
  if (auto failure = ParseJsonLine(line, where, &row)) return failure;
  if (auto failure = NotAnObject(row, where)) return failure;
  slots.assign(columns_.size(), nullptr);
  for (auto it = row.begin(); it != row.end(); ++it) {
    if (auto failure = CheckKey(it.key(), it.value(), where)) return failure;
    slots[index_.at(it.key())] = &it.value();
  }
  for (size_t c = 0; c < columns_.size(); ++c) {
    ColumnBuffer& buffer = out->columns[c];
    if (slots[c] == nullptr || slots[c]->is_null()) {
      buffer.AppendNull();
    } else if (!AppendJson(buffer, *slots[c])) {
      return BadValue(columns_[c], *slots[c], where);
    }
  }
  return std::nullopt;
}

std::optional<RowFailure> JsonlRecordParser::CheckKey(const std::string& key, const Json& value,
                                                      const ErrorWhere& where) const {
  ErrorWhere at = where;
  at.field = key;
  if (value.is_object() || value.is_array()) {
    return RowFailure{
        "nested value",
        DataError(fmt::format("key \"{}\" holds a nested {}; jsonl import takes flat objects", key,
                              value.is_object() ? "object" : "array"),
                  at,
                  fmt::format("flatten it into scalar keys (e.g. \"{}_0\") before converting, or "
                              "pass --on-error skip to drop such lines",
                              key))};
  }
  if (index_.contains(key)) return std::nullopt;
  return RowFailure{
      "unknown key",
      DataError(fmt::format("key \"{}\" is not in the schema (the keys of the first {} lines)", key,
                            infer_rows_),
                at,
                fmt::format("pass --columns {}:TYPE to add it, or --on-error skip to drop such "
                            "lines",
                            key))};
}

RowFailure JsonlRecordParser::BadValue(const JsonColumn& column, const Json& value,
                                       ErrorWhere where) const {
  where.field = column.spec.name;
  const DType suggest = value.is_number() && column.spec.dtype != DType::kFloat32 ? DType::kFloat32
                        : value.is_number()                                       ? DType::kFloat64
                                                                                  : DType::kString;
  const std::string origin =
      column.given ? "as given by --columns"
                   : fmt::format("the type inferred from the first {} lines", infer_rows_);
  return RowFailure{
      "bad value",
      DataError(fmt::format("{} is not {} ({})", QuoteForMessage(value.dump()),
                            DescribeDType(column.spec.dtype), origin),
                std::move(where),
                fmt::format("pass --columns {}:{} to read the key as {}, or --on-error skip to "
                            "drop such lines",
                            column.spec.name, DTypeName(suggest), DTypeName(suggest)))};
}

// ---- inference --------------------------------------------------------------

struct KeySample {
  bool ints = false, floats = false, bools = false, text = false, wide = false;
};

DType InferType(const KeySample& s) {
  if (s.text || (s.bools && (s.ints || s.floats))) return DType::kString;
  if (s.bools) return DType::kBool;
  if (s.floats) return s.wide ? DType::kFloat64 : DType::kFloat32;
  if (s.ints) return DType::kInt64;
  return DType::kFloat32;
}

void Observe(const Json& value, KeySample* s) {
  if (value.is_null()) return;
  if (value.is_boolean()) {
    s->bools = true;
  } else if (value.is_number_integer() &&
             !(value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{INT64_MAX})) {
    s->ints = true;
  } else if (value.is_number()) {
    s->floats = true;
    const double d = value.get<double>();
    if (std::isfinite(d) && std::fabs(d) > FLT_MAX) s->wide = true;
  } else {
    s->text = true;  // strings; nested values fail later
  }
}

std::vector<JsonColumn> InferColumns(const std::vector<InputFile>& files,
                                     const std::vector<ByteRange>& ranges,
                                     const ImportOptions& options) {
  std::vector<std::string> order;
  std::map<std::string, KeySample> samples;
  size_t rows = 0;
  std::optional<RowFailure> first_bad;  // the first sampled line that is not an object
  for (const auto& range : ranges) {
    if (rows >= options.infer_rows) break;
    const std::string& file = files[range.file].name();
    ForEachLine(files[range.file].text(), range, [&](std::string_view line, int64_t number) {
      if (IsBlank(line)) return true;
      Json row;
      const ErrorWhere where{.file = file, .line = number};
      auto failure = ParseJsonLine(line, where, &row);
      if (!failure) failure = NotAnObject(row, where);
      if (failure) {  // reported by the import, unless no line is good
        if (!first_bad) first_bad = std::move(failure);
        return true;
      }
      for (auto it = row.begin(); it != row.end(); ++it) {
        auto [entry, added] = samples.try_emplace(it.key());
        if (added) order.push_back(it.key());
        Observe(it.value(), &entry->second);
      }
      return ++rows < options.infer_rows;
    });
  }
  // No good line to infer from: the first bad one's error, not "no keys".
  if (rows == 0 && first_bad) throw first_bad->error;
  for (const auto& [name, dtype] : options.column_types) {
    if (dtype == DType::kTokensU16 || dtype == DType::kTokensU32) {
      throw ConfigError(
          fmt::format("--columns {}:{}: jsonl keys cannot be token lists", name, DTypeName(dtype)),
          ErrorWhere{.field = name}, "use float32, float64, int32, int64, uint8, bool or string");
    }
    if (!samples.contains(name)) order.push_back(name);
  }
  std::vector<JsonColumn> columns;
  for (const auto& name : order) {
    const auto given = options.column_types.find(name);
    if (given != options.column_types.end()) {
      columns.push_back(JsonColumn{{name, given->second}, true});
    } else {
      columns.push_back(JsonColumn{{name, InferType(samples[name])}, false});
    }
  }
  return columns;
}

}  // namespace

std::unique_ptr<Importer> OpenJsonlImporter(const std::vector<std::filesystem::path>& inputs,
                                            const ImportOptions& options,
                                            const ImportTuning& tuning) {
  auto pool = std::make_unique<ThreadPool>(ImportThreads(tuning));
  std::vector<InputFile> files = MapInputs(inputs);
  std::vector<ByteRange> ranges;
  for (size_t i = 0; i < files.size(); ++i) {
    const bool bom = files[i].text().starts_with("\xEF\xBB\xBF");
    files[i].body_begin = bom ? 3 : 0;
    auto file_ranges = SplitIntoRanges(files[i].text(), i, files[i].body_begin, 1,
                                       tuning.range_bytes, false, *pool);
    ranges.insert(ranges.end(), file_ranges.begin(), file_ranges.end());
  }
  std::vector<JsonColumn> columns = InferColumns(files, ranges, options);
  if (columns.empty()) {
    throw DataError(
        fmt::format("no keys in the first {} lines: nothing to import", options.infer_rows),
        ErrorWhere{.file = files.front().name()},
        "is the file empty? jsonl holds one JSON object per line, e.g. "
        "{\"label\": 1, \"qid\": 7}");
  }
  std::vector<ColumnSpec> schema;
  for (const auto& c : columns) schema.push_back(c.spec);
  auto parser =
      std::make_unique<JsonlRecordParser>(std::move(columns), options.on_error, options.infer_rows);
  return std::make_unique<RangeImporter>(std::move(files), std::move(schema), std::move(parser),
                                         std::move(ranges), options, std::move(pool));
}

}  // namespace topspin
