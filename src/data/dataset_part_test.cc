#include "data/dataset_part.h"

#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "data/merge_test_util.h"
#include "topspin/core/files.h"
#include "topspin/core/rng.h"

namespace topspin {
namespace {

using ::testing::HasSubstr;
using testing::ErrorOf;

// `files` CSV files of ranking rows; file f holds groups f*1000 + g of 1..9
// rows, a float column with nulls and a string column.
std::vector<std::filesystem::path> WriteCsvFiles(const std::filesystem::path& dir, int files) {
  std::vector<std::filesystem::path> paths;
  uint64_t state = 7;
  const auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  for (int f = 0; f < files; ++f) {
    std::string text = "qid,label,x,name\n";
    const int groups = 5 + static_cast<int>(next() % 20);
    for (int g = 0; g < groups; ++g) {
      const int rows = 1 + static_cast<int>(next() % 9);
      for (int r = 0; r < rows; ++r) {
        const bool null = next() % 7 == 0;
        text += std::to_string(f * 1000 + g) + "," + std::to_string(next() % 3) + "," +
                (null ? "" : std::to_string(static_cast<double>(next() % 100000) / 37.0)) + "," +
                "item" + std::to_string(next() % 50) + "\n";
      }
    }
    paths.push_back(testing::WriteBytes(dir / ("in-" + std::to_string(f) + ".csv"), text));
  }
  return paths;
}

ImportOptions Csv() {
  ImportOptions o;
  o.format = "csv";
  o.label_column = "label";
  o.group_column = "qid";
  o.column_types = {{"x", DType::kFloat64}};
  return o;
}

DatasetWriterOptions SmallShards(const std::filesystem::path& out) {
  return testing::SmallShards(out, 40, 3000);
}

TEST(SelectShare, CutsTheInputListIntoContiguousRuns) {
  std::vector<std::filesystem::path> inputs;
  for (int i = 0; i < 7; ++i) inputs.push_back("f" + std::to_string(i));
  const std::vector<uint64_t> sizes(7, 10);
  std::vector<std::filesystem::path> joined;
  for (uint32_t k = 0; k < 3; ++k) {
    const InputShare s = SelectShare(inputs, sizes, k, 3);
    EXPECT_EQ(s.first_input, joined.size());
    EXPECT_EQ(s.total_inputs, 7u);
    EXPECT_FALSE(s.inputs.empty());
    EXPECT_EQ(s.fingerprint, SelectShare(inputs, sizes, 0, 1).fingerprint);
    joined.insert(joined.end(), s.inputs.begin(), s.inputs.end());
  }
  EXPECT_EQ(joined, inputs);
  EXPECT_NE(SelectShare(inputs, std::vector<uint64_t>(7, 11), 0, 1).fingerprint,
            SelectShare(inputs, sizes, 0, 1).fingerprint);
  EXPECT_THAT(ErrorOf([&] { SelectShare(inputs, sizes, 3, 3); }).Message(), HasSubstr("0..N-1"));
  EXPECT_THAT(ErrorOf([&] { SelectShare(inputs, sizes, 0, 8); }).Message(),
              HasSubstr("7 input files, fewer than 8 parts"));
}

TEST(MergeParts, AnyNumberOfPartsGivesTheSingleConvert) {
  testing::TempDir dir;
  const auto inputs = WriteCsvFiles(dir.path(), 5);
  Convert(inputs, Csv(), SmallShards(dir / "single"), false, {});
  for (const uint32_t parts : {1u, 2u, 5u}) {
    SCOPED_TRACE(parts);
    const auto work = dir / ("n" + std::to_string(parts));
    const auto merged = testing::ConvertInParts(inputs, Csv(), SmallShards({}), parts, work);
    testing::ExpectSameDataset(dir / "single", merged);
    DatasetReader(merged).Verify();
  }
}

TEST(MergeParts, SortedGroupsMergeToo) {
  testing::TempDir dir;
  const auto inputs = WriteCsvFiles(dir.path(), 4);
  Convert(inputs, Csv(), SmallShards(dir / "single"), true, {});
  MergeOptions merge;
  for (uint32_t k = 0; k < 2; ++k) {
    ImportOptions o = Csv();
    o.part = k;
    o.parts = 2;
    Convert(inputs, o, SmallShards(dir / ("p" + std::to_string(k))), true, {});
    merge.parts.push_back(dir / ("p" + std::to_string(k)));
  }
  merge.out = dir / "merged";
  MergeParts(merge);
  testing::ExpectSameDataset(dir / "single", merge.out);
}

TEST(MergeParts, RefusesMissingRepeatedAndForeignParts) {
  testing::TempDir dir;
  const auto inputs = WriteCsvFiles(dir.path(), 3);
  std::vector<std::filesystem::path> parts;
  for (uint32_t k = 0; k < 3; ++k) {
    ImportOptions o = Csv();
    o.part = k;
    o.parts = 3;
    parts.push_back(dir / ("p" + std::to_string(k)));
    Convert(inputs, o, SmallShards(parts.back()), false, {});
  }
  const auto merge = [&](std::vector<std::filesystem::path> which) {
    return ErrorOf([&] { MergeParts(MergeOptions{which, dir / "out", ""}); }).Message();
  };
  EXPECT_THAT(merge({parts[0], parts[2]}), HasSubstr("parts 1/3 are missing"));
  EXPECT_THAT(merge({parts[0], parts[1], parts[1]}), HasSubstr("part 1/3 is given twice"));
  // A part of another input list.
  ImportOptions o = Csv();
  o.part = 1;
  o.parts = 3;
  std::filesystem::create_directories(dir / "other");
  const auto extra = WriteCsvFiles(dir / "other", 4);
  Convert({inputs[0], inputs[1], extra[3]}, o, SmallShards(dir / "foreign"), false, {});
  EXPECT_THAT(merge({parts[0], dir / "foreign", parts[2]}), HasSubstr("not parts of one convert"));
  // A plain dataset.
  Convert(inputs, Csv(), SmallShards(dir / "plain"), false, {});
  EXPECT_THAT(merge({dir / "plain"}), HasSubstr("is not a convert part"));
  // Damaged statistics.
  WriteFileAtomic(parts[1] / kPartStatsFile, "TSPSTAT1 garbage");
  EXPECT_THAT(merge(parts), HasSubstr("does not match the SHA-256"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));
}

TEST(MergeParts, AGroupSplitAcrossPartsNamesBothFiles) {
  testing::TempDir dir;
  const auto a = testing::WriteBytes(dir / "a.csv", "qid,label,x\n1,0,1\n2,1,2\n");
  const auto b = testing::WriteBytes(dir / "b.csv", "qid,label,x\n2,0,3\n3,1,4\n");
  std::vector<std::filesystem::path> parts;
  for (uint32_t k = 0; k < 2; ++k) {
    ImportOptions o = Csv();
    o.column_types.clear();
    o.part = k;
    o.parts = 2;
    parts.push_back(dir / ("p" + std::to_string(k)));
    Convert({a, b}, o, SmallShards(parts.back()), false, {});
  }
  const std::string message =
      ErrorOf([&] { MergeParts(MergeOptions{parts, dir / "out", ""}); }).Message();
  EXPECT_THAT(message, HasSubstr("group 2 of column \"qid\" has rows in two input files"));
  EXPECT_THAT(message, HasSubstr("a.csv (part 0)"));
  EXPECT_THAT(message, HasSubstr("b.csv (part 1)"));
}

TEST(ColumnStatsBuilder, SerializeRoundTripsAndRejectsGarbage) {
  ColumnStatsBuilder b(3);
  Column c(ColumnSpec{"x", DType::kFloat64});
  for (int i = 0; i < 20000; ++i) i % 11 == 0 ? c.AppendNull() : c.AppendFloat(i * 0.5);
  b.Add(c, 0);
  const ColumnStatsBuilder back = ColumnStatsBuilder::Deserialize(b.Serialize(), "s");
  EXPECT_EQ(back.Serialize(), b.Serialize());
  EXPECT_EQ(back.Finish().quantiles, b.Finish().quantiles);
  std::string cut = b.Serialize();
  cut.resize(cut.size() - 3);
  EXPECT_THAT(ErrorOf([&] { ColumnStatsBuilder::Deserialize(cut, "s.bin"); }).Message(),
              HasSubstr("does not match the counts"));
}

}  // namespace
}  // namespace topspin
