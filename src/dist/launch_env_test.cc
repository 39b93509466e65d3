#include "topspin/dist/launch_env.h"

#include <stdlib.h>

#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

using ::testing::HasSubstr;
using Vars = std::map<std::string, std::string, std::less<>>;

EnvLookup Env(Vars vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

LaunchEnv Detect(Vars vars) {
  return DetectLaunchEnv(Env(std::move(vars)));
}

// The error DetectLaunchEnv throws for `vars`; a test failure if none.
Error DetectError(Vars vars) {
  try {
    const LaunchEnv env = Detect(std::move(vars));
    ADD_FAILURE() << "expected an error, got " << Describe(env);
  } catch (const Error& error) {
    return error;
  }
  return InternalError("no error thrown");
}

void ExpectPlace(const LaunchEnv& e, int rank, int world, int local, int local_world, int node,
                 int nodes) {
  EXPECT_EQ(e.rank, rank);
  EXPECT_EQ(e.world_size, world);
  EXPECT_EQ(e.local_rank, local);
  EXPECT_EQ(e.local_world_size, local_world);
  EXPECT_EQ(e.node_rank, node);
  EXPECT_EQ(e.num_nodes, nodes);
}

TEST(LaunchEnv, NoLauncherMeansOneLocalProcess) {
  const LaunchEnv e = Detect({{"PATH", "/bin"}});
  EXPECT_EQ(e.launcher, Launcher::kLocal);
  EXPECT_EQ(e.name, "local");
  ExpectPlace(e, 0, 1, 0, 1, 0, 1);
  EXPECT_EQ(Describe(e), "local: rank 0/1, local 0/1, node 0/1, master 127.0.0.1:29500");
  EXPECT_EQ(Detect({{"MASTER_PORT", "1234"}}).master_port, 1234);
}

TEST(LaunchEnv, Torchrun) {
  const LaunchEnv e = Detect({{"RANK", "5"},
                              {"WORLD_SIZE", "8"},
                              {"LOCAL_RANK", "1"},
                              {"LOCAL_WORLD_SIZE", "4"},
                              {"GROUP_RANK", "1"},
                              {"MASTER_ADDR", "10.0.0.1"},
                              {"MASTER_PORT", " 29501 "}});
  EXPECT_EQ(e.launcher, Launcher::kTorchrun);
  ExpectPlace(e, 5, 8, 1, 4, 1, 2);
  EXPECT_EQ(Describe(e), "torchrun: rank 5/8, local 1/4, node 1/2, master 10.0.0.1:29501");
}

TEST(LaunchEnv, TorchrunWithOnlyRankAndWorldSizeIsOneNode) {
  const LaunchEnv e = Detect({{"RANK", "2"}, {"WORLD_SIZE", "4"}});
  ExpectPlace(e, 2, 4, 2, 4, 0, 1);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, kDefaultMasterPort);
}

TEST(LaunchEnv, OpenMpiPlacesRanksNodeByNode) {
  const LaunchEnv e = Detect({{"OMPI_COMM_WORLD_RANK", "6"},
                              {"OMPI_COMM_WORLD_SIZE", "8"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                              {"MASTER_ADDR", "node0"}});
  EXPECT_EQ(e.launcher, Launcher::kOpenMpi);
  EXPECT_EQ(e.name, "openmpi");
  ExpectPlace(e, 6, 8, 2, 4, 1, 2);
  EXPECT_EQ(e.master_addr, "node0");
}

TEST(LaunchEnv, OpenMpiOnOneNodeNeedsNoMasterAddr) {
  const LaunchEnv e = Detect({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  ExpectPlace(e, 1, 2, 1, 2, 0, 1);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
}

Vars SlurmTwoNodes() {
  return {{"SLURM_PROCID", "5"},          {"SLURM_NTASKS", "8"},
          {"SLURM_LOCALID", "1"},         {"SLURM_TASKS_PER_NODE", "4(x2)"},
          {"SLURM_NODEID", "1"},          {"SLURM_NNODES", "2"},
          {"SLURM_NODELIST", "cpu[1-2]"}, {"SLURM_JOB_NODELIST", "gpu[07-08]"}};
}

TEST(LaunchEnv, Slurm) {
  const LaunchEnv e = Detect(SlurmTwoNodes());
  EXPECT_EQ(e.launcher, Launcher::kSlurm);
  ExpectPlace(e, 5, 8, 1, 4, 1, 2);
  EXPECT_EQ(e.master_addr, "gpu07");
  EXPECT_EQ(e.master_port, 29500);
}

TEST(LaunchEnv, SlurmFallbacksAndOverrides) {
  Vars vars = SlurmTwoNodes();
  vars.erase("SLURM_JOB_NODELIST");
  EXPECT_EQ(Detect(vars).master_addr, "cpu1");
  vars["MASTER_ADDR"] = "head";
  EXPECT_EQ(Detect(vars).master_addr, "head");
  vars["SLURM_NTASKS_PER_NODE"] = "2";  // wins over SLURM_TASKS_PER_NODE
  vars["SLURM_PROCID"] = "3";
  ExpectPlace(Detect(vars), 3, 8, 1, 2, 1, 2);
  vars.erase("SLURM_NTASKS_PER_NODE");
  vars.erase("SLURM_TASKS_PER_NODE");  // even split of 8 tasks over 2 nodes
  EXPECT_EQ(Detect(vars).local_world_size, 4);
}

TEST(LaunchEnv, SlurmUnevenTasksPerNode) {
  Vars vars = SlurmTwoNodes();
  vars["SLURM_TASKS_PER_NODE"] = "4,3";
  vars["SLURM_NTASKS"] = "7";
  vars["SLURM_LOCALID"] = "2";
  ExpectPlace(Detect(vars), 5, 7, 2, 3, 1, 2);
}

TEST(LaunchEnv, SageMakerGpuHosts) {
  const LaunchEnv e = Detect({{"SM_HOSTS", R"(["algo-1", "algo-2"])"},
                              {"SM_CURRENT_HOST", "algo-2"},
                              {"SM_NUM_GPUS", "8"},
                              {"SM_NUM_CPUS", "96"}});
  EXPECT_EQ(e.launcher, Launcher::kSageMaker);
  ExpectPlace(e, 8, 16, 0, 8, 1, 2);
  EXPECT_EQ(e.master_addr, "algo-1");
  EXPECT_EQ(Describe(e), "sagemaker: rank 8/16, local 0/8, node 1/2, master algo-1:29500");
}

TEST(LaunchEnv, SageMakerCpuHostsUseTheCpuCount) {
  const LaunchEnv e = Detect({{"SM_HOSTS", R"(["algo-1"])"},
                              {"SM_CURRENT_HOST", "algo-1"},
                              {"SM_NUM_GPUS", "0"},
                              {"SM_NUM_CPUS", "4"}});
  ExpectPlace(e, 0, 4, 0, 4, 0, 1);
}

TEST(LaunchEnv, PrecedenceTorchrunOpenMpiSlurmSageMaker) {
  Vars vars = SlurmTwoNodes();
  vars.insert({{"SM_HOSTS", R"(["a"])"}, {"SM_CURRENT_HOST", "a"}});
  EXPECT_EQ(Detect(vars).launcher, Launcher::kSlurm);
  vars.insert({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}});
  EXPECT_EQ(Detect(vars).launcher, Launcher::kOpenMpi);
  vars.insert({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(Detect(vars).launcher, Launcher::kTorchrun);
  vars["RANK"] = "  ";  // blank counts as unset
  EXPECT_EQ(Detect(vars).launcher, Launcher::kOpenMpi);
}

struct MalformedCase {
  Vars vars;
  std::string field;        // ErrorWhere::field
  std::string hint_source;  // who set it, as the hint says
};

TEST(LaunchEnv, MalformedValuesNameTheVariableAndTheLauncher) {
  const Vars sm = {{"SM_HOSTS", R"(["algo-1"])"}, {"SM_CURRENT_HOST", "algo-1"}};
  const auto with = [](Vars base, const Vars& extra) {
    for (const auto& [k, v] : extra) base[k] = v;
    return base;
  };
  const std::vector<MalformedCase> cases = {
      {{{"RANK", "abc"}, {"WORLD_SIZE", "4"}}, "RANK", "torchrun"},
      {{{"RANK", "4"}, {"WORLD_SIZE", "4"}}, "RANK", "torchrun"},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "4"}}, "RANK", "torchrun"},
      {{{"RANK", "1x"}, {"WORLD_SIZE", "4"}}, "RANK", "torchrun"},
      {{{"RANK", "0"}}, "WORLD_SIZE", "torchrun"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE", "torchrun"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}}, "WORLD_SIZE", "torchrun"},
      {{{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}},
       "LOCAL_RANK",
       "torchrun"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "4"}},
       "LOCAL_WORLD_SIZE",
       "torchrun"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_RANK", "2"}},
       "GROUP_RANK",
       "torchrun"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT", "torchrun"},
      {{{"MASTER_PORT", "http"}}, "MASTER_PORT", "the environment"},
      {{{"OMPI_COMM_WORLD_RANK", "1"}}, "OMPI_COMM_WORLD_SIZE", "mpirun"},
      {{{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
       "OMPI_COMM_WORLD_RANK",
       "mpirun"},
      {{{"OMPI_COMM_WORLD_RANK", "0"},
        {"OMPI_COMM_WORLD_SIZE", "4"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
       "MASTER_ADDR",
       "mpirun"},
      {with(SlurmTwoNodes(), {{"SLURM_PROCID", "five"}}), "SLURM_PROCID", "SLURM"},
      {{{"SLURM_PROCID", "0"}}, "SLURM_NTASKS", "SLURM"},
      {with(SlurmTwoNodes(), {{"SLURM_JOB_NODELIST", "gpu[01-"}}), "SLURM_JOB_NODELIST", "SLURM"},
      {with(SlurmTwoNodes(), {{"SLURM_JOB_NODELIST", ""}, {"SLURM_NODELIST", "a,,b"}}),
       "SLURM_NODELIST", "SLURM"},
      {with(SlurmTwoNodes(), {{"SLURM_TASKS_PER_NODE", "4(x"}}), "SLURM_TASKS_PER_NODE", "SLURM"},
      {with(SlurmTwoNodes(), {{"SLURM_TASKS_PER_NODE", "4"}}), "SLURM_TASKS_PER_NODE", "SLURM"},
      {with(SlurmTwoNodes(), {{"SLURM_TASKS_PER_NODE", ""}, {"SLURM_NTASKS", "7"}}),
       "SLURM_TASKS_PER_NODE", "SLURM"},
      {with(SlurmTwoNodes(), {{"SLURM_NTASKS_PER_NODE", "16"}}), "SLURM_NTASKS_PER_NODE", "SLURM"},
      {with(SlurmTwoNodes(), {{"SLURM_NODEID", "2"}}), "SLURM_TASKS_PER_NODE", "SLURM"},
      {with(SlurmTwoNodes(), {{"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_NODEID", "2"}}),
       "SLURM_NODEID", "SLURM"},
      {with(sm, {{"SM_HOSTS", "algo-1"}}), "SM_HOSTS", "SageMaker"},
      {with(sm, {{"SM_HOSTS", "[]"}}), "SM_HOSTS", "SageMaker"},
      {with(sm, {{"SM_HOSTS", R"(["algo-1", 3])"}}), "SM_HOSTS", "SageMaker"},
      {with(sm, {{"SM_CURRENT_HOST", ""}}), "SM_CURRENT_HOST", "SageMaker"},
      {with(sm, {{"SM_CURRENT_HOST", "algo-9"}}), "SM_CURRENT_HOST", "SageMaker"},
      {with(sm, {{"SM_NUM_GPUS", "two"}}), "SM_NUM_GPUS", "SageMaker"},
      {with(sm, {{"SM_NUM_GPUS", "0"}, {"SM_NUM_CPUS", "0"}}), "SM_NUM_CPUS", "SageMaker"},
  };
  for (const MalformedCase& c : cases) {
    SCOPED_TRACE(testing::PrintToString(c.vars));
    const Error error = DetectError(c.vars);
    EXPECT_EQ(error.kind(), ErrorKind::kDist);
    EXPECT_EQ(error.where().field, c.field);
    EXPECT_THAT(error.hint(), HasSubstr(c.field + " comes from " + c.hint_source));
    EXPECT_THAT(error.Message(), HasSubstr("\"" + c.field + "\": "));
  }
}

TEST(LaunchEnv, RangeErrorsSayTheBound) {
  const Error error = DetectError({{"RANK", "4"}, {"WORLD_SIZE", "4"}});
  EXPECT_EQ(error.what_text(), "rank 4 is outside [0, 3]");
  EXPECT_THAT(error.hint(), HasSubstr("at most WORLD_SIZE (4) - 1"));
}

TEST(LaunchEnv, ProcessEnvLookupReadsTheRealEnvironment) {
  ASSERT_EQ(::setenv("TOPSPIN_TEST_LAUNCH_VAR", "42", 1), 0);
  const EnvLookup env = ProcessEnvLookup();
  EXPECT_EQ(env("TOPSPIN_TEST_LAUNCH_VAR"), "42");
  ::unsetenv("TOPSPIN_TEST_LAUNCH_VAR");
  EXPECT_EQ(env("TOPSPIN_TEST_LAUNCH_VAR"), std::nullopt);
}

}  // namespace
}  // namespace topspin
