// The machinery the csv, jsonl and letor importers share (internal).
//
// Every input is memory-mapped. The body of each file (after any BOM and
// header) is cut into byte ranges of about `range_bytes` that end just
// after a record-ending '\n' (SplitIntoRanges). A RecordParser turns one
// range into rows; RangeImporter runs parsers on a thread pool, a few
// ranges ahead of the consumer, and hands rows out in input order: each
// chunk holds the rows of one range (moved, not copied), cut into pieces of
// at most chunk_rows rows, so the chunks depend on the range size but never
// on the thread count. An error in a range is raised
// when the consumer reaches that range, so the first error in input order
// is the one reported. Line numbers are exact: each range knows its first
// line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/column_buffer.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/thread_pool.h"
#include "topspin/data/importer.h"

namespace topspin {

// How importers run; the defaults suit large files.
struct ImportTuning {
  size_t threads = 0;                    // parser threads; 0: hardware threads, at most 8
  size_t range_bytes = size_t{4} << 20;  // bytes per parse task
};

// The pool size ImportTuning::threads asks for.
size_t ImportThreads(const ImportTuning& tuning);

struct InputFile {
  std::filesystem::path path;
  MmapFile map;
  size_t body_begin = 0;  // first byte after the BOM and header
  int64_t body_line = 1;  // line number at body_begin

  std::string_view text() const { return map.view(); }
  std::string name() const { return path.string(); }
};

// Maps each input (Error kIo when one cannot be read).
std::vector<InputFile> MapInputs(const std::vector<std::filesystem::path>& inputs);

struct ByteRange {
  size_t file = 0;            // index into the inputs
  size_t begin = 0, end = 0;  // byte offsets into that file
  int64_t first_line = 1;     // line number at `begin`
};

// Cuts text[begin, text.size()) into ranges of about `target` bytes, each
// ending just after a '\n' that ends a record, or at the end of the text.
// With `quotes`, a '\n' after an odd number of '"' (counted from `begin`)
// is inside a quoted field and ends nothing; a record longer than `target`
// becomes one longer range. Counting runs on `pool`.
std::vector<ByteRange> SplitIntoRanges(std::string_view text, size_t file, size_t begin,
                                       int64_t first_line, size_t target, bool quotes,
                                       ThreadPool& pool);

// Rows parsed from one range.
struct ParsedRows {
  std::vector<ColumnBuffer> columns;
  std::vector<int64_t> lines;  // input line of each row
  SkipReport skipped;

  size_t rows() const { return lines.size(); }
};

// A row that failed to parse: why (the SkipReport reason) and the error.
struct RowFailure {
  std::string reason;
  Error error;
};

// The first record end at or after `from` in `text`: just past the first
// '\n' outside double quotes (with `quotes`, counting parity from `from`,
// which must be outside quotes), or text.size().
size_t FindRecordEnd(std::string_view text, size_t from, bool quotes);

// Calls fn(line, number) for each line of text[range.begin, range.end) in
// order, `line` without its '\n' (or "\r\n"); stops when fn returns false.
template <typename Fn>
void ForEachLine(std::string_view text, const ByteRange& range, Fn&& fn) {
  const char* p = text.data() + range.begin;
  const char* end = text.data() + range.end;
  int64_t number = range.first_line;
  while (p < end) {
    const auto* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const char* line_end = nl == nullptr ? end : nl;
    std::string_view line(p, static_cast<size_t>(line_end - p));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!fn(line, number)) return;
    p = nl == nullptr ? end : nl + 1;
    ++number;
  }
}

// Records a skipped row: counts it under `reason`, keeps the first few
// messages as examples.
void AddSkip(SkipReport* report, const std::string& reason, const Error& error);
void MergeSkips(SkipReport* into, const SkipReport& from);

// Handles a row that failed to parse: throws its error under
// OnError::kFail, records it under kSkip.
void FailOrSkip(OnError on_error, const RowFailure& failure, SkipReport* report);

// Parses one range of one file. Parse() is called concurrently from pool
// threads and must only read shared state.
class RecordParser {
 public:
  virtual ~RecordParser() = default;
  // Appends rows to out->columns (built from the importer's schema) and
  // out->lines; stops once `out` holds `max_rows` rows in all.
  virtual void Parse(const InputFile& file, const ByteRange& range, ParsedRows* out,
                     size_t max_rows = SIZE_MAX) const = 0;
};

// Parses ranges [0, n) in order on the calling thread until `rows` rows are
// collected (type inference). Rows that fail to parse are skipped.
ParsedRows ParseFirstRows(const RecordParser& parser, const std::vector<InputFile>& files,
                          const std::vector<ByteRange>& ranges,
                          const std::vector<ColumnSpec>& schema, size_t rows);

class RangeImporter final : public Importer {
 public:
  // Takes everything the format-specific opener prepared. `pool` runs the
  // parsers; ranges are parsed in the order given.
  RangeImporter(std::vector<InputFile> files, std::vector<ColumnSpec> schema,
                std::unique_ptr<RecordParser> parser, std::vector<ByteRange> ranges,
                const ImportOptions& options, std::unique_ptr<ThreadPool> pool);
  ~RangeImporter() override;

  const std::vector<ColumnSpec>& schema() const override { return schema_; }
  bool Next(Table* chunk) override;
  uint64_t bytes_read() const override { return bytes_read_; }
  uint64_t bytes_total() const override { return bytes_total_; }
  std::string RowLocation(size_t row) const override;
  const SkipReport& skipped() const override { return skipped_; }
  size_t chunk_input() const override { return chunk_file_; }
  void ChunkRowIds(std::vector<uint64_t>* ids) const override;
  bool breaks_at_inputs() const override { return true; }

 private:
  struct RowOrigin {
    size_t file;
    int64_t line;
  };
  struct Parsed {
    size_t file = 0;
    ParsedRows rows;
  };

  void SubmitRanges();
  // Waits for the next range in order; false when none is left.
  bool TakeRange();

  std::vector<InputFile> files_;
  std::vector<ColumnSpec> schema_;
  std::unique_ptr<RecordParser> parser_;
  std::vector<ByteRange> ranges_;
  ImportOptions options_;
  size_t next_range_ = 0;  // next to submit
  size_t next_take_ = 0;   // next to hand out
  size_t max_in_flight_;
  std::deque<std::future<Parsed>> in_flight_;
  std::deque<Parsed> ready_;
  size_t ready_row_ = 0;  // first unused row of ready_.front()
  std::vector<RowOrigin> chunk_origins_;
  size_t chunk_file_ = 0;  // the input of the last chunk
  SkipReport skipped_;
  uint64_t bytes_read_ = 0;
  uint64_t bytes_total_ = 0;
  double bytes_per_row_ = 0;  // of the last parsed range, for buffer sizing
  // Last: destroyed first, so queued parses finish while the files and the
  // parser they read are alive.
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace topspin
