#include "topspin/core/fault.h"

#include <chrono>
#include <cstdlib>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "topspin/core/error.h"

namespace topspin {
namespace {

double SecondsAt(std::string_view point) {
  const auto start = std::chrono::steady_clock::now();
  InjectFault(point);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(Fault, DelaysTheNamedPointOnly) {
  // Sleeps last at least their time; an unnamed point returning takes far
  // less than 300 ms even on a loaded machine.
  testing::ScopedEnv set("TOPSPIN_FAULTS", "comm.wait=delay:300ms,,loader.batch=delay:0ms");
  EXPECT_GE(SecondsAt("comm.wait"), 0.3);
  EXPECT_LT(SecondsAt("comm.waits"), 0.3);
  EXPECT_LT(SecondsAt("loader.batch"), 0.3);
}

TEST(Fault, MalformedSpecNamesTheEntry) {
  for (const char* bad : {"comm.wait=delay:20", "comm.wait", "comm.wait=delay:-1ms",
                          "comm.wait=delay:xms", "comm.wait=crash"}) {
    testing::ScopedEnv set("TOPSPIN_FAULTS", bad);
    try {
      InjectFault("loader.batch");
      FAIL() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig);
      EXPECT_NE(e.Message().find(fmt::format("\"TOPSPIN_FAULTS\": fault \"{}\"", bad)),
                std::string::npos)
          << e.Message();
    }
  }
}

}  // namespace
}  // namespace topspin
