#include "topspin/core/deal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace topspin {
namespace {

using ::testing::ElementsAre;

TEST(DealLargestFirst, GivesEachHalfOneBigAndOneSmallTask) {
  // The shop ranker's tables: two 17-row, four 2^18-row. On 2 threads each
  // contiguous half gets two large tables and one small one.
  const std::vector<int64_t> sizes = {17, 17, 262144, 262144, 262144, 262144};
  EXPECT_THAT(DealLargestFirst(sizes, 2), ElementsAre(2, 4, 0, 3, 5, 1));
}

TEST(DealLargestFirst, IsAPermutationForAnyThreadCount) {
  const std::vector<int64_t> sizes = {5, 1, 9, 3, 7};
  for (int parts : {0, 1, 2, 3, 4, 5, 8}) {
    std::vector<int64_t> d = DealLargestFirst(sizes, parts);
    std::sort(d.begin(), d.end());
    EXPECT_THAT(d, ElementsAre(0, 1, 2, 3, 4)) << parts;
  }
  EXPECT_THAT(DealLargestFirst(sizes, 1), ElementsAre(2, 4, 0, 3, 1));
  EXPECT_TRUE(DealLargestFirst({}, 2).empty());
}

}  // namespace
}  // namespace topspin
