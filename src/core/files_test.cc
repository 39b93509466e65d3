#include "topspin/core/files.h"

#include <unistd.h>

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "core/test_util.h"
#include "topspin/core/error.h"

namespace topspin {
namespace {

using ::testing::HasSubstr;

size_t CountEntries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(AtomicFile, WritesAndReplaces) {
  testing::TempDir dir;
  const fs::path p = dir / "a.txt";
  WriteFileAtomic(p, "first");
  EXPECT_EQ(ReadFile(p), "first");
  WriteFileAtomic(p, "second, longer");
  EXPECT_EQ(ReadFile(p), "second, longer");
  EXPECT_EQ(CountEntries(dir.path()), 1u);  // no temporary file left behind
}

TEST(AtomicFile, WriterDestroyedWithoutCommitLeavesOldFileAndNoTemp) {
  testing::TempDir dir;
  const fs::path p = dir / "a.txt";
  WriteFileAtomic(p, "old");
  {
    AtomicFileWriter writer(p);
    writer.Write("new content that never lands");
    EXPECT_TRUE(fs::exists(writer.temp_path()));
  }
  EXPECT_EQ(ReadFile(p), "old");
  EXPECT_EQ(CountEntries(dir.path()), 1u);
}

// A process that dies between writing and renaming (no destructors run, as
// in a crash or SIGKILL) must leave the old file intact.
TEST(AtomicFile, CrashBetweenWriteAndRenameLeavesOldFileIntact) {
  testing::TempDir dir;
  const fs::path p = dir / "checkpoint.json";
  WriteFileAtomic(p, "{\"step\": 100}");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto* writer = new AtomicFileWriter(p);  // never destroyed: the process dies
    writer->Write("{\"step\": 2");           // half of the new content
    ::_exit(0);                              // crash before Commit()
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(ReadFile(p), "{\"step\": 100}");
  // The orphaned temporary file is hidden (dot-prefixed) and never mistaken for the target.
  for (const auto& e : fs::directory_iterator(dir.path())) {
    if (e.path() != p) {
      EXPECT_EQ(e.path().filename().string().front(), '.');
    }
  }
}

TEST(AtomicFile, ErrorsNameThePath) {
  try {
    WriteFileAtomic("/nonexistent-dir/x.txt", "x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_THAT(e.Message(), HasSubstr("/nonexistent-dir/x.txt"));
    EXPECT_THAT(e.Message(), HasSubstr("No such file or directory"));
  }
}

TEST(MmapFile, MapsContentAndEmptyFiles) {
  testing::TempDir dir;
  WriteFileAtomic(dir / "f", "0123456789");
  MmapFile f(dir / "f");
  ASSERT_EQ(f.size(), 10u);
  EXPECT_EQ(f.view(), "0123456789");
  MmapFile moved(std::move(f));
  EXPECT_EQ(moved.view().substr(3, 2), "34");
  EXPECT_EQ(f.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty
  WriteFileAtomic(dir / "empty", "");
  EXPECT_EQ(MmapFile(dir / "empty").size(), 0u);
  EXPECT_THROW(MmapFile(dir / "missing"), Error);
  EXPECT_THROW(MmapFile(dir.path()), Error);  // a directory
}

// Resident file-backed pages of this process (the third field of statm).
uint64_t ResidentSharedPages() {
  std::ifstream statm("/proc/self/statm");  // procfs sizes are 0: stream it
  uint64_t size = 0, resident = 0, shared = 0;
  statm >> size >> resident >> shared;
  return shared;
}

TEST(MmapFile, DroppedPagesLeaveTheProcessAndReadBackTheSame) {
  testing::TempDir dir;
  const fs::path path = dir / "pages.bin";
  std::string content(size_t{8} << 20, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 131 % 251);
  WriteFileAtomic(path, content);
  const MmapFile f(path);
  EXPECT_EQ(f.view(), content);  // faults every page in
  const uint64_t before = ResidentSharedPages();
  f.DropPages(1000, f.size());  // from an unaligned offset to past the end
  f.DropPages(f.size() + 1, 10);
  const uint64_t pages = f.size() / 4096;
  EXPECT_LT(ResidentSharedPages() + pages / 2, before);
  EXPECT_EQ(f.view(), content);  // every byte reads back
}

TEST(MmapFile, APipeOrDeviceIsRefusedWithoutHanging) {
  testing::TempDir dir;
  const auto fifo = dir / "input.csv";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);  // no writer: a blocking open would wait forever
  for (const std::filesystem::path& special : {fifo, std::filesystem::path("/dev/null")}) {
    try {
      MmapFile f(special);
      FAIL() << special << " mapped";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kIo);
      EXPECT_EQ(e.Message(), special.string() +
                                 ": not a regular file; hint: pass a regular file, not a "
                                 "directory, pipe or device");
    }
  }
}

TEST(AtomicDirectory, AppearsOnlyOnCommit) {
  testing::TempDir dir;
  const fs::path out = dir / "dataset";
  {
    AtomicDirectory ad(out);
    WriteFileAtomic(ad.path() / "manifest.json", "{}");
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(ad.path(), dir / "dataset.incomplete");
    ad.Commit();
  }
  EXPECT_TRUE(fs::exists(out / "manifest.json"));
  EXPECT_FALSE(fs::exists(dir / "dataset.incomplete"));
  EXPECT_THROW(AtomicDirectory{out}, Error);  // never overwrites a finished directory
}

TEST(AtomicDirectory, InterruptedBuildNeverLooksComplete) {
  testing::TempDir dir;
  const fs::path out = dir / "dataset";
  {
    AtomicDirectory ad(out);
    WriteFileAtomic(ad.path() / "shard-0", "x");
  }  // no Commit
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::exists(dir / "dataset.incomplete" / "shard-0"));
  AtomicDirectory again(out);  // a new attempt starts clean
  EXPECT_FALSE(fs::exists(again.path() / "shard-0"));
}

TEST(FreeSpace, ReportsAndChecks) {
  testing::TempDir dir;
  EXPECT_GT(FreeBytes(dir.path()), 0u);
  EXPECT_GT(FreeBytes(dir / "not" / "yet" / "created"), 0u);
  EXPECT_NO_THROW(EnsureFreeSpace(dir.path(), 1, "a test"));
  try {
    EnsureFreeSpace(dir.path(), uint64_t{1} << 62, "the shards");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.Message(), HasSubstr("not enough free space for the shards"));
    EXPECT_THAT(e.hint(), HasSubstr("free disk space"));
  }
}

TEST(FormatBytes, UsesBinaryUnits) {
  EXPECT_EQ(FormatBytes(17), "17 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{300} << 20), "300 MiB");
}

}  // namespace
}  // namespace topspin
