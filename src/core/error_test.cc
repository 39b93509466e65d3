#include "topspin/core/error.h"

#include <gtest/gtest.h>

#include "topspin/core/strings.h"

namespace topspin {
namespace {

TEST(Error, MessageNamesFileLineFieldAndHint) {
  const Error e = ConfigError(
      "unknown key",
      ErrorWhere{.file = "configs/x.yaml", .field = "pipeline.thread", .line = 12, .column = 3},
      "did you mean \"pipeline.threads\"?");
  EXPECT_EQ(e.Message(),
            "configs/x.yaml:12:3: \"pipeline.thread\": unknown key; hint: did you mean "
            "\"pipeline.threads\"?");
  EXPECT_EQ(ExitCodeFor(e), kExitUser);
}

TEST(Error, ByteOffsetsAndBareMessages) {
  const Error e = DataError(
      "checksum mismatch",
      ErrorWhere{.file = "shard-00003.tshard", .field = "price", .byte_offset = 41943040});
  EXPECT_EQ(e.Message(), "shard-00003.tshard: byte 41943040: \"price\": checksum mismatch");
  EXPECT_EQ(IoError("plain").Message(), "plain");
  EXPECT_STREQ(e.what(), "checksum mismatch");
}

TEST(Error, InternalErrorsExitWithOneAndAskForAReport) {
  const Error e = InternalError("invariant broken");
  EXPECT_EQ(e.kind(), ErrorKind::kInternal);
  EXPECT_EQ(ExitCodeFor(e), kExitInternal);
  EXPECT_NE(e.hint().find("bug"), std::string::npos);
  EXPECT_STREQ(ErrorKindName(ErrorKind::kDist), "dist");
}

TEST(Strings, EditDistanceAndClosestMatch) {
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(ClosestMatch("thread", {"prefetch", "threads", "batch_size"}), "threads");
  EXPECT_EQ(ClosestMatch("zzzzzz", {"prefetch", "threads"}), std::nullopt);
  EXPECT_EQ(ClosestMatch("lr", {"l1", "lr2"}), "l1");  // ties: the first
}

TEST(Strings, SplitJoinTrim) {
  EXPECT_EQ(Split("a..b", '.'), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(Join({"a", "b"}, ", "), "a, b");
  EXPECT_EQ(Trim("  x y \n"), "x y");
  EXPECT_EQ(Trim("   "), "");
}

}  // namespace
}  // namespace topspin
