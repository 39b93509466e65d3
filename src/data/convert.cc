#include "topspin/data/convert.h"

#include <charconv>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "data/dataset_part.h"
#include "data/field_parse.h"
#include "data/importers.h"
#include "topspin/core/error.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

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

// The file name of input `input` of the importer.
std::string InputName(const Importer& importer, size_t input) {
  const auto& inputs = importer.share().inputs;
  return input < inputs.size() ? inputs[input].string() : fmt::format("input {}", input);
}

// Checks that groups arrive contiguously, one chunk at a time, and
// remembers each group's input (for a part's part-groups.bin). With
// `whole_inputs` (Parquet) a group must also stay inside one input file.
class GroupContiguity {
 public:
  GroupContiguity(std::string column, bool whole_inputs)
      : column_(std::move(column)), whole_inputs_(whole_inputs) {}

  // Throws Error kData at the first row of `chunk` whose group appeared
  // before, then ended (or, with whole_inputs, began in another input).
  void Check(const Column& column, const Importer& importer) {
    const auto input = static_cast<uint32_t>(importer.chunk_input());
    for (size_t row = 0; row < column.size(); ++row) {
      if (current_ && KeyEquals(*current_, column, row)) {
        if (whole_inputs_ && input != current_input_) Split(*current_, current_input_, importer, row);
        continue;
      }
      GroupKey key = KeyAt(column, row);
      const auto [it, added] = seen_.try_emplace(key, input);
      if (!added) {
        if (it->second != input) Split(key, it->second, importer, row);
        throw DataError(
            fmt::format("group {} of column \"{}\" appeared earlier and reappears here after other "
                        "groups; the rows of a group must be contiguous",
                        DescribeKey(key), column_),
            WhereFromLocation(importer.RowLocation(row)),
            "pass --sort-groups to regroup the rows (holds all rows in memory), or sort the input "
            "by the group column");
      }
      current_ = std::move(key);
      current_input_ = input;
    }
  }

  std::vector<PartGroup> Groups() const {
    std::vector<PartGroup> groups;
    groups.reserve(seen_.size());
    for (const auto& [key, input] : seen_) groups.push_back(PartGroup{key, input});
    return groups;
  }

 private:
  [[noreturn]] void Split(const GroupKey& key, uint32_t earlier, const Importer& importer,
                          size_t row) const {
    throw DataError(
        fmt::format("group {} of column \"{}\" has rows in two input files, {} and {}; the rows "
                    "of a group must be in one file",
                    DescribeKey(key), column_, InputName(importer, earlier),
                    InputName(importer, importer.chunk_input())),
        WhereFromLocation(importer.RowLocation(row)),
        fmt::format("write the data partitioned by the group key (Spark: "
                    "df.repartition(N, \"{0}\").sortWithinPartitions(\"{0}\"), as "
                    "scripts/spark/convert.py does), or pass --sort-groups to regroup the rows in "
                    "memory",
                    column_));
  }

  std::string column_;
  bool whole_inputs_;
  std::optional<GroupKey> current_;
  uint32_t current_input_ = 0;
  std::unordered_map<GroupKey, uint32_t, GroupKeyHash> seen_;  // key -> input of its first row
};

// Holds every chunk, then hands the rows out with groups in order of first
// appearance (a stable counting sort by group ordinal).
class GroupSorter {
 public:
  explicit GroupSorter(size_t group_column) : group_column_(group_column) {}

  void Add(Table chunk, std::vector<uint64_t> ids, uint32_t input) {
    const Column& column = chunk.columns[group_column_];
    for (size_t row = 0; row < column.size(); ++row) {
      const auto [it, added] = ordinals_.try_emplace(KeyAt(column, row), ordinals_.size());
      if (added) group_inputs_.push_back(input);
      rows_.push_back(
          Row{static_cast<uint32_t>(chunks_.size()), static_cast<uint32_t>(row), it->second});
    }
    chunks_.push_back(std::move(chunk));
    ids_.push_back(std::move(ids));
  }

  // Calls emit(table, row ids, input of its first group's first row) with
  // up to `chunk_rows` rows at a time, in group order; a table never mixes
  // groups that began in different inputs.
  void Emit(const std::vector<ColumnSpec>& schema, size_t chunk_rows,
            const std::function<void(const Table&, std::span<const uint64_t>, uint32_t)>& emit) {
    std::vector<size_t> start(ordinals_.size() + 1, 0);
    for (const Row& r : rows_) ++start[r.ordinal + 1];
    for (size_t g = 1; g < start.size(); ++g) start[g] += start[g - 1];
    std::vector<Row> sorted(rows_.size());
    for (const Row& r : rows_) sorted[start[r.ordinal]++] = r;
    rows_.clear();
    Table out = Table::Empty(schema);
    std::vector<uint64_t> ids;
    uint32_t input = 0;
    const auto flush = [&] {
      if (out.rows() > 0) emit(out, ids, input);
      out = Table::Empty(schema);
      ids.clear();
    };
    for (const Row& r : sorted) {
      const uint32_t row_input = group_inputs_[r.ordinal];
      if (out.rows() == chunk_rows || (out.rows() > 0 && row_input != input)) flush();
      input = row_input;
      out.AppendRow(chunks_[r.chunk], r.row);
      const auto& chunk_ids = ids_[r.chunk];
      if (!chunk_ids.empty()) ids.push_back(chunk_ids[r.row]);
    }
    flush();
  }

  std::vector<PartGroup> Groups() const {
    std::vector<PartGroup> groups(ordinals_.size());
    for (const auto& [key, ordinal] : ordinals_) groups[ordinal] = PartGroup{key, group_inputs_[ordinal]};
    return groups;
  }

 private:
  struct Row {
    uint32_t chunk, row;
    size_t ordinal;
  };
  size_t group_column_;
  std::vector<Table> chunks_;
  std::vector<std::vector<uint64_t>> ids_;  // per chunk (empty: no stable ids)
  std::vector<Row> rows_;
  std::unordered_map<GroupKey, size_t, GroupKeyHash> ordinals_;
  std::vector<uint32_t> group_inputs_;  // by ordinal: the input of the group's first row
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
  const bool breaks = importer->breaks_at_inputs();
  std::vector<uint64_t> rows_per_input(importer->share().inputs.size(), 0);
  std::optional<uint32_t> last_input;
  // Rows of different inputs never share a row group (a part's row groups
  // are then those of the whole convert).
  const auto append = [&](const Table& rows, std::span<const uint64_t> ids, uint32_t input) {
    if (breaks && last_input && *last_input != input) out.BreakRowGroup();
    last_input = input;
    out.Append(rows, ids);
  };
  GroupContiguity contiguity(options.group_column, options.format == "parquet");
  std::optional<GroupSorter> sorter;
  if (group && sort_groups) sorter.emplace(*group);
  Table chunk;
  std::vector<uint64_t> ids;
  while (importer->Next(&chunk)) {
    importer->ChunkRowIds(&ids);
    const auto input = static_cast<uint32_t>(importer->chunk_input());
    if (input < rows_per_input.size()) rows_per_input[input] += chunk.rows();
    if (sorter) {
      sorter->Add(std::move(chunk), std::move(ids), input);
      ids = {};
    } else {
      if (group) contiguity.Check(chunk.columns[*group], *importer);
      append(chunk, ids, input);
    }
    report();
  }
  if (sorter) sorter->Emit(schema, options.chunk_rows, append);
  if (skipped != nullptr) *skipped = importer->skipped();
  report();
  if (options.parts == 0) return out.Commit();
  // A part: the files `topspin dataset merge` needs.
  const std::vector<PartGroup> groups =
      !group ? std::vector<PartGroup>{} : sorter ? sorter->Groups() : contiguity.Groups();
  return out.Commit([&](const std::filesystem::path& dir, const Manifest&,
                        const std::vector<ColumnStatsBuilder>& stats) {
    WritePartFiles(dir, importer->share(), rows_per_input, stats, groups);
  });
}

}  // namespace topspin
