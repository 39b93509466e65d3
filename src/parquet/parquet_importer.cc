// The parquet importer (topspin/parquet/parquet_import.h).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <charconv>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/util/float16.h>
#include <fmt/format.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>

#include "data/field_parse.h"
#include "data/importers.h"
#include "topspin/core/error.h"
#include "topspin/core/strings.h"
#include "topspin/parquet/parquet_import.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHiveNull = "__HIVE_DEFAULT_PARTITION__";

// One input file and the key=value folders above it.
struct ParquetInput {
  fs::path path;
  uint64_t size = 0;
  std::vector<std::pair<std::string, std::optional<std::string>>> partitions;
};

// Spark escapes partition values with %XX.
std::string Unescape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto hex = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

bool Hidden(const fs::path& name) {
  const std::string s = name.string();
  return !s.empty() && (s.front() == '_' || s.front() == '.');
}

// Files of `inputs` in order; directories recursively, sorted.
std::vector<ParquetInput> ExpandInputs(const std::vector<fs::path>& inputs) {
  std::vector<ParquetInput> files;
  for (const fs::path& root : inputs) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
      files.push_back(ParquetInput{.path = root, .size = fs::file_size(root, ec), .partitions = {}});
      if (ec) {
        throw IoError(fmt::format("cannot read the input: {}", ec.message()),
                      ErrorWhere{.file = root.string()}, "check that the file exists");
      }
      continue;
    }
    std::vector<fs::path> found;
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (Hidden(it->path().filename())) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) found.push_back(it->path());
    }
    if (ec) {
      throw IoError(fmt::format("cannot list the directory: {}", ec.message()),
                    ErrorWhere{.file = root.string()}, "check its permissions");
    }
    std::sort(found.begin(), found.end());
    if (found.empty()) {
      throw DataError("the directory holds no Parquet files", ErrorWhere{.file = root.string()},
                      "pass the directory Spark wrote (files named part-*.parquet)");
    }
    for (const fs::path& path : found) {
      ParquetInput in{.path = path, .size = fs::file_size(path), .partitions = {}};
      for (const fs::path& part : path.lexically_relative(root).parent_path()) {
        const std::string folder = part.string();
        const size_t eq = folder.find('=');
        if (eq == std::string::npos || eq == 0) continue;
        const std::string value = Unescape(folder.substr(eq + 1));
        in.partitions.emplace_back(Unescape(folder.substr(0, eq)),
                                   value == kHiveNull ? std::nullopt : std::optional(value));
      }
      files.push_back(std::move(in));
    }
  }
  return files;
}

// What one output column is made from.
struct ColumnPlan {
  ColumnSpec spec;
  int field = -1;                  // index into the file's Arrow schema; -1: a partition key
  size_t partition = 0;            // index into ParquetInput::partitions
  std::shared_ptr<arrow::DataType> arrow_type;  // of the first file
};

[[noreturn]] void ThrowArrow(const arrow::Status& status, const fs::path& file,
                             const std::string& what) {
  throw DataError(fmt::format("{}: {}", what, status.ToString()), ErrorWhere{.file = file.string()},
                  "check that the file is Parquet (Spark, pyarrow and DuckDB write it) and is "
                  "complete");
}

template <typename T>
T Check(arrow::Result<T> result, const fs::path& file, const std::string& what) {
  if (!result.ok()) ThrowArrow(result.status(), file, what);
  return std::move(result).ValueUnsafe();
}

void Check(const arrow::Status& status, const fs::path& file, const std::string& what) {
  if (!status.ok()) ThrowArrow(status, file, what);
}

bool IsIntegerType(arrow::Type::type id) {
  switch (id) {
    case arrow::Type::INT8: case arrow::Type::INT16: case arrow::Type::INT32:
    case arrow::Type::INT64: case arrow::Type::UINT8: case arrow::Type::UINT16:
    case arrow::Type::UINT32: case arrow::Type::UINT64: return true;
    default: return false;
  }
}

bool IsStringType(arrow::Type::type id) {
  return id == arrow::Type::STRING || id == arrow::Type::LARGE_STRING ||
         id == arrow::Type::BINARY || id == arrow::Type::LARGE_BINARY ||
         id == arrow::Type::STRING_VIEW || id == arrow::Type::BINARY_VIEW;
}

bool IsListType(arrow::Type::type id) {
  return id == arrow::Type::LIST || id == arrow::Type::LARGE_LIST;
}

// Our dtype for an Arrow type, or nullopt when it has none.
std::optional<DType> NaturalType(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::BOOL: return DType::kBool;
    case arrow::Type::INT8: case arrow::Type::INT16: case arrow::Type::INT32:
    case arrow::Type::UINT16: return DType::kInt32;
    case arrow::Type::UINT8: return DType::kUInt8;
    case arrow::Type::INT64: case arrow::Type::UINT32: case arrow::Type::UINT64:
      return DType::kInt64;
    case arrow::Type::HALF_FLOAT: case arrow::Type::FLOAT: return DType::kFloat32;
    case arrow::Type::DOUBLE: return DType::kFloat64;
    case arrow::Type::DICTIONARY: {
      const auto& dict = static_cast<const arrow::DictionaryType&>(type);
      if (IsStringType(dict.value_type()->id())) return DType::kString;
      return std::nullopt;
    }
    default: break;
  }
  if (IsStringType(type.id())) return DType::kString;
  if (IsListType(type.id())) {
    const auto& value = *static_cast<const arrow::BaseListType&>(type).value_type();
    if (IsIntegerType(value.id())) return DType::kTokensU32;
  }
  return std::nullopt;
}

// True when a column of Arrow `type` may be stored as `dtype`.
bool Convertible(const arrow::DataType& type, DType dtype) {
  const auto natural = NaturalType(type);
  if (!natural) return false;
  if (*natural == dtype) return true;
  if (IsIntegerType(type.id())) return IsNumeric(dtype);
  if (*natural == DType::kFloat32 || *natural == DType::kFloat64)
    return dtype == DType::kFloat32 || dtype == DType::kFloat64;
  if (*natural == DType::kTokensU32) return dtype == DType::kTokensU16;
  return false;
}

// Fills a Column of `spec` from one Arrow array. Errors name the file,
// column and row (row_base: the file row of the array's row 0).
class ArrayConverter {
 public:
  ArrayConverter(const ColumnSpec& spec, const fs::path& file, uint64_t row_base)
      : spec_(spec), file_(file), row_base_(row_base) {}

  Column Convert(const arrow::Array& array) {
    rows_ = static_cast<size_t>(array.length());
    Validity(array);
    if (array.type_id() == arrow::Type::DICTIONARY) return Dictionary(array);
    if (IsStringType(array.type_id())) return Strings(array);
    if (IsListType(array.type_id())) return Lists(array);
    if (array.type_id() == arrow::Type::BOOL) return Bools(array);
    return Numbers(array);
  }

 private:
  [[noreturn]] void Fail(size_t row, const std::string& what) const {
    throw DataError(fmt::format("row {} of column \"{}\": {}", row_base_ + row, spec_.name, what),
                    ErrorWhere{.file = file_.string(), .field = spec_.name},
                    fmt::format("cast the column in Spark, or pass --columns {}:TYPE with a type "
                                "that holds it (e.g. int64 or float64)",
                                spec_.name));
  }

  bool Valid(size_t r) const { return validity_.empty() || (validity_[r / 8] >> (r % 8)) & 1; }

  void Validity(const arrow::Array& array) {
    validity_.clear();
    if (array.null_count() == 0) return;
    validity_.assign((rows_ + 7) / 8, 0);
    for (size_t r = 0; r < rows_; ++r) {
      if (array.IsValid(static_cast<int64_t>(r))) validity_[r / 8] |= uint8_t(1u << (r % 8));
    }
  }

  Column Build(std::vector<std::byte> values, std::vector<uint64_t> offsets = {}) {
    return Column::FromBuffers(spec_, rows_, std::move(validity_), std::move(values),
                               std::move(offsets));
  }

  template <typename Out, typename In>
  void Store(std::vector<std::byte>& values, const In* in) {
    values.resize(rows_ * sizeof(Out));
    auto* out = reinterpret_cast<Out*>(values.data());
    for (size_t r = 0; r < rows_; ++r) {
      if (!Valid(r)) {
        out[r] = std::is_floating_point_v<Out> ? std::numeric_limits<Out>::quiet_NaN() : Out{0};
        continue;
      }
      const In v = in[r];
      if constexpr (std::is_floating_point_v<Out>) {
        if constexpr (std::is_same_v<Out, float> && std::is_floating_point_v<In>) {
          if (std::isfinite(v) && std::fabs(v) > FLT_MAX) Fail(r, fmt::format("{} overflows float32", v));
        }
        out[r] = static_cast<Out>(v);
      } else if constexpr (std::is_integral_v<In>) {
        if (!std::in_range<Out>(v)) {
          Fail(r, fmt::format("{} does not fit {}", v, DTypeName(spec_.dtype)));
        }
        out[r] = static_cast<Out>(v);
      } else {
        throw InternalError("ArrayConverter: a float column read as an integer");
      }
    }
  }

  template <typename In>
  Column Typed(const In* in) {
    std::vector<std::byte> values;
    switch (spec_.dtype) {
      case DType::kFloat32: Store<float>(values, in); break;
      case DType::kFloat64: Store<double>(values, in); break;
      case DType::kInt32: Store<int32_t>(values, in); break;
      case DType::kInt64: Store<int64_t>(values, in); break;
      case DType::kUInt8: Store<uint8_t>(values, in); break;
      default: throw InternalError("ArrayConverter: not a number column");
    }
    return Build(std::move(values));
  }

  Column Numbers(const arrow::Array& array) {
    const auto& data = *array.data();
    switch (array.type_id()) {
      case arrow::Type::INT8: return Typed(data.GetValues<int8_t>(1));
      case arrow::Type::INT16: return Typed(data.GetValues<int16_t>(1));
      case arrow::Type::INT32: return Typed(data.GetValues<int32_t>(1));
      case arrow::Type::INT64: return Typed(data.GetValues<int64_t>(1));
      case arrow::Type::UINT8: return Typed(data.GetValues<uint8_t>(1));
      case arrow::Type::UINT16: return Typed(data.GetValues<uint16_t>(1));
      case arrow::Type::UINT32: return Typed(data.GetValues<uint32_t>(1));
      case arrow::Type::UINT64: return Typed(data.GetValues<uint64_t>(1));
      case arrow::Type::FLOAT: return Typed(data.GetValues<float>(1));
      case arrow::Type::DOUBLE: return Typed(data.GetValues<double>(1));
      case arrow::Type::HALF_FLOAT: {
        const auto* bits = data.GetValues<uint16_t>(1);
        std::vector<float> widened(rows_);
        for (size_t r = 0; r < rows_; ++r) {
          widened[r] = Valid(r) ? arrow::util::Float16::FromBits(bits[r]).ToFloat() : 0.0f;
        }
        return Typed(widened.data());
      }
      default: throw InternalError("ArrayConverter: unexpected Arrow type");
    }
  }

  Column Bools(const arrow::Array& array) {
    const auto& bools = static_cast<const arrow::BooleanArray&>(array);
    std::vector<std::byte> values(rows_);
    for (size_t r = 0; r < rows_; ++r) {
      values[r] = std::byte(Valid(r) && bools.Value(int64_t(r)) ? 1 : 0);
    }
    return Build(std::move(values));
  }

  template <typename ArrayType>
  Column StringsOf(const ArrayType& strings) {
    std::vector<uint64_t> offsets(rows_ + 1, 0);
    size_t bytes = 0;
    for (size_t r = 0; r < rows_; ++r) {
      if (Valid(r)) bytes += strings.GetView(int64_t(r)).size();
      offsets[r + 1] = bytes;
    }
    std::vector<std::byte> values(bytes);
    for (size_t r = 0; r < rows_; ++r) {
      if (!Valid(r)) continue;
      const auto view = strings.GetView(int64_t(r));
      if (!view.empty()) std::memcpy(values.data() + offsets[r], view.data(), view.size());
    }
    return Build(std::move(values), std::move(offsets));
  }

  Column Strings(const arrow::Array& array) {
    switch (array.type_id()) {
      case arrow::Type::STRING: case arrow::Type::BINARY:
        return StringsOf(static_cast<const arrow::BinaryArray&>(array));
      case arrow::Type::LARGE_STRING: case arrow::Type::LARGE_BINARY:
        return StringsOf(static_cast<const arrow::LargeBinaryArray&>(array));
      default: return StringsOf(static_cast<const arrow::BinaryViewArray&>(array));
    }
  }

  // Calls fn(values) with the raw values of an integer array (from its
  // offset), typed.
  template <typename Fn>
  static void WithIntegers(const arrow::Array& array, Fn&& fn) {
    const auto& data = *array.data();
    switch (array.type_id()) {
      case arrow::Type::INT8: fn(data.GetValues<int8_t>(1)); return;
      case arrow::Type::INT16: fn(data.GetValues<int16_t>(1)); return;
      case arrow::Type::INT32: fn(data.GetValues<int32_t>(1)); return;
      case arrow::Type::INT64: fn(data.GetValues<int64_t>(1)); return;
      case arrow::Type::UINT8: fn(data.GetValues<uint8_t>(1)); return;
      case arrow::Type::UINT16: fn(data.GetValues<uint16_t>(1)); return;
      case arrow::Type::UINT32: fn(data.GetValues<uint32_t>(1)); return;
      case arrow::Type::UINT64: fn(data.GetValues<uint64_t>(1)); return;
      default: throw InternalError("WithIntegers: not an integer array");
    }
  }

  // A dictionary<string> column: each row's index looked up.
  template <typename ArrayType>
  Column DictionaryOf(const ArrayType& dictionary, const arrow::Array& indices) {
    std::vector<uint64_t> offsets(rows_ + 1, 0);
    std::vector<std::byte> values;
    WithIntegers(indices, [&](const auto* index) {
      for (size_t r = 0; r < rows_; ++r) {
        if (Valid(r)) {
          const auto i = static_cast<int64_t>(index[r]);
          if (i < 0 || i >= dictionary.length()) Fail(r, "a dictionary index is out of range");
          const auto view = dictionary.GetView(i);
          const size_t at = values.size();
          values.resize(at + view.size());
          if (!view.empty()) std::memcpy(values.data() + at, view.data(), view.size());
        }
        offsets[r + 1] = values.size();
      }
    });
    return Build(std::move(values), std::move(offsets));
  }

  Column Dictionary(const arrow::Array& array) {
    const auto& dict = static_cast<const arrow::DictionaryArray&>(array);
    const arrow::Array& values = *dict.dictionary();
    switch (values.type_id()) {
      case arrow::Type::STRING: case arrow::Type::BINARY:
        return DictionaryOf(static_cast<const arrow::BinaryArray&>(values), *dict.indices());
      case arrow::Type::LARGE_STRING: case arrow::Type::LARGE_BINARY:
        return DictionaryOf(static_cast<const arrow::LargeBinaryArray&>(values), *dict.indices());
      default:
        return DictionaryOf(static_cast<const arrow::BinaryViewArray&>(values), *dict.indices());
    }
  }

  template <typename ListArray>
  Column ListsOf(const ListArray& lists) {
    const arrow::Array& items = *lists.values();
    const uint64_t max = spec_.dtype == DType::kTokensU16 ? 0xFFFF : 0xFFFFFFFFu;
    std::vector<uint64_t> offsets(rows_ + 1, 0);
    for (size_t r = 0; r < rows_; ++r) {
      offsets[r + 1] = offsets[r] + (Valid(r) ? uint64_t(lists.value_length(int64_t(r))) : 0);
    }
    std::vector<std::byte> values(offsets.back() * FixedWidth(spec_.dtype));
    auto* u16 = reinterpret_cast<uint16_t*>(values.data());
    auto* u32 = reinterpret_cast<uint32_t*>(values.data());
    WithIntegers(items, [&](const auto* item) {
      for (size_t r = 0; r < rows_; ++r) {
        if (!Valid(r)) continue;
        const int64_t begin = lists.value_offset(int64_t(r));
        uint64_t out = offsets[r];
        for (int64_t i = begin; i < begin + lists.value_length(int64_t(r)); ++i, ++out) {
          if (items.IsNull(i)) Fail(r, "a list holds a null token");
          const auto v = item[i];
          if (std::cmp_less(v, 0) || std::cmp_greater(v, max)) {
            Fail(r, fmt::format("token {} is outside 0..{} ({})", v, max, DTypeName(spec_.dtype)));
          }
          if (spec_.dtype == DType::kTokensU16) {
            u16[out] = static_cast<uint16_t>(v);
          } else {
            u32[out] = static_cast<uint32_t>(v);
          }
        }
      }
    });
    return Build(std::move(values), std::move(offsets));
  }

  Column Lists(const arrow::Array& array) {
    if (array.type_id() == arrow::Type::LARGE_LIST) {
      return ListsOf(static_cast<const arrow::LargeListArray&>(array));
    }
    return ListsOf(static_cast<const arrow::ListArray&>(array));
  }

  const ColumnSpec& spec_;
  const fs::path& file_;
  uint64_t row_base_;
  size_t rows_ = 0;
  std::vector<uint8_t> validity_;
};

class ParquetImporter final : public Importer {
 public:
  ParquetImporter(std::vector<ParquetInput> all, const ImportOptions& options)
      : options_(options) {
    std::vector<fs::path> paths;
    std::vector<uint64_t> sizes;
    for (const auto& in : all) {
      paths.push_back(in.path);
      sizes.push_back(in.size);
    }
    InputShare share = SelectShare(paths, sizes, options);
    PlanColumns(all);
    for (uint64_t i = share.first_input; i < share.first_input + share.inputs.size(); ++i) {
      files_.push_back(all[i]);
      bytes_total_ += all[i].size;
    }
    set_share(std::move(share));
  }

  const std::vector<ColumnSpec>& schema() const override { return schema_; }
  uint64_t bytes_read() const override { return bytes_read_; }
  uint64_t bytes_total() const override { return bytes_total_; }
  const SkipReport& skipped() const override { return skipped_; }
  size_t chunk_input() const override { return chunk_file_; }
  bool breaks_at_inputs() const override { return true; }

  std::string RowLocation(size_t row) const override {
    return fmt::format("{} (row {})", files_.at(chunk_file_).path.string(), chunk_first_row_ + row);
  }

  void ChunkRowIds(std::vector<uint64_t>* ids) const override {
    ids->resize(chunk_rows_);
    const uint64_t input = share().first_input + chunk_file_;
    for (size_t r = 0; r < chunk_rows_; ++r) (*ids)[r] = ImportRowId(input, chunk_first_row_ + r);
  }

  bool Next(Table* chunk) override {
    std::shared_ptr<arrow::RecordBatch> batch;
    while (true) {
      if (!batches_ && !OpenNext()) {
        *chunk = Table::Empty(schema_);
        chunk_rows_ = 0;
        return false;
      }
      Check(batches_->ReadNext(&batch), files_[file_].path, "cannot read a record batch");
      if (batch != nullptr && batch->num_rows() > 0) break;
      if (batch == nullptr) FinishFile();
    }
    chunk_file_ = file_;
    chunk_first_row_ = file_row_;
    chunk_rows_ = static_cast<size_t>(batch->num_rows());
    const ParquetInput& in = files_[file_];
    chunk->columns.clear();
    for (size_t c = 0; c < plan_.size(); ++c) {
      const ColumnPlan& p = plan_[c];
      if (p.field < 0) {
        chunk->columns.push_back(PartitionColumn(p, in, chunk_rows_));
      } else {
        ArrayConverter convert(p.spec, in.path, file_row_);
        chunk->columns.push_back(convert.Convert(*batch->column(batch_index_[c])));
      }
    }
    file_row_ += chunk_rows_;
    if (file_rows_ > 0) {
      bytes_read_ = bytes_done_ + uint64_t(double(in.size) * double(file_row_) / double(file_rows_));
    }
    return true;
  }

 private:
  // The output columns: the first file's (or the projection), then the
  // partition keys, typed over the whole input list.
  void PlanColumns(const std::vector<ParquetInput>& all) {
    const ParquetInput& first = all.front();
    auto reader = OpenReader(first.path);
    std::shared_ptr<arrow::Schema> arrow_schema;
    Check(reader->GetSchema(&arrow_schema), first.path, "cannot read the schema");
    first_file_ = first.path;
    first_schema_ = arrow_schema;

    std::vector<std::string> keys;
    for (const auto& [key, value] : first.partitions) keys.push_back(key);
    for (const auto& in : all) {
      std::vector<std::string> these;
      for (const auto& [key, value] : in.partitions) these.push_back(key);
      if (these != keys) {
        throw DataError(fmt::format("the partition folders differ: {} has keys [{}], {} has [{}]",
                                    first.path.string(), Join(keys, ", "), in.path.string(),
                                    Join(these, ", ")),
                        ErrorWhere{.file = in.path.string()},
                        "pass directories written by one Spark job (same partitionBy columns)");
      }
    }

    std::vector<std::string> names = options_.columns;
    if (names.empty()) {
      for (const auto& field : arrow_schema->fields()) names.push_back(field->name());
      for (const auto& key : keys) names.push_back(key);
    }
    std::set<std::string> unique;
    for (const std::string& name : names) {
      if (!unique.insert(name).second) {
        throw ConfigError(fmt::format("column \"{}\" is named twice", name),
                          ErrorWhere{.field = "--columns"}, "name each column once");
      }
      ColumnPlan p;
      p.spec.name = name;
      p.field = arrow_schema->GetFieldIndex(name);
      const auto key = std::find(keys.begin(), keys.end(), name);
      if (p.field >= 0) {
        p.arrow_type = arrow_schema->field(p.field)->type();
        p.spec.dtype = FieldType(name, *p.arrow_type, first.path);
      } else if (key != keys.end()) {
        p.partition = static_cast<size_t>(key - keys.begin());
        p.spec.dtype = PartitionType(all, p.partition, name);
      } else {
        std::vector<std::string> known;
        for (const auto& field : arrow_schema->fields()) known.push_back(field->name());
        for (const auto& k : keys) known.push_back(k);
        const auto guess = ClosestMatch(name, known);
        throw ConfigError(
            fmt::format("--columns names \"{}\", which {} does not have", name,
                        first.path.string()),
            ErrorWhere{.file = first.path.string(), .field = name},
            fmt::format("{}the columns are: {}",
                        guess ? fmt::format("did you mean \"{}\"? ", *guess) : "",
                        Join(known, ", ")));
      }
      schema_.push_back(p.spec);
      plan_.push_back(std::move(p));
    }
    for (const auto& [name, dtype] : options_.column_types) {
      if (!unique.contains(name)) {
        throw ConfigError(fmt::format("--columns gives a type for \"{}\", which is not read", name),
                          ErrorWhere{.field = "--columns"},
                          "check the name against topspin inspect or the Spark schema");
      }
    }
  }

  DType FieldType(const std::string& name, const arrow::DataType& type, const fs::path& file) {
    const auto given = options_.column_types.find(name);
    const auto natural = NaturalType(type);
    if (!natural) {
      throw ConfigError(
          fmt::format("column \"{}\" is {}, which topspin does not import", name, type.ToString()),
          ErrorWhere{.file = file.string(), .field = name},
          fmt::format("cast it in Spark (timestamps and dates to long, decimals to double, "
                      "structs to their fields), or leave it out: --columns with the other "
                      "columns' names"));
    }
    if (given == options_.column_types.end()) return *natural;
    if (!Convertible(type, given->second)) {
      throw ConfigError(fmt::format("column \"{}\" is {}, which cannot be read as {}", name,
                                    type.ToString(), DTypeName(given->second)),
                        ErrorWhere{.file = file.string(), .field = name},
                        fmt::format("drop :{} for \"{}\" (it reads as {})",
                                    DTypeName(given->second), name, DTypeName(*natural)));
    }
    return given->second;
  }

  DType PartitionType(const std::vector<ParquetInput>& all, size_t key, const std::string& name) {
    const auto given = options_.column_types.find(name);
    if (given != options_.column_types.end()) {
      if (given->second != DType::kInt64 && given->second != DType::kString) {
        throw ConfigError(fmt::format("partition key \"{}\" can be int64 or string, not {}", name,
                                      DTypeName(given->second)),
                          ErrorWhere{.field = "--columns"}, "use :int64 or :string");
      }
      if (given->second == DType::kString) return DType::kString;
    }
    for (const auto& in : all) {
      const auto& value = in.partitions[key].second;
      int64_t parsed = 0;
      if (value && !ParseInt64(*value, &parsed)) {
        if (given != options_.column_types.end()) {
          throw DataError(fmt::format("partition key \"{}\" is \"{}\", not an int64", name, *value),
                          ErrorWhere{.file = in.path.string(), .field = name},
                          fmt::format("read it as text: --columns {}:string", name));
        }
        return DType::kString;
      }
    }
    return DType::kInt64;
  }

  static bool ParseInt64(const std::string& text, int64_t* out) {
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
    return ec == std::errc() && ptr == text.data() + text.size() && !text.empty();
  }

  Column PartitionColumn(const ColumnPlan& p, const ParquetInput& in, size_t rows) const {
    Column column(p.spec);
    column.Reserve(rows);
    const auto& value = in.partitions[p.partition].second;
    int64_t number = 0;
    if (value && p.spec.dtype == DType::kInt64) ParseInt64(*value, &number);
    for (size_t r = 0; r < rows; ++r) {
      if (!value) {
        column.AppendNull();
      } else if (p.spec.dtype == DType::kInt64) {
        column.AppendInt(number);
      } else {
        column.AppendString(*value);
      }
    }
    return column;
  }

  std::unique_ptr<parquet::arrow::FileReader> OpenReader(const fs::path& path) const {
    parquet::ArrowReaderProperties properties;
    properties.set_batch_size(static_cast<int64_t>(std::max<size_t>(1, options_.chunk_rows)));
    properties.set_pre_buffer(true);
    properties.set_use_threads(true);
    parquet::arrow::FileReaderBuilder builder;
    try {
      Check(builder.OpenFile(path.string(), /*memory_map=*/false), path, "cannot open Parquet");
      builder.properties(properties);
      return Check(builder.Build(), path, "cannot open Parquet");
    } catch (const parquet::ParquetException& e) {
      throw DataError(fmt::format("not a readable Parquet file: {}", e.what()),
                      ErrorWhere{.file = path.string()},
                      "check that the file is Parquet and complete");
    }
  }

  // Opens files_[file_] (after the current one): its reader, the leaf
  // columns to read, and checks its schema against the first file's.
  bool OpenNext() {
    if (started_) ++file_;
    started_ = true;
    if (file_ >= files_.size()) return false;
    const ParquetInput& in = files_[file_];
    reader_ = OpenReader(in.path);
    std::shared_ptr<arrow::Schema> arrow_schema;
    Check(reader_->GetSchema(&arrow_schema), in.path, "cannot read the schema");
    std::vector<int> leaves;
    batch_index_.assign(plan_.size(), -1);
    int next = 0;
    for (size_t c = 0; c < plan_.size(); ++c) {
      const ColumnPlan& p = plan_[c];
      if (p.field < 0) continue;
      const int field = arrow_schema->GetFieldIndex(p.spec.name);
      if (field < 0) {
        throw DataError(fmt::format("column \"{}\" of {} is missing here", p.spec.name,
                                    first_file_.string()),
                        ErrorWhere{.file = in.path.string(), .field = p.spec.name},
                        "every file must have the same columns: rewrite the input with one "
                        "schema, or leave the column out with --columns");
      }
      const auto& type = arrow_schema->field(field)->type();
      if (!type->Equals(*p.arrow_type)) {
        throw DataError(fmt::format("column \"{}\" is {} here and {} in {}", p.spec.name,
                                    type->ToString(), p.arrow_type->ToString(),
                                    first_file_.string()),
                        ErrorWhere{.file = in.path.string(), .field = p.spec.name},
                        "every file must have the same column types: cast the column in Spark");
      }
      CollectLeaves(reader_->manifest().schema_fields.at(size_t(field)), leaves);
      batch_index_[c] = next++;
    }
    file_rows_ = uint64_t(reader_->parquet_reader()->metadata()->num_rows());
    file_row_ = 0;
    std::vector<int> row_groups(size_t(reader_->num_row_groups()));
    for (size_t g = 0; g < row_groups.size(); ++g) row_groups[g] = int(g);
    if (leaves.empty()) {
      // Only partition keys: the rows still come from the file.
      leaves.push_back(0);
    }
    batches_ = Check(reader_->GetRecordBatchReader(row_groups, leaves), in.path,
                     "cannot read the row groups");
    return true;
  }

  static void CollectLeaves(const parquet::arrow::SchemaField& field, std::vector<int>& out) {
    if (field.is_leaf()) {
      out.push_back(field.column_index);
      return;
    }
    for (const auto& child : field.children) CollectLeaves(child, out);
  }

  void FinishFile() {
    if (file_row_ != file_rows_) {
      throw DataError(fmt::format("read {} rows, the footer says {}", file_row_, file_rows_),
                      ErrorWhere{.file = files_[file_].path.string()}, "the file is damaged");
    }
    bytes_done_ += files_[file_].size;
    bytes_read_ = bytes_done_;
    batches_.reset();
    reader_.reset();
  }

  ImportOptions options_;
  std::vector<ParquetInput> files_;  // this share's
  std::vector<ColumnSpec> schema_;
  std::vector<ColumnPlan> plan_;
  std::vector<int> batch_index_;  // per plan entry: its column in a record batch (-1: partition)
  fs::path first_file_;
  std::shared_ptr<arrow::Schema> first_schema_;
  SkipReport skipped_;
  bool started_ = false;
  size_t file_ = 0;
  std::unique_ptr<parquet::arrow::FileReader> reader_;
  std::unique_ptr<arrow::RecordBatchReader> batches_;
  uint64_t file_rows_ = 0, file_row_ = 0;
  size_t chunk_file_ = 0;
  uint64_t chunk_first_row_ = 0;
  size_t chunk_rows_ = 0;
  uint64_t bytes_read_ = 0, bytes_done_ = 0, bytes_total_ = 0;
};

std::unique_ptr<Importer> OpenParquet(const std::vector<fs::path>& inputs,
                                      const ImportOptions& options, const ImportTuning&) {
  return std::make_unique<ParquetImporter>(ExpandInputs(inputs), options);
}

}  // namespace

void RegisterParquetImport() {
  RegisterParquetImporter(&OpenParquet);
}

}  // namespace topspin
