// The letor importer: LETOR / SVMlight ranking files,
//   "<label> qid:<N> <index>:<value> ... # comment"
// -> float32 "label", int64 "qid", float32 f1..fK where K is the largest
// index in the inputs (found by a first parallel pass). A feature missing
// from a line is null, as is a missing qid. Tokens are separated by spaces
// or tabs; '#' starts a comment; blank and comment-only lines are skipped.
#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "data/field_parse.h"
#include "data/importers.h"
#include "data/range_importer.h"

namespace topspin {
namespace {

// Dense columns f1..fK: more than this is surely not a dense ranking file.
constexpr int64_t kMaxFeatures = 100000;

constexpr std::string_view kLetorHint =
    "letor lines look like \"2 qid:10 1:0.5 3:1.25 # comment\"; pass --on-error skip to drop "
    "malformed lines";

bool IsBlank(char c) {
  return c == ' ' || c == '\t';
}

// The content of a line before any comment.
std::string_view StripComment(std::string_view line) {
  const size_t hash = line.find('#');
  return hash == std::string_view::npos ? line : line.substr(0, hash);
}

// Splits `content` into tokens, calling fn(token) for each; stops when fn
// returns false.
template <typename Fn>
bool ForEachToken(std::string_view content, Fn&& fn) {
  size_t i = 0;
  while (i < content.size()) {
    while (i < content.size() && IsBlank(content[i])) ++i;
    const size_t start = i;
    while (i < content.size() && !IsBlank(content[i])) ++i;
    if (i > start && !fn(content.substr(start, i - start))) return false;
  }
  return true;
}

// The feature index of an "index:value" token, or nullopt.
std::optional<int64_t> FeatureIndex(std::string_view token) {
  const size_t colon = token.find(':');
  int64_t index;
  if (colon == std::string_view::npos || !ParseInt64(token.substr(0, colon), &index)) {
    return std::nullopt;
  }
  return index;
}

class LetorRecordParser final : public RecordParser {
 public:
  LetorRecordParser(size_t features, OnError on_error) : k_(features), on_error_(on_error) {}

  void Parse(const InputFile& file, const ByteRange& range, ParsedRows* out,
             size_t max_rows) const override {
    RowState state{std::vector<float>(k_), std::vector<uint64_t>(k_, 0), 0};
    const std::string name = file.name();
    ForEachLine(file.text(), range, [&](std::string_view line, int64_t number) {
      if (out->rows() >= max_rows) return false;
      const std::string_view content = StripComment(line);
      if (TrimBlanks(content).empty()) return true;
      std::optional<RowFailure> failure = ParseRow(line, content, number, name, state, out);
      if (!failure) {
        out->lines.push_back(number);
      } else {
        FailOrSkip(on_error_, *failure, &out->skipped);
      }
      return true;
    });
  }

 private:
  struct RowState {
    std::vector<float> values;   // feature i - 1 of the current row
    std::vector<uint64_t> seen;  // == row when feature i - 1 is set in this row
    uint64_t row;
  };

  std::optional<RowFailure> ParseRow(std::string_view line, std::string_view content,
                                     int64_t number, const std::string& file, RowState& state,
                                     ParsedRows* out) const;

  size_t k_;
  OnError on_error_;
};

std::optional<RowFailure> LetorRecordParser::ParseRow(std::string_view line,
                                                      std::string_view content, int64_t number,
                                                      const std::string& file, RowState& state,
                                                      ParsedRows* out) const {
  ++state.row;
  float label = 0;
  std::optional<int64_t> qid;
  bool first = true;
  std::optional<RowFailure> failure;
  const auto fail = [&](std::string_view token, std::string what) {
    const ErrorWhere where{.file = file,
                           .line = number,
                           .column = static_cast<int64_t>(token.data() - line.data()) + 1};
    failure.emplace(
        RowFailure{"malformed token", DataError(fmt::format("{}: {}", QuoteForMessage(token), what),
                                                where, std::string(kLetorHint))});
    return false;
  };
  ForEachToken(content, [&](std::string_view token) {
    if (first) {
      first = false;
      return ParseFloat32(token, &label) || fail(token, "the label is not a number");
    }
    if (token.starts_with("qid:")) {
      int64_t q;
      if (qid) return fail(token, "a second qid on the line");
      if (!ParseInt64(token.substr(4), &q)) return fail(token, "the qid is not an integer");
      qid = q;
      return true;
    }
    const std::optional<int64_t> index = FeatureIndex(token);
    float value;
    if (!index) return fail(token, "expected INDEX:VALUE with an integer index");
    if (*index < 1) return fail(token, "feature indices start at 1");
    if (!ParseFloat32(token.substr(token.find(':') + 1), &value)) {
      return fail(token, "the feature value is not a number");
    }
    const auto slot = static_cast<size_t>(*index - 1);
    if (state.seen[slot] == state.row) return fail(token, "the feature appears twice on the line");
    state.seen[slot] = state.row;
    state.values[slot] = value;
    return true;
  });
  if (failure) return failure;
  out->columns[0].AppendFixed(label);
  if (qid) {
    out->columns[1].AppendFixed(*qid);
  } else {
    out->columns[1].AppendNull();
  }
  for (size_t f = 0; f < k_; ++f) {
    if (state.seen[f] == state.row) {
      out->columns[2 + f].AppendFixed(state.values[f]);
    } else {
      out->columns[2 + f].AppendNull();
    }
  }
  return std::nullopt;
}

// ---- the feature count ------------------------------------------------------

struct MaxIndex {
  int64_t index = 0;
  size_t file = 0;
  int64_t line = 0, column = 0;
};

MaxIndex ScanMaxIndex(const InputFile& file, const ByteRange& range) {
  MaxIndex best;
  ForEachLine(file.text(), range, [&](std::string_view line, int64_t number) {
    bool first = true;
    ForEachToken(StripComment(line), [&](std::string_view token) {
      if (first || token.starts_with("qid:")) {
        first = false;
        return true;
      }
      const std::optional<int64_t> index = FeatureIndex(token);
      if (index && *index > best.index) {
        best = {*index, range.file, number, static_cast<int64_t>(token.data() - line.data()) + 1};
      }
      return true;
    });
    return true;
  });
  return best;
}

size_t CountFeatures(const std::vector<InputFile>& files, const std::vector<ByteRange>& ranges,
                     ThreadPool& pool) {
  std::vector<MaxIndex> per_range(ranges.size());
  pool.ParallelFor(0, ranges.size(), [&](size_t r) {
    per_range[r] = ScanMaxIndex(files[ranges[r].file], ranges[r]);
  });
  MaxIndex best;
  for (const auto& m : per_range) {
    if (m.index > best.index) best = m;
  }
  if (best.index > kMaxFeatures) {
    throw DataError(
        fmt::format("feature index {} is above the limit of {} dense columns", best.index,
                    kMaxFeatures),
        ErrorWhere{.file = files[best.file].name(), .line = best.line, .column = best.column},
        "letor import makes one column per feature index; is this a sparse (bag-of-words) file?");
  }
  return static_cast<size_t>(best.index);
}

}  // namespace

std::unique_ptr<Importer> OpenLetorImporter(const std::vector<std::filesystem::path>& inputs,
                                            const ImportOptions& options,
                                            const ImportTuning& tuning) {
  if (!options.column_types.empty()) {
    throw ConfigError("letor columns have fixed types (label float32, qid int64, f1..fK float32)",
                      ErrorWhere{.field = options.column_types.begin()->first},
                      "drop --columns for letor input");
  }
  auto pool = std::make_unique<ThreadPool>(ImportThreads(tuning));
  std::vector<InputFile> files = MapInputs(inputs);
  std::vector<ByteRange> ranges;
  for (size_t i = 0; i < files.size(); ++i) {
    auto file_ranges = SplitIntoRanges(files[i].text(), i, 0, 1, tuning.range_bytes, false, *pool);
    ranges.insert(ranges.end(), file_ranges.begin(), file_ranges.end());
  }
  const size_t k = CountFeatures(files, ranges, *pool);
  std::vector<ColumnSpec> schema = {{"label", DType::kFloat32}, {"qid", DType::kInt64}};
  for (size_t f = 1; f <= k; ++f) schema.push_back({fmt::format("f{}", f), DType::kFloat32});
  return std::make_unique<RangeImporter>(std::move(files), std::move(schema),
                                         std::make_unique<LetorRecordParser>(k, options.on_error),
                                         std::move(ranges), options, std::move(pool));
}

}  // namespace topspin
