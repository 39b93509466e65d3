// The subcommands of `topspin`. Each lives in src/cli/cmd_<name>.cc and
// registers itself on the app; its callback throws topspin::Error on
// failure and main() turns that into one line on stderr and an exit code.
#pragma once

#include <filesystem>

#include <CLI/CLI.hpp>

namespace topspin::cli {

void RegisterVersion(CLI::App& app);
void RegisterConfig(CLI::App& app);
void RegisterDemo(CLI::App& app);
// `topspin demo gpt`, under the demo subcommand (cmd_demo_gpt.cc).
void RegisterDemoGpt(CLI::App& demo);
void RegisterGen(CLI::App& app);
void RegisterConvert(CLI::App& app);
void RegisterInspect(CLI::App& app);
// `topspin dataset merge` (cmd_dataset.cc).
void RegisterDataset(CLI::App& app);
void RegisterTokenizer(CLI::App& app);
void RegisterPipeline(CLI::App& app);
void RegisterTrain(CLI::App& app);
void RegisterTune(CLI::App& app);
void RegisterEval(CLI::App& app);
void RegisterScore(CLI::App& app);
void RegisterGenerate(CLI::App& app);
// `topspin import gpt2` and `topspin export gpt2` (cmd_gpt2.cc).
void RegisterGpt2(CLI::App& app);
void RegisterCompletion(CLI::App& app);
void RegisterProfile(CLI::App& app);
void RegisterReport(CLI::App& app);
void RegisterBench(CLI::App& app);
// `topspin plan` and its subcommands: scaling (cmd_plan.cc), memory and
// time (cmd_plan_gpt.cc), cluster (cmd_plan_cluster.cc).
void RegisterPlan(CLI::App& app);
void RegisterPlanGpt(CLI::App& plan);
void RegisterPlanCluster(CLI::App& plan);

// The config.yaml of the run that holds `path` (a run directory or one of
// its checkpoints/step-N directories); Error{kUsage} when the run has no
// checkpoint yet or no config.yaml (pass --config).
std::filesystem::path RunConfigOf(const std::filesystem::path& path);

// eval's and score's CHECKPOINT argument (a run directory or a step-N
// directory) and --checkpoint best|latest, registered on `cmd`.
void AddCheckpointArgs(CLI::App* cmd, std::string& checkpoint, std::string& which);
// Error{kUsage} unless `path` is a directory.
void CheckCheckpointDir(const std::filesystem::path& path);

}  // namespace topspin::cli
