// GPT-2 BPE files: the byte-to-unicode alphabet, vocab.json and merges.txt.
#include <algorithm>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/field_parse.h"
#include "data/gpt2_bpe_tokenizer.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin::data_internal {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFilesHint =
    "gpt2:DIR reads DIR/vocab.json and DIR/merges.txt, as Hugging Face's "
    "tokenizer.model.save(DIR) writes them (OpenAI's GPT-2 release calls them "
    "encoder.json and vocab.bpe)";
constexpr const char* kDataHint =
    "the file is damaged or not a GPT-2 byte-level BPE tokenizer; write it again "
    "(Hugging Face: tokenizer.model.save(DIR))";

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for
// themselves, the other 68 take U+0100.. in byte order.
constexpr uint32_t kAlphabetEnd = 256 + 68;
constexpr bool StandsForItself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}
struct Alphabet {
  std::array<uint16_t, 256> code_point{};    // byte -> character
  std::array<int16_t, kAlphabetEnd> byte{};  // character -> byte, or -1
  constexpr Alphabet() {
    uint16_t next = 256;
    for (int b = 0; b < 256; ++b) code_point[b] = StandsForItself(b) ? b : next++;
    for (auto& b : byte) b = -1;
    for (int b = 0; b < 256; ++b) byte[code_point[b]] = static_cast<int16_t>(b);
  }
};
constexpr Alphabet kAlphabet;

// `text` for a message: as it is when it is printable UTF-8 (token texts
// read best so: "Ġthe"), else with \xNN escapes; at most ~60 bytes.
std::string QuoteText(std::string_view text) {
  constexpr size_t kMax = 60;
  const bool printable =
      InvalidUtf8Offset(text) == std::string_view::npos &&
      std::none_of(text.begin(), text.end(), [](char c) { return uint8_t(c) < 0x20 || c == 0x7F; });
  if (!printable) return QuoteForMessage(text, kMax);
  size_t end = std::min(text.size(), kMax);
  while (end < text.size() && end > 0 && (uint8_t(text[end]) & 0xC0) == 0x80) --end;
  std::string out = "\"";
  for (const char c : text.substr(0, end)) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + (end < text.size() ? "\"..." : "\"");
}

std::string ReadTokenizerFile(const fs::path& path) {
  if (!fs::is_regular_file(path)) {
    throw IoError("GPT-2 tokenizer file not found", {.file = path.string()}, kFilesHint);
  }
  return ReadFile(path);  // Error{kIo} naming the path when unreadable
}

// Line and column (1-based) of byte `offset` of `text`.
ErrorWhere WhereInText(const fs::path& path, std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  const std::string_view before = text.substr(0, offset);
  const size_t line_start = before.rfind('\n');
  return {.file = path.string(),
          .line = 1 + static_cast<int64_t>(std::count(before.begin(), before.end(), '\n')),
          .column = static_cast<int64_t>(
              line_start == std::string_view::npos ? offset + 1 : offset - line_start),
          .byte_offset = static_cast<int64_t>(offset)};
}

void ParseVocab(const fs::path& path, std::string_view text, Gpt2BpeModel* model) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(fmt::format("not valid JSON: {}", e.what()),
                    WhereInText(path, text, e.byte > 0 ? e.byte - 1 : 0), kDataHint);
  }
  if (!json.is_object() || json.empty()) {
    throw DataError(fmt::format("expected a JSON object of token -> id, got {}",
                                json.is_object() ? "an empty object" : json.type_name()),
                    {.file = path.string()}, kDataHint);
  }
  const size_t size = json.size();
  model->tokens.assign(size, {});
  std::vector<bool> taken(size);
  for (const auto& [token, value] : json.items()) {
    if (!value.is_number_unsigned() || value.get<uint64_t>() >= size) {
      throw DataError(fmt::format("token {} has id {}: ids must be the integers 0..{} ({} tokens)",
                                  QuoteText(token), value.dump(), size - 1, size),
                      {.file = path.string()}, kDataHint);
    }
    const auto id = value.get<uint32_t>();
    if (taken[id]) {
      throw DataError(fmt::format("tokens {} and {} have the same id {}",
                                  QuoteText(model->tokens[id]), QuoteText(token), id),
                      {.file = path.string()}, kDataHint);
    }
    taken[id] = true;
    model->tokens[id] = token;
    model->ids.emplace(token, id);
  }
}

void ParseMerges(const fs::path& path, std::string_view text, const fs::path& vocab_path,
                 Gpt2BpeModel* model) {
  const auto id_of = [&](std::string_view token, std::string_view line, int64_t number) {
    const auto it = model->ids.find(std::string(token));
    if (it != model->ids.end()) return it->second;
    throw DataError(fmt::format("merge {}: token {} is not in {}", QuoteText(line),
                                QuoteText(token), vocab_path.string()),
                    {.file = path.string(), .line = number},
                    "vocab.json and merges.txt must come from the same tokenizer");
  };
  uint32_t rank = 0;
  int64_t number = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.starts_with("#version")) continue;
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      throw DataError(
          fmt::format("merge {} is not two tokens separated by one space", QuoteText(line)),
          {.file = path.string(), .line = number}, kDataHint);
    }
    const std::string_view left = line.substr(0, space), right = line.substr(space + 1);
    const uint32_t left_id = id_of(left, line, number), right_id = id_of(right, line, number);
    const uint32_t id = id_of(std::string(left) + std::string(right), line, number);
    // A repeated merge takes its later rank, as in GPT-2's and Hugging Face's readers.
    model->merges[Gpt2BpeModel::PairKey(left_id, right_id)] = {rank++, id};
  }
}

}  // namespace

std::string Gpt2ByteToken(uint8_t b) {
  const uint32_t c = kAlphabet.code_point[b];
  if (c < 0x80) return std::string(1, static_cast<char>(c));
  return {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
}

bool Gpt2TokenBytes(std::string_view token, std::string* bytes) {
  bytes->clear();
  for (size_t i = 0; i < token.size();) {
    const auto lead = static_cast<uint8_t>(token[i]);
    uint32_t c = lead;
    if (lead >= 0x80) {
      // Every character of the alphabet is below U+0800: one or two bytes.
      if ((lead & 0xE0) != 0xC0 || i + 1 >= token.size()) return false;
      c = (lead & 0x1Fu) << 6 | (static_cast<uint8_t>(token[i + 1]) & 0x3Fu);
      ++i;
    }
    ++i;
    if (c >= kAlphabetEnd || kAlphabet.byte[c] < 0) return false;
    bytes->push_back(static_cast<char>(kAlphabet.byte[c]));
  }
  return true;
}

Gpt2BpeModel LoadGpt2BpeModel(const fs::path& vocab_json, const fs::path& merges_txt) {
  Gpt2BpeModel model;
  const std::string vocab = ReadTokenizerFile(vocab_json);
  const std::string merges = ReadTokenizerFile(merges_txt);
  ParseVocab(vocab_json, vocab, &model);
  ParseMerges(merges_txt, merges, vocab_json, &model);
  for (int b = 0; b < 256; ++b) {
    const auto it = model.ids.find(Gpt2ByteToken(static_cast<uint8_t>(b)));
    model.byte_ids[b] = it == model.ids.end() ? kNoToken : it->second;
  }
  return model;
}

}  // namespace topspin::data_internal
