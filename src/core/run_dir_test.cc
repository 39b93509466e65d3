#include "topspin/core/run_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {
namespace {

TEST(RunDir, NumbersRunsAndWritesTheResolvedConfig) {
  testing::TempDir tmp;
  const Config config = Config::Defaults({"pipeline.threads=3"}, TopspinSchema());
  const auto first = CreateRunDirectory(tmp / "runs", "demo", config);
  const auto second = CreateRunDirectory(tmp / "runs", "demo", config);
  EXPECT_EQ(first.filename(), "demo-001");
  EXPECT_EQ(second.filename(), "demo-002");
  EXPECT_EQ(ReadFile(first / "config.hash"), config.Hash() + "\n");
  // The written config reads back to the same meaning.
  const Config back = Config::Load(first / "config.yaml", {}, TopspinSchema());
  EXPECT_EQ(back.Hash(), config.Hash());
  EXPECT_EQ(back.GetInt("pipeline.threads"), 3);
}

TEST(RunDir, RejectsNamesWithSlashes) {
  testing::TempDir tmp;
  const Config config = Config::Defaults({}, TopspinSchema());
  EXPECT_THROW(CreateRunDirectory(tmp.path(), "a/b", config), Error);
  EXPECT_THROW(CreateRunDirectory(tmp.path(), "", config), Error);
}

}  // namespace
}  // namespace topspin
