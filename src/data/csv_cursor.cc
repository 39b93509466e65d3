#include "data/csv_cursor.h"

#include <array>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "data/field_parse.h"

namespace topspin {
namespace {

constexpr std::string_view kQuoteHint =
    "a field holding a quote must be quoted as a whole with the inner quotes doubled (RFC 4180), "
    "e.g. \"say \"\"hi\"\"\"; or pass --on-error skip to drop malformed rows";

// Bytes that end the plain scan of an unquoted field.
constexpr std::array<bool, 256> StopBytes() {
  std::array<bool, 256> stop{};
  stop[static_cast<unsigned char>(',')] = true;
  stop[static_cast<unsigned char>('\n')] = true;
  stop[static_cast<unsigned char>('\r')] = true;
  stop[static_cast<unsigned char>('"')] = true;
  return stop;
}
constexpr std::array<bool, 256> kStop = StopBytes();

}  // namespace

CsvCursor::CsvCursor(std::string_view text, size_t begin, size_t end, int64_t line,
                     std::string file)
    : text_(text),
      p_(text.data() + begin),
      end_(text.data() + end),
      line_(line),
      line_start_(p_),
      file_(std::move(file)) {}

void CsvCursor::CountLines(const char* from, const char* to) {
  while (from < to) {
    const void* nl = std::memchr(from, '\n', static_cast<size_t>(to - from));
    if (nl == nullptr) return;
    from = static_cast<const char*>(nl) + 1;
    ++line_;
    line_start_ = from;
  }
}

bool CsvCursor::SkipBlankLine() {
  if (p_ < end_ && *p_ == '\n') return ConsumeFieldEnd(p_, nullptr);
  if (p_ < end_ && *p_ == '\r' && (p_ + 1 == end_ || p_[1] == '\n')) {
    return ConsumeFieldEnd(p_, nullptr);
  }
  return false;
}

bool CsvCursor::ConsumeFieldEnd(const char* q, bool* record_end) {
  bool ends_record = true;
  last_field_end_ = {q, line_, line_start_};
  if (q == end_) {
    p_ = q;
  } else if (*q == ',') {
    p_ = q + 1;
    ends_record = false;
  } else if (*q == '\n') {
    p_ = q + 1;
  } else if (*q == '\r' && (q + 1 == end_ || q[1] == '\n')) {
    p_ = q + 1 == end_ ? end_ : q + 2;
  } else {
    return false;
  }
  if (ends_record && p_ > q && p_[-1] == '\n') {
    ++line_;
    line_start_ = p_;
  }
  if (record_end != nullptr) *record_end = ends_record;
  return true;
}

bool CsvCursor::ReadField(CsvField* field) {
  field->start = Mark();
  field->quoted = field->escaped = false;
  if (p_ < end_ && *p_ == '"') return ReadQuoted(field);
  const char* q = p_;
  for (;;) {
    while (q < end_ && !kStop[static_cast<unsigned char>(*q)]) ++q;
    const char* begin = p_;
    if (ConsumeFieldEnd(q, &field->record_end)) {
      field->raw = std::string_view(begin, static_cast<size_t>(q - begin));
      return true;
    }
    if (*q == '\r') {  // a lone '\r' is data
      ++q;
      continue;
    }
    return Fail(PositionIn(field->start, q), "a quote inside an unquoted field",
                std::string(kQuoteHint));
  }
}

bool CsvCursor::ReadQuoted(CsvField* field) {
  field->quoted = true;
  const char* content = p_ + 1;
  const char* q = content;
  for (;;) {
    const auto* quote =
        static_cast<const char*>(std::memchr(q, '"', static_cast<size_t>(end_ - q)));
    if (quote == nullptr) {
      return Fail(field->start, "a quoted field is never closed (unterminated quote)",
                  "close the quote; a quote inside a quoted field is written as two quotes \"\"");
    }
    if (quote + 1 < end_ && quote[1] == '"') {
      field->escaped = true;
      q = quote + 2;
      continue;
    }
    CountLines(content, quote);
    field->raw = std::string_view(content, static_cast<size_t>(quote - content));
    if (ConsumeFieldEnd(quote + 1, &field->record_end)) return true;
    const CsvPos at = Mark();  // lines are counted up to the closing quote
    const CsvPos after{quote + 1, at.line, at.line_start};
    return Fail(after,
                fmt::format("{} after the closing quote of a field (expected ',' or a line end)",
                            QuoteForMessage(std::string_view(quote + 1, 1))),
                std::string(kQuoteHint));
  }
}

size_t CsvCursor::RecordEnd(const CsvPos& record_start) const {
  const std::string_view range(text_.data(), static_cast<size_t>(end_ - text_.data()));
  return FindRecordEnd(range, static_cast<size_t>(record_start.p - text_.data()), true);
}

bool CsvCursor::RecordSpansLines(const CsvPos& record_start) const {
  const char* last = text_.data() + RecordEnd(record_start) - 1;  // the record's own '\n'
  return last > record_start.p &&
         std::memchr(record_start.p, '\n', static_cast<size_t>(last - record_start.p)) != nullptr;
}

void CsvCursor::SkipRecord(const CsvPos& record_start) {
  const size_t next = RecordEnd(record_start);
  line_ = record_start.line;
  line_start_ = record_start.line_start;
  CountLines(record_start.p, text_.data() + next);
  p_ = text_.data() + next;
}

CsvPos CsvCursor::PositionIn(const CsvPos& start, const char* p) const {
  CsvPos pos = start;
  for (const char* c = start.p; c < p; ++c) {
    if (*c == '\n') {
      ++pos.line;
      pos.line_start = c + 1;
    }
  }
  pos.p = p;
  return pos;
}

ErrorWhere CsvCursor::Where(const CsvPos& at, std::string field) const {
  return ErrorWhere{.file = file_,
                    .field = std::move(field),
                    .line = at.line,
                    .column = static_cast<int64_t>(at.p - at.line_start) + 1};
}

bool CsvCursor::Fail(const CsvPos& at, std::string what, std::string hint) {
  failure_.emplace(
      RowFailure{"bad quoting", DataError(std::move(what), Where(at), std::move(hint))});
  return false;
}

size_t UnescapeCsv(std::string_view raw, char* out) {
  size_t n = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    out[n++] = raw[i];
    if (raw[i] == '"') ++i;  // the second quote of a pair
  }
  return n;
}

}  // namespace topspin
