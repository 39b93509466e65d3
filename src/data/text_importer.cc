// The text importer: UTF-8 text files -> rows of token ids.
//
//   - Each input file is one document, read in the order given. A leading
//     UTF-8 byte-order mark is dropped; an empty file yields no row.
//   - A document that is not valid UTF-8 is Error{kData} naming
//     file:line:column and the byte offset of the first bad byte; with
//     on_error skip the whole document is skipped and counted under
//     "invalid UTF-8".
//   - The tokenizer is ImportOptions::tokenizer ("bytes",
//     "sentencepiece:MODEL" or "gpt2:DIR"); the document's tokens are
//     followed by the tokenizer's end-of-text token when it has one.
//   - Output: one column "tokens", tokens_u16 when the vocabulary has at
//     most 65536 ids, else tokens_u32 (column_types {"tokens": tokens_u32}
//     forces u32). Each row is one document; a document longer than
//     kMaxTextRowTokens (1 << 20) tokens continues in further rows of at
//     most that many tokens (the end-of-text token is in its last row).
//   - Documents are tokenized in pieces of at most 1 MiB that end at a line
//     break, preferably one between two printable non-space characters
//     (or, for a longer line, at a character boundary), so memory stays
//     bounded for any file size. With byte-level or line-respecting
//     tokenizers (TrainSentencePiece models) this equals tokenizing the
//     whole document at once, and with gpt2 too wherever each half MiB of
//     text has such a line break (natural text does; a cut elsewhere can
//     split a run of whitespace that the whole text splits differently).
//   - Chunks hold up to chunk_rows rows and stop early past about 16M
//     tokens. No label or group column: setting either is Error{kConfig}.
#include <algorithm>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "data/field_parse.h"
#include "data/importers.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/data/tokenizer.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxTextRowTokens = size_t{1} << 20;
constexpr size_t kSegmentBytes = size_t{1} << 20;
constexpr size_t kChunkTokens = size_t{1} << 24;
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
constexpr const char* kTokensColumn = "tokens";

// The token column's type: u16 when every id fits, unless the user asked.
DType TokenType(const Tokenizer& tokenizer, const ImportOptions& options) {
  const DType fitting = tokenizer.vocab_size() <= 65536 ? DType::kTokensU16 : DType::kTokensU32;
  for (const auto& [name, dtype] : options.column_types) {
    if (name != kTokensColumn) {
      throw ConfigError(fmt::format("text import has no column \"{}\"", name), {.field = "columns"},
                        "its only column is \"tokens\"");
    }
    if (dtype == DType::kTokensU32 || (dtype == DType::kTokensU16 && fitting == dtype)) {
      return dtype;
    }
    throw ConfigError(fmt::format("column \"tokens\" cannot be {} with tokenizer {} ({} ids)",
                                  DTypeName(dtype), tokenizer.name(), tokenizer.vocab_size()),
                      {.field = "columns"},
                      "use tokens_u32 (or tokens_u16 for vocabularies up to 65536)");
  }
  return fitting;
}

void CheckOptions(const std::vector<fs::path>& inputs, const ImportOptions& options) {
  if (inputs.empty()) throw ConfigError("no input files for the text importer", {}, "pass files");
  const bool label = !options.label_column.empty();
  if (label || !options.group_column.empty()) {
    throw ConfigError("text import makes token rows: it has no label or group column",
                      {.field = label ? "label" : "group"}, "drop --label / --group");
  }
}

// Whether the line break at text[i] sits between two printable ASCII
// characters other than space. Cut after it, every tokenizer sees the
// pieces it sees in the whole text: a line end for SentencePiece, and for
// GPT-2's pattern a "\n" that is a piece of its own. Next to whitespace
// it is not: "a  \nb" is "a", "  ", "\n", "b", but "a  \n" cut off there
// ends in the piece "  \n".
bool CleanLineBreak(std::string_view text, size_t i) {
  const auto printable = [](char c) { return c > ' ' && c < 0x7F; };
  return i > 0 && i + 1 < text.size() && printable(text[i - 1]) && printable(text[i + 1]);
}

// The end of the tokenization piece that starts at `begin`: after the last
// clean line break in the second half of the window, else after its last
// line break.
size_t SegmentEnd(std::string_view text, size_t begin) {
  if (text.size() - begin <= kSegmentBytes) return text.size();
  const std::string_view window = text.substr(begin, kSegmentBytes);
  for (size_t i = window.rfind('\n'); i != std::string_view::npos && i >= kSegmentBytes / 2;
       i = i > 0 ? window.rfind('\n', i - 1) : std::string_view::npos) {
    if (CleanLineBreak(text, begin + i)) return begin + i + 1;
  }
  const size_t newline = window.rfind('\n');
  if (newline != std::string_view::npos) return begin + newline + 1;
  size_t end = begin + kSegmentBytes;  // a very long line: cut between characters
  while (end > begin && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) --end;
  return end;
}

Error InvalidUtf8Error(const fs::path& path, std::string_view text, size_t bad, size_t skipped) {
  const std::string_view before = text.substr(0, bad);
  const auto line = 1 + static_cast<int64_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t line_start = before.rfind('\n');
  const auto column =
      static_cast<int64_t>(line_start == std::string_view::npos ? bad + 1 : bad - line_start);
  return DataError(fmt::format("invalid UTF-8 (byte 0x{:02x})", static_cast<uint8_t>(text[bad])),
                   {.file = path.string(),
                    .line = line,
                    .column = column,
                    .byte_offset = static_cast<int64_t>(bad + skipped)},
                   "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8), or pass "
                   "--on-error skip to drop such documents");
}

class TextImporter final : public Importer {
 public:
  TextImporter(std::vector<fs::path> inputs, const ImportOptions& options)
      : inputs_(std::move(inputs)),
        options_(options),
        tokenizer_(OpenTokenizer(options.tokenizer)) {
    CheckOptions(inputs_, options_);
    schema_ = {{kTokensColumn, TokenType(*tokenizer_, options_)}};
    for (const auto& input : inputs_) {
      std::error_code ec;
      const uintmax_t size = fs::file_size(input, ec);
      if (ec) throw SystemError("cannot read text input", input.string(), ec.value());
      bytes_total_ += size;
    }
  }

  const std::vector<ColumnSpec>& schema() const override { return schema_; }
  uint64_t bytes_read() const override { return bytes_done_ + (open_ ? position_ : 0); }
  uint64_t bytes_total() const override { return bytes_total_; }
  const SkipReport& skipped() const override { return skipped_; }
  std::string RowLocation(size_t row) const override {
    return row < locations_.size() ? locations_[row] : std::string();
  }
  std::string tokenizer() const override {
    constexpr std::string_view kSpm = "sentencepiece:";
    const std::string name = tokenizer_->name();
    if (!name.starts_with(kSpm)) return name;
    return std::string(kSpm) + fs::absolute(name.substr(kSpm.size())).lexically_normal().string();
  }

  bool Next(Table* chunk) override {
    *chunk = Table::Empty(schema_);
    locations_.clear();
    Column& column = chunk->columns.front();
    size_t tokens = 0;
    while (chunk->rows() < std::max<size_t>(1, options_.chunk_rows) && tokens < kChunkTokens) {
      if (!open_ && !OpenNextDocument()) break;
      const std::optional<size_t> row = NextRowLength();
      if (!row) {
        CloseDocument();
        continue;
      }
      column.AppendTokens(std::span(pending_).subspan(pending_begin_, *row));
      pending_begin_ += *row;
      tokens += *row;
      locations_.push_back(part_ == 0
                               ? path().string()
                               : fmt::format("{} (document part {})", path().string(), part_ + 1));
      ++part_;
    }
    return chunk->rows() > 0;
  }

 private:
  const fs::path& path() const { return inputs_[next_input_ - 1]; }

  // Maps the next input with content; skips (or throws for) invalid UTF-8.
  bool OpenNextDocument() {
    while (next_input_ < inputs_.size()) {
      map_ = MmapFile(inputs_[next_input_++]);
      const std::string_view text = map_.view();
      const size_t bom = text.starts_with(kUtf8Bom) ? kUtf8Bom.size() : 0;
      text_ = text.substr(bom);
      const size_t bad = InvalidUtf8Offset(text_);
      if (bad != std::string_view::npos) {
        FailOrSkip(options_.on_error,
                   RowFailure{"invalid UTF-8", InvalidUtf8Error(path(), text_, bad, bom)},
                   &skipped_);
        bytes_done_ += map_.size();
        continue;
      }
      if (text_.empty()) {
        bytes_done_ += map_.size();
        continue;
      }
      open_ = true;
      position_ = bom;
      offset_ = 0;
      part_ = 0;
      eot_added_ = false;
      return true;
    }
    return false;
  }

  void CloseDocument() {
    open_ = false;
    bytes_done_ += map_.size();
    map_ = MmapFile();
    pending_.clear();
    pending_begin_ = 0;
  }

  // Tokens in the next row of the open document, tokenizing more text as
  // needed; nullopt when the document is done.
  std::optional<size_t> NextRowLength() {
    while (pending_.size() - pending_begin_ <= kMaxTextRowTokens && !eot_added_) EncodeMore();
    const size_t left = pending_.size() - pending_begin_;
    if (left == 0) return std::nullopt;
    return std::min(left, kMaxTextRowTokens);
  }

  // Tokenizes the next piece of the document, or appends end-of-text.
  void EncodeMore() {
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(pending_begin_));
    pending_begin_ = 0;
    if (offset_ == text_.size()) {
      if (const auto eot = tokenizer_->end_of_text()) pending_.push_back(*eot);
      eot_added_ = true;
      return;
    }
    const size_t end = SegmentEnd(text_, offset_);
    const std::vector<uint32_t> tokens = tokenizer_->Encode(text_.substr(offset_, end - offset_));
    pending_.insert(pending_.end(), tokens.begin(), tokens.end());
    position_ += end - offset_;
    offset_ = end;
  }

  std::vector<fs::path> inputs_;
  ImportOptions options_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<ColumnSpec> schema_;
  uint64_t bytes_total_ = 0;
  uint64_t bytes_done_ = 0;  // bytes of closed or skipped files
  SkipReport skipped_;
  std::vector<std::string> locations_;  // of the last chunk's rows

  // The open document.
  size_t next_input_ = 0;
  bool open_ = false;
  MmapFile map_;
  std::string_view text_;  // after any BOM
  size_t offset_ = 0;      // bytes of text_ tokenized
  size_t position_ = 0;    // bytes of the file consumed (BOM included)
  bool eot_added_ = false;
  size_t part_ = 0;                // rows emitted for the document
  std::vector<uint32_t> pending_;  // tokens not yet in a row, from pending_begin_
  size_t pending_begin_ = 0;
};

}  // namespace

std::unique_ptr<Importer> OpenTextImporter(const std::vector<fs::path>& inputs,
                                           const ImportOptions& options) {
  return std::make_unique<TextImporter>(inputs, options);
}

}  // namespace topspin
