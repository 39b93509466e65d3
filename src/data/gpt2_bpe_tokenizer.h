// The GPT-2 byte-level BPE tokenizer behind OpenTokenizer("gpt2:DIR")
// (internal to the data module; the API is topspin/data/tokenizer.h).
//
// DIR holds the two files of a GPT-2 style tokenizer, as OpenAI's GPT-2
// release and Hugging Face's `tokenizer.model.save(DIR)` write them:
//   vocab.json   a JSON object, token -> id, ids dense 0..N-1. Tokens are
//                spelled in GPT-2's byte-to-unicode alphabet (byte 0x20
//                ' ' is "Ġ", 0x0A is "Ċ", printable ASCII is itself).
//   merges.txt   an optional first line "#version: ..." then one merge
//                "LEFT RIGHT" per line (one space); rank = order in the
//                file. LEFT, RIGHT and LEFTRIGHT must all be tokens. A
//                merge listed twice takes its later rank (as in GPT-2's
//                and Hugging Face's readers).
//
// Encode, exactly as Hugging Face's ByteLevel BPE (add_prefix_space=false):
// split the text into pieces with GPT-2's pattern (gpt2_pretokenizer.h),
// spell each piece's UTF-8 bytes as byte tokens, then merge adjacent pairs,
// always the pair of lowest rank first (leftmost among equals), until no
// listed pair is left. The text must be valid UTF-8: anything else is
// Error{kData} with the byte offset (the text importer checks first and
// names the file and line). A byte whose token is missing from vocab.json
// is Error{kData} (Hugging Face drops the byte silently).
//
// Special tokens: "<|endoftext|>", when vocab.json has it, is
// end_of_text(). Encode never emits it: text that contains the literal
// string "<|endoftext|>" is encoded as ordinary text ("<|", "endoftext",
// "|>"), as Hugging Face does when the token is not registered as special.
// Decode drops end-of-text and spells every other id through the inverse
// byte table (a token with characters outside the alphabet, such as an
// added special token, as its own UTF-8 text), so Decode(Encode(s)) == s
// for every valid UTF-8 s. Decoded bytes need not be valid UTF-8 (a
// character may be split across tokens).
//
// Immutable after opening apart from a cache of recent pieces' ids behind
// a mutex: every const method is thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "topspin/data/tokenizer.h"

namespace topspin::data_internal {

inline constexpr const char* kGpt2VocabFile = "vocab.json";
inline constexpr const char* kGpt2MergesFile = "merges.txt";
inline constexpr const char* kGpt2EndOfText = "<|endoftext|>";
inline constexpr uint32_t kNoToken = UINT32_MAX;

// vocab.json and merges.txt, parsed and checked.
struct Gpt2BpeModel {
  struct Merge {
    uint32_t rank = 0;
    uint32_t id = 0;  // the token LEFTRIGHT
  };
  std::vector<std::string> tokens;                // id -> token text
  std::unordered_map<std::string, uint32_t> ids;  // token text -> id
  std::unordered_map<uint64_t, Merge> merges;     // PairKey(left, right) -> merge
  std::array<uint32_t, 256> byte_ids{};           // byte -> its token's id, or kNoToken

  static uint64_t PairKey(uint32_t left, uint32_t right) { return uint64_t{left} << 32 | right; }
};

// Reads and checks both files. Throws Error{kIo} naming a file that is
// missing or unreadable, Error{kData} naming file:line (merges.txt) or the
// token or byte offset (vocab.json) and the offending text for anything
// malformed: not a JSON object of token -> id, an id that is negative, not
// an integer or repeated, ids that are not 0..N-1, a merge line that is not
// two tokens, a merge whose parts or result are not in the vocabulary.
Gpt2BpeModel LoadGpt2BpeModel(const std::filesystem::path& vocab_json,
                              const std::filesystem::path& merges_txt);

// GPT-2's byte-to-unicode alphabet: the UTF-8 text of byte `b`'s token
// character ("!".."~", "¡".."¬", "®".."ÿ" stand for themselves; the other
// 68 bytes for U+0100.., in byte order: 0x00 "Ā", 0x20 "Ġ", 0x0A "Ċ").
std::string Gpt2ByteToken(uint8_t b);
// The bytes a token text stands for; false when a character of `token` is
// outside the alphabet (then *bytes is unspecified).
bool Gpt2TokenBytes(std::string_view token, std::string* bytes);

// Opens DIR/vocab.json and DIR/merges.txt (LoadGpt2BpeModel's errors).
std::unique_ptr<Tokenizer> OpenGpt2BpeTokenizer(const std::filesystem::path& dir);

}  // namespace topspin::data_internal
