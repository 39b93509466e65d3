#include "topspin/data/tokenizer.h"

#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/rng.h"

namespace topspin {
namespace {

using ::testing::HasSubstr;

std::string Roundtrip(const Tokenizer& tokenizer, const std::string& text) {
  return tokenizer.Decode(tokenizer.Encode(text));
}

// Lines of pseudo-words made of syllables (some non-ASCII): enough
// distinct substrings for a ~200-piece SentencePiece model.
std::string MakeTrainingText(int lines, uint64_t seed) {
  static const char* kSyllables[] = {"ka", "to", "ri", "ne", "su",  "lo",  "ma", "pe",
                                     "di", "ga", "fu", "be", "zo",  "shi", "ün", "çé",
                                     "ña", "or", "an", "el", "ist", "ung", "er", "qu"};
  PhiloxStream rng(seed);
  std::string text;
  for (int line = 0; line < lines; ++line) {
    const int words = 3 + static_cast<int>(rng.NextBelow(10));
    for (int w = 0; w < words; ++w) {
      if (w > 0) text += ' ';
      const int syllables = 1 + static_cast<int>(rng.NextBelow(3));
      for (int k = 0; k < syllables; ++k) text += kSyllables[rng.NextBelow(std::size(kSyllables))];
    }
    text += rng.NextBelow(4) == 0 ? ".\n" : "\n";
  }
  return text;
}

TEST(BytesTokenizer, RoundTripsAnyBytes) {
  const auto tokenizer = OpenTokenizer("bytes");
  EXPECT_EQ(tokenizer->name(), "bytes");
  EXPECT_EQ(tokenizer->vocab_size(), 257u);
  EXPECT_EQ(tokenizer->end_of_text(), 256u);
  const std::string utf8 = "Grüße, 世界! \xF0\x9F\x98\x80\n\ttab";
  EXPECT_EQ(Roundtrip(*tokenizer, utf8), utf8);
  const std::vector<uint32_t> tokens = tokenizer->Encode("é");
  EXPECT_EQ(tokens, (std::vector<uint32_t>{0xC3, 0xA9}));
  const std::string binary("\x00\xFF\x80 bytes", 9);
  EXPECT_EQ(Roundtrip(*tokenizer, binary), binary);
}

TEST(BytesTokenizer, DecodeDropsEndOfTextAndRejectsForeignIds) {
  const auto tokenizer = OpenTokenizer("bytes");
  const std::vector<uint32_t> with_eot = {'h', 'i', 256, '!'};
  EXPECT_EQ(tokenizer->Decode(with_eot), "hi!");
  const std::vector<uint32_t> foreign = {'a', 300};
  try {
    tokenizer->Decode(foreign);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData);
    EXPECT_THAT(e.Message(), HasSubstr("token 300"));
  }
}

TEST(OpenTokenizer, UnknownSpecSuggestsAName) {
  try {
    OpenTokenizer("byte");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_THAT(e.Message(), HasSubstr("did you mean \"bytes\""));
  }
}

TEST(OpenTokenizer, MissingModelNamesThePath) {
  testing::TempDir dir;
  const std::string model = (dir / "nope.model").string();
  try {
    OpenTokenizer("sentencepiece:" + model);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_THAT(e.Message(), HasSubstr(model));
  }
  WriteFileAtomic(dir / "junk.model", "not a model");
  try {
    OpenTokenizer("sentencepiece:" + (dir / "junk.model").string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_THAT(e.Message(), HasSubstr("junk.model"));
  }
}

TEST(SentencePiece, TrainsATinyModelThatRoundTrips) {
  testing::TempDir dir;
  WriteFileAtomic(dir / "train.txt", MakeTrainingText(3000, 1));
  SentencePieceTrainOptions options;
  options.character_coverage = 1.0;  // keep every character of the tiny corpus
  options.threads = 2;
  TrainSentencePiece({dir / "train.txt"}, dir / "tok" / "m", 200, options);
  ASSERT_TRUE(std::filesystem::exists(dir / "tok" / "m.model"));
  EXPECT_THAT(ReadFile(dir / "tok" / "m.vocab"), HasSubstr("</s>\t0\n"));

  const auto tokenizer = OpenTokenizer("sentencepiece:" + (dir / "tok" / "m.model").string());
  EXPECT_EQ(tokenizer->vocab_size(), 200u);
  EXPECT_EQ(tokenizer->end_of_text(), 2u);
  EXPECT_EQ(tokenizer->Encode("\n"), (std::vector<uint32_t>{3}));
  // Unseen sentences of the same language, with line breaks, extra spaces
  // and non-ASCII words, come back byte for byte.
  const std::string text = "  " + MakeTrainingText(50, 2) + "\n\nkaün  çéña.ist";
  const std::vector<uint32_t> tokens = tokenizer->Encode(text);
  EXPECT_LT(tokens.size(), text.size() / 2) << "subwords should compress the text";
  for (uint32_t t : tokens) ASSERT_LT(t, 200u);
  EXPECT_EQ(tokenizer->Decode(tokens), text);
  std::vector<uint32_t> with_eot = tokens;
  with_eot.push_back(*tokenizer->end_of_text());
  EXPECT_EQ(tokenizer->Decode(with_eot), text);
}

TEST(SentencePiece, InvalidUtf8InputNamesFileAndLine) {
  testing::TempDir dir;
  WriteFileAtomic(dir / "bad.txt", "good line\nbad caf\xE9 line\n");
  try {
    TrainSentencePiece({dir / "bad.txt"}, dir / "m", 100);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData);
    EXPECT_THAT(e.Message(), HasSubstr("bad.txt:2:8"));
  }
}

TEST(SentencePiece, MissingInputIsAnIoError) {
  testing::TempDir dir;
  try {
    TrainSentencePiece({dir / "missing.txt"}, dir / "m", 100);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_THAT(e.Message(), HasSubstr("missing.txt"));
  }
}

}  // namespace
}  // namespace topspin
