#include "topspin/data/dataset_diff.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "data/merge_test_util.h"

namespace topspin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ErrorOf;

class DatasetDiffTest : public ::testing::Test {
 protected:
  // Converts CSV text (qid,label,x,name rows) into a dataset named `name`.
  std::filesystem::path Convert(const std::string& name, const std::vector<std::string>& files,
                                const std::string& group = "qid") {
    std::vector<std::filesystem::path> inputs;
    for (size_t i = 0; i < files.size(); ++i) {
      inputs.push_back(testing::WriteBytes(dir_ / (name + "-" + std::to_string(i) + ".csv"),
                                           "qid,label,x,name\n" + files[i]));
    }
    ImportOptions o;
    o.format = "csv";
    o.label_column = "label";
    o.group_column = group;
    const auto out = dir_ / name;
    topspin::Convert(inputs, o, testing::SmallShards(out, 3, 1 << 20), false, {});
    return out;
  }
  testing::TempDir dir_;
};

const std::string kGroup1 = "1,1,0.5,a\n1,0,1.5,b\n1,0,,c\n";
const std::string kGroup2 = "2,2,7.25,d\n2,0,-3,e\n";
const std::string kGroup3 = "3,0,4,f\n";

TEST_F(DatasetDiffTest, TheSameConvertTwiceIsEqualRowByRow) {
  const auto a = Convert("a", {kGroup1 + kGroup2, kGroup3});
  const auto b = Convert("b", {kGroup1 + kGroup2, kGroup3});
  const DatasetDiff d = DiffDatasets(a, b);
  EXPECT_TRUE(d.equal()) << d.differences.front();
  EXPECT_EQ(d.rows, 6u);
}

TEST_F(DatasetDiffTest, MergedPartsEqualTheSingleConvert) {
  const auto single = Convert("single", {kGroup1, kGroup2, kGroup3});
  std::vector<std::filesystem::path> inputs;
  for (int i = 0; i < 3; ++i) inputs.push_back(dir_ / ("single-" + std::to_string(i) + ".csv"));
  ImportOptions o;
  o.format = "csv";
  o.label_column = "label";
  o.group_column = "qid";
  const auto merged = testing::ConvertInParts(inputs, o, testing::SmallShards(dir_ / "unused", 3, 1 << 20), 2,
                                              dir_ / "parts");
  const DatasetDiff d = DiffDatasets(single, merged);
  EXPECT_TRUE(d.equal()) << d.differences.front();
}

TEST_F(DatasetDiffTest, NamesTheRowAndColumnOfAChangedValue) {
  const auto a = Convert("a", {kGroup1 + kGroup2});
  const auto b = Convert("b", {kGroup1 + "2,2,7.5,d\n2,0,-3,e\n"});
  const DatasetDiff d = DiffDatasets(a, b);
  ASSERT_FALSE(d.equal());
  EXPECT_THAT(d.differences, ::testing::Contains(HasSubstr(
                                 "row 3 (shard-00000.tshard, row group 1, row 0), column \"x\": 7.25 vs 7.5")));
  const DatasetDiff g = DiffDatasets(a, b, {.by_group = true});
  EXPECT_THAT(g.differences, ::testing::Contains(HasSubstr("group 2 (rows 3 and 3)")));
}

TEST_F(DatasetDiffTest, ByGroupIgnoresWhereGroupsAreButNotTheOrderInsideThem) {
  const auto a = Convert("a", {kGroup1 + kGroup2 + kGroup3});
  const auto shuffled = Convert("shuffled", {kGroup3, kGroup2 + kGroup1});
  EXPECT_FALSE(DiffDatasets(a, shuffled).equal());
  const DatasetDiff d = DiffDatasets(a, shuffled, {.by_group = true});
  EXPECT_TRUE(d.equal()) << d.differences.front();
  EXPECT_EQ(d.groups, 3u);
  EXPECT_EQ(d.rows, 6u);

  const auto reordered = Convert("reordered", {"1,0,1.5,b\n1,1,0.5,a\n1,0,,c\n" + kGroup2 + kGroup3});
  EXPECT_THAT(DiffDatasets(a, reordered, {.by_group = true}).differences,
              ElementsAre(HasSubstr("group 1 (rows 0 and 0): the same length, other values or order")));
}

TEST_F(DatasetDiffTest, AMissingGroupIsNamedWithItsStatistics) {
  const auto a = Convert("a", {kGroup1 + kGroup2 + kGroup3});
  const auto b = Convert("b", {kGroup1 + kGroup3});
  const DatasetDiff d = DiffDatasets(a, b, {.by_group = true});
  EXPECT_THAT(d.differences, ::testing::Contains(HasSubstr("6 rows vs 4")));
  EXPECT_THAT(d.differences, ::testing::Contains(HasSubstr("groups: 3 of 1..3 rows")));
  EXPECT_THAT(d.differences, ::testing::Contains(HasSubstr("column \"x\" statistics: count 6 vs 4, min -3 vs 0.5, max 7.25 vs 4")));
  EXPECT_THAT(d.differences,
              ::testing::Contains(HasSubstr("group 2 (first at row 3) is only in the first")));
}

TEST_F(DatasetDiffTest, StopsListingAtTheLimit) {
  std::string many_a, many_b;
  for (int i = 0; i < 30; ++i) {
    many_a += "1,0," + std::to_string(i) + ",a\n";
    many_b += "1,0," + std::to_string(i + 100) + ",a\n";
  }
  const DatasetDiff d =
      DiffDatasets(Convert("a", {many_a}), Convert("b", {many_b}), {.max_differences = 4});
  EXPECT_EQ(d.differences.size(), 4u);
  EXPECT_TRUE(d.truncated);
}

TEST_F(DatasetDiffTest, ASchemaDifferenceIsTheOnlyLine) {
  const auto a = Convert("a", {kGroup1});
  const auto b = Convert("b", {"1,1,1,a\n1,0,2,b\n1,0,3,c\n"});  // x inferred int64
  EXPECT_THAT(DiffDatasets(a, b).differences, ElementsAre(HasSubstr("schema: column \"x\"")));
}

TEST_F(DatasetDiffTest, ByGroupWithoutAGroupColumnSaysWhatToDo) {
  const auto a = Convert("a", {kGroup1}, "");
  const auto b = Convert("b", {kGroup1});
  EXPECT_THAT(ErrorOf([&] { DiffDatasets(a, b, {.by_group = true}); }).Message(),
              HasSubstr("convert with --group"));
}

}  // namespace
}  // namespace topspin
