#include "topspin/dist/launch_env.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "topspin/core/error.h"
#include "topspin/core/strings.h"
#include "topspin/dist/slurm_nodelist.h"

namespace topspin {
namespace {

constexpr int kMaxProcessesPerHost = 4096;

// Who sets a launcher's variables, for hints.
const char* SourceOf(Launcher launcher) {
  switch (launcher) {
    case Launcher::kTorchrun: return "torchrun (or by hand)";
    case Launcher::kOpenMpi: return "mpirun (OpenMPI)";
    case Launcher::kSlurm: return "SLURM (sbatch/srun)";
    case Launcher::kSageMaker: return "SageMaker";
    case Launcher::kLocal: return "the environment";
  }
  return "the environment";
}

Error DistError(std::string what, std::string field, std::string hint) {
  return Error(ErrorKind::kDist, std::move(what), ErrorWhere{.field = std::move(field)},
               std::move(hint));
}

std::optional<int64_t> ParseInt64(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// Reads one launcher's variables; every failure names the variable and the
// launcher that set it.
class EnvReader {
 public:
  EnvReader(const EnvLookup& env, Launcher launcher) : env_(env), launcher_(launcher) {}

  // The trimmed value; nullopt when unset or blank.
  std::optional<std::string> Text(std::string_view var) const {
    std::optional<std::string> value = env_(var);
    if (!value) return std::nullopt;
    std::string trimmed(Trim(*value));
    if (trimmed.empty()) return std::nullopt;
    return trimmed;
  }

  std::optional<int> OptionalInt(std::string_view var) const {
    const std::optional<std::string> text = Text(var);
    if (!text) return std::nullopt;
    const std::optional<int64_t> value = ParseInt64(*text);
    if (!value) Fail(var, fmt::format("\"{}\" is not an integer", *text), "set a whole number");
    if (*value < std::numeric_limits<int>::min() || *value > std::numeric_limits<int>::max()) {
      Fail(var, fmt::format("{} is out of range", *value), "set a plausible value");
    }
    return static_cast<int>(*value);
  }

  // `needed_by` is the variable that made this one required.
  int RequiredInt(std::string_view var, std::string_view needed_by, std::string_view fix) const {
    const std::optional<int> value = OptionalInt(var);
    if (!value) Fail(var, fmt::format("{} is not set but {} is", var, needed_by), fix);
    return *value;
  }

  [[noreturn]] void Fail(std::string_view var, std::string what, std::string_view fix) const {
    throw DistError(std::move(what), std::string(var),
                    fmt::format("{} comes from {}; {}", var, SourceOf(launcher_), fix));
  }

 private:
  const EnvLookup& env_;
  Launcher launcher_;
};

// The variables a launcher's LaunchEnv fields came from, for range errors.
struct FieldVars {
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
  const char* node_rank;
  const char* num_nodes;
};

// Throws unless lo <= value <= hi; `bound` explains where hi comes from.
void CheckRange(const EnvReader& r, const char* var, const char* what, int value, int lo, int hi,
                std::string_view bound) {
  if (value >= lo && value <= hi) return;
  r.Fail(
      var, fmt::format("{} {} is outside [{}, {}]", what, value, lo, hi),
      fmt::format("it must be at least {} and at most {}; fix the values or relaunch", lo, bound));
}

void Validate(const EnvReader& r, const LaunchEnv& e, const FieldVars& v) {
  if (e.world_size < 1) {
    r.Fail(v.world_size, fmt::format("world size {} is below 1", e.world_size),
           "it counts the processes of the job and must be at least 1");
  }
  const std::string world = fmt::format("{} ({})", v.world_size, e.world_size);
  CheckRange(r, v.rank, "rank", e.rank, 0, e.world_size - 1, world + " - 1");
  CheckRange(r, v.local_world_size, "local world size", e.local_world_size, 1, e.world_size, world);
  CheckRange(r, v.local_rank, "local rank", e.local_rank, 0, e.local_world_size - 1,
             fmt::format("{} ({}) - 1", v.local_world_size, e.local_world_size));
  CheckRange(r, v.num_nodes, "node count", e.num_nodes, 1, e.world_size, world);
  CheckRange(r, v.node_rank, "node rank", e.node_rank, 0, e.num_nodes - 1,
             fmt::format("{} ({}) - 1", v.num_nodes, e.num_nodes));
}

// MASTER_ADDR / MASTER_PORT override whatever the launcher implied.
void ApplyMasterOverrides(const EnvReader& r, LaunchEnv& e) {
  if (std::optional<std::string> addr = r.Text("MASTER_ADDR")) e.master_addr = *addr;
  if (std::optional<int> port = r.OptionalInt("MASTER_PORT")) {
    if (*port < 1 || *port > 65535) {
      r.Fail("MASTER_PORT", fmt::format("port {} is outside [1, 65535]", *port),
             "pick a free TCP port such as 29500");
    }
    e.master_port = *port;
  }
}

LaunchEnv Start(Launcher launcher) {
  LaunchEnv e;
  e.launcher = launcher;
  e.name = LauncherName(launcher);
  return e;
}

constexpr const char* kSlurmNtasksPerNode = "SLURM_NTASKS_PER_NODE";

int CeilDiv(int a, int b) {
  return static_cast<int>((int64_t{a} + b - 1) / b);
}

LaunchEnv DetectTorchrun(const EnvReader& r) {
  LaunchEnv e = Start(Launcher::kTorchrun);
  e.rank = *r.OptionalInt("RANK");
  e.world_size =
      r.RequiredInt("WORLD_SIZE", "RANK", "set WORLD_SIZE too, or unset RANK to run one process");
  e.local_rank = r.OptionalInt("LOCAL_RANK").value_or(e.rank);
  e.local_world_size = r.OptionalInt("LOCAL_WORLD_SIZE").value_or(e.world_size);
  e.node_rank = r.OptionalInt("GROUP_RANK").value_or(0);
  const int lws = std::max(e.local_world_size, 1);
  e.num_nodes = r.OptionalInt("GROUP_WORLD_SIZE").value_or(CeilDiv(e.world_size, lws));
  Validate(
      r, e,
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE"});
  ApplyMasterOverrides(r, e);
  return e;
}

LaunchEnv DetectOpenMpi(const EnvReader& r) {
  LaunchEnv e = Start(Launcher::kOpenMpi);
  e.rank = *r.OptionalInt("OMPI_COMM_WORLD_RANK");
  e.world_size = r.RequiredInt("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                               "launch with mpirun, which sets both");
  e.local_rank = r.OptionalInt("OMPI_COMM_WORLD_LOCAL_RANK").value_or(e.rank);
  e.local_world_size = r.OptionalInt("OMPI_COMM_WORLD_LOCAL_SIZE").value_or(e.world_size);
  const int lws = std::max(e.local_world_size, 1);
  e.node_rank = e.rank / lws;
  e.num_nodes = CeilDiv(e.world_size, lws);
  Validate(r, e,
           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"});
  ApplyMasterOverrides(r, e);
  if (e.num_nodes > 1 && !r.Text("MASTER_ADDR")) {
    r.Fail("MASTER_ADDR",
           fmt::format("the job spans {} nodes but MASTER_ADDR is not set", e.num_nodes),
           "pass the host of rank 0 with mpirun -x MASTER_ADDR=<host>");
  }
  return e;
}

// Processes on this node: SLURM_NTASKS_PER_NODE, else this node's entry of
// SLURM_TASKS_PER_NODE, else an even split of the tasks over the nodes.
int SlurmTasksOnNode(const EnvReader& r, const LaunchEnv& e) {
  if (std::optional<int> n = r.OptionalInt(kSlurmNtasksPerNode)) return *n;
  if (std::optional<std::string> text = r.Text("SLURM_TASKS_PER_NODE")) {
    std::vector<int> counts;
    try {
      counts = ExpandSlurmTasksPerNode(*text);
    } catch (const Error& error) {
      r.Fail("SLURM_TASKS_PER_NODE", error.what_text(), "expected a form like \"4(x2),3\"");
    }
    if (e.node_rank < 0 || static_cast<size_t>(e.node_rank) >= counts.size()) {
      r.Fail("SLURM_TASKS_PER_NODE",
             fmt::format("\"{}\" lists {} nodes but SLURM_NODEID is {}", *text, counts.size(),
                         e.node_rank),
             "relaunch with srun so that SLURM sets consistent values");
    }
    return counts[e.node_rank];
  }
  if (e.num_nodes > 0 && e.world_size % e.num_nodes == 0) return e.world_size / e.num_nodes;
  r.Fail("SLURM_TASKS_PER_NODE", "neither SLURM_NTASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set",
         "launch with srun, or pass --ntasks-per-node");
}

std::optional<std::string> SlurmFirstHost(const EnvReader& r) {
  for (const char* var : {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    const std::optional<std::string> list = r.Text(var);
    if (!list) continue;
    try {
      return ExpandSlurmNodeList(*list).front();
    } catch (const Error& error) {
      r.Fail(var, error.what_text(), "expected a SLURM host list like \"gpu[01-04,07],cpu3\"");
    }
  }
  return std::nullopt;
}

LaunchEnv DetectSlurm(const EnvReader& r) {
  LaunchEnv e = Start(Launcher::kSlurm);
  e.rank = *r.OptionalInt("SLURM_PROCID");
  e.world_size =
      r.RequiredInt("SLURM_NTASKS", "SLURM_PROCID", "launch with srun, or pass --ntasks to sbatch");
  e.node_rank = r.OptionalInt("SLURM_NODEID").value_or(0);
  e.num_nodes = r.OptionalInt("SLURM_NNODES").value_or(1);
  e.local_rank = r.OptionalInt("SLURM_LOCALID").value_or(0);
  e.local_world_size = SlurmTasksOnNode(r, e);
  const bool explicit_per_node = r.Text(kSlurmNtasksPerNode).has_value();
  Validate(r, e,
           {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
            explicit_per_node ? kSlurmNtasksPerNode : "SLURM_TASKS_PER_NODE", "SLURM_NODEID",
            "SLURM_NNODES"});
  if (std::optional<std::string> host = SlurmFirstHost(r)) e.master_addr = *host;
  ApplyMasterOverrides(r, e);
  return e;
}

std::vector<std::string> ParseSageMakerHosts(const EnvReader& r, const std::string& text) {
  const nlohmann::json hosts = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const char* fix = "expected a JSON list of host names like [\"algo-1\",\"algo-2\"]";
  if (!hosts.is_array() || hosts.empty() || hosts.size() > kMaxJobHosts) {
    r.Fail("SM_HOSTS",
           fmt::format("\"{}\" is not a JSON list of 1 to {} hosts", text, kMaxJobHosts), fix);
  }
  std::vector<std::string> out;
  for (const nlohmann::json& host : hosts) {
    if (!host.is_string() || host.get<std::string>().empty()) {
      r.Fail("SM_HOSTS", fmt::format("entry {} is not a host name", host.dump()), fix);
    }
    out.push_back(host.get<std::string>());
  }
  return out;
}

LaunchEnv DetectSageMaker(const EnvReader& r) {
  LaunchEnv e = Start(Launcher::kSageMaker);
  const std::vector<std::string> hosts = ParseSageMakerHosts(r, *r.Text("SM_HOSTS"));
  const std::optional<std::string> current = r.Text("SM_CURRENT_HOST");
  if (!current) r.Fail("SM_CURRENT_HOST", "SM_CURRENT_HOST is not set but SM_HOSTS is", "set both");
  const auto it = std::find(hosts.begin(), hosts.end(), *current);
  if (it == hosts.end()) {
    r.Fail("SM_CURRENT_HOST", fmt::format("host \"{}\" is not in SM_HOSTS", *current),
           "SM_CURRENT_HOST must be one of the hosts listed in SM_HOSTS");
  }
  const int gpus = r.OptionalInt("SM_NUM_GPUS").value_or(0);
  const int per_host = gpus > 0 ? gpus : r.OptionalInt("SM_NUM_CPUS").value_or(1);
  const char* per_host_var = gpus > 0 ? "SM_NUM_GPUS" : "SM_NUM_CPUS";
  if (per_host < 1 || per_host > kMaxProcessesPerHost) {
    r.Fail(per_host_var,
           fmt::format("{} processes per host is outside [1, {}]", per_host, kMaxProcessesPerHost),
           "set it to the number of devices of each host");
  }
  e.num_nodes = static_cast<int>(hosts.size());
  e.node_rank = static_cast<int>(it - hosts.begin());
  e.local_world_size = per_host;
  e.world_size = per_host * e.num_nodes;
  e.rank = e.node_rank * per_host;
  e.master_addr = hosts.front();
  ApplyMasterOverrides(r, e);
  return e;
}

}  // namespace

const char* LauncherName(Launcher launcher) {
  switch (launcher) {
    case Launcher::kLocal: return "local";
    case Launcher::kTorchrun: return "torchrun";
    case Launcher::kSlurm: return "slurm";
    case Launcher::kOpenMpi: return "openmpi";
    case Launcher::kSageMaker: return "sagemaker";
  }
  return "local";
}

EnvLookup ProcessEnvLookup() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

LaunchEnv DetectLaunchEnv(const EnvLookup& env) {
  const auto is_set = [&](std::string_view var) {
    return EnvReader(env, Launcher::kLocal).Text(var).has_value();
  };
  if (is_set("RANK")) return DetectTorchrun(EnvReader(env, Launcher::kTorchrun));
  if (is_set("OMPI_COMM_WORLD_RANK")) return DetectOpenMpi(EnvReader(env, Launcher::kOpenMpi));
  if (is_set("SLURM_PROCID")) return DetectSlurm(EnvReader(env, Launcher::kSlurm));
  if (is_set("SM_HOSTS")) return DetectSageMaker(EnvReader(env, Launcher::kSageMaker));
  LaunchEnv e = Start(Launcher::kLocal);
  ApplyMasterOverrides(EnvReader(env, Launcher::kLocal), e);
  return e;
}

LaunchEnv DetectLaunchEnv() {
  return DetectLaunchEnv(ProcessEnvLookup());
}

std::string Describe(const LaunchEnv& e) {
  return fmt::format("{}: rank {}/{}, local {}/{}, node {}/{}, master {}:{}", e.name, e.rank,
                     e.world_size, e.local_rank, e.local_world_size, e.node_rank, e.num_nodes,
                     e.master_addr, e.master_port);
}

}  // namespace topspin
