// topspin plan scaling RUNS... [--budget C] [--bootstrap K] [--json]
//
// `topspin plan` answers before a large run: how big a model for this
// compute (scaling, here), will it fit (memory, cmd_plan_gpt.cc), how long
// on this cluster (time, the same file), and how big a preprocessing
// cluster (cluster, cmd_plan_cluster.cc). Every plan prints a table, or
// with --json one JSON document on stdout.
//
// scaling: fits L(N, D) = E + A/N^alpha + B/D^beta (topspin/plan/
// scaling_law.h) to topspin run directories (the model's parameters from
// config.yaml, the tokens it saw and its validation loss from
// summary.json) or CSVs of N,D,loss, and reports the compute-optimal point
// for --budget.
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/progress.h"
#include "topspin/plan/memory_plan.h"
#include "topspin/plan/scaling_law.h"

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

struct ScalingArgs {
  std::vector<std::string> inputs;
  double budget = 0;
  int bootstrap = 200;
  uint64_t seed = 0;
  bool json = false;
};

// One finished topspin GPT run: N from its config, D = steps x global batch
// x context, the loss of its last validation.
ScalingRun RunFromDir(const fs::path& dir) {
  const fs::path summary_file = dir / "summary.json";
  const Settings s = Settings::From(Config::Load(dir / "config.yaml", {}, TopspinSchema()));
  if (s.model.kind != "gpt") {
    throw DataError(fmt::format("run {} trains model.kind {}; a scaling law is fitted to GPT runs",
                                dir.string(), s.model.kind),
                    ErrorWhere{.file = (dir / "config.yaml").string(), .field = "model.kind"},
                    "leave it out");
  }
  nlohmann::json summary;
  try {
    summary = nlohmann::json::parse(ReadFile(summary_file));
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("summary.json is not valid JSON: {}", e.what()),
                    ErrorWhere{.file = summary_file.string()}, "re-run or drop the run");
  }
  const auto loss = summary.contains("valid") ? summary["valid"].value("loss", nlohmann::json())
                                              : nlohmann::json();
  if (!loss.is_number()) {
    throw DataError("the run has no validation loss", ErrorWhere{.file = summary_file.string(),
                                                                 .field = "valid.loss"},
                    "train with data.valid set (the sweep configs in configs/scaling/ do)");
  }
  const double step = summary.value("step", 0.0);
  const double tokens = step * double(s.pipeline.batch_size) * double(s.optim.grad_accum) *
                        double(s.model.gpt.context);
  return {.parameters = double(ParameterCount(GptShapeFromConfig(s.model.gpt))),
          .tokens = tokens, .loss = loss.get<double>(), .source = dir.string()};
}

// A CSV, a run directory, or a directory of run directories (a sweep).
void CollectRuns(const fs::path& input, std::vector<ScalingRun>& runs) {
  if (fs::is_regular_file(input)) {
    for (ScalingRun& r : ReadScalingCsv(input)) runs.push_back(std::move(r));
    return;
  }
  if (!fs::is_directory(input)) {
    throw Error(ErrorKind::kUsage, fmt::format("{}: no such file or directory", input.string()),
                ErrorWhere{.file = input.string()}, "give run directories or CSVs of N,D,loss");
  }
  if (fs::exists(input / "summary.json")) {
    runs.push_back(RunFromDir(input));
    return;
  }
  std::vector<fs::path> children;
  for (const auto& e : fs::directory_iterator(input)) {
    if (e.is_directory() && fs::exists(e.path() / "summary.json")) children.push_back(e.path());
  }
  if (children.empty()) {
    throw DataError(fmt::format("{} holds no finished runs (no summary.json in it or below it)",
                                input.string()),
                    ErrorWhere{.file = input.string()}, "train the runs first, or pass their directories");
  }
  std::sort(children.begin(), children.end());
  for (const fs::path& c : children) runs.push_back(RunFromDir(c));
}

Json IntervalJson(double value, const Interval& i, int bootstrap) {
  Json j{{"value", value}};
  if (bootstrap > 0) j["interval"] = {i.low, i.high};
  return j;
}

Json FitJson(const ScalingFit& f, const std::vector<ScalingRun>& runs, double coverage) {
  Json j{{"law", {{"E", IntervalJson(f.law.E, f.E, f.bootstrap)},
                  {"A", IntervalJson(f.law.A, f.A, f.bootstrap)},
                  {"B", IntervalJson(f.law.B, f.B, f.bootstrap)},
                  {"alpha", IntervalJson(f.law.alpha, f.alpha, f.bootstrap)},
                  {"beta", IntervalJson(f.law.beta, f.beta, f.bootstrap)}}},
         {"runs", runs.size()},
         {"objective", f.objective},
         {"rms_log_error", f.rms_log_error},
         {"starts", f.starts},
         {"bootstrap", f.bootstrap},
         {"interval_coverage", coverage},
         {"tokens_per_parameter_span", {f.spread.min_ratio, f.spread.max_ratio}},
         {"warnings", f.warnings}};
  if (f.optimal.compute > 0) {
    j["compute_optimal"] = {
        {"compute", f.optimal.compute},
        {"parameters", IntervalJson(f.optimal.parameters, f.optimal_parameters, f.bootstrap)},
        {"tokens", IntervalJson(f.optimal.tokens, f.optimal_tokens, f.bootstrap)},
        {"tokens_per_parameter",
         IntervalJson(f.optimal.tokens_per_parameter, f.optimal_tokens_per_parameter, f.bootstrap)},
        {"loss", f.optimal.loss}};
  }
  return j;
}

std::string WithInterval(const std::string& value, const Interval& i, int bootstrap,
                         std::string (*format)(double)) {
  if (bootstrap == 0) return value;
  return fmt::format("{:<10} [{}, {}]", value, format(i.low), format(i.high));
}

std::string Num(double v) { return fmt::format("{:.4g}", v); }
std::string Count(double v) { return FormatCount(v); }

void PrintFit(const ScalingFit& f, size_t runs, double coverage) {
  fmt::print("scaling law  L(N, D) = E + A / N^alpha + B / D^beta, fitted to {} runs\n", runs);
  fmt::print("             Huber (delta 1e-3) on log L, L-BFGS from {} starts; rms log error {:.4f}\n",
             f.starts, f.rms_log_error);
  if (f.bootstrap > 0) {
    fmt::print("             [{:.0f}% intervals from {} bootstrap refits]\n", 100 * coverage,
               f.bootstrap);
  }
  const auto row = [&](const char* name, double v, const Interval& i) {
    fmt::print("  {:<8} {}\n", name, WithInterval(Num(v), i, f.bootstrap, Num));
  };
  row("E", f.law.E, f.E);
  row("A", f.law.A, f.A);
  row("B", f.law.B, f.B);
  row("alpha", f.law.alpha, f.alpha);
  row("beta", f.law.beta, f.beta);
  fmt::print("tokens per parameter in the runs: {} to {} ({:.2f} decades), {} model sizes\n",
             Num(f.spread.min_ratio), Num(f.spread.max_ratio), f.spread.decades,
             f.spread.distinct_sizes);
  if (f.optimal.compute > 0) {
    fmt::print("\ncompute-optimal at C = {:.3g} FLOPs (C = 6 N D)\n", f.optimal.compute);
    fmt::print("  {:<22} {}\n", "parameters N*",
               WithInterval(Count(f.optimal.parameters), f.optimal_parameters, f.bootstrap, Count));
    fmt::print("  {:<22} {}\n", "tokens D*",
               WithInterval(Count(f.optimal.tokens), f.optimal_tokens, f.bootstrap, Count));
    fmt::print("  {:<22} {}\n", "tokens per parameter",
               WithInterval(Num(f.optimal.tokens_per_parameter), f.optimal_tokens_per_parameter,
                            f.bootstrap, Num));
    fmt::print("  {:<22} {:.4f}\n", "predicted loss", f.optimal.loss);
  }
  for (const std::string& w : f.warnings) fmt::print("\nwarning: {}\n", w);
}

void RunScaling(const ScalingArgs& args) {
  std::vector<ScalingRun> runs;
  for (const std::string& input : args.inputs) CollectRuns(input, runs);
  ScalingFitOptions o;
  o.bootstrap = args.bootstrap;
  o.seed = args.seed;
  o.compute = args.budget;
  const ScalingFit fit = FitScalingLaw(runs, o);
  if (args.json) {
    fmt::print("{}\n", FitJson(fit, runs, o.interval).dump(2));
  } else {
    PrintFit(fit, runs.size(), o.interval);
  }
}

void RegisterScaling(CLI::App& plan) {
  auto args = std::make_shared<ScalingArgs>();
  CLI::App* cmd = plan.add_subcommand(
      "scaling", "Fit L(N, D) = E + A/N^alpha + B/D^beta to runs; the compute-optimal N and D");
  cmd->add_option("RUNS", args->inputs,
                  "topspin GPT run directories (or a directory of them), or CSVs with columns "
                  "N, D, loss")
      ->required();
  cmd->add_option("--budget", args->budget,
                  "training FLOPs to give the compute-optimal N*, D* and loss at (e.g. 5.76e23)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--bootstrap", args->bootstrap,
                  "refits on resampled runs for the 90% intervals (0: none; default 200)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--seed", args->seed, "seed of the bootstrap's resampling (default 0)");
  cmd->add_flag("--json", args->json, "print the fit as JSON instead of the table");
  cmd->callback([args] { RunScaling(*args); });
}

}  // namespace

void RegisterPlan(CLI::App& app) {
  CLI::App* plan = app.add_subcommand(
      "plan", "Plan before a large run: scaling-law fits, memory per GPU, time on a cluster, "
              "preprocessing cluster size");
  plan->require_subcommand(1, 1);
  RegisterScaling(*plan);
  RegisterPlanGpt(*plan);
  RegisterPlanCluster(*plan);
}

}  // namespace topspin::cli
