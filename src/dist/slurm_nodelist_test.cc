#include "topspin/dist/slurm_nodelist.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

using ::testing::HasSubstr;
using Hosts = std::vector<std::string>;

TEST(SlurmNodeList, ExpandsRangesListsAndPadding) {
  EXPECT_EQ(ExpandSlurmNodeList("gpu[01-04,07],cpu3"),
            (Hosts{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "cpu3"}));
  EXPECT_EQ(ExpandSlurmNodeList("node1"), Hosts{"node1"});
  EXPECT_EQ(ExpandSlurmNodeList(" a,b "), (Hosts{"a", "b"}));
  EXPECT_EQ(ExpandSlurmNodeList("n[8-10]"), (Hosts{"n8", "n9", "n10"}));
  EXPECT_EQ(ExpandSlurmNodeList("n[098-100]"), (Hosts{"n098", "n099", "n100"}));
  EXPECT_EQ(ExpandSlurmNodeList("rack[1-2]-ib,x[5]"), (Hosts{"rack1-ib", "rack2-ib", "x5"}));
  EXPECT_EQ(ExpandSlurmNodeList("n[0-65535]").size(), 65536u);
}

TEST(SlurmNodeList, RejectsMalformedLists) {
  for (const char* list :
       {"", "a,,b", ",a", "a,", "a[1-2", "a]", "a[[1]]", "a[2-1]", "a[x]", "a[1-2]-b[3]", "a[]",
        "a[1-]", "a[1-2-3]", "a[1,,2]", "n[0-65536]", "n[0-9999999999]"}) {
    SCOPED_TRACE(list);
    try {
      ExpandSlurmNodeList(list);
      ADD_FAILURE() << "no error";
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::kDist);
      EXPECT_THAT(error.what_text(), HasSubstr("malformed SLURM host list"));
    }
  }
}

TEST(SlurmTasksPerNode, ExpandsRepeats) {
  EXPECT_EQ(ExpandSlurmTasksPerNode("4(x2),3"), (std::vector<int>{4, 4, 3}));
  EXPECT_EQ(ExpandSlurmTasksPerNode("8"), std::vector<int>{8});
  for (const char* bad : {"", "0", "a", "4(x", "4(x0)", "4(x2)x", "4(2)", "4,,3", "-1"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(ExpandSlurmTasksPerNode(bad), Error);
  }
}

}  // namespace
}  // namespace topspin
