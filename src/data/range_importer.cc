#include "data/range_importer.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace topspin {
namespace {

constexpr size_t kMaxExamples = 5;
constexpr size_t kMaxDefaultThreads = 8;

struct BlockCounts {
  uint64_t quotes = 0;
  uint64_t newlines = 0;
};

// 0x01 in each byte of a word whose byte equals the pattern's byte, else 0.
uint64_t MatchingBytes(uint64_t word, uint64_t pattern) {
  constexpr uint64_t kLow7 = 0x7F7F7F7F7F7F7F7Full;
  const uint64_t x = word ^ pattern;                   // zero bytes where equal
  const uint64_t nonzero = ((x & kLow7) + kLow7) | x;  // high bit set where not equal
  return (~nonzero >> 7) & 0x0101010101010101ull;
}

// The sum of the eight byte lanes of `lanes` (each at most 255).
uint64_t SumLanes(uint64_t lanes) {
  constexpr uint64_t kEven = 0x00FF00FF00FF00FFull;
  const uint64_t pairs = (lanes & kEven) + ((lanes >> 8) & kEven);  // four 16-bit lanes
  return (pairs * 0x0001000100010001ull) >> 48;
}

// Counts '\n' and (with `quotes`) '"' eight bytes at a time.
BlockCounts CountBlock(const char* p, size_t n, bool quotes) {
  constexpr uint64_t kNewlines = 0x0A0A0A0A0A0A0A0Aull, kQuotes = 0x2222222222222222ull;
  BlockCounts c;
  size_t i = 0;
  while (n - i >= 8) {
    uint64_t newline_lanes = 0, quote_lanes = 0;
    const size_t stop = i + 8 * std::min<size_t>(255, (n - i) / 8);  // lanes stay below 256
    for (; i < stop; i += 8) {
      uint64_t word;
      std::memcpy(&word, p + i, 8);
      newline_lanes += MatchingBytes(word, kNewlines);
      if (quotes) quote_lanes += MatchingBytes(word, kQuotes);
    }
    c.newlines += SumLanes(newline_lanes);
    c.quotes += SumLanes(quote_lanes);
  }
  for (; i < n; ++i) {
    c.newlines += p[i] == '\n';
    c.quotes += quotes && p[i] == '"';
  }
  return c;
}

// The first record end at or after `from`, given the quote parity there:
// the offset just past a '\n' outside quotes, or npos when there is none.
size_t FindRecordEndFrom(std::string_view text, size_t from, bool in_quotes, bool quotes) {
  const char* p = text.data() + from;
  const char* end = text.data() + text.size();
  if (!quotes) {
    const void* nl = std::memchr(p, '\n', static_cast<size_t>(end - p));
    return nl == nullptr ? std::string_view::npos
                         : static_cast<size_t>(static_cast<const char*>(nl) - text.data()) + 1;
  }
  for (; p < end; ++p) {
    if (*p == '"') {
      in_quotes = !in_quotes;
    } else if (*p == '\n' && !in_quotes) {
      return static_cast<size_t>(p - text.data()) + 1;
    }
  }
  return std::string_view::npos;
}

}  // namespace

size_t FindRecordEnd(std::string_view text, size_t from, bool quotes) {
  const size_t end = FindRecordEndFrom(text, from, false, quotes);
  return end == std::string_view::npos ? text.size() : end;
}

size_t ImportThreads(const ImportTuning& tuning) {
  if (tuning.threads > 0) return tuning.threads;
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, kMaxDefaultThreads);
}

std::vector<InputFile> MapInputs(const std::vector<std::filesystem::path>& inputs) {
  if (inputs.empty()) throw ConfigError("no input files", {}, "name at least one file to import");
  std::vector<InputFile> files;
  files.reserve(inputs.size());
  for (const auto& path : inputs) files.push_back(InputFile{.path = path, .map = MmapFile(path)});
  return files;
}

std::vector<ByteRange> SplitIntoRanges(std::string_view text, size_t file, size_t begin,
                                       int64_t first_line, size_t target, bool quotes,
                                       ThreadPool& pool) {
  target = std::max<size_t>(target, 1);
  const size_t blocks = begin >= text.size() ? 0 : (text.size() - begin + target - 1) / target;
  if (blocks == 0) return {};
  const auto block_start = [&](size_t b) { return begin + b * target; };
  const auto block_size = [&](size_t b) { return std::min(target, text.size() - block_start(b)); };

  std::vector<BlockCounts> counts(blocks);
  pool.ParallelFor(0, blocks, [&](size_t b) {
    counts[b] = CountBlock(text.data() + block_start(b), block_size(b), quotes);
  });
  // boundary[b]: the first record end at or after block b's start (b >= 1).
  // Each search stays inside its block; a block without a record end takes
  // its successor's, so a huge record costs one scan, not one per block.
  constexpr size_t kNone = std::string_view::npos;
  std::vector<size_t> boundary(blocks, begin);
  std::vector<int64_t> boundary_line(blocks, first_line);
  std::vector<uint64_t> quotes_before(blocks, 0), lines_before(blocks, 0);
  for (size_t b = 1; b < blocks; ++b) {
    quotes_before[b] = quotes_before[b - 1] + counts[b - 1].quotes;
    lines_before[b] = lines_before[b - 1] + counts[b - 1].newlines;
  }
  pool.ParallelFor(1, blocks, [&](size_t b) {
    const size_t start = block_start(b);
    const std::string_view block = text.substr(0, start + block_size(b));
    const size_t end = FindRecordEndFrom(block, start, quotes_before[b] % 2 == 1, quotes);
    boundary[b] = end;
    if (end == kNone) return;
    boundary_line[b] = first_line + static_cast<int64_t>(lines_before[b]) +
                       std::count(text.data() + start, text.data() + end, '\n');
  });
  for (size_t b = blocks - 1; b >= 1; --b) {
    if (boundary[b] != kNone) continue;
    const bool last = b + 1 == blocks;
    boundary[b] = last ? text.size() : boundary[b + 1];
    boundary_line[b] = last ? 0 : boundary_line[b + 1];  // an empty range never uses it
  }

  std::vector<ByteRange> ranges;
  for (size_t b = 0; b < blocks; ++b) {
    const size_t end = b + 1 < blocks ? boundary[b + 1] : text.size();
    if (end <= boundary[b]) continue;  // a record spans this whole block
    ranges.push_back(ByteRange{file, boundary[b], end, boundary_line[b]});
  }
  return ranges;
}

void AddSkip(SkipReport* report, const std::string& reason, const Error& error) {
  ++report->rows;
  ++report->reasons[reason];
  if (report->examples.size() < kMaxExamples) report->examples.push_back(error.Message());
}

void MergeSkips(SkipReport* into, const SkipReport& from) {
  into->rows += from.rows;
  for (const auto& [reason, rows] : from.reasons) into->reasons[reason] += rows;
  for (const auto& example : from.examples) {
    if (into->examples.size() < kMaxExamples) into->examples.push_back(example);
  }
}

void FailOrSkip(OnError on_error, const RowFailure& failure, SkipReport* report) {
  if (on_error == OnError::kFail) throw failure.error;
  AddSkip(report, failure.reason, failure.error);
}

ParsedRows ParseFirstRows(const RecordParser& parser, const std::vector<InputFile>& files,
                          const std::vector<ByteRange>& ranges,
                          const std::vector<ColumnSpec>& schema, size_t rows) {
  ParsedRows out{.columns = MakeColumnBuffers(schema)};
  for (const auto& range : ranges) {
    if (out.rows() >= rows) break;
    parser.Parse(files[range.file], range, &out, rows);
  }
  return out;
}

// ---- RangeImporter ----------------------------------------------------------

RangeImporter::RangeImporter(std::vector<InputFile> files, std::vector<ColumnSpec> schema,
                             std::unique_ptr<RecordParser> parser, std::vector<ByteRange> ranges,
                             const ImportOptions& options, std::unique_ptr<ThreadPool> pool)
    : files_(std::move(files)),
      schema_(std::move(schema)),
      parser_(std::move(parser)),
      ranges_(std::move(ranges)),
      options_(options),
      max_in_flight_(2 * pool->size()),
      pool_(std::move(pool)) {
  if (options_.chunk_rows == 0) {
    throw ConfigError("chunk_rows must be at least 1", ErrorWhere{.field = "chunk_rows"});
  }
  for (const auto& f : files_) bytes_total_ += f.map.size();
  // Headers and BOMs count as read from the start.
  uint64_t body_bytes = 0;
  for (const auto& r : ranges_) body_bytes += r.end - r.begin;
  bytes_read_ = bytes_total_ - body_bytes;
}

RangeImporter::~RangeImporter() {
  // Let queued parses finish before the files they read go away.
  pool_.reset();
}

void RangeImporter::SubmitRanges() {
  while (next_range_ < ranges_.size() && in_flight_.size() < max_in_flight_) {
    const ByteRange* range = &ranges_[next_range_++];
    // Room for the rows the range likely holds, so buffers rarely regrow.
    const size_t expect_rows =
        bytes_per_row_ > 0
            ? static_cast<size_t>(1.1 * static_cast<double>(range->end - range->begin) /
                                  bytes_per_row_)
            : 0;
    in_flight_.push_back(pool_->Submit([this, range, expect_rows] {
      Parsed parsed{.file = range->file, .rows = {.columns = MakeColumnBuffers(schema_)}};
      for (auto& column : parsed.rows.columns) column.Reserve(expect_rows);
      parsed.rows.lines.reserve(expect_rows);
      parser_->Parse(files_[range->file], *range, &parsed.rows);
      return parsed;
    }));
  }
}

bool RangeImporter::TakeRange() {
  SubmitRanges();
  if (in_flight_.empty()) return false;
  std::future<Parsed> next = std::move(in_flight_.front());
  in_flight_.pop_front();
  Parsed parsed = next.get();  // re-raises the range's error, in input order
  const ByteRange& range = ranges_[next_take_++];
  bytes_read_ += range.end - range.begin;
  if (parsed.rows.rows() > 0) {
    bytes_per_row_ = static_cast<double>(range.end - range.begin) /
                     static_cast<double>(parsed.rows.rows() + parsed.rows.skipped.rows);
  }
  MergeSkips(&skipped_, parsed.rows.skipped);
  if (parsed.rows.rows() > 0) ready_.push_back(std::move(parsed));
  SubmitRanges();
  return true;
}

bool RangeImporter::Next(Table* chunk) {
  chunk_origins_.clear();
  while (ready_.empty()) {
    if (!TakeRange()) {
      *chunk = Table::Empty(schema_);
      return false;
    }
  }
  Parsed& front = ready_.front();
  const size_t begin = ready_row_;
  const size_t end = std::min(front.rows.rows(), begin + options_.chunk_rows);
  std::vector<ColumnBuffer> out;
  if (begin == 0 && end == front.rows.rows()) {
    out = std::move(front.rows.columns);  // the whole range: no copy
  } else {
    out = MakeColumnBuffers(schema_);
    for (size_t c = 0; c < out.size(); ++c) out[c].AppendRows(front.rows.columns[c], begin, end);
  }
  chunk_origins_.reserve(end - begin);
  chunk_file_ = front.file;
  for (size_t r = begin; r < end; ++r) {
    chunk_origins_.push_back(RowOrigin{front.file, front.rows.lines[r]});
  }
  ready_row_ = end;
  if (ready_row_ == front.rows.rows()) {
    ready_.pop_front();
    ready_row_ = 0;
  }
  chunk->columns.clear();
  for (auto& buffer : out) chunk->columns.push_back(buffer.Build());
  return true;
}

void RangeImporter::ChunkRowIds(std::vector<uint64_t>* ids) const {
  ids->clear();
  ids->reserve(chunk_origins_.size());
  for (const RowOrigin& origin : chunk_origins_) {
    ids->push_back(ImportRowId(share().first_input + origin.file,
                               static_cast<uint64_t>(origin.line)));
  }
}

std::string RangeImporter::RowLocation(size_t row) const {
  if (row >= chunk_origins_.size()) {
    throw InternalError(
        fmt::format("RowLocation({}) of a chunk of {} rows", row, chunk_origins_.size()));
  }
  const RowOrigin& origin = chunk_origins_[row];
  return fmt::format("{}:{}", files_[origin.file].name(), origin.line);
}

}  // namespace topspin
