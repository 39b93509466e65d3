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

TEST(Error, FilesystemFailuresAreUserErrorsNamingThePath) {
  try {
    std::filesystem::create_directories("/proc/self/no/such/dir");
    FAIL() << "created a directory under /proc";
  } catch (const std::filesystem::filesystem_error& fe) {
    const Error e = FilesystemError(fe);
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_EQ(ExitCodeFor(e), kExitUser);
    EXPECT_EQ(e.where().file, "/proc/self/no/such/dir");
    EXPECT_EQ(e.Message().find("filesystem error"), std::string::npos) << e.Message();
    EXPECT_NE(e.Message().find("cannot create directories"), std::string::npos) << e.Message();
  }
  const std::filesystem::filesystem_error ro("cannot rename", "/a", "/b",
                                             std::make_error_code(std::errc::read_only_file_system));
  EXPECT_EQ(FilesystemError(ro).Message(),
            "/a -> /b: cannot rename: Read-only file system; hint: the filesystem is read-only: "
            "choose a writable path");
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
