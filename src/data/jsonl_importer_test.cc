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

ImportOptions Jsonl() {
  return testing::FormatOptions("jsonl");
}

using testing::kSerial;

Imported ImportText(const testing::TempDir& dir, std::string_view text,
                    const ImportOptions& options = Jsonl(), ImportTuning tuning = kSerial) {
  return testing::ImportTextAs(dir, "f.jsonl", text, options, tuning);
}

std::string ErrorText(const testing::TempDir& dir, std::string_view text,
                      const ImportOptions& options = Jsonl()) {
  return ErrorOf([&] { ImportText(dir, text, options); }).Message();
}

TEST(JsonlImporter, SchemaInFirstSeenKeyOrderWithNullsForMissingKeys) {
  testing::TempDir dir;
  const Imported got = ImportText(dir,
                                  "{\"qid\": 7, \"label\": 1.5, \"title\": \"a\"}\n"
                                  "\n"
                                  "{\"label\": 2, \"ok\": true, \"qid\": 8}\r\n"
                                  "{\"qid\": 9, \"title\": null, \"n\": null}\n");
  EXPECT_EQ(got.table.schema(), (std::vector<ColumnSpec>{{"qid", DType::kInt64},
                                                         {"label", DType::kFloat32},
                                                         {"title", DType::kString},
                                                         {"ok", DType::kBool},
                                                         {"n", DType::kFloat32}}));
  const Table& t = got.table;
  ASSERT_EQ(t.rows(), 3u);
  EXPECT_EQ(t.columns[0].Values<int64_t>()[2], 9);
  EXPECT_EQ(t.columns[1].Values<float>()[1], 2.0f);
  EXPECT_FALSE(t.columns[1].IsValid(2));  // missing
  EXPECT_FALSE(t.columns[2].IsValid(2));  // null
  EXPECT_EQ(t.columns[2].StringAt(0), "a");
  EXPECT_EQ(t.columns[3].null_count(), 2u);
  EXPECT_EQ(got.locations[1], (dir / "f.jsonl").string() + ":3");
}

TEST(JsonlImporter, MixedValuesBecomeTextAndWideFloatsFloat64) {
  testing::TempDir dir;
  const Imported got = ImportText(dir, "{\"a\": 1, \"b\": 1e300}\n{\"a\": \"x\", \"b\": 2}\n");
  EXPECT_EQ(got.table.schema(),
            (std::vector<ColumnSpec>{{"a", DType::kString}, {"b", DType::kFloat64}}));
  EXPECT_EQ(got.table.columns[0].StringAt(0), "1");  // a number in a string column: its JSON
}

TEST(JsonlImporter, NestedValuesNameTheFieldAndLine) {
  testing::TempDir dir;
  const std::string f = (dir / "f.jsonl").string();
  EXPECT_THAT(ErrorText(dir, "{\"a\": 1}\n{\"a\": 2, \"b\": {\"c\": 1}}\n"),
              HasSubstr(f + ":2: \"b\": key \"b\" holds a nested object"));
  EXPECT_THAT(ErrorText(dir, "{\"a\": [1, 2]}\n"),
              HasSubstr(f + ":1: \"a\": key \"a\" holds a nested array"));
}

TEST(JsonlImporter, MalformedLinesAreErrorsWithLineAndColumn) {
  testing::TempDir dir;
  const std::string f = (dir / "f.jsonl").string();
  const Error e = ErrorOf([&] { ImportText(dir, "{\"a\": 1}\n{\"a\": tru}\n"); });
  EXPECT_EQ(e.kind(), ErrorKind::kData);
  EXPECT_EQ(e.where().line, 2);
  ASSERT_TRUE(e.where().column.has_value());
  EXPECT_THAT(e.Message(), HasSubstr("invalid JSON"));
  EXPECT_THAT(ErrorText(dir, "{\"a\": 1}\n[1]\n"),
              HasSubstr(f + ":2: the line holds \"[1]\", not a JSON object"));
}

TEST(JsonlImporter, LaterValuesMustFitTheInferredType) {
  testing::TempDir dir;
  ImportOptions o = Jsonl();
  o.infer_rows = 1;
  EXPECT_EQ(ErrorText(dir, "{\"a\": 1}\n{\"a\": 2.5}\n", o),
            (dir / "f.jsonl").string() +
                ":2: \"a\": \"2.5\" is not an integer (int64) (the type inferred from the first 1 "
                "lines); hint: pass --columns a:float32 to read the key as float32, or --on-error "
                "skip to drop such lines");
  EXPECT_THAT(ErrorText(dir, "{\"a\": 1}\n{\"a\": 2, \"new\": 3}\n", o),
              HasSubstr(":2: \"new\": key \"new\" is not in the schema"));
  // --columns can declare a key the sample does not show.
  o.column_types = {{"new", DType::kInt32}};
  const Imported got = ImportText(dir, "{\"a\": 1}\n{\"a\": 2, \"new\": 3}\n", o);
  EXPECT_EQ(got.table.schema()[1], (ColumnSpec{"new", DType::kInt32}));
  EXPECT_FALSE(got.table.columns[1].IsValid(0));
  EXPECT_EQ(got.table.columns[1].Values<int32_t>()[1], 3);
}

TEST(JsonlImporter, SkipModeCountsReasons) {
  testing::TempDir dir;
  ImportOptions o = Jsonl();
  o.on_error = OnError::kSkip;
  o.column_types = {{"a", DType::kInt64}};
  const auto path = WriteBytes(dir / "f.jsonl",
                               "{\"a\": 1}\n{\"a\": [1]}\n{oops\n{\"a\": \"x\"}\n7\n{\"a\": 5}\n");
  auto importer = OpenJsonlImporter({path}, o, kSerial);
  const Imported got = ImportAll(*importer);
  ASSERT_EQ(got.table.rows(), 2u);
  EXPECT_EQ(got.table.columns[0].Values<int64_t>()[1], 5);
  EXPECT_EQ(got.locations[1], path.string() + ":6");
  EXPECT_EQ(importer->skipped().reasons,
            (std::map<std::string, uint64_t>{
                {"bad value", 1}, {"invalid JSON", 1}, {"nested value", 1}, {"not an object", 1}}));
}

TEST(JsonlImporter, EmptyInputIsAnError) {
  testing::TempDir dir;
  EXPECT_THAT(ErrorText(dir, ""), HasSubstr("no keys in the first"));
  EXPECT_THAT(ErrorText(dir, "\n  \n"), HasSubstr("no keys in the first"));
}

TEST(JsonlImporter, NoGoodSampledLineReportsTheFirstBadOne) {
  testing::TempDir dir;
  const std::string f = (dir / "f.jsonl").string();
  const Error e = ErrorOf([&] { ImportText(dir, "\n{\"a\":\n{\"b\"\n"); });
  EXPECT_EQ(e.kind(), ErrorKind::kData);
  EXPECT_EQ(e.where().file, f);
  EXPECT_EQ(e.where().line, 2);
  EXPECT_THAT(e.Message(), HasSubstr("invalid JSON"));
  EXPECT_THAT(ErrorText(dir, "7\n[1]\n"),
              HasSubstr(f + ":1: the line holds \"7\", not a JSON object"));
}

TEST(JsonlImporter, ParallelParseEqualsSerialParse) {
  testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 1500; ++i) {
    text += fmt::format("{{\"id\": {}, \"s\": \"line \\n {}\", \"x\": {}}}{}", i, i,
                        i % 3 ? fmt::format("{}.5", i) : "null", i % 4 ? "\n" : "\r\n");
    if (i % 100 == 0) text += "\n";
  }
  const auto path = WriteBytes(dir / "f.jsonl", text);
  ImportOptions o = Jsonl();
  o.chunk_rows = 100;
  auto serial = OpenJsonlImporter({path}, o, kSerial);
  const Imported want = ImportAll(*serial);
  ASSERT_EQ(want.table.rows(), 1500u);
  EXPECT_EQ(want.table.columns[1].StringAt(3), "line \n 3");
  testing::ExpectParallelMatchesSerial(path, o, want, *serial, {1, 50, 4096}, 3);
}

}  // namespace
}  // namespace topspin
