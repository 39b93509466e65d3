// The GPT-2 byte-level BPE tokenizer: pieces -> byte tokens -> merges.
#include "data/gpt2_bpe_tokenizer.h"

#include <algorithm>
#include <mutex>
#include <string_view>

#include <fmt/format.h>

#include "data/field_parse.h"
#include "data/gpt2_pretokenizer.h"
#include "topspin/core/error.h"

namespace topspin::data_internal {
namespace {

namespace fs = std::filesystem;

// Pieces of at most this many bytes are cached, up to kCacheEntries of them
// (then the cache starts again empty).
constexpr size_t kMaxCachedPieceBytes = 64;
constexpr size_t kCacheEntries = size_t{1} << 16;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// One symbol of a piece being merged: a token, linked to its neighbours.
struct Symbol {
  uint32_t id;
  int64_t prev;  // -1: none
  int64_t next;  // -1: none
  bool removed = false;
};

// A pair that could merge: the symbol at `pos` with the one after it.
struct Candidate {
  uint32_t rank;
  int64_t pos;
  uint32_t id;  // the merged token
};
// Lowest rank first, then leftmost (a max-heap of the reverse order).
bool PopsLater(const Candidate& a, const Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  Gpt2BpeTokenizer(fs::path dir, Gpt2BpeModel model)
      : dir_(std::move(dir)), model_(std::move(model)) {
    bytes_.resize(model_.tokens.size());
    for (size_t id = 0; id < model_.tokens.size(); ++id) {
      // A token outside the alphabet (an added special token) is its own text.
      if (!Gpt2TokenBytes(model_.tokens[id], &bytes_[id])) bytes_[id] = model_.tokens[id];
    }
    if (const auto it = model_.ids.find(kGpt2EndOfText); it != model_.ids.end()) {
      end_of_text_ = it->second;
    }
  }

  std::vector<uint32_t> Encode(std::string_view text) const override {
    if (const size_t bad = InvalidUtf8Offset(text); bad != std::string_view::npos) {
      throw DataError(fmt::format("cannot encode text that is not valid UTF-8 (byte 0x{:02x})",
                                  static_cast<uint8_t>(text[bad])),
                      {.byte_offset = static_cast<int64_t>(bad)},
                      "the gpt2 tokenizer takes UTF-8 text; convert it first (e.g. iconv)");
    }
    std::vector<std::string_view> pieces;
    pretokenizer_.Split(text, &pieces);
    std::vector<uint32_t> ids;
    ids.reserve(text.size() / 3);
    for (const std::string_view piece : pieces) AppendPiece(piece, &ids);
    return ids;
  }

  std::string Decode(std::span<const uint32_t> tokens) const override {
    std::string text;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] >= vocab_size()) {
        throw DataError(fmt::format("token {} (position {}) is outside the vocabulary of {} ids",
                                    tokens[i], i, vocab_size()),
                        {.file = (dir_ / kGpt2VocabFile).string()},
                        "was the data tokenized with another tokenizer?");
      }
      if (tokens[i] != end_of_text_) text += bytes_[tokens[i]];
    }
    return text;
  }

  uint32_t vocab_size() const override { return static_cast<uint32_t>(model_.tokens.size()); }
  std::optional<uint32_t> end_of_text() const override { return end_of_text_; }
  std::string name() const override { return "gpt2:" + dir_.string(); }

 private:
  // Appends the ids of one piece, from the cache when it is there.
  void AppendPiece(std::string_view piece, std::vector<uint32_t>* ids) const {
    if (piece.size() > kMaxCachedPieceBytes) {
      const std::vector<uint32_t> merged = MergePiece(piece);
      ids->insert(ids->end(), merged.begin(), merged.end());
      return;
    }
    {
      std::lock_guard lock(mu_);
      if (const auto it = cache_.find(piece); it != cache_.end()) {
        ids->insert(ids->end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<uint32_t> merged = MergePiece(piece);
    ids->insert(ids->end(), merged.begin(), merged.end());
    std::lock_guard lock(mu_);
    if (cache_.size() >= kCacheEntries) cache_.clear();
    cache_.emplace(std::string(piece), std::move(merged));
  }

  // The byte tokens of `piece`, merged lowest rank first (leftmost among
  // equal ranks) until no adjacent pair has a merge: Hugging Face's
  // Word::merge_all, so the result is Hugging Face's even for merges.txt
  // files whose ranks are out of order (a merge ranked before its parts).
  std::vector<uint32_t> MergePiece(std::string_view piece) const {
    std::vector<Symbol> symbols;
    symbols.reserve(piece.size());
    for (size_t i = 0; i < piece.size(); ++i) {
      const uint32_t id = model_.byte_ids[static_cast<uint8_t>(piece[i])];
      if (id == kNoToken) throw MissingByteError(static_cast<uint8_t>(piece[i]));
      const auto pos = static_cast<int64_t>(i);
      symbols.push_back({id, pos - 1, i + 1 < piece.size() ? pos + 1 : -1});
    }
    std::vector<Candidate> heap;
    const auto push = [&](int64_t pos) {
      const auto it =
          model_.merges.find(Gpt2BpeModel::PairKey(symbols[pos].id, symbols[symbols[pos].next].id));
      if (it == model_.merges.end()) return;
      heap.push_back({it->second.rank, pos, it->second.id});
      std::push_heap(heap.begin(), heap.end(), PopsLater);
    };
    for (int64_t pos = 0; pos + 1 < static_cast<int64_t>(symbols.size()); ++pos) push(pos);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), PopsLater);
      const Candidate top = heap.back();
      heap.pop_back();
      Symbol& left = symbols[top.pos];
      if (left.removed || left.next < 0) continue;
      // Stale: the pair at `pos` changed since it was pushed.
      const auto it = model_.merges.find(Gpt2BpeModel::PairKey(left.id, symbols[left.next].id));
      if (it == model_.merges.end() || it->second.id != top.id) continue;
      Symbol& right = symbols[left.next];
      left.id = top.id;
      right.removed = true;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = top.pos;
      if (left.prev >= 0) push(left.prev);
      if (left.next >= 0) push(top.pos);
    }
    std::vector<uint32_t> ids;
    for (const Symbol& s : symbols) {
      if (!s.removed) ids.push_back(s.id);
    }
    return ids;
  }

  Error MissingByteError(uint8_t byte) const {
    return DataError(fmt::format("the vocabulary has no token for byte 0x{:02x} (\"{}\")", byte,
                                 Gpt2ByteToken(byte)),
                     {.file = (dir_ / kGpt2VocabFile).string()},
                     "a byte-level BPE vocabulary needs all 256 byte tokens (Hugging Face: "
                     "BpeTrainer(initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))");
  }

  fs::path dir_;
  Gpt2BpeModel model_;
  std::vector<std::string> bytes_;  // id -> the bytes it decodes to
  std::optional<uint32_t> end_of_text_;
  Gpt2PreTokenizer pretokenizer_;

  mutable std::mutex mu_;
  // Guarded by mu_: piece -> its ids.
  mutable std::unordered_map<std::string, std::vector<uint32_t>, StringHash, std::equal_to<>>
      cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> OpenGpt2BpeTokenizer(const fs::path& dir) {
  fs::path absolute = fs::absolute(dir).lexically_normal();
  if (absolute.filename().empty()) absolute = absolute.parent_path();  // "DIR/"
  if (!fs::is_directory(absolute)) {
    throw IoError("GPT-2 tokenizer directory not found", {.file = absolute.string()},
                  "gpt2:DIR names a directory holding vocab.json and merges.txt");
  }
  Gpt2BpeModel model = LoadGpt2BpeModel(absolute / kGpt2VocabFile, absolute / kGpt2MergesFile);
  return std::make_unique<Gpt2BpeTokenizer>(absolute, std::move(model));
}

}  // namespace topspin::data_internal
