// topspin plan memory CONFIG [--gpus N] [--gpu KIND] [--micro-batch B]
//                            [--zero S] [--recompute] [--set k=v]... [--json]
// topspin plan time CONFIG --gpus N --gpu KIND [--tokens D] [--mfu M |
//                          --profile RUN] [--link GBPS] [--no-overlap]
//                          [--hours H [--max-tokens D] [--law L]] [--json]
//
// memory: the bytes per rank of a GPT config's training step, part by part
// (topspin/plan/memory_plan.h), and with --gpu what fits on that device at
// each ZeRO stage. time: the run's time and GPU-hours, its communication per
// step, and with --hours the cluster-optimal model for that deadline next
// to the compute-optimal one (topspin/plan/time_plan.h).
#include <cmath>
#include <optional>
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
#include "topspin/perf/profile.h"
#include "topspin/plan/memory_plan.h"
#include "topspin/plan/time_plan.h"

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

struct GptPlanArgs {
  std::string config;
  std::vector<std::string> overrides;
  int64_t gpus = 0;       // 0: dist.nproc
  std::string gpu;
  int64_t micro_batch = 0;
  int zero = -1;          // -1: dist.zero
  bool recompute = false;
  bool json = false;
  // time
  double tokens = 0;
  double mfu = 0;
  std::string profile;
  double link_gbps = 0;
  bool no_overlap = false;
  double hours = 0;
  double max_tokens = 0;
  std::string law = "epoch";
};

Settings LoadSettings(const GptPlanArgs& a) {
  return Settings::From(Config::Load(a.config, a.overrides, TopspinSchema()));
}

GptMemoryInputs MemoryInputs(const GptPlanArgs& a, const Settings& s) {
  GptMemoryInputs in = GptMemoryInputsFrom(s);
  if (a.gpus > 0) {
    in.world_size = a.gpus;
    in.micro_batch = std::max<int64_t>(1, s.pipeline.batch_size / a.gpus);
  }
  if (a.micro_batch > 0) in.micro_batch = a.micro_batch;
  if (a.zero >= 0) in.zero_stage = a.zero;
  in.recompute = a.recompute;
  return in;
}

// "12.3 ms", "4.56 s", "0:04:28".
std::string Span(double s) {
  if (s < 1) return fmt::format("{:.1f} ms", 1e3 * s);
  return s < 60 ? fmt::format("{:.2f} s", s) : FormatDuration(s);
}

std::string Bytes(int64_t b) { return FormatBytes(static_cast<uint64_t>(std::max<int64_t>(0, b))); }

Json MemoryJson(const GptMemory& m) {
  return {{"parameters", m.parameters},         {"param_bytes", m.param_bytes},
          {"grad_bytes", m.grad_bytes},         {"optimizer_bytes", m.optimizer_bytes},
          {"weight_copy_bytes", m.weight_copy_bytes}, {"gathered_bytes", m.gathered_bytes},
          {"layer_bytes", m.layer_bytes},       {"layer_bytes_recompute", m.layer_bytes_recompute},
          {"activation_bytes", m.activation_bytes}, {"head_bytes", m.head_bytes},
          {"total_bytes", m.total_bytes},       {"pinned_host_bytes", m.pinned_bytes}};
}

void PrintMemory(const GptMemoryInputs& in, const GptMemory& m) {
  const GptShape& s = in.shape;
  fmt::print("model        {} parameters (GPT: {} layers, d_model {}, {} heads, context {}, vocab {})\n",
             FormatCount(double(m.parameters)), s.layers, s.d_model, s.heads, s.context, s.vocab);
  fmt::print("per rank     micro-batch {} on each of {} ranks, fp32 weights{}, ZeRO {}{}\n", in.micro_batch,
             in.world_size, in.bf16 ? " with bf16 autocast" : "", in.zero_stage,
             in.recompute ? ", recomputing activations" : "");
  fmt::print("\n{:<44} {:>12}\n", "part", "bytes");
  const auto row = [](const std::string& part, int64_t bytes) {
    if (bytes > 0) fmt::print("{:<44} {:>12}\n", part, Bytes(bytes));
  };
  row("parameters (fp32)", m.param_bytes);
  row("gradients (fp32)", m.grad_bytes);
  row(fmt::format("optimizer states ({} x fp32)", in.optimizer_states), m.optimizer_bytes);
  row("bf16 weight copies (autocast)", m.weight_copy_bytes);
  row("ZeRO-3: one block gathered", m.gathered_bytes);
  row(in.recompute ? fmt::format("activations: {} block inputs + one block", s.layers)
                   : fmt::format("activations: {} blocks x {}", s.layers, Bytes(m.layer_bytes)),
      m.activation_bytes);
  row("loss: final LayerNorm, log-softmax, gradient", m.head_bytes);
  fmt::print("{:<44} {:>12}\n", "total per rank", Bytes(m.total_bytes));
  if (m.pinned_bytes > 0) fmt::print("{:<44} {:>12}\n", "host: pinned batch buffers", Bytes(m.pinned_bytes));
  fmt::print("(without recomputation a block keeps {}; recomputing, {})\n", Bytes(m.layer_bytes),
             Bytes(m.layer_bytes_recompute));
}

void RunMemory(const GptPlanArgs& a) {
  const Settings s = LoadSettings(a);
  const GptMemoryInputs in = MemoryInputs(a, s);
  const GptMemory m = EstimateGptMemory(in);
  Json doc{{"config", a.config}, {"micro_batch", in.micro_batch}, {"world_size", in.world_size},
           {"zero", in.zero_stage}, {"recompute", in.recompute}, {"memory", MemoryJson(m)}};
  std::optional<MemoryFit> fit;
  if (!a.gpu.empty()) {
    const GpuSpec& gpu = FindGpu(a.gpu);
    fit = FitOnGpu(in, gpu, {});
    Json stages = Json::array();
    for (const StageFit& f : fit->stages) {
      stages.push_back({{"zero", f.zero_stage}, {"total_bytes", f.memory.total_bytes},
                        {"fits", f.fits}, {"largest_micro_batch", f.largest_micro_batch}});
    }
    doc["gpu"] = {{"name", gpu.name}, {"memory_bytes", gpu.memory_bytes},
                  {"usable_bytes", fit->usable_bytes}, {"stages", stages},
                  {"recommended_zero", fit->recommended_stage}, {"advice", fit->advice}};
  }
  if (a.json) {
    fmt::print("{}\n", doc.dump(2));
    return;
  }
  PrintMemory(in, m);
  if (!fit) return;
  const GpuSpec& gpu = FindGpu(a.gpu);
  fmt::print("\non {} x {} ({}): usable {} per GPU (90% of {}, less 1.5 GiB for the CUDA context "
             "and workspaces)\n",
             in.world_size, gpu.name, gpu.description, Bytes(int64_t(fit->usable_bytes)),
             Bytes(int64_t(gpu.memory_bytes)));
  fmt::print("{:<6} {:>14} {:>6} {:>22}\n", "zero", "total/rank", "fits", "largest micro-batch");
  for (const StageFit& f : fit->stages) {
    fmt::print("{:<6} {:>14} {:>6} {:>22}\n", f.zero_stage, Bytes(f.memory.total_bytes),
               f.fits ? "yes" : "no", f.largest_micro_batch);
  }
  fmt::print("\n{}\n", fit->advice);
}

ScalingLaw LawFrom(const std::string& name) {
  if (name == "epoch") return EpochLaw();
  if (name == "chinchilla") return ChinchillaLaw();
  // A `topspin plan scaling --json` document.
  try {
    const auto j = nlohmann::json::parse(ReadFile(name)).at("law");
    const auto v = [&](const char* k) { return j.at(k).at("value").get<double>(); };
    return {.E = v("E"), .A = v("A"), .B = v("B"), .alpha = v("alpha"), .beta = v("beta")};
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("not a `topspin plan scaling --json` fit: {}", e.what()),
                    ErrorWhere{.file = name, .field = "law"},
                    "pass --law epoch, --law chinchilla, or the JSON plan scaling wrote");
  }
}

// --mfu, else the MFU a run's profile.json measured, else 40% (assumed).
void ChooseMfu(const GptPlanArgs& a, TimePlanInputs& in) {
  if (a.mfu > 0) {
    in.mfu = a.mfu;
    in.mfu_source = "given (--mfu)";
    return;
  }
  if (a.profile.empty()) {
    in.mfu = 0.40;
    in.mfu_source = "assumed (pass --mfu or --profile RUN for a measured one)";
    return;
  }
  const fs::path file = fs::path(a.profile) / kProfileFile;
  const StepProfile p = ReadProfile(file);
  const ProfileReport r = Analyze(p);
  if (!(r.mfu > 0)) {
    throw DataError("the profile has no MFU (no peak FLOP/s was known when it ran)",
                    ErrorWhere{.file = file.string(), .field = "mfu"}, "pass --mfu instead");
  }
  in.mfu = std::min(1.0, r.mfu);
  in.mfu_source = fmt::format("measured: {} ({})", file.string(), p.peak_source);
}

void RunTime(const GptPlanArgs& a) {
  const Settings s = LoadSettings(a);
  if (s.model.kind != "gpt") (void)GptMemoryInputsFrom(s);  // the error naming model.kind
  TimePlanInputs in;
  in.shape = GptShapeFromConfig(s.model.gpt);
  in.gpus = a.gpus > 0 ? a.gpus : std::max<int64_t>(1, s.dist.nproc);
  in.gpu = FindGpu(a.gpu);
  in.peak_flops = PeakFlops(in.gpu, s.train.precision == "bf16", s.train.tf32);
  in.step_tokens = s.pipeline.batch_size * s.optim.grad_accum * s.model.gpt.context;
  in.tokens = a.tokens > 0 ? a.tokens : double(s.train.steps) * double(in.step_tokens);
  in.zero_stage = a.zero >= 0 ? a.zero : static_cast<int>(s.dist.zero);
  in.link_bytes_per_s = a.link_gbps * 1e9;
  in.overlap = !a.no_overlap;
  ChooseMfu(a, in);
  const TimePlan t = PlanTrainingTime(in);
  Json doc{{"config", a.config}, {"gpus", in.gpus}, {"gpu", in.gpu.name},
           {"tokens", in.tokens}, {"mfu", in.mfu}, {"mfu_source", in.mfu_source},
           {"peak_flops_per_gpu", t.peak_flops}, {"flops_per_token", t.flops_per_token},
           {"flops", t.flops}, {"steps", t.steps}, {"compute_s_per_step", t.compute_s_per_step},
           {"comm_bytes_per_step", t.comm_bytes_per_step}, {"link", t.link},
           {"link_bytes_per_s", t.link_bytes_per_s}, {"comm_s_per_step", t.comm_s_per_step},
           {"exposed_comm_s_per_step", t.exposed_comm_s_per_step}, {"comm_bound", t.comm_bound},
           {"seconds", t.seconds}, {"gpu_hours", t.gpu_hours}};
  std::optional<ClusterOptimal> c;
  if (a.hours > 0) {
    c = PlanClusterOptimal({.gpus = in.gpus, .gpu = in.gpu, .peak_flops = in.peak_flops,
                            .mfu = in.mfu, .hours = a.hours,
                            .comm_overhead = t.exposed_comm_s_per_step / t.compute_s_per_step,
                            .max_tokens = a.max_tokens, .law = LawFrom(a.law)});
    const auto point = [](const ComputeOptimalPoint& p) {
      return Json{{"parameters", p.parameters}, {"tokens", p.tokens},
                  {"tokens_per_parameter", p.tokens_per_parameter}, {"loss", p.loss},
                  {"compute", p.compute}};
    };
    doc["deadline"] = {{"hours", a.hours}, {"law", a.law}, {"compute", c->compute},
                       {"compute_optimal", point(c->compute_optimal)},
                       {"cluster_optimal", point(c->cluster_optimal)},
                       {"max_parameters", c->max_parameters}, {"limited_by", c->limited_by}};
  }
  if (a.json) {
    fmt::print("{}\n", doc.dump(2));
    return;
  }
  fmt::print("model        {} parameters; {:.3g} training FLOPs per token (6 N + attention, "
             "what MFU counts)\n",
             FormatCount(double(ParameterCount(in.shape))), t.flops_per_token);
  fmt::print("run          {} tokens in {} steps of {} tokens on {} x {} ({:.0f} TFLOP/s each)\n",
             FormatCount(in.tokens), FormatCount(t.steps), FormatCount(double(in.step_tokens)),
             in.gpus, in.gpu.name, t.peak_flops / 1e12);
  fmt::print("MFU          {:.1f}%, {}\n\n", 100 * in.mfu, in.mfu_source);
  fmt::print("{:<36} {:>14}\n", "compute per step", Span(t.compute_s_per_step));
  fmt::print("{:<36} {:>14}\n", "gradient traffic per GPU per step", Bytes(int64_t(t.comm_bytes_per_step)));
  fmt::print("{:<36} {:>14}\n", fmt::format("communication at {:.0f} GB/s ({})", t.link_bytes_per_s / 1e9, t.link),
             Span(t.comm_s_per_step));
  fmt::print("{:<36} {:>14}\n", in.overlap ? "exposed (not under the backward)" : "exposed (no overlap)",
             Span(t.exposed_comm_s_per_step));
  fmt::print("{:<36} {:>14}\n", "wall time", FormatDuration(t.seconds));
  fmt::print("{:<36} {:>14.1f}\n", "GPU-hours", t.gpu_hours);
  if (t.comm_bound) {
    fmt::print("\nwarning: communication ({:.1f} ms) exceeds compute ({:.1f} ms) per step: raise the "
               "tokens per step (pipeline.batch_size, optim.grad_accum), use fewer, faster-linked "
               "GPUs, or a lower ZeRO stage\n",
               1e3 * t.comm_s_per_step, 1e3 * t.compute_s_per_step);
  }
  if (!c) return;
  fmt::print("\nin {:.0f} hours on {} x {}: {:.3g} FLOPs (law: {})\n", a.hours, in.gpus, in.gpu.name,
             c->compute, a.law);
  fmt::print("{:<18} {:>12} {:>12} {:>12} {:>10}\n", "", "parameters", "tokens", "tokens/param", "loss");
  for (const auto& [name, p] : {std::pair{"compute-optimal", c->compute_optimal},
                                std::pair{"cluster-optimal", c->cluster_optimal}}) {
    fmt::print("{:<18} {:>12} {:>12} {:>12.1f} {:>10.4f}\n", name, FormatCount(p.parameters),
               FormatCount(p.tokens), p.tokens_per_parameter, p.loss);
  }
  if (c->limited_by.empty()) {
    fmt::print("the cluster holds the compute-optimal model and the data suffices: they agree\n");
  } else {
    fmt::print("limited by {}: at most {} parameters fit (16 bytes each, ZeRO-3 over every GPU, "
               "80% of memory){}\n",
               c->limited_by, FormatCount(c->max_parameters),
               a.max_tokens > 0 ? fmt::format(", at most {} tokens", FormatCount(a.max_tokens)) : "");
  }
}

void AddConfigArgs(CLI::App* cmd, GptPlanArgs& a) {
  cmd->add_option("CONFIG", a.config, "a GPT training config (YAML)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", a.overrides, "override a config key, e.g. --set model.gpt.layers=24");
  cmd->add_option("--gpus", a.gpus, "ranks the run trains on (default dist.nproc)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--zero", a.zero, "ZeRO stage (default dist.zero)")->check(CLI::Range(0, 3));
  cmd->add_flag("--json", a.json, "print the plan as JSON instead of the table");
}

}  // namespace

void RegisterPlanGpt(CLI::App& plan) {
  auto mem = std::make_shared<GptPlanArgs>();
  CLI::App* m = plan.add_subcommand(
      "memory", "Bytes per rank of a GPT config's training step, and what fits on a GPU");
  AddConfigArgs(m, *mem);
  m->add_option("--gpu", mem->gpu, "the device: h100, h200, a100, a100-40gb, l4 (none: no fit table)");
  m->add_option("--micro-batch", mem->micro_batch,
                "sequences per rank per forward (default pipeline.batch_size / GPUs)")
      ->check(CLI::PositiveNumber);
  m->add_flag("--recompute", mem->recompute, "keep only each block's input (activation recomputation)");
  m->callback([mem] { RunMemory(*mem); });

  auto time = std::make_shared<GptPlanArgs>();
  CLI::App* t = plan.add_subcommand(
      "time", "Time and GPU-hours of a GPT run on a cluster, its communication, and the "
              "cluster-optimal model for a deadline");
  AddConfigArgs(t, *time);
  t->add_option("--gpu", time->gpu, "the device: h100, h200, a100, a100-40gb, l4")->required();
  t->add_option("--tokens", time->tokens, "tokens to train on (default train.steps x tokens per step)")
      ->check(CLI::PositiveNumber);
  auto* mfu = t->add_option("--mfu", time->mfu, "model FLOPs utilisation in (0, 1] (default 0.4, assumed)")
                  ->check(CLI::Range(1e-6, 1.0));
  t->add_option("--profile", time->profile, "a run directory whose profile.json gives a measured MFU")
      ->excludes(mfu);
  t->add_option("--link", time->link_gbps,
                "GB/s per GPU for the gradients (default NVLink within a node, the NIC beyond)")
      ->check(CLI::PositiveNumber);
  t->add_flag("--no-overlap", time->no_overlap, "communication does not overlap the backward");
  t->add_option("--hours", time->hours, "a deadline: plan the cluster-optimal model for it")
      ->check(CLI::PositiveNumber);
  t->add_option("--max-tokens", time->max_tokens, "tokens of data there are (with --hours)")
      ->check(CLI::PositiveNumber);
  t->add_option("--law", time->law,
                "scaling law for --hours: epoch (default), chinchilla, or a `plan scaling --json` file");
  t->callback([time] { RunTime(*time); });
}

}  // namespace topspin::cli
