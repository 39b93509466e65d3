// Gpt2PreTokenizer: GPT-2's split of text into pieces before BPE (internal
// to the data module; used by gpt2_bpe_tokenizer.cc).
//
// The pieces are the matches, left to right, of GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (Hugging Face's ByteLevel pre-tokenizer with add_prefix_space=false), run
// by PCRE2 in UTF + UCP mode (JIT-compiled when PCRE2 has a JIT). Every
// character matches some alternative, so the pieces cover the text.
// Contractions are case-sensitive ("'S" is punctuation then a letter). A
// run of whitespace before a word leaves its last character to a piece of
// its own, or to the word when it is a space U+0020 ("a   b" -> "a", "  ",
// " b"; "x\n\ny" -> "x", "\n", "\n", "y").
//
// \s is spelled out as [\t-\r\x{85}\p{Z}], the characters Oniguruma's \s
// matches (Hugging Face runs this pattern with Oniguruma): PCRE2's own \s
// adds U+180E MONGOLIAN VOWEL SEPARATOR, a format character since
// Unicode 6.3. \p{L}, \p{N} and \p{Z} follow PCRE2's Unicode tables
// (Unicode 14 in Debian 12's PCRE2 10.42): letters and digits added later
// (9,392 of them by Unicode 16, such as CJK extension H) are neither here,
// unlike in Hugging Face's newer tables (tests/bpe_vs_hf.py counts them).
//
// Immutable after construction; Split() is thread-safe.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

namespace topspin::data_internal {

class Gpt2PreTokenizer {
 public:
  // Compiles the pattern; Error{kInternal} if PCRE2 rejects it.
  Gpt2PreTokenizer();
  ~Gpt2PreTokenizer();
  Gpt2PreTokenizer(const Gpt2PreTokenizer&) = delete;
  Gpt2PreTokenizer& operator=(const Gpt2PreTokenizer&) = delete;

  // Appends the pieces of `text` to *pieces (views into `text`, in order,
  // together exactly `text`). `text` must be valid UTF-8 (the caller
  // checks: PCRE2 runs without its own check).
  void Split(std::string_view text, std::vector<std::string_view>* pieces) const;

  // Whether the pattern was JIT-compiled (for benchmarks and tests).
  bool jit() const { return jit_; }

 private:
  struct Code;
  std::unique_ptr<Code> code_;
  bool jit_ = false;
};

}  // namespace topspin::data_internal
