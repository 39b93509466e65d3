// The SentencePiece tokenizer behind OpenTokenizer("sentencepiece:MODEL")
// (internal to the data module; the API is topspin/data/tokenizer.h).
#pragma once

#include <filesystem>
#include <memory>

#include "topspin/data/tokenizer.h"

namespace topspin::data_internal {

// Loads `model`; throws Error{kIo} naming it when it is missing or not a
// SentencePiece model.
std::unique_ptr<Tokenizer> OpenSentencePieceTokenizer(const std::filesystem::path& model);

}  // namespace topspin::data_internal
