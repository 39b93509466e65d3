// Tokenizers: text <-> token ids, for the text importer and GPT generation.
//
// A tokenizer is named by a spec string (ImportOptions::tokenizer,
// `topspin convert --tokenizer`):
//   "bytes"                  byte-level: token = byte value (0..255) plus an
//                            end-of-text token 256; vocab_size() 257.
//                            Lossless for any bytes, UTF-8 or not.
//   "sentencepiece:MODEL"    a SentencePiece model file (for example one
//                            made by TrainSentencePiece or `topspin
//                            tokenizer train`); end-of-text is the model's
//                            </s> (eos) piece when it has one.
//   "gpt2:DIR"               GPT-2's byte-level BPE from DIR/vocab.json and
//                            DIR/merges.txt (OpenAI's GPT-2 files, or any
//                            Hugging Face ByteLevel BPE saved with
//                            tokenizer.model.save(DIR)); ids equal Hugging
//                            Face `tokenizers`' for text of Unicode 14's
//                            characters (tests/bpe_vs_hf.py). The
//                            text must be valid UTF-8; end-of-text is
//                            "<|endoftext|>" when vocab.json has it, and
//                            that string in the text is ordinary text.
//                            Details: src/data/gpt2_bpe_tokenizer.h.
// Encode() never emits the end-of-text token; callers append it between
// documents. Decode() drops it (and SentencePiece's other control pieces),
// so Decode(Encode(s)) == s for the bytes tokenizer, for gpt2 (any UTF-8
// s) and for SentencePiece models trained by TrainSentencePiece with
// byte_fallback (whose text is not normalized).
//
// Tokenizers are immutable after opening: every const method is
// thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace topspin {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`, each < vocab_size().
  virtual std::vector<uint32_t> Encode(std::string_view text) const = 0;
  // The text of `tokens`. Throws Error{kData} for an id >= vocab_size().
  virtual std::string Decode(std::span<const uint32_t> tokens) const = 0;
  // Number of distinct ids, the end-of-text token included.
  virtual uint32_t vocab_size() const = 0;
  // The id that ends a document, when the tokenizer has one.
  virtual std::optional<uint32_t> end_of_text() const = 0;
  // The spec that opens this tokenizer again ("bytes",
  // "sentencepiece:/path/m.model", "gpt2:/abs/dir").
  virtual std::string name() const = 0;
};

// The byte-level tokenizer's end-of-text id and vocabulary size.
inline constexpr uint32_t kBytesEndOfText = 256;
inline constexpr uint32_t kBytesVocabSize = 257;

// Opens the tokenizer named by `spec` (see above). Throws Error{kConfig}
// for an unknown spec (with a suggestion), Error{kIo} naming the model
// path when a SentencePiece model cannot be read or parsed or a gpt2 file
// is missing, and Error{kData} naming the file, the line and the offending
// text for a malformed gpt2 vocab.json or merges.txt.
std::unique_ptr<Tokenizer> OpenTokenizer(const std::string& spec);

struct SentencePieceTrainOptions {
  std::string model_type = "unigram";  // unigram | bpe | char | word
  // Fraction of characters the vocabulary must cover; the rest become
  // byte pieces (with byte_fallback) or unknown.
  double character_coverage = 0.9995;
  // Encode characters outside the vocabulary as their UTF-8 bytes (256 extra
  // pieces, so vocab_size must exceed ~260) instead of as the unknown piece.
  // nullopt: on when vocab_size >= 1024.
  std::optional<bool> byte_fallback;
  // Lines sampled from the inputs for training (0: all). Large corpora
  // train in minutes on a few million lines.
  uint64_t max_sentences = 2'000'000;
  int threads = 0;       // 0: hardware concurrency
  uint32_t seed = 1;     // sampling and shuffling of the training lines
  bool verbose = false;  // print SentencePiece's training log to stderr
};

// Trains a SentencePiece model on the UTF-8 text files `inputs` (one
// training sentence per line) and writes MODEL_PREFIX.model and
// MODEL_PREFIX.vocab. The model keeps text as it is (identity
// normalization, whitespace kept, no dummy prefix) and has "\n" as a
// piece, so documents round-trip through Encode/Decode including their
// line breaks. Ids: 0 <unk>, 1 <s>, 2 </s> (end of text), 3 "\n".
// Throws Error{kIo} naming a missing input or an unwritable prefix and
// Error{kData} when training fails (e.g. vocab_size larger than the text
// supports), with SentencePiece's message.
void TrainSentencePiece(const std::vector<std::filesystem::path>& inputs,
                        const std::filesystem::path& model_prefix, int vocab_size,
                        const SentencePieceTrainOptions& options = {});

}  // namespace topspin
