// The gpt2:DIR tokenizer on small handwritten vocabularies. The check
// against Hugging Face `tokenizers` on a trained one is tests/bpe_vs_hf.py.
#include "data/gpt2_bpe_tokenizer.h"

#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/test_util.h"
#include "data/gpt2_pretokenizer.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/data/importer.h"
#include "topspin/data/tokenizer.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;
using data_internal::Gpt2ByteToken;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A GPT-2 tokenizer directory: ids 0..255 are the byte tokens (id == byte
// value), then one id per merge result in merge order, then `extra`.
struct Gpt2Files {
  std::vector<std::pair<std::string, std::string>> merges;  // in byte-token spelling
  std::vector<std::string> extra;
  bool end_of_text = true;

  void Write(const fs::path& dir) const {
    nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
    for (int b = 0; b < 256; ++b) vocab[Gpt2ByteToken(uint8_t(b))] = b;
    std::string merges_txt = "#version: 0.2\n";
    for (const auto& [left, right] : merges) {
      if (!vocab.contains(left + right)) vocab[left + right] = vocab.size();
      merges_txt += left + " " + right + "\n";
    }
    for (const auto& token : extra) vocab[token] = vocab.size();
    if (end_of_text) vocab["<|endoftext|>"] = vocab.size();
    WriteFileAtomic(dir / "vocab.json", vocab.dump());
    WriteFileAtomic(dir / "merges.txt", merges_txt);
  }
};

std::unique_ptr<Tokenizer> Open(const fs::path& dir) {
  return OpenTokenizer("gpt2:" + dir.string());
}

std::vector<uint32_t> Bytes(std::string_view text) {
  std::vector<uint32_t> ids;
  for (const char c : text) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

// The id of a token of Gpt2Files: 256 + its index among the merge results.
uint32_t MergedId(int index) {
  return 256 + uint32_t(index);
}

std::vector<std::string> Pieces(std::string_view text) {
  static const data_internal::Gpt2PreTokenizer pretokenizer;
  std::vector<std::string_view> pieces;
  pretokenizer.Split(text, &pieces);
  return {pieces.begin(), pieces.end()};
}

Error ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error";
  return InternalError("no error");
}

TEST(Gpt2PreTokenizer, SplitsLikeGpt2) {
  EXPECT_THAT(Pieces("I'm here's they're we've you'll he'd it't"),
              ElementsAre("I", "'m", " here", "'s", " they", "'re", " we", "'ve", " you", "'ll",
                          " he", "'d", " it", "'t"));
  // Contractions are lowercase only; "''ll" is punctuation then letters.
  EXPECT_THAT(Pieces("HE'S"), ElementsAre("HE", "'", "S"));
  EXPECT_THAT(Pieces("''ll don't"), ElementsAre("''", "ll", " don", "'t"));
  EXPECT_THAT(Pieces("Hello, world!! $100.50"),
              ElementsAre("Hello", ",", " world", "!!", " $", "100", ".", "50"));
  EXPECT_THAT(Pieces("abc123 4567"), ElementsAre("abc", "123", " 4567"));
  // Digits of other scripts are \p{N}: Arabic-Indic, fullwidth.
  EXPECT_THAT(Pieces("x\u0663\u0664 \uFF13"), ElementsAre("x", "\u0663\u0664", " \uFF13"));
}

TEST(Gpt2PreTokenizer, WhitespaceGoesWithTheNextWordOrStaysARun) {
  // The last space before a word joins the word: \s+(?!\S).
  EXPECT_THAT(Pieces("a   b"), ElementsAre("a", "  ", " b"));
  EXPECT_THAT(Pieces("  lead"), ElementsAre(" ", " lead"));
  EXPECT_THAT(Pieces("end  "), ElementsAre("end", "  "));
  EXPECT_THAT(Pieces("a  \n"), ElementsAre("a", "  \n"));
  EXPECT_THAT(Pieces("x \n y"), ElementsAre("x", " \n", " y"));
  // A run of line breaks before a word gives up its last one; at the end
  // it stays whole.
  EXPECT_THAT(Pieces("x\n\ny"), ElementsAre("x", "\n", "\n", "y"));
  EXPECT_THAT(Pieces("x\n\n"), ElementsAre("x", "\n\n"));
  EXPECT_THAT(Pieces("a\tb\r\nc"), ElementsAre("a", "\t", "b", "\r", "\n", "c"));
  // Only U+0020 joins a word; other spaces stand alone.
  EXPECT_THAT(Pieces("a\u00A0b"), ElementsAre("a", "\u00A0", "b"));
  EXPECT_THAT(Pieces("a\u3000 b"), ElementsAre("a", "\u3000", " b"));
  EXPECT_THAT(Pieces("a\u2028b"), ElementsAre("a", "\u2028", "b"));
  // U+180E is no space to Oniguruma (Hugging Face), unlike PCRE2's \s.
  EXPECT_THAT(Pieces("a\u180Eb c"), ElementsAre("a", "\u180E", "b", " c"));
}

TEST(Gpt2PreTokenizer, MarksEmojiAndCjk) {
  // A combining mark is not a letter: it ends the word.
  EXPECT_THAT(Pieces("e\u0301t\u00E9"), ElementsAre("e", "\u0301", "t\u00E9"));
  EXPECT_THAT(Pieces("\u4E2D\u6587\u5B57 \u65E5\u672C"),
              ElementsAre("\u4E2D\u6587\u5B57", " \u65E5\u672C"));
  // Emoji, skin tones and zero-width joiners are one run of symbols.
  const std::string family = "\U0001F44D\U0001F3FD\U0001F468\u200D\U0001F469\u200D\U0001F467";
  EXPECT_THAT(Pieces("a " + family + " b"), ElementsAre("a", " " + family, " b"));
  EXPECT_THAT(Pieces("x\u200By"), ElementsAre("x", "\u200B", "y"));
}

TEST(Gpt2PreTokenizer, LongRunsNeedNoBacktrackingStack) {
  const std::string spaces(size_t{1} << 20, ' ');
  EXPECT_THAT(Pieces("x" + spaces + "y"), ElementsAre("x", spaces.substr(1), " y"));
  const std::string letters(size_t{1} << 20, 'q');
  EXPECT_THAT(Pieces(letters + "!"), ElementsAre(letters, "!"));
}

TEST(Gpt2Bpe, MergesLowestRankFirst) {
  testing::TempDir dir;
  // "b c" outranks "a b": "abc" is a + bc, then abc.
  Gpt2Files{.merges = {{"b", "c"}, {"a", "b"}, {"a", "bc"}}}.Write(dir.path());
  EXPECT_EQ(Open(dir.path())->Encode("abc"), (std::vector<uint32_t>{MergedId(2)}));
  EXPECT_EQ(Open(dir.path())->Encode("abx"), (std::vector<uint32_t>{MergedId(1), 'x'}));

  testing::TempDir other;
  // "a b" first: ab + c, and "ab c" is not a merge.
  Gpt2Files{.merges = {{"a", "b"}, {"b", "c"}, {"a", "bc"}}}.Write(other.path());
  EXPECT_EQ(Open(other.path())->Encode("abc"), (std::vector<uint32_t>{MergedId(0), 'c'}));
}

TEST(Gpt2Bpe, EqualRanksMergeLeftmostFirstAndMergesStayInsidePieces) {
  testing::TempDir dir;
  const std::string sp = Gpt2ByteToken(' ');  // "Ġ"
  Gpt2Files{.merges = {{"a", "a"}, {sp, "t"}, {sp + "t", "h"}, {sp + "th", "e"}, {"e", sp}}}.Write(
      dir.path());
  const auto tokenizer = Open(dir.path());
  EXPECT_EQ(tokenizer->Encode("aaa"), (std::vector<uint32_t>{MergedId(0), 'a'}));
  EXPECT_EQ(tokenizer->Encode("aaaa"), (std::vector<uint32_t>{MergedId(0), MergedId(0)}));
  EXPECT_EQ(tokenizer->Encode(" the"), (std::vector<uint32_t>{MergedId(3)}));
  // "e Ġ" never applies: "the the" is the pieces "the" and " the".
  EXPECT_EQ(tokenizer->Encode("the the"), (std::vector<uint32_t>{'t', 'h', 'e', MergedId(3)}));
  EXPECT_EQ(tokenizer->Decode(tokenizer->Encode("the the")), "the the");
}

TEST(Gpt2Bpe, MultiByteCharactersFallBackToByteTokens) {
  testing::TempDir dir;
  Gpt2Files{.merges = {{Gpt2ByteToken(0xC3), Gpt2ByteToken(0xA9)}}}.Write(dir.path());
  const auto tokenizer = Open(dir.path());
  EXPECT_EQ(tokenizer->Encode("\u00E9"), (std::vector<uint32_t>{MergedId(0)}));  // é merged
  EXPECT_EQ(tokenizer->Encode("e\u0301"), Bytes("e\u0301"));        // decomposed: bytes
  EXPECT_EQ(tokenizer->Encode("\u4E2D"), Bytes("\u4E2D"));          // 3 bytes
  EXPECT_EQ(tokenizer->Encode("\U0001F600"), Bytes("\U0001F600"));  // 4 bytes
  const std::string text =
      "caf\u00E9 \u4E2D\u6587 \U0001F44D\U0001F3FD\n\t\u0627\u0644\u0639\u0631\u0628\u064A\u0629 "
      "\u05E2\u05D1\u05E8\u05D9\u05EA \u00A0\u3000 x  \r\n";
  EXPECT_EQ(tokenizer->Decode(tokenizer->Encode(text)), text);
}

TEST(Gpt2Bpe, EndOfTextIsNeverEncodedAndDecodesToNothing) {
  testing::TempDir dir;
  Gpt2Files{.merges = {{"a", "b"}}}.Write(dir.path());
  const auto tokenizer = Open(dir.path());
  EXPECT_EQ(tokenizer->vocab_size(), 258u);
  ASSERT_EQ(tokenizer->end_of_text(), 257u);
  EXPECT_EQ(tokenizer->name(), "gpt2:" + fs::absolute(dir.path()).lexically_normal().string());
  EXPECT_EQ(OpenTokenizer(tokenizer->name())->name(), tokenizer->name());
  EXPECT_EQ(OpenTokenizer(tokenizer->name() + "/")->name(), tokenizer->name());
  // The literal string is ordinary text.
  const std::string literal = "x<|endoftext|>y";
  EXPECT_EQ(tokenizer->Encode(literal), Bytes(literal));
  EXPECT_EQ(tokenizer->Decode(std::vector<uint32_t>{'a', 257, 'b', 256}), "abab");
  const auto error = ErrorOf([&] { tokenizer->Decode(std::vector<uint32_t>{'a', 258}); });
  EXPECT_EQ(error.kind(), ErrorKind::kData);
  EXPECT_THAT(error.Message(), HasSubstr("token 258 (position 1)"));

  testing::TempDir without;
  Gpt2Files{.end_of_text = false}.Write(without.path());
  EXPECT_EQ(Open(without.path())->end_of_text(), std::nullopt);
  EXPECT_EQ(Open(without.path())->vocab_size(), 256u);
}

TEST(Gpt2Bpe, AddedTokensOutsideTheAlphabetDecodeAsTheirText) {
  testing::TempDir dir;
  Gpt2Files{.extra = {"<pad>", "\u4E2D!"}}.Write(dir.path());
  const auto tokenizer = Open(dir.path());
  EXPECT_EQ(tokenizer->Decode(std::vector<uint32_t>{256, 'x', 257}), "<pad>x\u4E2D!");
}

TEST(Gpt2Bpe, EncodeRejectsInvalidUtf8AndMissingByteTokens) {
  testing::TempDir dir;
  Gpt2Files{}.Write(dir.path());
  const auto bad = ErrorOf([&] { Open(dir.path())->Encode("ok caf\xE9"); });
  EXPECT_EQ(bad.kind(), ErrorKind::kData);
  EXPECT_THAT(bad.Message(), HasSubstr("not valid UTF-8 (byte 0xe9)"));
  EXPECT_EQ(bad.where().byte_offset, 6);

  // A vocabulary without the byte token "Ġ" (0x20).
  testing::TempDir partial;
  nlohmann::json vocab = nlohmann::json::object();
  vocab["a"] = 0;
  vocab["b"] = 1;
  WriteFileAtomic(partial / "vocab.json", vocab.dump());
  WriteFileAtomic(partial / "merges.txt", "#version: 0.2\n");
  const auto tokenizer = Open(partial.path());
  EXPECT_EQ(tokenizer->Encode("ab"), (std::vector<uint32_t>{0, 1}));
  const auto missing = ErrorOf([&] { tokenizer->Encode("a b"); });
  EXPECT_EQ(missing.kind(), ErrorKind::kData);
  EXPECT_THAT(missing.Message(), HasSubstr("no token for byte 0x20 (\"\u0120\")"));
}

TEST(Gpt2Bpe, ConcurrentEncodesAgree) {
  testing::TempDir dir;
  const std::string sp = Gpt2ByteToken(' ');
  Gpt2Files{.merges = {{sp, "t"}, {sp + "t", "o"}, {"o", "n"}, {"t", "o"}}}.Write(dir.path());
  const auto tokenizer = Open(dir.path());
  std::string text;
  for (int i = 0; i < 3000; ++i) text += " to ton onto word" + std::to_string(i % 97);
  const std::vector<uint32_t> expected = tokenizer->Encode(text);
  std::vector<std::vector<uint32_t>> got(4);
  std::vector<std::thread> threads;
  for (auto& out : got) {
    threads.emplace_back([&] { out = tokenizer->Encode(text); });
  }
  for (auto& t : threads) t.join();
  for (const auto& out : got) EXPECT_EQ(out, expected);
  EXPECT_EQ(tokenizer->Decode(expected), text);
}

TEST(Gpt2BpeFiles, MissingFilesAreIoErrorsNamingThePath) {
  testing::TempDir dir;
  const auto no_dir = ErrorOf([&] { Open(dir / "nope"); });
  EXPECT_EQ(no_dir.kind(), ErrorKind::kIo);
  EXPECT_THAT(no_dir.Message(), HasSubstr((dir / "nope").string()));
  Gpt2Files{}.Write(dir.path());
  fs::remove(dir / "merges.txt");
  const auto no_merges = ErrorOf([&] { Open(dir.path()); });
  EXPECT_EQ(no_merges.kind(), ErrorKind::kIo);
  EXPECT_THAT(no_merges.Message(), HasSubstr((dir / "merges.txt").string()));
  EXPECT_EQ(ErrorOf([] { OpenTokenizer("gpt2:"); }).kind(), ErrorKind::kConfig);
  EXPECT_THAT(ErrorOf([] { OpenTokenizer("gpt:/some/dir"); }).Message(),
              HasSubstr("did you mean \"gpt2:DIR\"?"));
  EXPECT_THAT(ErrorOf([] { OpenTokenizer("sentencepeice:m.model"); }).Message(),
              HasSubstr("did you mean \"sentencepiece:MODEL\"?"));
}

TEST(Gpt2BpeFiles, BadMergesNameFileLineAndText) {
  testing::TempDir dir;
  Gpt2Files{.merges = {{"a", "b"}}}.Write(dir.path());
  WriteFileAtomic(dir / "merges.txt", "#version: 0.2\na b\nab c d\n");
  auto error = ErrorOf([&] { Open(dir.path()); });
  EXPECT_EQ(error.kind(), ErrorKind::kData);
  EXPECT_THAT(error.Message(), HasSubstr("merges.txt:3: merge \"ab c d\" is not two tokens"));

  WriteFileAtomic(dir / "merges.txt", "a b\n\na b\n");  // an empty line
  EXPECT_THAT(ErrorOf([&] { Open(dir.path()); }).Message(), HasSubstr("merges.txt:2: merge \"\""));

  // "ab" is a token but "abc" (the result) is not.
  WriteFileAtomic(dir / "merges.txt", "#version: 0.2\na b\nab c\n");
  error = ErrorOf([&] { Open(dir.path()); });
  EXPECT_EQ(error.kind(), ErrorKind::kData);
  EXPECT_THAT(error.Message(), HasSubstr("merges.txt:3: merge \"ab c\": token \"abc\" is not in"));
  WriteFileAtomic(dir / "merges.txt", "a \u4E2D\n");
  EXPECT_THAT(ErrorOf([&] { Open(dir.path()); }).Message(),
              HasSubstr("merges.txt:1: merge \"a \u4E2D\": token \"\u4E2D\" is not in"));
}

TEST(Gpt2BpeFiles, BadVocabularies) {
  testing::TempDir dir;
  Gpt2Files{}.Write(dir.path());
  WriteFileAtomic(dir / "merges.txt", "");
  const auto message = [&](const std::string& vocab) {
    WriteFileAtomic(dir / "vocab.json", vocab);
    const Error e = ErrorOf([&] { Open(dir.path()); });
    EXPECT_EQ(e.kind(), ErrorKind::kData) << vocab;
    return e.Message();
  };
  EXPECT_THAT(message("[1, 2]"), HasSubstr("expected a JSON object of token -> id, got array"));
  EXPECT_THAT(message("{\"a\": 0,\n \"b\": }"), HasSubstr("vocab.json:2:"));
  EXPECT_THAT(message(R"({"a": 0, "b": -1})"), HasSubstr("token \"b\" has id -1"));
  EXPECT_THAT(message(R"({"a": 0, "b": "1"})"), HasSubstr("token \"b\" has id \"1\""));
  EXPECT_THAT(message(R"({"a": 0, "b": 2})"), HasSubstr("ids must be the integers 0..1"));
  EXPECT_THAT(message(R"({"a": 1, "b": 1})"),
              HasSubstr("tokens \"a\" and \"b\" have the same id 1"));
}

TEST(Gpt2BpeImport, LongDocumentsTokenizeAsAWhole) {
  // 3 MiB of lines with trailing spaces and blank lines: the importer's
  // ~1 MiB pieces must end where the whole text has a piece boundary.
  testing::TempDir dir;
  const std::string sp = Gpt2ByteToken(' '), nl = Gpt2ByteToken('\n');
  fs::create_directories(dir / "tok");
  Gpt2Files{.merges = {{sp, sp}, {nl, nl}, {sp, nl}, {sp + sp, nl}}}.Write(dir / "tok");
  std::string text;
  for (int i = 0; text.size() < (size_t{3} << 20); ++i) {
    text += "word" + std::to_string(i) + (i % 3 == 0 ? "  \n\n" : i % 3 == 1 ? " \n  " : "\n");
  }
  WriteFileAtomic(dir / "doc.txt", text);
  ImportOptions options;
  options.format = "text";
  options.tokenizer = "gpt2:" + (dir / "tok").string();
  const auto importer = OpenImporter({dir / "doc.txt"}, options);
  std::vector<uint32_t> imported;
  Table chunk;
  while (importer->Next(&chunk)) {
    for (size_t r = 0; r < chunk.rows(); ++r) {
      const auto row = chunk.columns.front().TokensAt(r);
      imported.insert(imported.end(), row.begin(), row.end());
    }
  }
  const auto tokenizer = OpenTokenizer(options.tokenizer);
  std::vector<uint32_t> expected = tokenizer->Encode(text);
  expected.push_back(*tokenizer->end_of_text());
  ASSERT_EQ(imported.size(), expected.size());
  EXPECT_TRUE(imported == expected);
  EXPECT_EQ(importer->tokenizer(), tokenizer->name());
}

}  // namespace
}  // namespace topspin
