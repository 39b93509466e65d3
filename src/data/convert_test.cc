#include "topspin/data/convert.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "data/import_test_util.h"
#include "data/merge_test_util.h"

namespace topspin {
namespace {

using testing::ErrorOf;
using ::testing::HasSubstr;
using testing::WriteBytes;

ImportOptions CsvWithGroups(size_t chunk_rows = 65536) {
  ImportOptions o;
  o.format = "csv";
  o.label_column = "label";
  o.group_column = "qid";
  o.chunk_rows = chunk_rows;
  return o;
}

DatasetWriterOptions WriterTo(const std::filesystem::path& out) {
  DatasetWriterOptions w;
  w.out = out;
  w.threads = 2;
  return w;
}

constexpr std::string_view kInterleaved =
    "qid,label,x\n"
    "1,0,1\n"
    "1,1,2\n"
    "2,0,3\n"
    "1,1,4\n"
    "3,0,5\n"
    "2,1,6\n";

TEST(Convert, AGroupThatReappearsIsAnErrorAtItsLine) {
  testing::TempDir dir;
  const auto in = WriteBytes(dir / "in.csv", kInterleaved);
  for (const size_t chunk_rows : {size_t{2}, size_t{65536}}) {
    const Error e = ErrorOf(
        [&] { Convert({in}, CsvWithGroups(chunk_rows), WriterTo(dir / "out"), false, {}); });
    EXPECT_EQ(e.kind(), ErrorKind::kData);
    EXPECT_EQ(e.where().file, in.string());
    EXPECT_EQ(e.where().line, 5);
    EXPECT_THAT(e.Message(), HasSubstr("group 1 of column \"qid\" appeared earlier"));
    EXPECT_THAT(e.hint(), HasSubstr("pass --sort-groups"));
    EXPECT_FALSE(std::filesystem::exists(dir / "out"));
  }
}

TEST(Convert, SortGroupsOrdersGroupsByFirstAppearanceStably) {
  testing::TempDir dir;
  const auto in = WriteBytes(dir / "in.csv", kInterleaved);
  const Manifest m = Convert({in}, CsvWithGroups(2), WriterTo(dir / "out"), true, {});
  EXPECT_EQ(m.rows(), 6u);
  EXPECT_EQ(m.group_stats.groups, 3u);
  EXPECT_EQ(m.label_column, "label");
  EXPECT_EQ(m.group_column, "qid");
  const Table t = testing::ReadAllRows(dir / "out");
  const auto qid = t.Find("qid")->Values<int64_t>();
  const auto x = t.Find("x")->Values<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(qid.begin(), qid.end()), (std::vector<int64_t>{1, 1, 1, 2, 2, 3}));
  EXPECT_EQ(std::vector<int64_t>(x.begin(), x.end()), (std::vector<int64_t>{1, 2, 4, 3, 6, 5}));
}

TEST(Convert, ContiguousStringGroupsAcrossChunksAreFine) {
  testing::TempDir dir;
  const auto in = WriteBytes(dir / "in.csv", "qid,label\nb,1\nb,0\nb,1\na,0\n,1\n,0\n");
  ImportOptions o = CsvWithGroups(2);
  const Manifest m = Convert({in}, o, WriterTo(dir / "out"), false, {});
  EXPECT_EQ(m.rows(), 6u);
  EXPECT_EQ(m.group_stats.groups, 3u);  // "b", "a" and null
}

TEST(Convert, LabelAndGroupColumnsMustExist) {
  testing::TempDir dir;
  const auto in = WriteBytes(dir / "in.csv", kInterleaved);
  ImportOptions o = CsvWithGroups();
  o.label_column = "lable";
  const Error e = ErrorOf([&] { Convert({in}, o, WriterTo(dir / "out"), false, {}); });
  EXPECT_EQ(e.kind(), ErrorKind::kConfig);
  EXPECT_THAT(e.Message(), HasSubstr("the label column \"lable\" is not in the data"));
  EXPECT_THAT(e.hint(), HasSubstr("the columns are: qid, label, x"));

  o = CsvWithGroups();
  o.group_column = "query";
  EXPECT_THAT(ErrorOf([&] { Convert({in}, o, WriterTo(dir / "out"), false, {}); }).Message(),
              HasSubstr("the group column \"query\" is not in the data"));

  o = CsvWithGroups();
  o.column_types = {{"qid", DType::kFloat32}};
  const Error g = ErrorOf([&] { Convert({in}, o, WriterTo(dir / "out"), false, {}); });
  EXPECT_THAT(g.Message(), HasSubstr("must be int64 or string"));
  EXPECT_THAT(g.hint(), HasSubstr("--columns qid:string"));
  EXPECT_THAT(g.hint(), HasSubstr("or qid:int64"));
}

TEST(Convert, ReportsSkippedRowsAndProgress) {
  testing::TempDir dir;
  const auto in = WriteBytes(dir / "in.csv", "qid,label\n1,0\n1,1,9\n2,1\n");
  ImportOptions o = CsvWithGroups();
  o.on_error = OnError::kSkip;
  uint64_t last_read = 0, total = 0;
  int calls = 0;
  SkipReport skipped;
  const Manifest m = Convert(
      {in}, o, WriterTo(dir / "out"), false,
      [&](uint64_t read, uint64_t all) {
        EXPECT_GE(read, last_read);
        last_read = read;
        total = all;
        ++calls;
      },
      &skipped);
  EXPECT_EQ(m.rows(), 2u);
  EXPECT_EQ(skipped.rows, 1u);
  EXPECT_EQ(skipped.reasons.at("wrong number of fields"), 1u);
  EXPECT_GE(calls, 1);
  EXPECT_EQ(total, std::filesystem::file_size(in));
  EXPECT_EQ(last_read, total);
}

}  // namespace
}  // namespace topspin
