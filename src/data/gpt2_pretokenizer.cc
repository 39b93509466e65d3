// GPT-2's pre-tokenization pattern, run by PCRE2.
#include "data/gpt2_pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include "topspin/core/error.h"

namespace topspin::data_internal {
namespace {

// GPT-2's pattern with \s written as Oniguruma's [\t-\r\x{85}\p{Z}] (see
// the header): \S becomes the negated class, [^\s...] gains its members.
constexpr std::string_view kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\t-\r\x{85}\p{Z}\p{L}\p{N}]+)"
    R"(|[\t-\r\x{85}\p{Z}]+(?![^\t-\r\x{85}\p{Z}])|[\t-\r\x{85}\p{Z}]+)";

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
using MatchData = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) return fmt::format("{}", code);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

struct Gpt2PreTokenizer::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Gpt2PreTokenizer::Gpt2PreTokenizer() : code_(std::make_unique<Code>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern.data()), kPattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code_->code == nullptr) {
    throw InternalError(fmt::format("PCRE2 rejects the GPT-2 pattern at offset {}: {}", offset,
                                    Pcre2Message(error)));
  }
  // Without a JIT (or when it fails) pcre2_match interprets the pattern.
  jit_ = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

Gpt2PreTokenizer::~Gpt2PreTokenizer() = default;

void Gpt2PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  const MatchData data(pcre2_match_data_create_from_pattern(code_->code, nullptr));
  if (!data) throw InternalError("PCRE2 cannot allocate match data");
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset < text.size()) {
    int rc = pcre2_match(code_->code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, data.get(),
                         nullptr);
    // The JIT's 32 KiB stack can run out on pathological input; the
    // interpreter keeps its backtracking state on the heap.
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code_->code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       data.get(), nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      throw InternalError(
          fmt::format("PCRE2 failed at byte {} of {}: {}", offset, text.size(), Pcre2Message(rc)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const size_t begin = ovector[0], end = ovector[1];
    // Every character matches, so neither happens; kept like Hugging
    // Face's "isolated" split: unmatched text is a piece of its own.
    if (begin > offset) pieces->push_back(text.substr(offset, begin - offset));
    if (end <= begin) throw InternalError("the GPT-2 pattern matched no text");
    pieces->push_back(text.substr(begin, end - begin));
    offset = end;
  }
  if (offset < text.size()) pieces->push_back(text.substr(offset));
}

}  // namespace topspin::data_internal
