// The AutoTuner on the real step (topspin/train/tune.h).
#include "topspin/train/tune.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <thread>

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#ifdef TOPSPIN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/hash.h"
#include "topspin/model/torch_info.h"
#include "topspin/perf/memory.h"
#include "train/trainer_core.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

class CountingCpuAllocator;
CountingCpuAllocator& Counting();

// Every CPU tensor allocation while trials run: counted, with a peak, and
// refused past a limit with the out-of-memory error a device gives.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  void Wrap(c10::Allocator* base) { base_ = base; }
  void SetLimit(uint64_t bytes) { limit_ = bytes; }
  void ResetPeak() { peak_ = current_.load(); }
  uint64_t peak() const { return peak_.load(); }
  uint64_t current() const { return current_.load(); }

  c10::DataPtr allocate(size_t n) override {
    const uint64_t now = current_.fetch_add(n) + n;
    const uint64_t limit = limit_.load();
    if (limit != 0 && now > limit) {
      current_ -= n;
      C10_THROW_ERROR(OutOfMemoryError,
                      fmt::format("host memory limit: allocating {} would use {} of the {} "
                                  "the tuner allows (--memory-limit)",
                                  FormatBytes(n), FormatBytes(now), FormatBytes(limit)));
    }
    uint64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    void* data = nullptr;
    try {
      data = base_->raw_allocate(n);
    } catch (...) {
      current_ -= n;
      throw;
    }
    {
      std::lock_guard lock(mu_);
      sizes_[data] = n;
    }
    // A simple pointer (context = data): LibTorch's raw_allocate callers
    // need one.
    return {data, data, &Free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

 private:
  static void Free(void* data) {
    CountingCpuAllocator& self = Counting();
    {
      std::lock_guard lock(self.mu_);
      const auto it = self.sizes_.find(data);
      if (it != self.sizes_.end()) {
        self.current_ -= it->second;
        self.sizes_.erase(it);
      }
    }
    self.base_->raw_deallocate(data);
  }
  std::mutex mu_;
  std::unordered_map<void*, size_t> sizes_;
  c10::Allocator* base_ = nullptr;
  std::atomic<uint64_t> current_{0}, peak_{0}, limit_{0};
};

// Lives as long as the process: tensors it counted may outlive a tuner.
CountingCpuAllocator& Counting() {
  static auto* counting = new CountingCpuAllocator;
  return *counting;
}

constexpr uint8_t kAllocatorPriority = 100;

std::string Describe(const std::exception& e) {
  std::string s = e.what();
  const size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

// Keys the trials set (the knobs) and keys that do not change a step: left
// out of the workload hash.
bool OutsideWorkload(const std::string& key) {
  static const char* const kKeys[] = {
      "pipeline.threads", "pipeline.prefetch", "pipeline.batch_size", "pipeline.pinned_memory",
      "optim.grad_accum", "train.torch_threads", "train.steps", "train.log_every",
      "train.eval_every", "train.checkpoint_every", "train.keep_checkpoints", "data.valid"};
  for (const char* k : kKeys) {
    if (key == k) return true;
  }
  return key.rfind("run.", 0) == 0 || key.rfind("train.best.", 0) == 0 ||
         key.rfind("train.early_stop.", 0) == 0;
}

// The LibTorch build, the GPUs and the ranks: the machine fingerprint's part
// that the CPU and memory do not give.
std::string AcceleratorText(int world_size) {
  const TorchInfo t = GetTorchInfo();
  std::string s = fmt::format("libtorch {}; blas {}; ranks {}", t.version, t.blas,
                              std::max(1, world_size));
  for (const GpuInfo& g : t.gpus) {
    s += fmt::format("; {} {} GiB sm_{}{}", g.name, g.memory_bytes >> 30, g.major, g.minor);
  }
  return s;
}

}  // namespace

// ---- StepTrials ---------------------------------------------------------------

struct StepTrials::Impl {
  TuneRequest request;
  Config base;
  Settings settings;
  ComputeDevice device;
  int cores = 1;
  TuneKnobs defaults;
  TuneSpace space;
  uint64_t limit = 0;
  int64_t share = 0;  // per-rank samples of one optimizer step (fixed global batch)
  uint64_t samples_per_epoch = 0;
  std::string unit = "items";
  fs::path run_dir;
  c10::Allocator* previous_allocator = nullptr;
  // The trainer of the current micro-batch and pinned setting.
  std::unique_ptr<Config> config;
  std::unique_ptr<Trainer> trainer;
  TuneKnobs built, live;
  bool have_trainer = false, have_live = false;
  int64_t steps_per_window = 0;

  explicit Impl(const TuneRequest& r)
      : request(r),
        base(Config::Load(r.config, r.overrides, TopspinSchema())),
        settings(Settings::From(base)),
        device(ResolveDevice(settings.train.device, VisibleGpus(), 0)) {}

  void ResetPeak() {
#ifdef TOPSPIN_WITH_CUDA
    if (device.cuda) {
      c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device.index));
      return;
    }
#endif
    Counting().ResetPeak();
  }
  uint64_t Peak() const {
#ifdef TOPSPIN_WITH_CUDA
    if (device.cuda) {
      const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(
          static_cast<c10::DeviceIndex>(device.index));
      return uint64_t(stats.allocated_bytes[0].peak);  // aggregate
    }
#endif
    return Counting().peak();
  }
  void AfterOom() {
    trainer.reset();
    config.reset();
    have_trainer = have_live = false;
#ifdef TOPSPIN_WITH_CUDA
    if (device.cuda) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
  }

  // The trainer for `k`'s micro-batch and pinned setting, with the loader
  // and prefetch ceilings of the search space.
  void Build(const TuneKnobs& k) {
    trainer.reset();  // its memory first
    config.reset();
    have_trainer = have_live = false;
    std::vector<std::string> sets = request.overrides;
    for (const std::string& s :
         {fmt::format("pipeline.threads={}", space.max_loader_threads),
          fmt::format("pipeline.prefetch={}", space.max_prefetch),
          fmt::format("pipeline.batch_size={}", k.micro_batch),
          fmt::format("optim.grad_accum={}", k.grad_accum),
          fmt::format("pipeline.pinned_memory={}", k.pinned ? "true" : "false"),
          std::string("train.steps=1000000000"), std::string("data.valid=")}) {
      sets.push_back(s);
    }
    config = std::make_unique<Config>(Config::Load(request.config, sets, TopspinSchema()));
    TrainOptions o;
    o.run_dir = run_dir;
    o.trial = true;
    trainer = std::make_unique<Trainer>(*config, o);
    samples_per_epoch = trainer->task().training_pipeline().samples_per_epoch();
    unit = trainer->task().unit();
    built = k;
    have_trainer = true;
  }

  bool NeedsBuild(const TuneKnobs& k) const {
    return !have_trainer || k.micro_batch != built.micro_batch ||
           k.grad_accum != built.grad_accum || k.pinned != built.pinned;
  }

  void ApplyLive(const TuneKnobs& k) {
    trainer->task().training_pipeline().SetParallelism(int(k.loader_threads), int(k.prefetch));
    at::set_num_threads(int(k.compute_threads));
    live = k;
    have_live = true;
  }

  double LoaderBusy() {
    double busy = 0;
    for (const StageStats& s : trainer->task().LoaderStages()) busy += s.busy_s;
    return busy;
  }
};

StepTrials::StepTrials(const TuneRequest& request) : impl_(std::make_unique<Impl>(request)) {
  Impl& p = *impl_;
  const int world = std::max(1, request.world_size);
  p.cores = std::max<int>(1, int(sysconf(_SC_NPROCESSORS_ONLN)));
  const int per_rank_cores = std::max(1, p.cores / world);
  const PipelineConfig& pc = p.settings.pipeline;
  if (pc.batch_size % world != 0) {
    throw ConfigError(fmt::format("pipeline.batch_size {} is not a multiple of the {} ranks",
                                  pc.batch_size, world),
                      ErrorWhere{.field = "pipeline.batch_size"},
                      "set a batch size the ranks divide");
  }
  const int64_t torch_threads = p.settings.train.torch_threads;
  p.defaults = {.loader_threads = pc.threads,
                .prefetch = pc.prefetch,
                .compute_threads = torch_threads > 0 ? torch_threads : per_rank_cores,
                .pinned = pc.pinned_memory && p.device.cuda,
                .micro_batch = pc.batch_size / world,
                .grad_accum = p.settings.optim.grad_accum};
  p.share = p.defaults.micro_batch * p.defaults.grad_accum;
  p.space = {.max_loader_threads = std::max<int64_t>(per_rank_cores, pc.threads),
             .max_prefetch = std::max<int64_t>(16, pc.prefetch),
             .max_compute_threads = std::max<int64_t>(per_rank_cores, p.defaults.compute_threads),
             .tune_compute_threads = true,
             .tune_pinned = p.device.cuda};
  p.run_dir = fs::temp_directory_path() / fmt::format("topspin-tune-{}", ::getpid());
  if (!p.device.cuda) {
    c10::Allocator* current = c10::GetCPUAllocator();
    if (current != &Counting()) {
      p.previous_allocator = current;
      Counting().Wrap(current);
      c10::SetCPUAllocator(&Counting(), kAllocatorPriority);
    }
  }
  uint64_t available = 0;
#ifdef TOPSPIN_WITH_CUDA
  if (p.device.cuda) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) available = total_b;
  }
#endif
  if (!p.device.cuda) available = AvailableMemoryBytes() + Counting().current();
  p.limit = ParseMemoryLimit(request.memory_limit, available);
  if (!p.device.cuda) Counting().SetLimit(p.limit);
#ifdef TOPSPIN_WITH_CUDA
  if (p.device.cuda && available > 0) {
    c10::cuda::CUDACachingAllocator::setMemoryFraction(
        std::min(1.0, double(p.limit) / double(available)),
        static_cast<c10::DeviceIndex>(p.device.index));
  }
#endif
  // The config's own micro-batch may not fit the limit: then the smallest
  // (the epoch's sample count is needed either way).
  try {
    p.Build(p.defaults);
  } catch (const c10::OutOfMemoryError&) {
    p.AfterOom();
    TuneKnobs smallest = p.defaults;
    smallest.micro_batch = 1;
    p.Build(smallest);
  }
}

StepTrials::~StepTrials() {
  Impl& p = *impl_;
  p.trainer.reset();
  p.config.reset();
  if (p.previous_allocator) {
    Counting().SetLimit(0);
    c10::SetCPUAllocator(p.previous_allocator, kAllocatorPriority);
  }
  std::error_code ignored;
  fs::remove_all(p.run_dir, ignored);
}

// Runs `fn`; an out-of-memory (the tuner's limit, the device's, the host's)
// destroys the trainer and returns its message, and the process goes on.
template <typename F>
std::optional<std::string> OutOfMemoryIn(StepTrials::Impl& p, F&& fn) {
  try {
    fn();
    return std::nullopt;
  } catch (const c10::OutOfMemoryError& e) {
    p.AfterOom();
    return Describe(e);
  } catch (const std::bad_alloc& e) {
    p.AfterOom();
    return std::string("std::bad_alloc: ") + e.what();
  }
}

TrialOutcome StepTrials::Run(const TuneKnobs& knobs, int windows) {
  Impl& p = *impl_;
  TrialOutcome o;
  const auto start = Clock::now();
  const auto oom = OutOfMemoryIn(p, [&] {
    const bool changed = !p.have_live || !(knobs == p.live) || p.NeedsBuild(knobs);
    if (p.NeedsBuild(knobs)) {
      p.ResetPeak();
      p.Build(knobs);
    }
    if (changed) p.ApplyLive(knobs);
    if (changed || p.steps_per_window == 0) {
      if (p.steps_per_window == 0) {
        p.trainer->RunTrialSteps(2);  // first steps allocate
        const auto one = p.trainer->RunTrialSteps(1);
        p.steps_per_window =
            std::max<int64_t>(2, int64_t(p.request.window_s / std::max(one.seconds, 1e-6) + 0.5));
      } else {
        // Warm-up: the queue refills at the new setting (threads and
        // prefetch change in place; nothing is rebuilt).
        p.trainer->RunTrialSteps(std::max<int64_t>(1, p.steps_per_window / 4));
      }
    }
    double wait = 0, secs = 0;
    const double busy_before = p.LoaderBusy();
    for (int w = 0; w < windows; ++w) {
      const auto t = p.trainer->RunTrialSteps(p.steps_per_window);
      o.windows.push_back(double(t.items) / std::max(t.seconds, 1e-9));
      wait += t.data_wait_s;
      secs += t.seconds;
    }
    o.signals.data_wait_fraction = secs > 0 ? wait / secs : 0;
    o.signals.loader_busy = secs > 0 ? (p.LoaderBusy() - busy_before) / secs : 0;
    o.peak_bytes = p.Peak();
  });
  o.oom = oom.has_value();
  o.error = oom.value_or("");
  o.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return o;
}

MemoryProbe StepTrials::Probe(int64_t batch, const TuneKnobs& base) {
  Impl& p = *impl_;
  TuneKnobs k = base;
  k.micro_batch = batch;
  k.grad_accum = AccumFor(batch);
  MemoryProbe probe{.batch = batch};
  const auto oom = OutOfMemoryIn(p, [&] {
    p.trainer.reset();  // the previous trainer's memory is not this one's
    p.config.reset();
    p.have_trainer = p.have_live = false;
    p.ResetPeak();
    p.Build(k);
    p.ApplyLive(k);
    p.trainer->RunTrialSteps(2);
    probe.peak_bytes = p.Peak();
  });
  probe.oom = oom.has_value();
  probe.error = oom.value_or("");
  return probe;
}

const TuneKnobs& StepTrials::defaults() const { return impl_->defaults; }
TuneSpace StepTrials::space() const { return impl_->space; }
uint64_t StepTrials::limit_bytes() const { return impl_->limit; }
const std::string& StepTrials::unit() const { return impl_->unit; }
const Config& StepTrials::config() const { return impl_->base; }

std::vector<int64_t> StepTrials::AllowedBatches() const {
  const Impl& p = *impl_;
  std::vector<int64_t> allowed;
  if (p.request.free_batch) {
    // At least two batches an epoch on every rank.
    const int64_t cap = std::max<int64_t>(
        1, std::min<int64_t>(int64_t(p.samples_per_epoch) / (2 * std::max(1, p.request.world_size)),
                             int64_t{1} << 16));
    for (int64_t b = 1; b <= cap; ++b) allowed.push_back(b);
  } else {
    for (int64_t d = 1; d <= p.share; ++d) {
      if (p.share % d == 0) allowed.push_back(d);
    }
  }
  return allowed;
}

int64_t StepTrials::AccumFor(int64_t batch) const {
  const Impl& p = *impl_;
  // A batch that does not divide the global batch (a probe outside the
  // allowed ones) keeps the configured accumulation.
  return p.request.free_batch || p.share % batch != 0 ? p.defaults.grad_accum : p.share / batch;
}

// ---- the tuner ------------------------------------------------------------------

fs::path DefaultTuneCacheDir() {
  if (const char* d = std::getenv("TOPSPIN_TUNE_CACHE"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "topspin/tune";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache/topspin/tune";
  return fs::temp_directory_path() / "topspin-tune-cache";
}

uint64_t ParseMemoryLimit(const std::string& text, uint64_t available) {
  const auto bad = [&] {
    return ConfigError(fmt::format("--memory-limit {} is neither a fraction in (0, 1] nor a size "
                                   "like 2GiB",
                                   text),
                       ErrorWhere{.field = "--memory-limit"},
                       "give a fraction of the memory this process can use (0.8) or bytes (2GiB)");
  };
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  const std::string suffix = text.substr(used);
  if (suffix.empty() && v > 0 && v <= 1) {
    if (available == 0) {
      throw ConfigError("--memory-limit is a fraction, but this machine's memory is unknown",
                        ErrorWhere{.field = "--memory-limit"}, "give bytes instead (2GiB)");
    }
    return uint64_t(v * double(available));
  }
  static const std::map<std::string, double> kUnits = {
      {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}};
  if (suffix.empty() && v != std::floor(v)) throw bad();  // bytes are whole
  const auto unit = kUnits.find(suffix);
  // A bare number over 1 is bytes; with a unit, any positive size (1GiB).
  if (unit == kUnits.end() || v <= 0 || (suffix.empty() && v <= 1)) throw bad();
  return uint64_t(v * unit->second);
}

std::string WorkloadHash(const Config& config) {
  std::string text;
  for (const std::string& key : config.schema().Keys()) {
    if (OutsideWorkload(key)) continue;
    text += key + "=" + FormatConfigValue(config.Get(key)) + "\n";
  }
  // The training data's identity: its manifest (the same directory may be
  // converted anew).
  const fs::path manifest = fs::path(config.GetString("data.train")) / "manifest.json";
  std::error_code ec;
  if (fs::exists(manifest, ec)) text += "manifest=" + HexU64(Xxh3(ReadFile(manifest)));
  return HexU64(Xxh3(text));
}

namespace {

json KnobsJson(const TuneKnobs& k) {
  return {{"loader_threads", k.loader_threads}, {"prefetch", k.prefetch},
          {"compute_threads", k.compute_threads}, {"pinned", k.pinned},
          {"micro_batch", k.micro_batch}, {"grad_accum", k.grad_accum}};
}

json TrialJson(const TrialRecord& t) {
  const TrialOutcome& o = t.outcome;
  return {{"search", t.search},
          {"purpose", t.purpose},
          {"knobs", KnobsJson(t.knobs)},
          {"windows", o.windows},
          {"baseline_windows", t.baseline},
          {"mean", o.Mean()},
          {"stderr", o.StdErr()},
          {"data_wait_fraction", o.signals.data_wait_fraction},
          {"loader_busy", o.signals.loader_busy},
          {"peak_bytes", o.peak_bytes},
          {"oom", o.oom},
          {"error", o.error},
          {"seconds", o.seconds},
          {"accepted", t.accepted}};
}

std::string Rate(double v, const std::string& unit) {
  return v >= 1e6   ? fmt::format("{:.3g}M {}/s", v / 1e6, unit)
         : v >= 1e3 ? fmt::format("{:.3g}k {}/s", v / 1e3, unit)
                    : fmt::format("{:.3g} {}/s", v, unit);
}

}  // namespace

TuneReport Tune(const TuneRequest& request) {
  const auto started = Clock::now();
  const auto say = [&](const std::string& line) {
    if (request.say) request.say(line);
  };
  TuneReport report;
  const Config base = Config::Load(request.config, request.overrides, TopspinSchema());
  report.workload = WorkloadHash(base);
  report.machine = FingerprintMachine(AcceleratorText(request.world_size));
  const fs::path cache_dir = request.cache_dir.empty() ? DefaultTuneCacheDir() : request.cache_dir;
  // The limit and the batch policy change the answer: part of the key.
  const std::string key = HexU64(Xxh3(fmt::format("{}|{}|{}|{}|{}|{}", report.machine.hash,
                                                  report.workload, request.memory_limit,
                                                  request.margin, request.free_batch,
                                                  request.tune_batch)));
  report.cache_file = cache_dir / (key + ".json");
  std::error_code ec;
  if (request.use_cache && fs::exists(report.cache_file, ec)) {
    const json j = json::parse(ReadFile(report.cache_file));
    report.cache_hit = true;
    report.sets = j.at("sets").get<std::vector<std::string>>();
    report.yaml = j.at("yaml").get<std::string>();
    report.unit = j.at("unit").get<std::string>();
    report.defaults_rate = j.at("defaults_rate").get<double>();
    report.tuned_rate = j.at("tuned_rate").get<double>();
    report.trials = j.at("trials").get<int>();
    report.summary = j.at("summary").get<std::vector<std::string>>();
    report.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    say(fmt::format("tune: cache hit {} (machine {}, workload {})", report.cache_file.string(),
                    report.machine.hash, report.workload));
    return report;
  }

  if (request.cache_only) {
    throw ConfigError(fmt::format("no tuning result for this machine and workload in {}",
                                  cache_dir.string()),
                      ErrorWhere{.file = report.cache_file.string()},
                      "run topspin tune CONFIG (with --nproc N for a job of N ranks) first, or "
                      "train with --tune from the launcher");
  }
  StepTrials trials(request);
  const std::string& unit = trials.unit();
  report.unit = unit;
  std::vector<TrialRecord> log;
  TuneOptions topt;
  topt.budget_s = request.budget_s;

  // 1. The config's own settings, for comparison.
  say(fmt::format("tune: the config's own settings ({})", trials.defaults().Describe()));
  TrialOutcome defaults = trials.Run(trials.defaults(), topt.min_windows);
  log.push_back({.search = "defaults", .purpose = "the config's own settings",
                 .knobs = trials.defaults(), .outcome = defaults});
  if (defaults.oom) {
    if (!request.tune_batch) {
      throw ConfigError(fmt::format("the config's own settings ran out of memory: {}",
                                    defaults.error),
                        ErrorWhere{.field = "pipeline.batch_size"},
                        "lower pipeline.batch_size, raise --memory-limit, or tune the batch");
    }
    say("tune:   out of memory under the limit: " + defaults.error);
  } else {
    say(fmt::format("tune:   {} +- {:.1f}%", Rate(defaults.Mean(), unit),
                    100 * defaults.StdErr() / std::max(1e-9, defaults.Mean())));
  }

  // 2. The micro-batch: the largest that fits with the margin.
  TuneKnobs start = trials.defaults();
  BatchSearchResult batch;
  std::string batch_why;
  if (request.tune_batch) {
    say(fmt::format("tune: micro-batch under {} ({}% margin)", FormatBytes(trials.limit_bytes()),
                    int(100 * request.margin + 0.5)));
    BatchSearchOptions bo{.limit_bytes = trials.limit_bytes(),
                          .margin = request.margin,
                          .allowed = trials.AllowedBatches(),
                          .first_probe = trials.defaults().micro_batch};
    batch = SearchBatch([&](int64_t b) { return trials.Probe(b, trials.defaults()); }, bo);
    for (const MemoryProbe& p : batch.probes) {
      TrialRecord r{.search = "batch", .purpose = "memory probe",
                    .knobs = trials.defaults()};
      r.knobs.micro_batch = p.batch;
      r.knobs.grad_accum = trials.AccumFor(p.batch);
      r.outcome.peak_bytes = p.peak_bytes;
      r.outcome.oom = p.oom;
      r.outcome.error = p.error;
      r.accepted = p.batch == batch.batch;
      log.push_back(r);
      say(fmt::format("tune:   batch {}: {}", p.batch,
                      p.oom ? "out of memory (" + p.error + ")" : FormatBytes(p.peak_bytes)));
    }
    if (batch.batch == 0) {
      throw ConfigError("no micro-batch fits the memory limit: " + batch.why,
                          ErrorWhere{.field = "pipeline.batch_size"},
                          "raise --memory-limit, or make the model smaller");
    }
    start.micro_batch = batch.batch;
    start.grad_accum = trials.AccumFor(batch.batch);
    batch_why = fmt::format("peak {} of {} per rank at {}, {} probe{}", FormatBytes(batch.peak_bytes),
                            FormatBytes(trials.limit_bytes()), batch.batch, batch.probes.size(),
                            batch.probes.size() == 1 ? "" : "s");
    if (batch.model.per_sample > 0) {
      batch_why += fmt::format("; fitted {} + {} per sample",
                               FormatBytes(uint64_t(std::max(0.0, batch.model.fixed))),
                               FormatBytes(uint64_t(batch.model.per_sample)));
    }
    if (batch.batch == bo.allowed.back()) batch_why += "; the largest allowed";
  }

  // 3. Loader, prefetch, compute threads (and pinned memory on CUDA).
  say("tune: loader, prefetch and compute threads");
  // The config's own loader setting at the chosen batch may be one the
  // climb did not visit: it faces the best in turns, and wins only beyond
  // the noise.
  TuneKnobs own = trials.defaults();
  own.micro_batch = start.micro_batch;
  own.grad_accum = start.grad_accum;
  const ThroughputResult tr = TuneThroughput(trials, start, trials.space(), topt, {own});
  for (const TrialRecord& t : tr.trials) {
    log.push_back(t);
    const double base = t.baseline.empty() ? 0 : TrialOutcome{.windows = t.baseline}.Mean();
    say(fmt::format("tune:   {}: {}{}{}", t.knobs.Describe(), Rate(t.outcome.Mean(), unit),
                    base > 0 ? fmt::format(", {:+.1f}% vs the best in turns",
                                           100 * (t.outcome.Mean() / base - 1))
                             : "",
                    t.accepted ? " (kept)" : ""));
  }
  const TuneKnobs best = tr.best;
  const double best_rate = tr.best_mean;
  // The headline ratio is the one measured in turns (the challenger's
  // trial), not two means taken minutes apart.
  report.defaults_rate = defaults.Mean();
  report.tuned_rate = best_rate;
  if (best == own) {
    report.defaults_rate = best_rate;  // the config's own settings won
  } else {
    for (const TrialRecord& t : tr.trials) {
      if (t.knobs == own && !t.baseline.empty()) {
        report.defaults_rate = t.outcome.Mean();
        report.tuned_rate = TrialOutcome{.windows = t.baseline}.Mean();
      }
    }
  }

  // The settings, and the tuned config with a comment per choice.
  const int world = std::max(1, request.world_size);
  std::map<std::string, std::string, std::less<>> notes;
  for (const auto& [k, why] : tr.reasons) notes[k] = "tuned " + why;
  report.sets = {fmt::format("pipeline.threads={}", best.loader_threads),
                 fmt::format("pipeline.prefetch={}", best.prefetch),
                 fmt::format("train.torch_threads={}", best.compute_threads)};
  if (trials.space().tune_pinned) {
    report.sets.push_back(fmt::format("pipeline.pinned_memory={}", best.pinned));
  } else {
    notes.erase("pipeline.pinned_memory");
  }
  if (request.tune_batch) {
    report.sets.push_back(fmt::format("pipeline.batch_size={}", best.micro_batch * world));
    report.sets.push_back(fmt::format("optim.grad_accum={}", best.grad_accum));
    const bool changes_math = best.micro_batch * best.grad_accum !=
                              trials.defaults().micro_batch * trials.defaults().grad_accum;
    notes["pipeline.batch_size"] = fmt::format("tuned {} per rank: {}{}", best.micro_batch,
                                               batch_why,
                                               changes_math ? "; CHANGES THE GLOBAL BATCH "
                                                              "(--free-batch): retune the "
                                                              "learning rate"
                                                            : "");
    notes["optim.grad_accum"] =
        changes_math ? "tuned: as the config had it, with a new global batch"
                     : fmt::format("tuned: keeps the global batch {} ({} x {} x {} ranks)",
                                   best.micro_batch * best.grad_accum * world, best.micro_batch,
                                   best.grad_accum, world);
  }
  std::vector<std::string> tuned_overrides = request.overrides;
  tuned_overrides.insert(tuned_overrides.end(), report.sets.begin(), report.sets.end());
  const Config tuned = Config::Load(request.config, tuned_overrides, TopspinSchema());
  report.trials = int(log.size());
  report.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  report.summary = {
      fmt::format("tuned     {}", best.Describe()),
      fmt::format("measured  {} tuned, {} with the config's own settings ({:.2f}x, in turns)",
                  Rate(report.tuned_rate, unit), Rate(report.defaults_rate, unit),
                  report.tuned_rate / std::max(1e-9, report.defaults_rate)),
      fmt::format("trials    {} in {:.0f} s{}", report.trials, report.seconds,
                  tr.budget_hit ? " (the budget ended the search)" : ""),
  };
  report.yaml = fmt::format(
      "# topspin tune {} ({} rank{}): settings measured on this machine\n"
      "# machine {} ({}); workload {}\n"
      "# {}\n# {}\n# {}\n",
      request.config.string(), world, world == 1 ? "" : "s", report.machine.hash,
      report.machine.text, report.workload, report.summary[0], report.summary[1],
      report.summary[2]);
  report.yaml += tuned.ToYaml(/*with_origins=*/true, notes, /*only_set=*/true);

  if (!request.log.empty()) {
    std::string lines;
    for (const TrialRecord& t : log) lines += TrialJson(t).dump() + "\n";
    WriteFileAtomic(request.log, lines);
  }
  fs::create_directories(cache_dir, ec);
  const json cached = {{"machine", report.machine.text},  {"workload", report.workload},
                       {"sets", report.sets},             {"yaml", report.yaml},
                       {"unit", report.unit},             {"defaults_rate", report.defaults_rate},
                       {"tuned_rate", report.tuned_rate}, {"trials", report.trials},
                       {"summary", report.summary}};
  WriteFileAtomic(report.cache_file, cached.dump(2) + "\n");
  return report;
}

}  // namespace topspin
