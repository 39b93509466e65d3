#include "topspin/data/convert.h"

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "data/field_parse.h"
#include "data/importers.h"
#include "topspin/core/error.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

// A group value: null, an int64 or a string.
using GroupKey = std::variant<std::monostate, int64_t, std::string>;

struct GroupKeyHash {
  size_t operator()(const GroupKey& key) const { return std::hash<GroupKey>()(key); }
};

GroupKey KeyAt(const Column& column, size_t row) {
  if (!column.IsValid(row)) return std::monostate{};
  if (column.dtype() == DType::kInt64) return column.Values<int64_t>()[row];
  return std::string(column.StringAt(row));
}

bool KeyEquals(const GroupKey& key, const Column& column, size_t row) {
  if (!column.IsValid(row)) return std::holds_alternative<std::monostate>(key);
  if (column.dtype() == DType::kInt64) {
    const auto* i = std::get_if<int64_t>(&key);
    return i != nullptr && *i == column.Values<int64_t>()[row];
  }
  const auto* s = std::get_if<std::string>(&key);
  return s != nullptr && *s == column.StringAt(row);
}

std::string DescribeKey(const GroupKey& key) {
  if (const auto* i = std::get_if<int64_t>(&key)) return std::to_string(*i);
  if (const auto* s = std::get_if<std::string>(&key)) return QuoteForMessage(*s);
  return "null";
}

// "file:line" from Importer::RowLocation as an ErrorWhere.
ErrorWhere WhereFromLocation(const std::string& location) {
  const size_t colon = location.rfind(':');
  int64_t line = 0;
  if (colon != std::string::npos) {
    const char* begin = location.data() + colon + 1;
    const char* end = location.data() + location.size();
    const auto [ptr, ec] = std::from_chars(begin, end, line);
    if (ec == std::errc() && ptr == end && begin != end) {
      return ErrorWhere{.file = location.substr(0, colon), .line = line};
    }
  }
  return ErrorWhere{.file = location};
}

// Checks that groups arrive contiguously, one chunk at a time.
class GroupContiguity {
 public:
  // Throws Error kData at the first row of `chunk` whose group appeared
  // before, then ended.
  void Check(const Column& column, const Importer& importer) {
    for (size_t row = 0; row < column.size(); ++row) {
      if (current_ && KeyEquals(*current_, column, row)) continue;
      GroupKey key = KeyAt(column, row);
      if (!seen_.insert(key).second) {
        throw DataError(
            fmt::format("group {} of column \"{}\" appeared earlier and reappears here after other "
                        "groups; the rows of a group must be contiguous",
                        DescribeKey(key), column.name()),
            WhereFromLocation(importer.RowLocation(row)),
            "pass --sort-groups to regroup the rows (holds all rows in memory), or sort the input "
            "by the group column");
      }
      current_ = std::move(key);
    }
  }

 private:
  std::optional<GroupKey> current_;
  std::unordered_set<GroupKey, GroupKeyHash> seen_;
};

// Holds every chunk, then hands the rows out with groups in order of first
// appearance (a stable counting sort by group ordinal).
class GroupSorter {
 public:
  explicit GroupSorter(size_t group_column) : group_column_(group_column) {}

  void Add(Table chunk) {
    const Column& column = chunk.columns[group_column_];
    for (size_t row = 0; row < column.size(); ++row) {
      const auto [it, added] = ordinals_.try_emplace(KeyAt(column, row), ordinals_.size());
      rows_.push_back(
          Row{static_cast<uint32_t>(chunks_.size()), static_cast<uint32_t>(row), it->second});
    }
    chunks_.push_back(std::move(chunk));
  }

  // Calls emit(table) with up to `chunk_rows` rows at a time, in group order.
  void Emit(const std::vector<ColumnSpec>& schema, size_t chunk_rows,
            const std::function<void(const Table&)>& emit) {
    std::vector<size_t> start(ordinals_.size() + 1, 0);
    for (const Row& r : rows_) ++start[r.ordinal + 1];
    for (size_t g = 1; g < start.size(); ++g) start[g] += start[g - 1];
    std::vector<Row> sorted(rows_.size());
    for (const Row& r : rows_) sorted[start[r.ordinal]++] = r;
    rows_.clear();
    Table out = Table::Empty(schema);
    for (const Row& r : sorted) {
      out.AppendRow(chunks_[r.chunk], r.row);
      if (out.rows() == chunk_rows) {
        emit(out);
        out = Table::Empty(schema);
      }
    }
    if (out.rows() > 0) emit(out);
  }

 private:
  struct Row {
    uint32_t chunk, row;
    size_t ordinal;
  };
  size_t group_column_;
  std::vector<Table> chunks_;
  std::vector<Row> rows_;
  std::unordered_map<GroupKey, size_t, GroupKeyHash> ordinals_;
};

// The index of `name` in `schema`; Error kConfig listing the columns when
// it is missing.
size_t RequireColumn(const std::vector<ColumnSpec>& schema, const std::string& name,
                     const char* role, const char* option) {
  std::vector<std::string> names;
  for (size_t i = 0; i < schema.size(); ++i) {
    if (schema[i].name == name) return i;
    names.push_back(schema[i].name);
  }
  const auto guess = ClosestMatch(name, names);
  throw ConfigError(fmt::format("the {} column \"{}\" is not in the data", role, name),
                    ErrorWhere{.field = name},
                    fmt::format("{}the columns are: {}",
                                guess ? fmt::format("did you mean \"{}\"? ", *guess) : "",
                                names.empty() ? "(none)" : Join(names, ", ")));
}

}  // namespace

Manifest Convert(const std::vector<std::filesystem::path>& inputs, const ImportOptions& options,
                 DatasetWriterOptions writer, bool sort_groups, ConvertProgress progress,
                 SkipReport* skipped) {
  ImportTuning tuning;
  tuning.threads = writer.threads > 0 ? static_cast<size_t>(writer.threads) : 0;
  std::unique_ptr<Importer> importer = OpenImporter(inputs, options, tuning);
  const std::vector<ColumnSpec>& schema = importer->schema();
  if (!options.label_column.empty())
    RequireColumn(schema, options.label_column, "label", "label_column");
  std::optional<size_t> group;
  if (!options.group_column.empty()) {
    group = RequireColumn(schema, options.group_column, "group", "group_column");
    const DType dtype = schema[*group].dtype;
    if (dtype != DType::kInt64 && dtype != DType::kString) {
      throw ConfigError(
          fmt::format("the group column \"{}\" is {}; it must be int64 or string",
                      options.group_column, DTypeName(dtype)),
          ErrorWhere{.field = "group_column"},
          fmt::format("pass --columns {0}:string (ids as text, whatever their length) or "
                      "{0}:int64 (integers that fit in 64 bits); a number type is inferred "
                      "when an id has a decimal point or more than 18 digits",
                      options.group_column));
    }
  }
  writer.schema = schema;
  writer.label_column = options.label_column;
  writer.group_column = options.group_column;
  writer.tokenizer = importer->tokenizer();
  DatasetWriter out(std::move(writer));

  const auto report = [&] {
    if (progress) progress(importer->bytes_read(), importer->bytes_total());
  };
  GroupContiguity contiguity;
  std::optional<GroupSorter> sorter;
  if (group && sort_groups) sorter.emplace(*group);
  Table chunk;
  while (importer->Next(&chunk)) {
    if (sorter) {
      sorter->Add(std::move(chunk));
    } else {
      if (group) contiguity.Check(chunk.columns[*group], *importer);
      out.Append(chunk);
    }
    report();
  }
  if (sorter) sorter->Emit(schema, options.chunk_rows, [&](const Table& t) { out.Append(t); });
  if (skipped != nullptr) *skipped = importer->skipped();
  report();
  return out.Commit();
}

}  // namespace topspin
