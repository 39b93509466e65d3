// The byte-level tokenizer and OpenTokenizer's spec parsing.
#include "topspin/data/tokenizer.h"

#include <fmt/format.h>

#include "data/gpt2_bpe_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"
#include "topspin/core/error.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

constexpr std::string_view kSentencePiecePrefix = "sentencepiece:";
constexpr std::string_view kGpt2Prefix = "gpt2:";

class BytesTokenizer final : public Tokenizer {
 public:
  std::vector<uint32_t> Encode(std::string_view text) const override {
    std::vector<uint32_t> tokens(text.size());
    for (size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<uint8_t>(text[i]);
    return tokens;
  }

  std::string Decode(std::span<const uint32_t> tokens) const override {
    std::string text;
    text.reserve(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < kBytesEndOfText) {
        text.push_back(static_cast<char>(tokens[i]));
      } else if (tokens[i] > kBytesEndOfText) {
        throw DataError(
            fmt::format("token {} (position {}) is not a byte-level token id", tokens[i], i), {},
            "the bytes tokenizer has ids 0..256; was the data tokenized "
            "with another tokenizer?");
      }
    }
    return text;
  }

  uint32_t vocab_size() const override { return kBytesVocabSize; }
  std::optional<uint32_t> end_of_text() const override { return kBytesEndOfText; }
  std::string name() const override { return "bytes"; }
};

// A suggestion for a spec that names no tokenizer; "sentencpiece:m.model"
// is compared by its name before the ':'.
std::string UnknownSpecHint(const std::string& spec) {
  const std::string name = spec.substr(0, spec.find(':'));
  const auto guess = ClosestMatch(name, {"bytes", "sentencepiece", "gpt2"});
  if (!guess) return R"(use "bytes", "sentencepiece:MODEL" or "gpt2:DIR")";
  if (*guess == "bytes") return R"(did you mean "bytes"?)";
  if (*guess == "sentencepiece") return R"(did you mean "sentencepiece:MODEL"?)";
  return R"(did you mean "gpt2:DIR"?)";
}

}  // namespace

std::unique_ptr<Tokenizer> OpenTokenizer(const std::string& spec) {
  if (spec == "bytes") return std::make_unique<BytesTokenizer>();
  if (spec.starts_with(kSentencePiecePrefix)) {
    const std::string model = spec.substr(kSentencePiecePrefix.size());
    if (model.empty()) {
      throw ConfigError("tokenizer \"sentencepiece:\" names no model file", {},
                        "write sentencepiece:PATH/TO/MODEL.model");
    }
    return data_internal::OpenSentencePieceTokenizer(model);
  }
  if (spec.starts_with(kGpt2Prefix)) {
    const std::string dir = spec.substr(kGpt2Prefix.size());
    if (dir.empty()) {
      throw ConfigError("tokenizer \"gpt2:\" names no directory", {},
                        "write gpt2:DIR, DIR holding vocab.json and merges.txt");
    }
    return data_internal::OpenGpt2BpeTokenizer(dir);
  }
  throw ConfigError(fmt::format("unknown tokenizer \"{}\"", spec), {}, UnknownSpecHint(spec));
}

}  // namespace topspin
