#include "topspin/parquet/parquet_import.h"

#include <memory>
#include <string>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <parquet/arrow/writer.h>

#include "core/test_util.h"
#include "data/merge_test_util.h"
#include "topspin/core/files.h"

namespace topspin {
namespace {

using ::testing::HasSubstr;
using testing::ErrorOf;
using testing::WriteBytes;

class Parquet : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { RegisterParquetImport(); }
  testing::TempDir dir_;
};

void WriteArrow(const std::filesystem::path& path, const std::shared_ptr<arrow::Table>& table) {
  std::filesystem::create_directories(path.parent_path());
  auto file = arrow::io::FileOutputStream::Open(path.string()).ValueOrDie();
  const auto status = parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), file, 3);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_TRUE(file->Close().ok());
}

template <typename Builder, typename T>
std::shared_ptr<arrow::Array> ArrayOf(const std::vector<std::optional<T>>& values) {
  Builder b;
  for (const auto& v : values) EXPECT_TRUE((v ? b.Append(*v) : b.AppendNull()).ok());
  return b.Finish().ValueOrDie();
}

Table ImportAll(const std::vector<std::filesystem::path>& inputs, ImportOptions options) {
  options.format = "parquet";
  auto importer = OpenImporter(inputs, options);
  return testing::ImportAll(*importer).table;
}

TEST_F(Parquet, MapsTypesAndKeepsNulls) {
  arrow::StringDictionaryBuilder dict;
  for (const char* s : {"red", "blue", "red", "green"}) ASSERT_TRUE(dict.Append(s).ok());
  auto tokens_values = std::make_shared<arrow::Int32Builder>();
  arrow::ListBuilder tokens(arrow::default_memory_pool(), tokens_values);
  ASSERT_TRUE(tokens.Append().ok());
  ASSERT_TRUE(tokens_values->AppendValues({5, 6, 70000}).ok());
  ASSERT_TRUE(tokens.AppendNull().ok());
  ASSERT_TRUE(tokens.Append().ok());
  ASSERT_TRUE(tokens.Append().ok());
  ASSERT_TRUE(tokens_values->Append(1).ok());
  const auto dict_array = dict.Finish().ValueOrDie();
  const auto table = arrow::Table::Make(
      arrow::schema({arrow::field("i8", arrow::int8()), arrow::field("u64", arrow::uint64()),
                     arrow::field("f", arrow::float64()), arrow::field("b", arrow::boolean()),
                     arrow::field("s", arrow::utf8()),
                     arrow::field("d", dict_array->type()),
                     arrow::field("t", arrow::list(arrow::int32()))}),
      {ArrayOf<arrow::Int8Builder, int8_t>({1, -2, std::nullopt, 4}),
       ArrayOf<arrow::UInt64Builder, uint64_t>({1, 2, 3, 4}),
       ArrayOf<arrow::DoubleBuilder, double>({0.5, std::nullopt, 2.5, 3.5}),
       ArrayOf<arrow::BooleanBuilder, bool>({true, false, std::nullopt, true}),
       ArrayOf<arrow::StringBuilder, std::string>({"a", std::nullopt, "", "dd"}),
       dict_array, tokens.Finish().ValueOrDie()});
  WriteArrow(dir_ / "t.parquet", table);
  const Table t = ImportAll({dir_ / "t.parquet"}, {});
  const std::vector<ColumnSpec> want = {
      {"i8", DType::kInt32},  {"u64", DType::kInt64},  {"f", DType::kFloat64},
      {"b", DType::kBool},    {"s", DType::kString},   {"d", DType::kString},
      {"t", DType::kTokensU32}};
  ASSERT_EQ(t.schema(), want);
  ASSERT_EQ(t.rows(), 4u);
  EXPECT_EQ(t.columns[0].Values<int32_t>()[1], -2);
  EXPECT_FALSE(t.columns[0].IsValid(2));
  EXPECT_EQ(t.columns[1].Values<int64_t>()[3], 4);
  EXPECT_FALSE(t.columns[2].IsValid(1));
  EXPECT_TRUE(std::isnan(t.columns[2].Values<double>()[1]));
  EXPECT_EQ(t.columns[3].null_count(), 1u);
  EXPECT_EQ(t.columns[4].StringAt(3), "dd");
  EXPECT_FALSE(t.columns[4].IsValid(1));
  EXPECT_TRUE(t.columns[4].IsValid(2));
  EXPECT_EQ(t.columns[5].StringAt(2), "red");
  EXPECT_EQ(t.columns[5].StringAt(3), "green");
  EXPECT_EQ(t.columns[6].TokensAt(0), (std::vector<uint32_t>{5, 6, 70000}));
  EXPECT_FALSE(t.columns[6].IsValid(1));
  EXPECT_TRUE(t.columns[6].TokensAt(2).empty());
  EXPECT_EQ(t.columns[6].TokensAt(3), (std::vector<uint32_t>{1}));

  // Projection and overrides: order as given, tokens_u16 range-checked.
  ImportOptions o;
  o.columns = {"s", "i8"};
  o.column_types = {{"i8", DType::kFloat32}};
  const Table p = ImportAll({dir_ / "t.parquet"}, o);
  ASSERT_EQ(p.schema(), (std::vector<ColumnSpec>{{"s", DType::kString}, {"i8", DType::kFloat32}}));
  EXPECT_EQ(p.columns[1].Values<float>()[3], 4.0f);
  o.columns = {"t"};
  o.column_types = {{"t", DType::kTokensU16}};
  const Error e = ErrorOf([&] { ImportAll({dir_ / "t.parquet"}, o); });
  EXPECT_THAT(e.Message(), HasSubstr("row 0 of column \"t\": token 70000 is outside 0..65535"));
  EXPECT_THAT(e.where().file, HasSubstr("t.parquet"));
  o.columns = {"nope"};
  o.column_types.clear();
  EXPECT_THAT(ErrorOf([&] { ImportAll({dir_ / "t.parquet"}, o); }).Message(),
              HasSubstr("--columns names \"nope\""));
}

TEST_F(Parquet, UnsupportedTypesAndOverflowNameFileAndColumn) {
  arrow::TimestampBuilder ts(arrow::timestamp(arrow::TimeUnit::MICRO), arrow::default_memory_pool());
  ASSERT_TRUE(ts.Append(1).ok());
  const auto table = arrow::Table::Make(
      arrow::schema({arrow::field("when", arrow::timestamp(arrow::TimeUnit::MICRO)),
                     arrow::field("big", arrow::uint64())}),
      {ts.Finish().ValueOrDie(),
       ArrayOf<arrow::UInt64Builder, uint64_t>({uint64_t{1} << 63})});
  WriteArrow(dir_ / "bad.parquet", table);
  const Error e = ErrorOf([&] { ImportAll({dir_ / "bad.parquet"}, {}); });
  EXPECT_THAT(e.Message(), HasSubstr("column \"when\" is timestamp[us]"));
  EXPECT_EQ(e.where().field, "when");
  EXPECT_THAT(e.hint(), HasSubstr("--columns"));
  ImportOptions o;
  o.columns = {"big"};
  const Error overflow = ErrorOf([&] { ImportAll({dir_ / "bad.parquet"}, o); });
  EXPECT_THAT(overflow.Message(), HasSubstr("row 0 of column \"big\": 9223372036854775808 does not fit int64"));
  WriteBytes(dir_ / "junk.parquet", "not parquet at all");
  EXPECT_THAT(ErrorOf([&] { ImportAll({dir_ / "junk.parquet"}, {}); }).where().file,
              HasSubstr("junk.parquet"));
}

// A Spark-like output directory: day=D/part-N.parquet plus _SUCCESS and .crc.
Table Rows(int64_t first_qid, int groups, int per_group) {
  Table t = Table::Empty({{"qid", DType::kInt64}, {"label", DType::kFloat32},
                          {"x", DType::kFloat64}, {"name", DType::kString}});
  for (int g = 0; g < groups; ++g) {
    for (int r = 0; r < per_group + g % 3; ++r) {
      t.columns[0].AppendInt(first_qid + g);
      t.columns[1].AppendFloat(static_cast<double>((g + r) % 3));
      if ((g * 7 + r) % 5 == 0) {
        t.columns[2].AppendNull();
      } else {
        t.columns[2].AppendFloat(g * 1.25 + r / 3.0);
      }
      t.columns[3].AppendString("n" + std::to_string((g * r) % 11));
    }
  }
  return t;
}

TEST_F(Parquet, ReadsHivePartitionedDirectoriesInSortedOrder) {
  const auto out = dir_ / "spark";
  WriteParquetFile(out / "day=2" / "city=New%20York" / "part-00001.parquet", Rows(200, 3, 2));
  WriteParquetFile(out / "day=1" / "city=__HIVE_DEFAULT_PARTITION__" / "part-00000.parquet",
                   Rows(100, 2, 2));
  WriteBytes(out / "_SUCCESS", "");
  WriteBytes(out / "day=1" / ".part-00000.parquet.crc", "crc");
  const Table t = ImportAll({out}, {});
  ASSERT_EQ(t.schema().size(), 6u);
  EXPECT_EQ(t.schema()[4], (ColumnSpec{"day", DType::kInt64}));
  EXPECT_EQ(t.schema()[5], (ColumnSpec{"city", DType::kString}));
  EXPECT_EQ(t.columns[0].Values<int64_t>()[0], 100);  // day=1 first
  EXPECT_EQ(t.columns[4].Values<int64_t>()[0], 1);
  EXPECT_FALSE(t.columns[5].IsValid(0));
  EXPECT_EQ(t.columns[4].Values<int64_t>()[t.rows() - 1], 2);
  EXPECT_EQ(t.columns[5].StringAt(t.rows() - 1), "New York");
  ImportOptions o;
  o.columns = {"city", "qid"};
  o.column_types = {{"day", DType::kString}};
  EXPECT_THAT(ErrorOf([&] { ImportAll({out}, o); }).Message(), HasSubstr("which is not read"));
}

ImportOptions Ranking() {
  ImportOptions o;
  o.format = "parquet";
  o.label_column = "label";
  o.group_column = "qid";
  return o;
}

DatasetWriterOptions SmallShards(const std::filesystem::path& out) {
  return testing::SmallShards(out, 16, 2000);
}

TEST_F(Parquet, AGroupInTwoFilesNamesBothUnlessSorted) {
  WriteParquetFile(dir_ / "a.parquet", Rows(1, 3, 2));
  WriteParquetFile(dir_ / "b.parquet", Rows(3, 3, 2));  // qid 3 is in both
  const Error e = ErrorOf([&] {
    Convert({dir_ / "a.parquet", dir_ / "b.parquet"}, Ranking(), SmallShards(dir_ / "out"), false,
            {});
  });
  EXPECT_THAT(e.Message(), HasSubstr("group 3 of column \"qid\" has rows in two input files"));
  EXPECT_THAT(e.Message(), HasSubstr("a.parquet and "));
  EXPECT_THAT(e.hint(), HasSubstr("repartition(N, \"qid\")"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out"));
  const Manifest m = Convert({dir_ / "a.parquet", dir_ / "b.parquet"}, Ranking(),
                             SmallShards(dir_ / "sorted"), true, {});
  EXPECT_EQ(m.group_stats.groups, 5u);
}

TEST_F(Parquet, SchemasMustAgreeAcrossFiles) {
  WriteParquetFile(dir_ / "a.parquet", Rows(1, 2, 2));
  Table other = Rows(10, 2, 2);
  other.columns[2] = Column(ColumnSpec{"x", DType::kFloat32});
  for (size_t r = 0; r < other.rows(); ++r) other.columns[2].AppendFloat(1);
  WriteParquetFile(dir_ / "b.parquet", other);
  const Error e = ErrorOf([&] { ImportAll({dir_ / "a.parquet", dir_ / "b.parquet"}, {}); });
  EXPECT_THAT(e.Message(), HasSubstr("column \"x\" is float here and double in"));
  EXPECT_THAT(e.where().file, HasSubstr("b.parquet"));
}

TEST_F(Parquet, PartsMergeToTheSingleConvert) {
  const auto out = dir_ / "spark";
  for (int f = 0; f < 5; ++f) {
    WriteParquetFile(out / ("part-0000" + std::to_string(f) + ".parquet"),
                     Rows(1000 * f, 4 + f, 3), 7);
  }
  Convert({out}, Ranking(), SmallShards(dir_ / "single"), false, {});
  for (const uint32_t parts : {1u, 2u, 5u}) {
    SCOPED_TRACE(parts);
    const auto merged = testing::ConvertInParts({out}, Ranking(), SmallShards({}), parts,
                                                dir_ / ("n" + std::to_string(parts)));
    testing::ExpectSameDataset(dir_ / "single", merged);
  }
}

}  // namespace
}  // namespace topspin
