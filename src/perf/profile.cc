#include "topspin/perf/profile.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/perf/report.h"

namespace topspin {
namespace {

double Seconds(const StepProfile& p, const std::string& phase) {
  const auto it = p.phase_s.find(phase);
  return it == p.phase_s.end() ? 0 : it->second;
}

// Share of the wall time.
double Share(const StepProfile& p, const std::string& phase) {
  return p.wall_s > 0 ? Seconds(p, phase) / p.wall_s : 0;
}

// Share of the training steps' time: evaluation and checkpoints (which a
// short run's final checkpoint can dominate) left out.
double StepShare(const StepProfile& p, const std::string& phase) {
  const double step_s = p.wall_s - Seconds(p, "eval") - Seconds(p, "checkpoint");
  return step_s > 0 ? Seconds(p, phase) / step_s : 0;
}

// The busiest loader stage: (name, busy share of the loader's thread time).
std::pair<std::string, double> BusiestStage(const StepProfile& p) {
  std::pair<std::string, double> best{"", 0};
  const double capacity = p.wall_s * std::max(1, p.loader_threads);
  for (const auto& s : p.stages) {
    const double use = capacity > 0 ? s.busy_s / capacity : 0;
    if (use > best.second) best = {s.name, use};
  }
  return best;
}

void Classify(const StepProfile& p, ProfileReport& r) {
  const double sync = StepShare(p, "sync"), data = StepShare(p, "data_wait"),
               optimizer = StepShare(p, "optimizer");
  if (sync >= 0.25) {
    r.bound = "collectives";
    r.evidence = fmt::format("{:.0f}% of the step waits on gradient exchange across {} ranks",
                             100 * sync, p.world_size);
    r.advice =
        "raise pipeline.batch_size (fewer exchanges per document), use fewer ranks per host, or "
        "keep dist.overlap on with more layers per bucket (dist.bucket_mib)";
    return;
  }
  if (data >= 0.25) {
    const auto [stage, use] = BusiestStage(p);
    r.bound = "host";
    r.evidence = fmt::format("{:.0f}% of the step waits on data; the {} stage is {:.0f}% busy "
                             "on {} loader thread{}",
                             100 * data, stage.empty() ? "loader" : stage, 100 * use,
                             p.loader_threads, p.loader_threads == 1 ? "" : "s");
    r.advice =
        "give the loader more threads (pipeline.threads), make the feature chains cheaper, or "
        "keep transformed row groups cached (pipeline.cache_mib)";
    return;
  }
  // Roofline: a step whose arithmetic intensity (model FLOPs per byte it
  // moves) is below the machine balance (peak FLOP/s over peak bytes/s) is
  // bound by memory. Without both peaks, a large optimizer share (row
  // updates stream memory) decides.
  const double intensity =
      p.bytes_per_step > 0 ? r.flops_per_step / p.bytes_per_step : INFINITY;
  const bool rooflines = p.peak_flops > 0 && p.peak_bytes_per_s > 0;
  const double balance = rooflines ? p.peak_flops / p.peak_bytes_per_s : 0;
  const bool memory = rooflines ? intensity < balance : optimizer >= 0.30;
  if (memory) {
    r.bound = "memory";
    r.evidence = fmt::format(
        "{} the step moves ~{:.2f} GB/s (embedding rows and optimizer state) and the optimizer "
        "takes {:.0f}% of it",
        rooflines ? fmt::format("{:.2f} FLOP per byte moved is below this machine's balance of "
                                "{:.1f} FLOP/byte;",
                                intensity, balance)
                  : std::string("row updates dominate:"),
        r.memory_gbs, 100 * optimizer);
    r.advice =
        "touch fewer bytes per step: a smaller model.embedding_dim, optim.sparse adagrad (one "
        "scalar per row) instead of lazy_adam (two vectors), or larger batches so rows are "
        "shared";
    return;
  }
  r.bound = "compute";
  r.evidence =
      fmt::format("forward and backward take {:.0f}% of the step{}",
                  100 * (StepShare(p, "forward") + StepShare(p, "backward")),
                  std::isnan(r.mfu) ? "" : fmt::format(" at {:.0f}% MFU", 100 * r.mfu));
  r.advice =
      "train.precision: bf16 for wide layers (docs/TRAINING.md), more cores per rank "
      "(train.torch_threads), or a smaller model";
}

}  // namespace

ProfileReport Analyze(const StepProfile& p) {
  ProfileReport r;
  const double steps = std::max<int64_t>(1, p.steps);
  r.step_ms = 1e3 * p.wall_s / steps;
  for (const auto& phase : ProfilePhases()) {
    const auto it = p.phase_s.find(phase);
    if (it == p.phase_s.end() || (it->second == 0 && phase != "other")) continue;
    r.rows.push_back({phase, 1e3 * it->second / steps, Share(p, phase)});
  }
  r.data_stall = Share(p, "data_wait");
  r.items_per_s = p.wall_s > 0 ? p.items / p.wall_s : 0;
  // This rank's share of the items runs on this rank's device.
  r.tflops = r.items_per_s * p.flops_per_item / std::max(1, p.world_size) / 1e12;
  r.flops_per_step = p.items * p.flops_per_item / std::max(1, p.world_size) / steps;
  if (p.peak_flops > 0) r.mfu = r.tflops * 1e12 / p.peak_flops;
  r.memory_gbs = p.wall_s > 0 ? p.bytes_per_step * steps / p.wall_s / 1e9 : 0;
  if (p.peak_bytes_per_s > 0) r.memory_use = r.memory_gbs * 1e9 / p.peak_bytes_per_s;
  Classify(p, r);
  return r;
}

std::optional<SteadyState> AnalyzeSteadyState(const StepProfile& whole,
                                              const std::vector<MetricsRecord>& windows,
                                              int64_t warmup_steps) {
  const auto value = [](const MetricsRecord& r, const std::string& key) {
    const auto it = r.values.find(key);
    return it == r.values.end() || !std::isfinite(it->second) ? 0.0 : it->second;
  };
  // One window as a profile: its phases (ms per step) times its steps.
  const auto window = [&](const MetricsRecord& r, int64_t steps) {
    StepProfile p = whole;
    p.steps = steps;
    p.phase_s.clear();
    p.stages.clear();
    p.wall_s = 0;
    for (const auto& phase : ProfilePhases()) {
      const double s = value(r, "phase_ms/" + phase) * double(steps) / 1e3;
      p.phase_s[phase] = s;
      p.wall_s += s;
    }
    const double paused = p.phase_s["eval"] + p.phase_s["checkpoint"];
    p.items = value(r, whole.unit + "_per_s") * std::max(0.0, p.wall_s - paused);
    for (const auto& [key, share] : r.values) {
      if (!key.starts_with("loader_busy/")) continue;
      p.stages.push_back({key.substr(12), share * p.wall_s * std::max(1, whole.loader_threads)});
    }
    return p;
  };
  SteadyState out;
  std::vector<std::string> bounds;
  int64_t previous = 0;
  for (const MetricsRecord& r : windows) {
    const int64_t steps = r.step - previous, start = previous;
    previous = r.step;
    if (steps <= 0 || start < warmup_steps || !r.values.contains("phase_ms/forward")) continue;
    const StepProfile p = window(r, steps);
    bounds.push_back(Analyze(p).bound);
    if (out.windows++ == 0) {
      out.profile = p;
      continue;
    }
    out.profile.steps += p.steps;
    out.profile.wall_s += p.wall_s;
    out.profile.items += p.items;
    for (const auto& [phase, s] : p.phase_s) out.profile.phase_s[phase] += s;
    for (size_t i = 0; i < p.stages.size() && i < out.profile.stages.size(); ++i) {
      out.profile.stages[i].busy_s += p.stages[i].busy_s;
    }
  }
  if (out.windows == 0) return std::nullopt;
  out.report = Analyze(out.profile);
  out.agree = int(std::count(bounds.begin(), bounds.end(), out.report.bound));
  return out;
}

std::string FormatReport(const StepProfile& p, const ProfileReport& r) {
  std::string out = fmt::format("{:<12} {:>10} {:>8}\n", "phase", "ms/step", "share");
  for (const auto& row : r.rows) {
    out += fmt::format("{:<12} {:>10.3f} {:>7.1f}%\n", row.phase, row.ms_per_step,
                       100 * row.share);
  }
  out += fmt::format("{:<12} {:>10.3f} {:>7.1f}%\n", "step", r.step_ms, 100.0);
  out += fmt::format("\nsteps         {} ({} rank{})\n", p.steps, p.world_size,
                     p.world_size == 1 ? "" : "s");
  out += fmt::format("throughput    {:.0f} {}/s\n", r.items_per_s, p.unit);
  out += fmt::format("data stall    {:.1f}%\n", 100 * r.data_stall);
  out += fmt::format("model         {:.3f} TFLOP/s per rank", r.tflops);
  out += std::isnan(r.mfu) ? "; MFU unknown (no peak: pass --peak TFLOPS)\n"
                           : fmt::format(", MFU {:.1f}% of {:.3f} TFLOP/s ({})\n", 100 * r.mfu,
                                         p.peak_flops / 1e12, p.peak_source);
  out += fmt::format("memory        ~{:.2f} GB/s (embedding rows and optimizer state){}\n",
                     r.memory_gbs,
                     std::isnan(r.memory_use)
                         ? ""
                         : fmt::format(", {:.1f}% of {:.1f} GB/s measured", 100 * r.memory_use,
                                       p.peak_bytes_per_s / 1e9));
  out += fmt::format("bound         {}: {}\n", r.bound, r.evidence);
  out += fmt::format("try           {}\n", r.advice);
  return out;
}

std::string ProfileJson(const StepProfile& p, const ProfileReport& r) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : p.stages) stages.push_back({{"name", s.name}, {"busy_s", s.busy_s}});
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    rows.push_back({{"phase", row.phase}, {"ms_per_step", row.ms_per_step}, {"share", row.share}});
  }
  const nlohmann::json doc{
      {"profile",
       {{"steps", p.steps},
        {"wall_s", p.wall_s},
        {"phase_s", p.phase_s},
        {"items", p.items},
        {"unit", p.unit},
        {"world_size", p.world_size},
        {"flops_per_item", p.flops_per_item},
        {"peak_flops", p.peak_flops},
        {"peak_source", p.peak_source},
        {"peak_bytes_per_s", p.peak_bytes_per_s},
        {"bytes_per_step", p.bytes_per_step},
        {"loader_threads", p.loader_threads},
        {"stages", stages}}},
      {"report",
       {{"phases", rows},
        {"step_ms", r.step_ms},
        {"data_stall", r.data_stall},
        {"items_per_s", r.items_per_s},
        {"tflops", r.tflops},
        {"mfu", std::isnan(r.mfu) ? nlohmann::json(nullptr) : nlohmann::json(r.mfu)},
        {"memory_gbs", r.memory_gbs},
        {"memory_use",
         std::isnan(r.memory_use) ? nlohmann::json(nullptr) : nlohmann::json(r.memory_use)},
        {"bound", r.bound},
        {"evidence", r.evidence},
        {"advice", r.advice}}}};
  return doc.dump(2) + "\n";
}

StepProfile ReadProfile(const std::filesystem::path& path) {
  try {
    const auto doc = nlohmann::json::parse(ReadFile(path)).at("profile");
    StepProfile p;
    p.steps = doc.at("steps").get<int64_t>();
    p.wall_s = doc.at("wall_s").get<double>();
    p.phase_s = doc.at("phase_s").get<std::map<std::string, double>>();
    // Profiles before 2026-12-02 counted documents ("docs", "flops_per_doc").
    p.items = doc.contains("items") ? doc.at("items").get<double>() : doc.at("docs").get<double>();
    p.unit = doc.value("unit", std::string("docs"));
    p.world_size = doc.at("world_size").get<int>();
    p.flops_per_item = doc.contains("flops_per_item") ? doc.at("flops_per_item").get<double>()
                                                      : doc.at("flops_per_doc").get<double>();
    p.peak_flops = doc.at("peak_flops").get<double>();
    p.peak_source = doc.at("peak_source").get<std::string>();
    p.bytes_per_step = doc.at("bytes_per_step").get<double>();
    p.peak_bytes_per_s = doc.value("peak_bytes_per_s", 0.0);
    p.loader_threads = doc.at("loader_threads").get<int>();
    for (const auto& s : doc.at("stages")) {
      p.stages.push_back({s.at("name").get<std::string>(), s.at("busy_s").get<double>()});
    }
    return p;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw DataError(fmt::format("cannot read the profile: {}", e.what()),
                    ErrorWhere{.file = path.string()},
                    "profile the run again: topspin profile CONFIG --steps N");
  }
}

}  // namespace topspin
