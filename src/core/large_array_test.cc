#include "topspin/core/large_array.h"

#include <cstdint>
#include <numeric>

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

}  // namespace
}  // namespace topspin
