#include "topspin/data/gen_text.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr const char* kLicenses = "/usr/share/common-licenses";

// A licenses-like directory: files out of name order, a link, a Latin-1 file.
void MakeSources(const fs::path& dir) {
  fs::create_directories(dir);
  WriteFileAtomic(dir / "b-second", "second text\n");
  WriteFileAtomic(dir / "a-first", "first line\nno final newline");
  WriteFileAtomic(dir / "c-latin1", "caf\xE9\n");
  fs::create_symlink(dir / "a-first", dir / "d-link");
}

TEST(GenText, ConcatenatesFilesInNameOrderSkippingLinksAndNonUtf8) {
  testing::TempDir tmp;
  MakeSources(tmp / "src");
  TextCorpusOptions options;
  options.roots = {tmp / "src"};
  TextCorpusSummary summary;
  const std::string corpus = BuildTextCorpus(options, &summary);
  EXPECT_EQ(corpus, "first line\nno final newline\n\nsecond text\n\n");
  EXPECT_EQ(summary.files, 2u);
  EXPECT_EQ(summary.skipped_files, 1u);
  EXPECT_EQ(summary.bytes, corpus.size());
  EXPECT_FALSE(summary.truncated);
}

TEST(GenText, CapEndsAtALineBreak) {
  testing::TempDir tmp;
  MakeSources(tmp / "src");
  TextCorpusOptions options;
  options.roots = {tmp / "src"};
  options.max_bytes = 35;  // inside "second text\n"
  TextCorpusSummary summary;
  const std::string corpus = BuildTextCorpus(options, &summary);
  EXPECT_EQ(corpus, "first line\nno final newline\n\n");
  EXPECT_TRUE(summary.truncated);
  options.max_bytes = 15;
  EXPECT_EQ(BuildTextCorpus(options), "first line\n");
}

TEST(GenText, MissingRootIsAnIoErrorWithAHint) {
  TextCorpusOptions options;
  options.roots = {"/nonexistent/licenses"};
  try {
    ListTextCorpusFiles(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_THAT(e.Message(), HasSubstr("/nonexistent/licenses"));
    EXPECT_THAT(e.hint(), HasSubstr("common-licenses"));
  }
}

TEST(GenText, DebianLicensesMakeADeterministicCorpus) {
  if (!fs::is_directory(kLicenses)) GTEST_SKIP() << kLicenses << " is missing (not Debian?)";
  testing::TempDir tmp;
  const TextCorpusSummary summary = WriteTextCorpus(tmp / "out" / "corpus.txt", {});
  const std::string corpus = ReadFile(tmp / "out" / "corpus.txt");
  EXPECT_EQ(summary.bytes, corpus.size());
  EXPECT_GT(summary.files, 5u);
  EXPECT_GT(corpus.size(), 100'000u);
  EXPECT_THAT(corpus, HasSubstr("GNU GENERAL PUBLIC LICENSE"));
  EXPECT_EQ(BuildTextCorpus({}), corpus);
  TextCorpusOptions capped;
  capped.max_bytes = 10'000;
  const std::string head = BuildTextCorpus(capped);
  EXPECT_LE(head.size(), 10'000u);
  EXPECT_GT(head.size(), 9'000u);
  EXPECT_EQ(corpus.substr(0, head.size()), head);
}

}  // namespace
}  // namespace topspin
