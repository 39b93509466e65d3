// DiffDatasets (topspin/data/dataset_diff.h).
#include "topspin/data/dataset_diff.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "topspin/core/error.h"
#include "topspin/core/hash.h"
#include "topspin/data/dataset.h"
#include "topspin/data/shard.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

// Collects differences up to the limit.
class Differences {
 public:
  Differences(DatasetDiff& out, size_t limit) : out_(out), limit_(limit) {}
  void Add(std::string what) {
    if (out_.differences.size() < limit_) {
      out_.differences.push_back(std::move(what));
    } else {
      out_.truncated = true;
    }
  }
  // One more than the limit was found: stop looking.
  bool done() const { return out_.truncated; }

 private:
  DatasetDiff& out_;
  size_t limit_;
};

// Walks every row group of a dataset in order, across shards, decoding
// into one reused table.
class RowGroupWalk {
 public:
  explicit RowGroupWalk(const fs::path& dir) : reader_(dir) {
    for (size_t c = 0; c < reader_.manifest().schema.size(); ++c) columns_.push_back(c);
  }
  const Manifest& manifest() const { return reader_.manifest(); }
  // Decodes the next row group; false after the last.
  bool Next() {
    while (shard_ < reader_.num_shards()) {
      const ShardReader& s = reader_.shard(shard_);
      if (group_ < s.num_row_groups()) {
        first_row_ += table_.rows();
        s.ReadRowGroupInto(group_, columns_, table_);
        s.ReleaseRowGroup(group_);
        current_group_ = group_++;
        return true;
      }
      ++shard_;
      group_ = 0;
    }
    return false;
  }
  const Table& table() const { return table_; }
  uint64_t first_row() const { return first_row_; }  // dataset row of the table's row 0
  std::string Where(size_t row) const {
    return fmt::format("row {} ({}, row group {}, row {})", first_row_ + row,
                       reader_.shard(shard_).path().filename().string(), current_group_, row);
  }

 private:
  DatasetReader reader_;
  std::vector<size_t> columns_;
  Table table_;
  size_t shard_ = 0, group_ = 0, current_group_ = 0;
  uint64_t first_row_ = 0;
};

// The bytes of one row of a column: a validity byte, then the fixed-width
// value or the variable-length bytes.
std::string_view RowBytes(const Column& c, size_t row, std::string& scratch) {
  scratch.assign(1, c.IsValid(row) ? '\1' : '\0');
  const auto values = c.values();
  if (IsVariableLength(c.dtype())) {
    const size_t unit = c.dtype() == DType::kString ? 1 : FixedWidth(c.dtype());
    const auto offsets = c.offsets();
    const auto* begin = reinterpret_cast<const char*>(values.data()) + offsets[row] * unit;
    scratch.append(begin, (offsets[row + 1] - offsets[row]) * unit);
  } else {
    const size_t width = FixedWidth(c.dtype());
    scratch.append(reinterpret_cast<const char*>(values.data()) + row * width, width);
  }
  return scratch;
}

// A value as a person reads it, for a difference line.
std::string Show(const Column& c, size_t row) {
  if (!c.IsValid(row)) return "null";
  switch (c.dtype()) {
    case DType::kString: {
      const std::string_view s = c.StringAt(row);
      return fmt::format("\"{}\"", s.size() > 40 ? std::string(s.substr(0, 40)) + "..." : s);
    }
    case DType::kTokensU16:
    case DType::kTokensU32:
      return fmt::format("{} tokens", c.TokensAt(row).size());
    case DType::kInt64:
      return fmt::format("{}", c.Values<int64_t>()[row]);
    default:
      return fmt::format("{}", c.AsDouble(row));
  }
}

bool Near(double x, double y, double tolerance) {
  return x == y || std::fabs(x - y) <= tolerance * std::max(std::fabs(x), std::fabs(y));
}

void DiffColumnsAndRows(const Manifest& a, const Manifest& b, Differences& d) {
  if (a.label_column != b.label_column)
    d.Add(fmt::format("label column \"{}\" vs \"{}\"", a.label_column, b.label_column));
  if (a.group_column != b.group_column)
    d.Add(fmt::format("group column \"{}\" vs \"{}\"", a.group_column, b.group_column));
  if (a.rows() != b.rows()) d.Add(fmt::format("{} rows vs {}", a.rows(), b.rows()));
}

// Group and column statistics, one line per column that differs.
void DiffStatistics(const Manifest& a, const Manifest& b, const DatasetDiffOptions& o,
                    Differences& d) {
  const GroupStats& ga = a.group_stats;
  const GroupStats& gb = b.group_stats;
  if (ga.groups != gb.groups || ga.min_length != gb.min_length ||
      ga.max_length != gb.max_length || !Near(ga.mean_length, gb.mean_length, o.stats_tolerance)) {
    d.Add(fmt::format("groups: {} of {}..{} rows (mean {}) vs {} of {}..{} (mean {})", ga.groups,
                      ga.min_length, ga.max_length, ga.mean_length, gb.groups, gb.min_length,
                      gb.max_length, gb.mean_length));
  }
  for (const ColumnSpec& spec : a.schema) {
    const auto x = a.stats.find(spec.name), y = b.stats.find(spec.name);
    if (x == a.stats.end() || y == b.stats.end()) continue;
    const ColumnStats& s = x->second;
    const ColumnStats& t = y->second;
    std::vector<std::string> differ;
    const auto stat = [&](const char* name, auto u, auto v, bool same) {
      if (!same) differ.push_back(fmt::format("{} {} vs {}", name, u, v));
    };
    stat("count", s.count, t.count, s.count == t.count);
    stat("nulls", s.nulls, t.nulls, s.nulls == t.nulls);
    stat("infinite", s.infinite, t.infinite, s.infinite == t.infinite);
    stat("min", s.min, t.min, s.min == t.min);
    stat("max", s.max, t.max, s.max == t.max);
    stat("mean", s.mean, t.mean, Near(s.mean, t.mean, o.stats_tolerance));
    stat("std", s.std, t.std, Near(s.std, t.std, o.stats_tolerance));
    if (!o.by_group && s.quantiles != t.quantiles) {
      size_t i = 0;
      while (i < std::min(s.quantiles.size(), t.quantiles.size()) &&
             s.quantiles[i] == t.quantiles[i]) {
        ++i;
      }
      differ.push_back(fmt::format("quantile edge {}", i));
    }
    if (!differ.empty())
      d.Add(fmt::format("column \"{}\" statistics: {}", spec.name, fmt::join(differ, ", ")));
  }
}

// Exact: both datasets in lockstep, row group by row group.
void DiffRows(RowGroupWalk& a, RowGroupWalk& b, DatasetDiff& out, Differences& d) {
  std::string x, y;
  while (!d.done()) {
    const bool more_a = a.Next(), more_b = b.Next();
    if (!more_a || !more_b) {
      if (more_a != more_b)
        d.Add(fmt::format("row groups: {} has more after row {}", more_a ? "the first" : "the second",
                          (more_a ? a : b).first_row()));
      return;
    }
    const Table& ta = a.table();
    const Table& tb = b.table();
    if (ta.rows() != tb.rows()) {
      d.Add(fmt::format("row group at row {}: {} rows vs {} (the pipeline's sample order differs)",
                        a.first_row(), ta.rows(), tb.rows()));
      return;  // rows no longer line up
    }
    for (size_t r = 0; r < ta.rows() && !d.done(); ++r) {
      for (size_t c = 0; c < ta.columns.size(); ++c) {
        const Column& ca = ta.columns[c];
        const Column& cb = tb.columns[c];
        if (RowBytes(ca, r, x) != RowBytes(cb, r, y)) {
          d.Add(fmt::format("{}, column \"{}\": {} vs {}", a.Where(r), ca.name(), Show(ca, r),
                            Show(cb, r)));
        }
      }
    }
    out.rows += ta.rows();
  }
}

// A group key as text (integer or string group columns).
std::string KeyOf(const Column& c, size_t row) {
  if (!c.IsValid(row)) return "null";
  switch (c.dtype()) {
    case DType::kString: return std::string(c.StringAt(row));
    case DType::kInt64: return std::to_string(c.Values<int64_t>()[row]);
    case DType::kInt32: return std::to_string(c.Values<int32_t>()[row]);
    default: return fmt::format("{}", c.AsDouble(row));
  }
}

struct GroupDigest {
  uint64_t rows = 0;
  uint64_t hash = 0;  // of the rows, in order
  uint64_t first_row = 0;
};

// By group: one digest per group key.
std::map<std::string, GroupDigest> DigestGroups(RowGroupWalk& walk, Differences& d,
                                                const char* which) {
  std::map<std::string, GroupDigest> groups;
  const size_t key_column = [&] {
    const auto& schema = walk.manifest().schema;
    for (size_t c = 0; c < schema.size(); ++c)
      if (schema[c].name == walk.manifest().group_column) return c;
    return schema.size();
  }();
  std::string scratch, key, previous;
  GroupDigest* current = nullptr;
  while (walk.Next()) {
    const Table& t = walk.table();
    for (size_t r = 0; r < t.rows(); ++r) {
      key = KeyOf(t.columns[key_column], r);
      if (current == nullptr || key != previous) {
        auto [it, inserted] = groups.try_emplace(key, GroupDigest{.first_row = walk.first_row() + r});
        if (!inserted) d.Add(fmt::format("{}: group {} appears twice ({})", which, key, walk.Where(r)));
        current = &it->second;
        previous = key;
      }
      uint64_t h = current->hash;
      for (const Column& c : t.columns) h = Xxh3(RowBytes(c, r, scratch), h);
      current->hash = h;
      ++current->rows;
    }
  }
  return groups;
}

void DiffGroups(RowGroupWalk& a, RowGroupWalk& b, DatasetDiff& out, Differences& d) {
  const auto ga = DigestGroups(a, d, "the first");
  const auto gb = DigestGroups(b, d, "the second");
  for (const auto& [key, x] : ga) {
    out.rows += x.rows;
    ++out.groups;
    const auto y = gb.find(key);
    if (y == gb.end()) {
      d.Add(fmt::format("group {} (first at row {}) is only in the first", key, x.first_row));
    } else if (x.rows != y->second.rows) {
      d.Add(fmt::format("group {}: {} rows vs {}", key, x.rows, y->second.rows));
    } else if (x.hash != y->second.hash) {
      d.Add(fmt::format("group {} (rows {} and {}): the same length, other values or order", key,
                        x.first_row, y->second.first_row));
    }
  }
  for (const auto& [key, y] : gb) {
    if (!ga.contains(key))
      d.Add(fmt::format("group {} (first at row {}) is only in the second", key, y.first_row));
  }
}

}  // namespace

DatasetDiff DiffDatasets(const fs::path& a, const fs::path& b, const DatasetDiffOptions& o) {
  DatasetDiff out;
  Differences d(out, o.max_differences);
  RowGroupWalk wa(a), wb(b);
  const Manifest& ma = wa.manifest();
  const Manifest& mb = wb.manifest();
  if (const std::string why = DescribeSchemaDifference(mb.schema, ma.schema); !why.empty()) {
    d.Add(fmt::format("schema: {}", why));
    return out;  // nothing else lines up
  }
  if (o.by_group && (ma.group_column.empty() || mb.group_column.empty())) {
    throw ConfigError("comparing by group needs a group column in both datasets",
                      ErrorWhere{.file = (ma.group_column.empty() ? a : b).string()},
                      "convert with --group, or compare row by row (without --by-group)");
  }
  DiffColumnsAndRows(ma, mb, d);
  if (o.by_group) {
    DiffGroups(wa, wb, out, d);
  } else {
    DiffRows(wa, wb, out, d);
  }
  DiffStatistics(ma, mb, o, d);
  return out;
}

}  // namespace topspin
