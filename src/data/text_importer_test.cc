#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "data/importers.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/rng.h"
#include "topspin/data/importer.h"
#include "topspin/data/tokenizer.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

ImportOptions TextOptions(std::string tokenizer = "bytes") {
  ImportOptions options;
  options.format = "text";
  options.tokenizer = std::move(tokenizer);
  return options;
}

// Every row of every chunk.
std::vector<std::vector<uint32_t>> ReadAll(Importer& importer,
                                           std::vector<std::string>* locations = nullptr) {
  std::vector<std::vector<uint32_t>> rows;
  Table chunk;
  while (importer.Next(&chunk)) {
    EXPECT_EQ(chunk.schema(), importer.schema());
    for (size_t r = 0; r < chunk.rows(); ++r) {
      rows.push_back(chunk.columns.front().TokensAt(r));
      if (locations != nullptr) locations->push_back(importer.RowLocation(r));
    }
  }
  EXPECT_EQ(chunk.rows(), 0u);
  return rows;
}

std::vector<uint32_t> Bytes(std::string_view text, bool end_of_text = true) {
  std::vector<uint32_t> tokens(text.begin(), text.end());
  for (auto& t : tokens) t &= 0xFF;
  if (end_of_text) tokens.push_back(kBytesEndOfText);
  return tokens;
}

TEST(TextImporter, EachFileIsARowEndingInEndOfText) {
  testing::TempDir dir;
  WriteFileAtomic(dir / "a.txt", "hello\nworld\n");
  WriteFileAtomic(dir / "b.txt", "\xEF\xBB\xBFgrüße");  // BOM dropped
  WriteFileAtomic(dir / "empty.txt", "");
  const auto importer =
      OpenImporter({dir / "a.txt", dir / "empty.txt", dir / "b.txt"}, TextOptions());
  ASSERT_EQ(importer->schema(), (std::vector<ColumnSpec>{{"tokens", DType::kTokensU16}}));
  EXPECT_EQ(importer->bytes_total(), 12u + 3u + 7u);
  std::vector<std::string> locations;
  const auto rows = ReadAll(*importer, &locations);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], Bytes("hello\nworld\n"));
  EXPECT_EQ(rows[1], Bytes("grüße"));
  EXPECT_EQ(locations[1], (dir / "b.txt").string());
  EXPECT_EQ(importer->bytes_read(), importer->bytes_total());
}

TEST(TextImporter, InvalidUtf8NamesFileLineAndColumn) {
  testing::TempDir dir;
  WriteFileAtomic(dir / "good.txt", "fine\n");
  WriteFileAtomic(dir / "bad.txt", "line one\ncaf\xE9 au lait\n");
  try {
    ReadAll(*OpenImporter({dir / "good.txt", dir / "bad.txt"}, TextOptions()));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData);
    EXPECT_THAT(e.Message(), HasSubstr("bad.txt:2:4"));
    EXPECT_THAT(e.Message(), HasSubstr("0xe9"));
    EXPECT_EQ(e.where().byte_offset, 12);
  }
  ImportOptions skip = TextOptions();
  skip.on_error = OnError::kSkip;
  const auto importer = OpenImporter({dir / "bad.txt", dir / "good.txt"}, skip);
  const auto rows = ReadAll(*importer);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], Bytes("fine\n"));
  EXPECT_EQ(importer->skipped().rows, 1u);
  EXPECT_EQ(importer->skipped().reasons.at("invalid UTF-8"), 1u);
  ASSERT_EQ(importer->skipped().examples.size(), 1u);
  EXPECT_THAT(importer->skipped().examples[0], HasSubstr("bad.txt:2:4"));
}

TEST(TextImporter, LongDocumentsSplitIntoRowsOfAtMostOneMebiToken) {
  testing::TempDir dir;
  // 1.5 MiB of short lines, then a 1.2 MiB line of 3-byte characters (no
  // line break to cut at), then a tail.
  std::string text;
  while (text.size() < (size_t{3} << 19)) text += "a line of text\n";
  for (size_t i = 0; i < 400'000; ++i) text += "\xE2\x82\xAC";  // euro sign
  text += "\ntail\n";
  WriteFileAtomic(dir / "long.txt", text);
  ImportOptions options = TextOptions();
  options.chunk_rows = 1;
  const auto importer = OpenImporter({dir / "long.txt"}, options);
  std::vector<std::string> locations;
  const auto rows = ReadAll(*importer, &locations);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].size(), size_t{1} << 20);
  EXPECT_EQ(rows[1].size(), size_t{1} << 20);
  std::vector<uint32_t> all;
  for (const auto& row : rows) all.insert(all.end(), row.begin(), row.end());
  EXPECT_EQ(all, Bytes(text));
  EXPECT_THAT(locations[2], HasSubstr("long.txt (document part 3)"));
}

TEST(TextImporter, SentencePieceTokensDecodeToTheDocument) {
  testing::TempDir dir;
  // Pseudo-words over a few letters: enough distinct pieces for 120 ids.
  PhiloxStream rng(3);
  std::string text;
  for (int line = 0; line < 600; ++line) {
    for (int word = 0; word < 8; ++word) {
      for (uint64_t n = 2 + rng.NextBelow(6); n > 0; --n) text += "etaoinshrdlu"[rng.NextBelow(12)];
      text += word < 7 ? " " : ".\n";
    }
  }
  WriteFileAtomic(dir / "doc.txt", text);
  SentencePieceTrainOptions train;
  train.character_coverage = 1.0;
  TrainSentencePiece({dir / "doc.txt"}, dir / "sp", 120, train);
  const std::string spec = "sentencepiece:" + (dir / "sp.model").string();
  const auto importer = OpenImporter({dir / "doc.txt"}, TextOptions(spec));
  EXPECT_EQ(importer->schema().front().dtype, DType::kTokensU16);
  // The manifest names the model by its absolute path.
  EXPECT_EQ(importer->tokenizer(),
            "sentencepiece:" + fs::absolute(dir / "sp.model").lexically_normal().string());
  EXPECT_EQ(OpenImporter({dir / "doc.txt"}, TextOptions())->tokenizer(), "bytes");
  const auto rows = ReadAll(*importer);
  ASSERT_EQ(rows.size(), 1u);
  const auto tokenizer = OpenTokenizer(spec);
  EXPECT_EQ(rows[0].back(), *tokenizer->end_of_text());
  EXPECT_LT(rows[0].size(), text.size()) << "subword pieces: fewer tokens than bytes";
  EXPECT_EQ(tokenizer->Decode(rows[0]), text);
}

TEST(TextImporter, OptionsThatDoNotFitAreConfigErrors) {
  testing::TempDir dir;
  WriteFileAtomic(dir / "a.txt", "x");
  ImportOptions wide = TextOptions();
  wide.column_types["tokens"] = DType::kTokensU32;
  const auto importer = OpenTextImporter({dir / "a.txt"}, wide);
  EXPECT_EQ(importer->schema().front().dtype, DType::kTokensU32);
  EXPECT_EQ(ReadAll(*importer), (std::vector<std::vector<uint32_t>>{Bytes("x")}));

  ImportOptions other_column = TextOptions();
  other_column.column_types["text"] = DType::kString;
  ImportOptions label = TextOptions();
  label.label_column = "y";
  for (const auto& options : {other_column, label}) {
    try {
      OpenTextImporter({dir / "a.txt"}, options);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig) << e.Message();
    }
  }
  try {
    OpenTextImporter({dir / "missing.txt"}, TextOptions());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_THAT(e.Message(), HasSubstr("missing.txt"));
  }
}

}  // namespace
}  // namespace topspin
