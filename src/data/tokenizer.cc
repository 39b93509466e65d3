// The byte-level tokenizer and OpenTokenizer's spec parsing.
#include "topspin/data/tokenizer.h"

#include <fmt/format.h>

#include "data/sentencepiece_tokenizer.h"
#include "topspin/core/error.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

constexpr std::string_view kSentencePiecePrefix = "sentencepiece:";

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
  const auto guess = ClosestMatch(spec, {"bytes", "sentencepiece"});
  throw ConfigError(fmt::format("unknown tokenizer \"{}\"", spec), {},
                    guess == "bytes" ? "did you mean \"bytes\"?"
                    : guess          ? "did you mean \"sentencepiece:MODEL\"?"
                                     : "use \"bytes\" or \"sentencepiece:MODEL\"");
}

}  // namespace topspin
