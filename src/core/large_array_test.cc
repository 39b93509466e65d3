#include "topspin/core/large_array.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace topspin {
namespace {

TEST(LargeArray, HoldsAlignedWritableMemoryAndMoves) {
  for (size_t n : {size_t{1}, size_t{1000}, size_t{3} << 20}) {
    LargeArray<int32_t> a(n);
    ASSERT_EQ(a.size(), n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % (n * 4 >= (2u << 20) ? (2u << 20) : 64), 0u);
    std::iota(a.data(), a.data() + n, 0);
    LargeArray<int32_t> b = std::move(a);
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(b[n - 1], static_cast<int32_t>(n - 1));
    EXPECT_EQ(b.span().size_bytes(), n * 4);
  }
  LargeArray<float> empty(0);
  EXPECT_EQ(empty.data(), nullptr);
}

// Populating is advice: whatever the range's alignment and size, the
// memory keeps what was written to it.
TEST(LargeArray, PopulateForWriteKeepsTheContents) {
  std::vector<uint32_t> v(300000);
  std::iota(v.begin(), v.end(), 7u);
  for (const auto [begin, count] :
       {std::pair<size_t, size_t>{0, v.size()}, {13, 100000}, {1001, 10}, {299999, 1}, {0, 0}}) {
    PopulateForWrite(v.data() + begin, count * sizeof(uint32_t));
  }
  for (size_t k = 0; k < v.size(); ++k) ASSERT_EQ(v[k], k + 7) << k;
  std::vector<uint32_t> fresh;
  fresh.reserve(200000);
  PopulateForWrite(fresh.data(), fresh.capacity() * sizeof(uint32_t));
  fresh.assign(200000, 5u);
  EXPECT_EQ(std::count(fresh.begin(), fresh.end(), 5u), 200000);
}

}  // namespace
}  // namespace topspin
