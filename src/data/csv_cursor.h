// CsvCursor: field-by-field reading of RFC 4180 records within one byte
// range of a mapped file (internal to the data module).
//
// Fields are separated by ',' and records end with "\n" or "\r\n" (a '\r'
// elsewhere in an unquoted field is data). A field that starts with '"' is
// quoted: it runs to the next lone '"', may hold ',', '\r' and '\n', and
// writes a '"' as '""'; the closing quote must be followed by a field end.
// A '"' anywhere else is an error. The cursor tracks exact line numbers
// (through newlines inside quoted fields too) and byte columns.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "data/field_parse.h"
#include "data/range_importer.h"
#include "topspin/core/error.h"

namespace topspin {

// A place in the input: the byte, its line and the start of that line.
struct CsvPos {
  const char* p = nullptr;
  int64_t line = 1;
  const char* line_start = nullptr;
};

struct CsvField {
  std::string_view raw;  // unquoted text, or the text between the quotes
  bool quoted = false;
  bool escaped = false;     // raw still holds doubled quotes ("")
  bool record_end = false;  // the field was the last of its record
  CsvPos start;             // the first byte (the opening quote if quoted)
};

class CsvCursor {
 public:
  // Reads text[begin, end); `line` is the line number at `begin`, which must
  // be the start of a line.
  CsvCursor(std::string_view text, size_t begin, size_t end, int64_t line, std::string file);

  bool AtEnd() const { return p_ >= end_; }
  CsvPos Mark() const { return {p_, line_, line_start_}; }
  // Skips one empty line ("\n" or "\r\n"); false when the cursor is not on one.
  bool SkipBlankLine();

  // Reads the field at the cursor and the ',' or record end after it. On bad
  // quoting returns false with failure() set.
  bool ReadField(CsvField* field);
  // Fast path for numbers: parses T at the cursor with std::from_chars and,
  // when a field end follows at once, consumes both. Otherwise returns false
  // and leaves the cursor alone (ReadField then sees the whole field).
  template <typename T>
  bool TryNumber(T* value, bool* record_end) {
    T parsed;
    const char* stop = nullptr;
    if constexpr (std::is_floating_point_v<T>) {
      if (ParseSimpleDecimal(p_, end_, &parsed, &stop)) {
        if (!ConsumeFieldEnd(stop, record_end)) return false;
        *value = parsed;
        return true;
      }
    }
    const auto [ptr, ec] = std::from_chars(p_, end_, parsed);
    if (ec != std::errc() || ptr == p_ || !ConsumeFieldEnd(ptr, record_end)) return false;
    *value = parsed;
    return true;
  }

  // After a failed record that started at `record_start`: moves to the start
  // of the next record, found by quote parity, with the line count fixed.
  void SkipRecord(const CsvPos& record_start);
  // Whether the record that starts at `record_start` (by quote parity) runs
  // over more than one line.
  bool RecordSpansLines(const CsvPos& record_start) const;

  // Where the separator or line end after the last field read was.
  const CsvPos& last_field_end() const { return last_field_end_; }
  // The position of byte `p` inside a field that starts at `start`.
  CsvPos PositionIn(const CsvPos& start, const char* p) const;
  ErrorWhere Where(const CsvPos& at, std::string field = {}) const;

  // Why the last ReadField failed.
  const std::optional<RowFailure>& failure() const { return failure_; }
  const std::string& file() const { return file_; }

 private:
  bool ReadQuoted(CsvField* field);
  // When `q` is a field end (',', "\n", "\r\n", or the end), moves past it.
  bool ConsumeFieldEnd(const char* q, bool* record_end);
  void CountLines(const char* from, const char* to);
  bool Fail(const CsvPos& at, std::string what, std::string hint);
  size_t RecordEnd(const CsvPos& record_start) const;

  std::string_view text_;
  const char* p_;
  const char* end_;
  int64_t line_;
  const char* line_start_;
  CsvPos last_field_end_;
  std::string file_;
  std::optional<RowFailure> failure_;
};

// Copies `raw` to `out` with every "" turned into "; returns the length.
// `out` must have room for raw.size() bytes.
size_t UnescapeCsv(std::string_view raw, char* out);

}  // namespace topspin
