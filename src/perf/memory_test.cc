#include "topspin/perf/memory.h"

#include <cstddef>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <sys/mman.h>

namespace topspin {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// 64 MiB of anonymous memory, every page written so it is resident.
// mmap (not malloc) so that munmap returns it to the kernel at once.
class TouchedMapping {
 public:
  explicit TouchedMapping(size_t bytes) : size_(bytes) {
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<volatile char*>(p);
    for (size_t i = 0; data_ != nullptr && i < size_; i += 4096) data_[i] = 1;
  }
  ~TouchedMapping() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }
  TouchedMapping(const TouchedMapping&) = delete;
  TouchedMapping& operator=(const TouchedMapping&) = delete;

  bool ok() const { return data_ != nullptr; }

 private:
  size_t size_;
  volatile char* data_ = nullptr;
};

TEST(Memory, ParsesProcStatusFields) {
  const std::string status = "Name:\tx\nVmHWM:\t    2048 kB\nVmRSS:\t 1234 kB\nVmRSSx:\t9 kB\n";
  EXPECT_EQ(ParseProcStatusBytes(status, "VmRSS"), 1234u * 1024);
  EXPECT_EQ(ParseProcStatusBytes(status, "VmHWM"), 2048u * 1024);
  EXPECT_EQ(ParseProcStatusBytes(status, "VmRSSx"), 9u * 1024);
  EXPECT_EQ(ParseProcStatusBytes(status, "VmSwap"), std::nullopt);
  EXPECT_EQ(ParseProcStatusBytes("VmRSS:\tlots kB\n", "VmRSS"), std::nullopt);
  EXPECT_EQ(ParseProcStatusBytes("VmRSS:\t12 MB\n", "VmRSS"), std::nullopt);
}

TEST(Memory, CurrentAndPeakAreSane) {
  const uint64_t current = CurrentRssBytes();
  EXPECT_GT(current, 1 * kMiB);          // a GoogleTest binary is bigger than 1 MiB
  EXPECT_LT(current, kMiB * 64 * 1024);  // under 64 GiB
  EXPECT_GE(PeakRssBytes(), current);
}

TEST(Memory, AvailableMemoryIsBetweenZeroAndTheMachine) {
  const uint64_t available = AvailableMemoryBytes();
  if (available == 0) GTEST_SKIP() << "no /proc/meminfo";
  std::ifstream in("/proc/meminfo");
  std::ostringstream meminfo;
  meminfo << in.rdbuf();
  const auto total = ParseProcStatusBytes(meminfo.str(), "MemTotal");
  ASSERT_TRUE(total.has_value());
  EXPECT_LE(available, *total);
  EXPECT_GT(available, uint64_t{1} << 20);  // a test process runs with more than 1 MiB free
}

TEST(Memory, TouchingSixtyFourMibRaisesCurrentAndPeak) {
  ResetPeakRss();  // best effort: lower the peak left by earlier tests
  const uint64_t before = CurrentRssBytes();
  TouchedMapping mapping(64 * kMiB);
  ASSERT_TRUE(mapping.ok());
  const uint64_t during = CurrentRssBytes();
  EXPECT_GE(during, before + 60 * kMiB);
  EXPECT_GE(PeakRssBytes(), before + 60 * kMiB);
  EXPECT_GE(PeakRssBytes(), during);
}

TEST(Memory, ResetLowersThePeakToTheCurrentRss) {
  { TouchedMapping mapping(64 * kMiB); }  // raise the peak, then unmap
  const uint64_t peak = PeakRssBytes();
  ASSERT_GE(peak, CurrentRssBytes() + 60 * kMiB);
  if (!ResetPeakRss()) GTEST_SKIP() << "/proc/self/clear_refs is not writable here";
  EXPECT_LT(PeakRssBytes(), peak - 32 * kMiB);
  EXPECT_GE(PeakRssBytes(), CurrentRssBytes());
}

}  // namespace
}  // namespace topspin
