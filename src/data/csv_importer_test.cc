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

ImportOptions Csv() {
  return testing::FormatOptions("csv");
}

using testing::kSerial;

Imported ImportText(const testing::TempDir& dir, std::string_view text,
                    const ImportOptions& options = Csv(), ImportTuning tuning = kSerial) {
  return testing::ImportTextAs(dir, "f.csv", text, options, tuning);
}

std::string ErrorText(const testing::TempDir& dir, std::string_view text,
                      const ImportOptions& options = Csv()) {
  return ErrorOf([&] { ImportText(dir, text, options); }).Message();
}

TEST(CsvImporter, InfersTypesFromTheValues) {
  testing::TempDir dir;
  const Imported got = ImportText(dir,
                                  "id,price,ok,name,empty\n"
                                  "1,2.5,true,apple,\n"
                                  "2,3,false,\"banana, ripe\",\n"
                                  "-3,1e3,True,cherry,\n");
  const std::vector<ColumnSpec> expected = {{"id", DType::kInt64},
                                            {"price", DType::kFloat32},
                                            {"ok", DType::kBool},
                                            {"name", DType::kString},
                                            {"empty", DType::kFloat32}};
  EXPECT_EQ(got.table.schema(), expected);
  ASSERT_EQ(got.table.rows(), 3u);
  const Table& t = got.table;
  EXPECT_EQ(t.columns[0].Values<int64_t>()[2], -3);
  EXPECT_EQ(t.columns[1].Values<float>()[2], 1000.0f);
  EXPECT_EQ(t.columns[2].Values<uint8_t>()[1], 0);
  EXPECT_EQ(t.columns[3].StringAt(1), "banana, ripe");
  EXPECT_EQ(t.columns[4].null_count(), 3u);
  EXPECT_TRUE(std::isnan(t.columns[4].Values<float>()[0]));  // nulls hold NaN
}

TEST(CsvImporter, QuotedFieldsKeepCommasQuotesAndNewlines) {
  testing::TempDir dir;
  const Imported got = ImportText(dir,
                                  "a,b\n"
                                  "\"say \"\"hi\"\"\",\"x,y\"\n"
                                  "\"line1\nline2\",z\n"
                                  "plain,\"\"\n");
  const Table& t = got.table;
  ASSERT_EQ(t.rows(), 3u);
  EXPECT_EQ(t.columns[0].StringAt(0), "say \"hi\"");
  EXPECT_EQ(t.columns[1].StringAt(0), "x,y");
  EXPECT_EQ(t.columns[0].StringAt(1), "line1\nline2");
  EXPECT_EQ(t.columns[0].StringAt(2), "plain");
  EXPECT_FALSE(t.columns[1].IsValid(2));  // an empty field is null, quoted or not
  // Rows are located by the line they start on, past the embedded newline.
  EXPECT_EQ(got.locations, (std::vector<std::string>{(dir / "f.csv").string() + ":2",
                                                     (dir / "f.csv").string() + ":3",
                                                     (dir / "f.csv").string() + ":5"}));
}

TEST(CsvImporter, CrlfAndBomGiveTheSameTableAsLf) {
  testing::TempDir dir;
  const Imported lf = ImportText(dir, "a,b,c\n1,x,2.5\n2,\"q\"\"\",\n");
  const Imported crlf = ImportText(dir,
                                   "\xEF\xBB\xBF"
                                   "a,b,c\r\n1,x,2.5\r\n2,\"q\"\"\",\r\n");
  EXPECT_EQ(crlf.table.schema()[0].name, "a");  // the BOM is not part of the name
  testing::ExpectSameTable(lf.table, crlf.table);
  EXPECT_EQ(crlf.table.columns[1].StringAt(1), "q\"");
}

TEST(CsvImporter, CrlfInsideAQuotedFieldIsKept) {
  testing::TempDir dir;
  const Imported got = ImportText(dir, "a\r\n\"x\r\ny\"\r\n");
  ASSERT_EQ(got.table.rows(), 1u);
  EXPECT_EQ(got.table.columns[0].StringAt(0), "x\r\ny");
}

TEST(CsvImporter, BlankLinesAreSkippedAndLinesStayExact) {
  testing::TempDir dir;
  const Imported got = ImportText(dir, "a\n1\n\n2\r\n\r\n3\n");
  ASSERT_EQ(got.table.rows(), 3u);
  const std::string f = (dir / "f.csv").string();
  EXPECT_EQ(got.locations, (std::vector<std::string>{f + ":2", f + ":4", f + ":6"}));
}

TEST(CsvImporter, RaggedRowsNameLineColumnAndCounts) {
  testing::TempDir dir;
  const std::string f = (dir / "f.csv").string();
  EXPECT_THAT(ErrorText(dir, "a,b\n1,2\n3,4,5\n"),
              HasSubstr(f + ":3:5: expected 2 fields (as in the header), got 3"));
  EXPECT_THAT(ErrorText(dir, "a,b,c\n1,2,3\n1,2\n"),
              HasSubstr(f + ":3:4: expected 3 fields (as in the header), got 2"));
  const Error e = ErrorOf([&] { ImportText(dir, "a,b\n1\n"); });
  EXPECT_EQ(e.kind(), ErrorKind::kData);
  EXPECT_EQ(e.where().line, 2);
  EXPECT_THAT(e.hint(), HasSubstr("--on-error skip"));
}

TEST(CsvImporter, HugeFieldsAreFine) {
  testing::TempDir dir;
  std::string big(1 << 20, 'x');
  for (size_t i = 1000; i < big.size(); i += 50000) big[i] = i % 100000 == 0 ? '\n' : ',';
  const std::string plain(1 << 20, 'y');
  const std::string text = "id,text\n1,\"" + big + "\"\n2," + plain + "\n3,short\n";
  for (const size_t range : {size_t{4096}, size_t{1} << 30}) {
    const Imported got = ImportText(dir, text, Csv(), {.threads = 3, .range_bytes = range});
    ASSERT_EQ(got.table.rows(), 3u);
    EXPECT_EQ(got.table.columns[1].StringAt(0), big);
    EXPECT_EQ(got.table.columns[1].StringAt(1), plain);
    EXPECT_EQ(got.table.columns[1].StringAt(2), "short");
    EXPECT_EQ(got.locations[2], (dir / "f.csv").string() + ":" +
                                    std::to_string(4 + std::count(big.begin(), big.end(), '\n')));
  }
}

TEST(CsvImporter, NonUtf8InAStringColumnIsAnErrorOrSkipped) {
  testing::TempDir dir;
  const std::string text = "a,name\n1,ok\n2,caf\xE9\n3,fine\n";
  const Error e = ErrorOf([&] { ImportText(dir, text); });
  EXPECT_THAT(e.Message(),
              HasSubstr((dir / "f.csv").string() + ":3:6: \"name\": invalid UTF-8 (byte 0xe9)"));
  ImportOptions skip = Csv();
  skip.on_error = OnError::kSkip;
  const auto path = WriteBytes(dir / "g.csv", text);
  auto importer = OpenCsvImporter({path}, skip, kSerial);
  const Imported got = ImportAll(*importer);
  EXPECT_EQ(got.table.rows(), 2u);
  EXPECT_EQ(importer->skipped().rows, 1u);
  EXPECT_EQ(importer->skipped().reasons.at("invalid UTF-8"), 1u);
  ASSERT_EQ(importer->skipped().examples.size(), 1u);
  EXPECT_THAT(importer->skipped().examples[0], HasSubstr("g.csv:3:6"));
}

TEST(CsvImporter, EmptyFileAndHeaderOnlyAreErrorsUnlessEveryTypeIsGiven) {
  testing::TempDir dir;
  const Error e = ErrorOf([&] { ImportText(dir, ""); });
  EXPECT_EQ(e.kind(), ErrorKind::kData);
  EXPECT_THAT(e.Message(), HasSubstr((dir / "f.csv").string() + ":1: the file is empty"));
  EXPECT_EQ(ErrorOf([&] { ImportText(dir, "\xEF\xBB\xBF"); }).kind(), ErrorKind::kData);
  // Types inferred from no value would make misleading errors later.
  EXPECT_THAT(ErrorText(dir, "a,b\r\n"),
              HasSubstr(":2: the file has a header but no data rows: nothing to import"));

  ImportOptions typed = Csv();
  typed.column_types = {{"a", DType::kInt64}, {"b", DType::kFloat32}};
  const Imported got = ImportText(dir, "a,b\r\n", typed);
  EXPECT_EQ(got.table.rows(), 0u);
  EXPECT_EQ(got.chunks.size(), 0u);
  EXPECT_EQ(got.table.schema(),
            (std::vector<ColumnSpec>{{"a", DType::kInt64}, {"b", DType::kFloat32}}));
}

TEST(CsvImporter, InferenceReportsTheRealErrorOfBadFirstRows) {
  testing::TempDir dir;
  // A quote left open runs to the end of the file: that, not a type.
  EXPECT_THAT(ErrorText(dir, "qid,label,f1\n1,1,\"abc\n1,0,2\n"),
              HasSubstr(":2:5: a quoted field is never closed"));
  // Every sampled row is bad: the first one's error.
  const Error e = ErrorOf([&] { ImportText(dir, "a,b\n1,2,3\n4,5,6\n"); });
  EXPECT_EQ(e.kind(), ErrorKind::kData);
  EXPECT_EQ(e.where().line, 2);
  EXPECT_THAT(e.Message(), HasSubstr("expected 2 fields (as in the header), got 3"));
}

TEST(CsvImporter, HeaderProblems) {
  testing::TempDir dir;
  EXPECT_THAT(ErrorText(dir, "a,b,a\n1,2,3\n"), HasSubstr(":1:5: column \"a\" appears twice"));
  const Imported got = ImportText(dir, ",b\n1,2\n");
  EXPECT_EQ(got.table.schema()[0].name, "column_1");
}

TEST(CsvImporter, InferenceSamplesAcrossRanges) {
  testing::TempDir dir;
  ImportOptions o = Csv();
  o.infer_rows = 4;
  // The fourth row, in a later range, makes the column text; the fifth is
  // past the sample.
  const std::string text = "a,b\n1,1\n2,2\n3,3\nx,4\n5,y\n";
  for (const size_t range : {size_t{1}, size_t{4}, size_t{1} << 30}) {
    const auto path = WriteBytes(dir / "f.csv", text);
    auto importer = OpenCsvImporter({path}, o, {.threads = 2, .range_bytes = range});
    EXPECT_EQ(importer->schema(),
              (std::vector<ColumnSpec>{{"a", DType::kString}, {"b", DType::kInt64}}))
        << range;
  }
}

TEST(CsvImporter, ColumnTypesOverrideInference) {
  testing::TempDir dir;
  ImportOptions o = Csv();
  o.column_types = {{"id", DType::kString}, {"price", DType::kFloat64}, {"n", DType::kUInt8}};
  const Imported got = ImportText(dir, "id,price,n\n007,2.5,255\n8, 1 ,0\n", o);
  EXPECT_EQ(got.table.schema(),
            (std::vector<ColumnSpec>{
                {"id", DType::kString}, {"price", DType::kFloat64}, {"n", DType::kUInt8}}));
  EXPECT_EQ(got.table.columns[0].StringAt(0), "007");
  EXPECT_EQ(got.table.columns[1].Values<double>()[1], 1.0);  // blanks around numbers are fine
  EXPECT_EQ(got.table.columns[2].Values<uint8_t>()[0], 255);

  o.column_types = {{"prise", DType::kFloat64}};
  const Error e = ErrorOf([&] { ImportText(dir, "id,price\n1,2\n", o); });
  EXPECT_EQ(e.kind(), ErrorKind::kConfig);
  EXPECT_THAT(e.hint(), HasSubstr("did you mean \"price\"?"));
  EXPECT_THAT(e.hint(), HasSubstr("id, price"));
}

TEST(CsvImporter, ALaterValueOfTheWrongTypeNamesFileLineColumnAndHint) {
  testing::TempDir dir;
  ImportOptions o = Csv();
  o.infer_rows = 2;
  const std::string text = "a,b\n1,x\n2,y\n3.5,z\nfoo,w\n";
  const std::string f = (dir / "f.csv").string();
  const Error e = ErrorOf([&] { ImportText(dir, text, o); });
  EXPECT_EQ(e.Message(),
            f + ":4:1: \"a\": \"3.5\" is not an integer (int64) (the type inferred from the first "
                "2 rows); hint: pass --columns a:float32 to read the column as float32, or "
                "--on-error skip to drop such rows");

  o.on_error = OnError::kSkip;
  const auto path = WriteBytes(dir / "f.csv", text);
  auto importer = OpenCsvImporter({path}, o, kSerial);
  EXPECT_EQ(ImportAll(*importer).table.rows(), 2u);
  EXPECT_EQ(importer->skipped().reasons.at("bad value"), 2u);
  EXPECT_THAT(importer->skipped().examples[1], HasSubstr("--columns a:string"));
}

TEST(CsvImporter, ValueErrorsCountLinesInsideQuotedFields) {
  testing::TempDir dir;
  ImportOptions o = Csv();
  o.column_types = {{"b", DType::kInt64}};
  EXPECT_THAT(ErrorText(dir, "a,b\n\"x\ny\",1\n2,bad\n", o),
              HasSubstr(":4:3: \"b\": \"bad\" is not an integer (int64) (as given by --columns)"));
  o.column_types = {{"b", DType::kFloat32}};
  EXPECT_THAT(ErrorText(dir, "a,b\n1,1e50\n", o), HasSubstr("--columns b:float64"));
  o.column_types = {{"b", DType::kInt32}};
  EXPECT_THAT(ErrorText(dir, "a,b\n1,3000000000\n", o),
              HasSubstr("\"3000000000\" is out of range for int32 (as given by --columns); hint: "
                        "pass --columns b:int64"));
  // An id too long for int64 belongs in a string column.
  o.column_types = {{"b", DType::kInt64}};
  EXPECT_THAT(ErrorText(dir, "a,b\n1,99999999999999999999999\n", o),
              HasSubstr("is out of range for int64 (as given by --columns); hint: pass --columns "
                        "b:string"));
}

TEST(CsvImporter, BadQuotingIsAnError) {
  testing::TempDir dir;
  EXPECT_THAT(ErrorText(dir, "a,b\n1,\"open\n"), HasSubstr(":2:3: a quoted field is never closed"));
  EXPECT_THAT(ErrorText(dir, "a,b\n1,x\"y\"\n"),
              HasSubstr(":2:4: a quote inside an unquoted field"));
  EXPECT_THAT(ErrorText(dir, "a,b\n\"x\"y,1\n"),
              HasSubstr(":2:4: \"y\" after the closing quote of a field"));
}

TEST(CsvImporter, SkipModeCountsEveryReason) {
  testing::TempDir dir;
  ImportOptions o = Csv();
  o.on_error = OnError::kSkip;
  o.column_types = {{"n", DType::kInt64}};
  const auto path = WriteBytes(dir / "f.csv",
                               "n,s\n"
                               "1,a\n"
                               "x,b\n"        // bad value
                               "2,c,extra\n"  // wrong number of fields
                               "3,\"d\"e\n"   // bad quoting on one line
                               "4,\xFF\n"     // invalid UTF-8
                               "5,f\n");
  auto importer = OpenCsvImporter({path}, o, kSerial);
  const Imported got = ImportAll(*importer);
  ASSERT_EQ(got.table.rows(), 2u);
  EXPECT_EQ(got.table.columns[0].Values<int64_t>()[1], 5);
  EXPECT_EQ(got.locations[1], path.string() + ":7");
  const SkipReport& s = importer->skipped();
  EXPECT_EQ(s.rows, 4u);
  EXPECT_EQ(s.reasons, (std::map<std::string, uint64_t>{{"bad quoting", 1},
                                                        {"bad value", 1},
                                                        {"invalid UTF-8", 1},
                                                        {"wrong number of fields", 1}}));
}

TEST(CsvImporter, AQuoteLeftOpenAcrossLinesStopsEvenInSkipMode) {
  // Skipping would silently drop every line up to the next quote.
  testing::TempDir dir;
  ImportOptions o = Csv();
  o.on_error = OnError::kSkip;
  const Error e = ErrorOf([&] { ImportText(dir, "a,b\n1,x\"y\n2,z\n3,w\n", o); });
  EXPECT_THAT(e.Message(), HasSubstr(":2:4: a quote inside an unquoted field"));
  EXPECT_THAT(e.hint(), HasSubstr("cannot be skipped"));
}

TEST(CsvImporter, ChunksHoldAtMostChunkRows) {
  testing::TempDir dir;
  ImportOptions o = Csv();
  o.chunk_rows = 4;
  std::string text = "a\n";
  for (int i = 0; i < 10; ++i) text += std::to_string(i) + "\n";
  const Imported got = ImportText(dir, text, o, {.threads = 2, .range_bytes = 1000});
  ASSERT_EQ(got.chunks.size(), 3u);
  EXPECT_EQ(got.chunks[0].rows(), 4u);
  EXPECT_EQ(got.chunks[1].rows(), 4u);
  EXPECT_EQ(got.chunks[2].rows(), 2u);
  EXPECT_EQ(got.table.columns[0].Values<int64_t>()[9], 9);
}

TEST(CsvImporter, SeveralInputsShareTheHeader) {
  testing::TempDir dir;
  const auto a = WriteBytes(dir / "a.csv", "x,y\n1,2\n");
  const auto b = WriteBytes(dir / "b.csv", "\xEF\xBB\xBFx,y\r\n3,4\r\n5,6\r\n");
  auto importer = OpenCsvImporter({a, b}, Csv(), {.threads = 2, .range_bytes = 3});
  const Imported got = ImportAll(*importer);
  ASSERT_EQ(got.table.rows(), 3u);
  EXPECT_EQ(got.locations[2], b.string() + ":3");
  EXPECT_EQ(got.table.columns[1].Values<int64_t>()[2], 6);

  const auto c = WriteBytes(dir / "c.csv", "x,z\n1,2\n");
  EXPECT_THAT(ErrorOf([&] {
                OpenCsvImporter({a, c}, Csv());
              }).Message(),
              HasSubstr(c.string() + ":1: the header (x,z) differs"));
}

// A file with quoted newlines, escaped quotes, CRLF rows, nulls and a bad
// row, so that small ranges start and end in every awkward place.
std::string AwkwardCsv(int rows) {
  std::string text = "id,text,score,flag\n";
  for (int i = 0; i < rows; ++i) {
    std::string field = fmt::format("row {}", i);
    if (i % 3 == 0) field = fmt::format("\"multi\nline {}\n\"", i);
    if (i % 5 == 0) field = fmt::format("\"quote \"\"{}\"\", comma\"", i);
    if (i % 7 == 0) field = "\"\n\n\"";
    const std::string score = i % 4 == 0 ? "" : fmt::format("{}.25", i);
    const char* end = i % 11 == 0 ? "\r\n" : "\n";
    text += fmt::format("{},{},{},{}{}", i, field, score, i % 2 ? "true" : "false", end);
    if (i == rows / 2) text += "oops,\"x\",1\n";  // skipped: bad id, wrong field count
  }
  return text;
}

TEST(CsvImporter, ParallelParseEqualsSerialParse) {
  testing::TempDir dir;
  const auto path = WriteBytes(dir / "f.csv", AwkwardCsv(2000));
  ImportOptions o = Csv();
  o.on_error = OnError::kSkip;
  o.chunk_rows = 333;
  o.column_types = {{"id", DType::kInt64}};
  auto serial = OpenCsvImporter({path}, o, kSerial);
  const Imported want = ImportAll(*serial);
  ASSERT_EQ(want.table.rows(), 2000u);
  testing::ExpectParallelMatchesSerial(path, o, want, *serial, {1, 7, 64, 1000, 8192}, 4);
}

TEST(CsvImporter, TheFirstErrorInInputOrderIsReported) {
  testing::TempDir dir;
  std::string text = "n\n";
  for (int i = 0; i < 5000; ++i) text += i == 1234 || i == 4000 ? "bad\n" : "1\n";
  ImportOptions o = Csv();
  o.column_types = {{"n", DType::kInt64}};
  const auto path = WriteBytes(dir / "f.csv", text);
  const Error e = ErrorOf([&] {
    auto importer = OpenCsvImporter({path}, o, {.threads = 4, .range_bytes = 100});
    ImportAll(*importer);
  });
  EXPECT_EQ(e.where().line, 1236);
}

}  // namespace
}  // namespace topspin
