#include "topspin/dist/job.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/test_util.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

TEST(Job, RankCommandLineDropsTheLaunchFlagsInBothFormsAndAddsTheRunDir) {
  const auto argv = RankCommandLine(
      "/runs/r", {"topspin", "train", "c.yaml", "--nproc", "2", "--set", "a=b", "--nnodes=1",
                  "--node-rank", "0", "--master-addr=10.0.0.1", "--master-port", "29500",
                  "--run-dir", "/old", "--extend"});
  ASSERT_FALSE(argv.empty());
  EXPECT_NE(argv[0].find('/'), std::string::npos);  // this executable, resolved
  EXPECT_EQ(std::vector<std::string>(argv.begin() + 1, argv.end()),
            (std::vector<std::string>{"train", "c.yaml", "--set", "a=b", "--extend", "--run-dir",
                                      "/runs/r"}));
}

TEST(Job, TheRoleComesFromTheEnvironmentAndTheFlags) {
  const DistConfig one = DistConfig::From(Config::Defaults({}, TopspinSchema()));
  EXPECT_EQ(PlanJob({}, one).role, JobRole::kSingle);
  EXPECT_EQ(PlanJob({.nproc = 2}, one).role, JobRole::kLauncher);
  EXPECT_EQ(PlanJob({}, DistConfig::From(Config::Defaults({"dist.nproc=2"}, TopspinSchema()))).role,
            JobRole::kLauncher);
  EXPECT_EQ(PlanJob({.run_dir = "/r", .nnodes = 2}, one).role, JobRole::kLauncher);
  {
    const testing::ScopedEnv spawned("TOPSPIN_SPAWNED", "1");
    const testing::ScopedEnv rank("RANK", "1"), world("WORLD_SIZE", "2");
    const JobPlan plan = PlanJob({.run_dir = "/r", .nproc = 2}, one);
    EXPECT_EQ(plan.role, JobRole::kRank);  // a spawned rank never launches again
    EXPECT_EQ(plan.env.rank, 1);
    EXPECT_EQ(plan.env.world_size, 2);
    // A rank needs the shared run directory.
    try {
      PlanJob({}, one);
      FAIL() << "a rank without --run-dir";
    } catch (const Error& e) {
      EXPECT_EQ(e.where().field, "--run-dir");
    }
  }
  for (const JobArgs& bad : {JobArgs{.resume = "auto"}, JobArgs{.nnodes = 2}}) {
    EXPECT_THROW(PlanJob(bad, one), Error);
  }
}

TEST(Job, PrepareRunWritesTheConfigButKeepsAResumedRunsOwn) {
  testing::TempDir dir;
  const Config config = Config::Defaults({"run.seed=3"}, TopspinSchema());
  const JobPlan plan = PlanJob({}, DistConfig::From(config));
  {
    const PreparedRun run = PrepareRun({.run_dir = (dir / "r").string()}, config, plan);
    EXPECT_EQ(run.dir, dir / "r");
    EXPECT_NE(run.lock, nullptr);  // the single process owns the run
    EXPECT_NE(ReadFile(dir / "r" / "config.yaml").find("seed: 3"), std::string::npos);
  }
  const Config other = Config::Defaults({"run.seed=4"}, TopspinSchema());
  PrepareRun({.run_dir = (dir / "r").string(), .resume = "auto"}, other, plan);
  EXPECT_NE(ReadFile(dir / "r" / "config.yaml").find("seed: 3"), std::string::npos);
  // Without --run-dir: a new numbered directory under run.dir.
  const Config numbered =
      Config::Defaults({"run.dir=" + (dir / "runs").string(), "run.name=x"}, TopspinSchema());
  EXPECT_EQ(PrepareRun({}, numbered, plan).dir, dir / "runs" / "x-001");
}

TEST(Job, RendezvousTakesTheTokenFromTheEnvironmentFirst) {
  testing::TempDir dir;
  WriteFileAtomic(dir / "token", "from-file\n");
  const Config config =
      Config::Defaults({"dist.token_file=" + (dir / "token").string(), "dist.timeout_s=7"},
                       TopspinSchema());
  EXPECT_EQ(RendezvousFromEnvironment(DistConfig::From(config)).token, "from-file");
  EXPECT_EQ(RendezvousFromEnvironment(DistConfig::From(config)).timeout.count(), 7000);
  const testing::ScopedEnv token("TOPSPIN_JOB_TOKEN", "from-env");
  EXPECT_EQ(RendezvousFromEnvironment(DistConfig::From(config)).token, "from-env");
}

}  // namespace
}  // namespace topspin
