#include "topspin/data/importer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "data/import_test_util.h"

namespace topspin {
namespace {

using ::testing::HasSubstr;

TEST(OpenImporter, DispatchesOnTheFormat) {
  testing::TempDir dir;
  const auto path = testing::WriteBytes(dir / "a.csv", "x\n1\n2\n");
  ImportOptions options;
  options.format = "csv";
  auto importer = OpenImporter({path}, options);
  EXPECT_EQ(importer->schema(), (std::vector<ColumnSpec>{{"x", DType::kInt64}}));
  EXPECT_EQ(testing::ImportAll(*importer).table.rows(), 2u);
}

TEST(OpenImporter, UnknownFormatsAreConfigErrorsWithASuggestion) {
  ImportOptions options;
  options.format = "jsnl";
  const Error e = testing::ErrorOf([&] { OpenImporter({"unused.csv"}, options); });
  EXPECT_EQ(e.kind(), ErrorKind::kConfig);
  EXPECT_THAT(e.Message(), HasSubstr("unknown import format \"jsnl\""));
  EXPECT_THAT(e.hint(), HasSubstr("did you mean \"jsonl\"?"));
}

TEST(OpenImporter, MissingInputsAreIoErrors) {
  testing::TempDir dir;
  ImportOptions options;
  options.format = "jsonl";
  const Error e = testing::ErrorOf([&] { OpenImporter({dir / "nope.jsonl"}, options); });
  EXPECT_EQ(e.kind(), ErrorKind::kIo);
  EXPECT_THAT(e.Message(), HasSubstr("nope.jsonl"));
}

}  // namespace
}  // namespace topspin
