#include <cmath>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "data/import_test_util.h"
#include "data/importers.h"

namespace topspin {
namespace {

using testing::ErrorOf;
using ::testing::HasSubstr;
using testing::ImportAll;
using testing::Imported;
using testing::WriteBytes;

ImportOptions Letor() {
  return testing::FormatOptions("letor");
}

using testing::kSerial;

Imported ImportText(const testing::TempDir& dir, std::string_view text,
                    const ImportOptions& options = Letor(), ImportTuning tuning = kSerial) {
  return testing::ImportTextAs(dir, "f.txt", text, options, tuning);
}

std::string ErrorText(const testing::TempDir& dir, std::string_view text) {
  return ErrorOf([&] { ImportText(dir, text); }).Message();
}

TEST(LetorImporter, SparseIndicesBecomeDenseColumnsWithNulls) {
  testing::TempDir dir;
  const Imported got = ImportText(dir,
                                  "# a comment line\n"
                                  "2 qid:10 1:0.5 3:1.25 # docid = 7\n"
                                  "\n"
                                  "0\tqid:10\t2:-1e-3\r\n"
                                  "1 qid:11 4:7\n");
  const Table& t = got.table;
  EXPECT_EQ(t.schema(), (std::vector<ColumnSpec>{{"label", DType::kFloat32},
                                                 {"qid", DType::kInt64},
                                                 {"f1", DType::kFloat32},
                                                 {"f2", DType::kFloat32},
                                                 {"f3", DType::kFloat32},
                                                 {"f4", DType::kFloat32}}));
  ASSERT_EQ(t.rows(), 3u);
  EXPECT_EQ(t.columns[0].Values<float>()[0], 2.0f);
  EXPECT_EQ(t.columns[1].Values<int64_t>()[2], 11);
  EXPECT_EQ(t.columns[2].Values<float>()[0], 0.5f);
  EXPECT_FALSE(t.columns[2].IsValid(1));
  EXPECT_EQ(t.columns[3].Values<float>()[1], -1e-3f);
  EXPECT_EQ(t.columns[4].Values<float>()[0], 1.25f);
  EXPECT_EQ(t.columns[5].null_count(), 2u);
  const std::string f = (dir / "f.txt").string();
  EXPECT_EQ(got.locations, (std::vector<std::string>{f + ":2", f + ":4", f + ":5"}));
}

TEST(LetorImporter, AMissingQidIsNull) {
  testing::TempDir dir;
  const Imported got = ImportText(dir, "1 1:2\n");
  EXPECT_FALSE(got.table.columns[1].IsValid(0));
  EXPECT_EQ(got.table.columns[2].Values<float>()[0], 2.0f);
}

TEST(LetorImporter, MalformedTokensNameLineColumnAndToken) {
  testing::TempDir dir;
  const std::string f = (dir / "f.txt").string();
  EXPECT_THAT(ErrorText(dir, "1 qid:1 1:0.5\n1 qid:1 2:abc\n"),
              HasSubstr(f + ":2:9: \"2:abc\": the feature value is not a number"));
  EXPECT_THAT(ErrorText(dir, "x qid:1 1:1\n"), HasSubstr(f + ":1:1: \"x\": the label is not"));
  EXPECT_THAT(ErrorText(dir, "1 qid:q 1:1\n"), HasSubstr(":1:3: \"qid:q\": the qid is not"));
  EXPECT_THAT(ErrorText(dir, "1 qid:1 junk\n"), HasSubstr(":1:9: \"junk\": expected INDEX:VALUE"));
  EXPECT_THAT(ErrorText(dir, "1 qid:1 0:1\n"), HasSubstr("feature indices start at 1"));
  EXPECT_THAT(ErrorText(dir, "1 qid:1 1:1 1:2\n"),
              HasSubstr(":1:13: \"1:2\": the feature appears"));
  EXPECT_THAT(ErrorText(dir, "1 qid:1 qid:2\n"), HasSubstr("a second qid"));
  const Error e = ErrorOf([&] { ImportText(dir, "1 qid:1 5000000:1\n"); });
  EXPECT_THAT(e.Message(), HasSubstr(f + ":1:9: feature index 5000000 is above the limit"));
}

TEST(LetorImporter, SkipModeDropsMalformedLines) {
  testing::TempDir dir;
  ImportOptions o = Letor();
  o.on_error = OnError::kSkip;
  const auto path = WriteBytes(dir / "f.txt", "1 qid:1 1:1\nbad qid:1\n0 qid:2 2:x\n3 qid:2 2:2\n");
  auto importer = OpenLetorImporter({path}, o, kSerial);
  const Imported got = ImportAll(*importer);
  EXPECT_EQ(got.table.rows(), 2u);
  EXPECT_EQ(importer->skipped().reasons.at("malformed token"), 2u);
  EXPECT_EQ(got.locations[1], path.string() + ":4");
}

TEST(LetorImporter, ColumnTypesAreRejected) {
  testing::TempDir dir;
  ImportOptions o = Letor();
  o.column_types = {{"label", DType::kInt64}};
  EXPECT_EQ(ErrorOf([&] { ImportText(dir, "1 qid:1 1:1\n", o); }).kind(), ErrorKind::kConfig);
}

TEST(LetorImporter, ParallelParseEqualsSerialParse) {
  testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 3000; ++i) {
    text += fmt::format("{} qid:{}", i % 5, i / 10);
    for (int f = 1; f <= 12; ++f) {
      if ((i + f) % 4 != 0) text += fmt::format(" {}:{}.5", f, i * f % 97);
    }
    text += i % 9 == 0 ? " # comment\r\n" : "\n";
  }
  const auto path = WriteBytes(dir / "f.txt", text);
  ImportOptions o = Letor();
  o.chunk_rows = 500;
  auto serial = OpenLetorImporter({path}, o, kSerial);
  const Imported want = ImportAll(*serial);
  ASSERT_EQ(want.table.rows(), 3000u);
  ASSERT_EQ(want.table.columns.size(), 14u);
  testing::ExpectParallelMatchesSerial(path, o, want, *serial, {3, 333, 10000}, 4);
}

}  // namespace
}  // namespace topspin
