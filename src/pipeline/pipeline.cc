// The pipeline's scheduler: plans batches in order, loads the units they
// need in first-use order into an LRU cache, assembles batches on any
// worker, and hands them to the consumer strictly in order.
//
// Everything below `mu` is guarded by it; workers drop it while they read,
// decode, transform or assemble. A batch may only be assembled while its
// sequence number is below consume_seq + prefetch (the bounded queue), and
// only units for at most prefetch + threads planned batches are loaded
// ahead. A unit that does not fit the cache budget is still loaded when the
// oldest unfinished batch needs it, so the consumer always makes progress.
#include "topspin/pipeline/pipeline.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pipeline/source.h"
#include "topspin/core/error.h"
#include "topspin/core/fault.h"

namespace topspin {

using namespace pipeline_internal;
using Clock = std::chrono::steady_clock;

namespace {

uint64_t NanosSince(Clock::time_point t) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count());
}

// The units one batch uses, looked up without the scheduler's lock.
class BatchUnits final : public UnitLookup {
 public:
  std::vector<std::pair<size_t, std::shared_ptr<const Unit>>> units;  // sorted by index
  const Unit* Get(size_t u) const override {
    const auto it = std::lower_bound(units.begin(), units.end(), u,
                                     [](const auto& e, size_t v) { return e.first < v; });
    return it != units.end() && it->first == u ? it->second.get() : nullptr;
  }
};

}  // namespace

struct Pipeline::Impl {
  struct Planned {
    uint64_t seq, epoch, index;
    std::vector<uint64_t> samples;
    std::vector<size_t> units;
    size_t missing = 0;  // units not yet loaded (or failed)
  };
  enum class UnitState { kQueued, kLoading, kReady, kFailed, kSkipped };
  struct Entry {
    UnitState state = UnitState::kQueued;
    std::shared_ptr<const Unit> unit;
    std::exception_ptr error;
    int refs = 0;  // planned, unassembled batches using it
    uint64_t first_seq = 0;
    uint64_t epoch = 0;             // of the batch its load was queued for
    std::vector<uint64_t> waiters;  // seqs of planned batches waiting for it
    std::list<size_t>::iterator lru;
    bool in_lru = false;
  };
  struct Result {
    BatchPtr batch{nullptr, BatchReturn{nullptr}};
    std::exception_ptr error;
    uint64_t epoch = 0, index = 0, rows = 0;
  };
  struct AssembleJob {
    Planned plan;
    BatchUnits units;
    BatchPtr batch{nullptr, BatchReturn{nullptr}};
    std::exception_ptr error;
  };
  struct WorkerCounters {
    std::atomic<uint64_t> busy_ns{0}, wait_input_ns{0}, wait_output_ns{0};
  };
  // A load's pieces (LoadHelpers::For), on the help board while it runs.
  struct HelpJob {
    Stage stage;
    size_t n;
    const std::function<void(size_t)>* fn;
    std::atomic<size_t> next{0}, finished{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;  // the first piece's that threw; guarded by `mu`
  };
  class Helpers;

  Impl(std::unique_ptr<Source> src, const PipelineOptions& o, const PipelineState& start);
  void Start(const std::weak_ptr<Impl>& self);
  void Stop();

  // ---- workers ----
  void WorkerLoop(size_t w);
  // Called and returns with the lock held; true when it dropped the lock
  // to plan batches.
  bool Plan(std::unique_lock<std::mutex>& lock);
  void SamplesOf(uint64_t epoch, uint64_t index, std::vector<uint64_t>& out);
  bool ClaimAssembleLocked(AssembleJob& job);
  // Assembles a claimed job on worker w (without the lock); returns the rows written.
  uint64_t RunAssemble(AssembleJob& job, size_t w);
  void FinishAssembleLocked(AssembleJob& job, uint64_t rows);
  bool ClaimLoadLocked(size_t& unit);
  std::shared_ptr<HelpJob> ClaimHelpLocked();
  void RunPieces(HelpJob& job, size_t w, bool timed);
  void FinishLoadLocked(size_t unit, std::shared_ptr<const Unit> loaded, std::exception_ptr error);
  void Release(size_t unit);
  void EvictLocked(size_t need);
  void WarnOverCacheLocked() const;
  void WarnReloadsLocked() const;
  void NoteReadyChangeLocked();

  // ---- consumer ----
  BatchPtr Next();
  PipelineStats Stats() const;

  PipelineOptions opt;
  std::unique_ptr<Source> source;
  SampleOrder order;
  BatchSlice slice;
  uint64_t bpe;
  BatchLayout layout;
  std::shared_ptr<BatchPool> pool;
  StageCounters stages;
  std::vector<std::unique_ptr<WorkerCounters>> worker_counters;
  std::vector<std::thread> threads;
  std::vector<int> trace_tracks;  // per worker, when opt.trace is set
  int consumer_track = 0;         // Next()'s waits, when opt.trace is set
  Clock::time_point created = Clock::now();

  mutable std::mutex mu;
  std::condition_variable work_cv;      // workers wait here
  std::condition_variable consumer_cv;  // Next() waits here
  bool consumer_waiting = false;        // ... now, for batch consume_seq
  bool stop = false;
  // SetParallelism: workers at or past `active_threads` park; batches are
  // assembled at most `active_prefetch` ahead (both at most their options).
  int active_threads = 0, active_prefetch = 0;
  // Planning: the next batch to plan.
  uint64_t plan_epoch, plan_index, next_seq = 0;
  bool plan_done = false;
  bool planning = false;  // a worker is computing plans without the lock
  struct Ahead {          // samples of the next batches (SamplesOf); the planner's alone
    uint64_t epoch = UINT64_MAX, first = 0;
    std::vector<size_t> starts;  // batch k's samples are [starts[k], starts[k + 1])
    std::vector<uint64_t> positions, samples;
  } ahead;
  std::deque<Planned> pending;  // planned, not yet claimed, by seq
  // Units.
  std::unordered_map<size_t, Entry> entries;
  std::deque<size_t> load_queue;
  std::vector<std::shared_ptr<HelpJob>> help;  // loads' pieces idle workers may run
  std::condition_variable help_cv;             // a load waits here for its last pieces
  std::list<size_t> lru;  // ready units no planned batch uses; front = least recent
  size_t resident_bytes = 0, unit_estimate = 0;
  uint64_t cache_loads = 0, cache_hits = 0, cache_reloads = 0, skipped_units = 0;
  // Per unit: 1 + the epoch its last successful load was for (0: none), to
  // count a unit transformed twice for one epoch (evicted too early).
  std::vector<uint64_t> loaded_for_epoch;
  bool warned_over_cache = false;  // WarnOverCacheLocked, once
  bool warned_reloads = false;     // WarnReloadsLocked, once
  // Output.
  std::map<uint64_t, Result> ready;
  std::set<uint64_t> unfinished;
  uint64_t consume_seq = 0;
  std::exception_ptr failure;
  PipelineState state;
  uint64_t batches = 0, samples = 0, rows = 0, consumer_wait_ns = 0;
  double ready_integral = 0;  // sum of ready.size() * seconds
  Clock::time_point ready_changed = Clock::now();
};

Pipeline::Impl::Impl(std::unique_ptr<Source> src, const PipelineOptions& o,
                     const PipelineState& start)
    : opt(o),
      source(std::move(src)),
      order(source->samples(), SampleOrderOptions{.mode = o.shuffle,
                                                  .seed = o.seed,
                                                  .block_size = source->block_size(),
                                                  .window_blocks = o.window_blocks}),
      slice(RankSlice(o.batch_size, o.rank, o.world_size)),
      bpe(BatchesPerEpoch(source->samples(), o.batch_size, o.drop_last)),
      layout(source->Layout(slice.size())),
      plan_epoch(start.epoch),
      plan_index(start.next_batch),
      state(start) {
  if (o.threads < 1 || o.prefetch < 1) {
    throw ConfigError(
        fmt::format("pipeline threads {} and prefetch {} must be at least 1", o.threads,
                    o.prefetch),
        ErrorWhere{.field = o.threads < 1 ? "pipeline.threads" : "pipeline.prefetch"});
  }
  if (bpe == 0) {
    throw ConfigError(fmt::format("the dataset has {} samples, fewer than one global batch of {}",
                                  source->samples(), o.batch_size),
                      ErrorWhere{.field = "pipeline.batch_size"},
                      "lower pipeline.batch_size or set pipeline.drop_last: false");
  }
  const bool resuming = start.epoch != 0 || start.next_batch != 0;
  if (resuming && start.seed != o.seed) {
    throw ConfigError(fmt::format("resuming a pipeline of seed {} with seed {}: the order would "
                                  "differ",
                                  start.seed, o.seed),
                      ErrorWhere{.field = "run.seed"}, "resume with the run's original seed");
  }
  if (start.next_batch >= bpe) {
    throw ConfigError(
        fmt::format("resume point batch {} is past the epoch's {} batches", start.next_batch, bpe),
        ErrorWhere{.field = "pipeline"},
        "the batch size or dataset changed since the state was saved");
  }
  state.seed = o.seed;
  active_threads = o.threads;
  active_prefetch = o.prefetch;
  plan_done = o.max_epochs != 0 && plan_epoch >= o.max_epochs;
  pool = BatchPool::Create(layout, static_cast<size_t>(o.prefetch + o.threads + 2), o.allocator);
  loaded_for_epoch.assign(source->units(), 0);
}

void Pipeline::Impl::Start(const std::weak_ptr<Impl>& self) {
  // A batch returned to the pool may unblock a worker waiting for a buffer.
  pool->SetOnReturn([self] {
    if (const auto impl = self.lock()) {
      std::lock_guard lock(impl->mu);
      impl->work_cv.notify_all();
    }
  });
  for (int w = 0; w < opt.threads; ++w) {
    worker_counters.push_back(std::make_unique<WorkerCounters>());
    trace_tracks.push_back(
        opt.trace ? opt.trace->Track(fmt::format("rank {} loader {}", opt.rank, w)) : 0);
  }
  if (opt.trace) consumer_track = opt.trace->Track(fmt::format("rank {} Next() waits", opt.rank));
  for (int w = 0; w < opt.threads; ++w) {
    threads.emplace_back([this, w] { WorkerLoop(static_cast<size_t>(w)); });
  }
}

void Pipeline::Impl::Stop() {
  {
    std::lock_guard lock(mu);
    stop = true;
  }
  work_cv.notify_all();
  consumer_cv.notify_all();
  for (auto& t : threads) t.join();
  threads.clear();
  pool->SetOnReturn(nullptr);
}

// ---- planning ------------------------------------------------------------------

// This rank's samples of batch `index` of `epoch`. The samples of the next
// kAhead batches of the epoch are computed in one call and kept: the keyed
// permutation then runs over full vector lanes, where one batch's 64
// samples leave most lanes idle while the last ones walk. Only the planner
// (the worker that set `planning`) calls it.
void Pipeline::Impl::SamplesOf(uint64_t epoch, uint64_t index, std::vector<uint64_t>& out) {
  constexpr uint64_t kAhead = 16;
  const uint64_t n = source->samples();
  const auto range = [&](uint64_t i) {
    const uint64_t base = i * opt.batch_size;
    return std::pair{std::min(base + slice.begin, n), std::min(base + slice.end, n)};
  };
  const auto batches = [&] { return ahead.starts.empty() ? 0 : ahead.starts.size() - 1; };
  if (ahead.epoch != epoch || index < ahead.first || index >= ahead.first + batches()) {
    ahead.epoch = epoch;
    ahead.first = index;
    ahead.starts = {0};
    ahead.positions.clear();
    for (uint64_t i = index; i < std::min(index + kAhead, bpe); ++i) {
      const auto [first, last] = range(i);
      for (uint64_t pos = first; pos < last; ++pos) ahead.positions.push_back(pos);
      ahead.starts.push_back(ahead.positions.size());
    }
    ahead.samples.resize(ahead.positions.size());
    order.AtMany(epoch, ahead.positions, ahead.samples.data());
  }
  const size_t k = index - ahead.first;
  const size_t begin = ahead.starts[k], end = ahead.starts[k + 1];
  out.assign(ahead.samples.begin() + static_cast<std::ptrdiff_t>(begin),
             ahead.samples.begin() + static_cast<std::ptrdiff_t>(end));
}

// Plans batches up to the lookahead. A batch's samples cost tens of Philox
// calls each (the keyed permutation), so one planner at a time computes
// them without the lock, and the plans then join `pending` in order;
// under the lock, planning serialised the workers.
bool Pipeline::Impl::Plan(std::unique_lock<std::mutex>& lock) {
  bool planned = false;
  while (!planning && !plan_done &&
         next_seq < consume_seq + static_cast<uint64_t>(active_prefetch + active_threads)) {
    planning = true;
    std::vector<Planned> plans;
    uint64_t epoch = plan_epoch, index = plan_index;
    bool done = false;
    const uint64_t wanted =
        consume_seq + static_cast<uint64_t>(active_prefetch + active_threads) - next_seq;
    for (uint64_t k = 0; k < wanted && !done; ++k) {
      plans.push_back(Planned{.seq = next_seq + k, .epoch = epoch, .index = index});
      if (++index == bpe) {
        index = 0;
        ++epoch;
        done = opt.max_epochs != 0 && epoch >= opt.max_epochs;
      }
    }
    lock.unlock();
    for (Planned& p : plans) {
      SamplesOf(p.epoch, p.index, p.samples);
      for (uint64_t sample : p.samples) source->UnitsOf(p.epoch, sample, p.units);
      std::sort(p.units.begin(), p.units.end());
      p.units.erase(std::unique(p.units.begin(), p.units.end()), p.units.end());
    }
    lock.lock();
    for (Planned& p : plans) {
      for (size_t u : p.units) {
        auto [it, inserted] = entries.try_emplace(u);
        Entry& e = it->second;
        if (inserted) {
          e.first_seq = p.seq;
          e.epoch = p.epoch;
          load_queue.push_back(u);
          if (loaded_for_epoch[u] == p.epoch + 1) ++cache_reloads;
        } else if (e.state == UnitState::kReady) {
          ++cache_hits;
        }
        if (e.in_lru) {
          lru.erase(e.lru);
          e.in_lru = false;
        }
        ++e.refs;
        if (e.state == UnitState::kQueued || e.state == UnitState::kLoading) {
          ++p.missing;
          e.waiters.push_back(p.seq);
        }
      }
      unfinished.insert(p.seq);
      pending.push_back(std::move(p));
    }
    next_seq += plans.size();
    plan_epoch = epoch;
    plan_index = index;
    plan_done = done;
    planning = false;
    planned = true;
  }
  if (planned) work_cv.notify_all();  // workers that found nothing while we planned
  return planned;
}

// ---- assembly ------------------------------------------------------------------

bool Pipeline::Impl::ClaimAssembleLocked(AssembleJob& job) {
  for (auto it = pending.begin(); it != pending.end(); ++it) {
    if (it->seq >= consume_seq + static_cast<uint64_t>(active_prefetch)) return false;
    if (it->missing != 0) continue;
    job.error = nullptr;
    job.units.units.clear();
    for (size_t u : it->units) {
      const Entry& e = entries.at(u);
      if (e.state == UnitState::kFailed && !job.error) job.error = e.error;
      if (e.state == UnitState::kReady) job.units.units.emplace_back(u, e.unit);
    }
    if (!job.error) {
      job.batch = pool->TryAcquire();
      if (!job.batch) return false;  // every buffer is out: wait for one
    }
    job.plan = std::move(*it);
    pending.erase(it);
    return true;
  }
  return false;
}

uint64_t Pipeline::Impl::RunAssemble(AssembleJob& job, size_t w) {
  uint64_t written = 0;
  if (!job.error) {
    StageClock clock(stages, worker_counters[w]->busy_ns, opt.trace, trace_tracks[w]);
    try {
      job.batch->epoch = job.plan.epoch;
      job.batch->index = job.plan.index;
      written = source->Assemble(job.plan.epoch, job.plan.samples, job.units, *job.batch);
      InjectFault("loader.batch");
      clock.Lap(kAssemble, job.batch->FilledBytes());
    } catch (...) {
      job.error = std::current_exception();
      job.batch.reset();  // back to the pool before taking the lock
    }
  }
  job.units.units.clear();
  return written;
}

void Pipeline::Impl::FinishAssembleLocked(AssembleJob& job, uint64_t rows_written) {
  Result& r = ready[job.plan.seq];
  r.batch = std::move(job.batch);
  r.error = job.error;
  r.epoch = job.plan.epoch;
  r.index = job.plan.index;
  r.rows = rows_written;
  unfinished.erase(job.plan.seq);
  for (size_t u : job.plan.units) Release(u);
  NoteReadyChangeLocked();
  // Only the batch the consumer waits for wakes it: a wake for any other
  // costs it a switch in and out, on the cores the workers need.
  if (consumer_waiting && job.plan.seq == consume_seq) consumer_cv.notify_one();
}

void Pipeline::Impl::Release(size_t u) {
  Entry& e = entries.at(u);
  if (--e.refs > 0) return;
  if (e.state == UnitState::kReady) {
    e.lru = lru.insert(lru.end(), u);
    e.in_lru = true;
  } else {
    entries.erase(u);  // failed or skipped: nothing to keep
  }
}

// ---- loading -------------------------------------------------------------------

void Pipeline::Impl::EvictLocked(size_t need) {
  while (resident_bytes + need > opt.cache_bytes && !lru.empty()) {
    const size_t u = lru.front();
    lru.pop_front();
    resident_bytes -= entries.at(u).unit->bytes;
    entries.erase(u);
  }
}

// Units that batches in flight need are kept whatever the budget, so
// memory is over `cache_bytes`: say why, once, and what bounds it.
void Pipeline::Impl::WarnOverCacheLocked() const {
  const double mib = double(resident_bytes) / double(1 << 20),
               budget = double(opt.cache_bytes) / double(1 << 20);
  const char* why =
      opt.shuffle == ShuffleMode::kGlobal
          ? "a global shuffle draws each batch from nearly every row group, so memory grows "
            "with the dataset; for data larger than memory set pipeline.shuffle: block "
            "(docs/PIPELINE.md)"
          : "the batches in flight need more row groups than fit; raise pipeline.cache_mib, "
            "or lower pipeline.window_blocks or pipeline.prefetch";
  spdlog::warn(
      "pipeline: transformed row groups hold {:.1f} MiB, over pipeline.cache_mib "
      "({:.1f} MiB), because batches in flight need them: {}",
      mib, budget, why);
}

// Units evicted while their epoch still needed them were read, decoded and
// transformed again: each costs a whole row group's load for a few
// samples, and under a global shuffle of data larger than the cache nearly
// every sample does. Say so, once, with the numbers and what to set.
void Pipeline::Impl::WarnReloadsLocked() const {
  const double mib = 1.0 / double(1 << 20);
  const double all = double(unit_estimate) * double(source->units()) * mib;
  const std::string what =
      opt.shuffle == ShuffleMode::kGlobal
          ? fmt::format(
                "a global shuffle draws every batch from the whole dataset, about {:.0f} "
                "MiB transformed; set pipeline.shuffle: block for data larger than "
                "memory (docs/PIPELINE.md), or raise pipeline.cache_mib above that",
                all)
          : fmt::format(
                "a window of {} row groups, about {:.0f} MiB transformed, does not fit; "
                "raise pipeline.cache_mib above that or lower pipeline.window_blocks",
                opt.window_blocks, double(unit_estimate) * double(opt.window_blocks) * mib);
  spdlog::warn(
      "pipeline: {} of {} row group loads so far transformed a row group again for the same "
      "epoch ({} row groups): pipeline.cache_mib ({:.1f} MiB) let them go while the epoch still "
      "needed them, so loading costs several times what it should; {}",
      cache_reloads, cache_loads, source->units(), double(opt.cache_bytes) * mib, what);
}

bool Pipeline::Impl::ClaimLoadLocked(size_t& unit) {
  if (load_queue.empty()) return false;
  const size_t u = load_queue.front();
  EvictLocked(unit_estimate);
  const bool fits = resident_bytes + unit_estimate <= opt.cache_bytes;
  const uint64_t oldest = unfinished.empty() ? next_seq : *unfinished.begin();
  if (!fits && entries.at(u).first_seq > oldest) return false;
  load_queue.pop_front();
  entries.at(u).state = UnitState::kLoading;
  resident_bytes += unit_estimate;  // reserved; corrected when it loads
  unit = u;
  return true;
}

void Pipeline::Impl::FinishLoadLocked(size_t u, std::shared_ptr<const Unit> loaded,
                                      std::exception_ptr error) {
  Entry& e = entries.at(u);
  resident_bytes -= unit_estimate;
  if (loaded) {
    e.state = UnitState::kReady;
    e.unit = std::move(loaded);
    resident_bytes += e.unit->bytes;
    unit_estimate = std::max(unit_estimate, e.unit->bytes);
    ++cache_loads;
    loaded_for_epoch[u] = e.epoch + 1;
    if (resident_bytes > opt.cache_bytes && !warned_over_cache) {
      warned_over_cache = true;
      WarnOverCacheLocked();
    }
    // As many reloads as units (at most 256, so that a dataset of many
    // units is told early): the order reuses units after the cache has let
    // them go.
    if (!warned_reloads && cache_reloads >= std::clamp<size_t>(source->units(), 4, 256)) {
      warned_reloads = true;
      WarnReloadsLocked();
    }
  } else {
    bool skip = false;
    if (opt.on_error == OnError::kSkip) {
      try {
        std::rethrow_exception(error);
      } catch (const Error& err) {
        skip = err.kind() == ErrorKind::kData;
      } catch (...) {
      }
    }
    e.state = skip ? UnitState::kSkipped : UnitState::kFailed;
    e.error = skip ? nullptr : error;
    skipped_units += skip ? 1 : 0;
  }
  for (uint64_t seq : e.waiters) {
    for (auto& p : pending) {
      if (p.seq == seq) --p.missing;
    }
  }
  e.waiters.clear();
}

// ---- sharing a load with idle workers ----------------------------------------------

class Pipeline::Impl::Helpers final : public LoadHelpers {
 public:
  Helpers(Impl& impl, size_t w) : impl_(impl), w_(w) {}
  void For(Stage stage, size_t n, const std::function<void(size_t)>& fn) override {
    auto job = std::make_shared<HelpJob>();
    job->stage = stage;
    job->n = n;
    job->fn = &fn;
    // Worth publishing only when another worker could be idle. The caller
    // times its own pieces through its StageClock, not here.
    bool shared = false;
    if (n > 1) {
      std::lock_guard lock(impl_.mu);
      shared = impl_.active_threads > 1;
      if (shared) {
        impl_.help.push_back(job);
        impl_.work_cv.notify_all();
      }
    }
    impl_.RunPieces(*job, w_, /*timed=*/false);
    if (shared) {
      std::unique_lock lock(impl_.mu);
      impl_.help_cv.wait(lock, [&] { return job->finished.load() == n; });
      std::erase(impl_.help, job);
    }
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  Impl& impl_;
  size_t w_;
};

std::shared_ptr<Pipeline::Impl::HelpJob> Pipeline::Impl::ClaimHelpLocked() {
  for (const auto& job : help) {
    if (job->next.load() < job->n) return job;
  }
  return nullptr;
}

void Pipeline::Impl::RunPieces(HelpJob& job, size_t w, bool timed) {
  const auto start = Clock::now();
  size_t ran = 0;
  for (size_t i; (i = job.next++) < job.n; ++ran) {
    if (job.failed.load()) continue;  // a piece failed: the load fails, skip the rest
    try {
      (*job.fn)(i);
    } catch (...) {
      std::lock_guard lock(mu);
      if (!job.error) job.error = std::current_exception();
      job.failed = true;
    }
  }
  if (timed && ran > 0) {  // a helper: its time counts to the load's stage
    const uint64_t ns = NanosSince(start);
    stages.busy_ns[job.stage] += ns;
    worker_counters[w]->busy_ns += ns;
    if (opt.trace != nullptr) {
      const double secs = double(ns) * 1e-9;
      opt.trace->Complete(trace_tracks[w], fmt::format("{} (helping)", kStageNames[job.stage]),
                          "loader", opt.trace->Now() - secs, secs);
    }
  }
  if (ran > 0 && (job.finished += ran) == job.n) {
    std::lock_guard lock(mu);
    help_cv.notify_all();
  }
}

// ---- the worker loop -----------------------------------------------------------------

void Pipeline::Impl::WorkerLoop(size_t w) {
  WorkerCounters& counters = *worker_counters[w];
  Table scratch;
  std::unique_lock lock(mu);
  while (!stop) {
    if (w >= static_cast<size_t>(active_threads)) {  // parked by SetParallelism
      work_cv.wait(lock);
      continue;
    }
    // Planning drops the lock: whatever changed meanwhile (stop, parking)
    // is seen from the top.
    if (Plan(lock)) continue;
    AssembleJob job;
    if (ClaimAssembleLocked(job)) {
      lock.unlock();
      const uint64_t written = RunAssemble(job, w);
      lock.lock();
      FinishAssembleLocked(job, written);
      work_cv.notify_all();
      continue;
    }
    size_t unit = 0;
    if (ClaimLoadLocked(unit)) {
      lock.unlock();
      std::shared_ptr<const Unit> loaded;
      std::exception_ptr error;
      StageClock clock(stages, counters.busy_ns, opt.trace, trace_tracks[w]);
      Helpers helpers(*this, w);
      try {
        loaded = source->Load(unit, scratch, clock, helpers);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      FinishLoadLocked(unit, std::move(loaded), error);
      work_cv.notify_all();
      continue;
    }
    if (const auto job = ClaimHelpLocked()) {  // a load in progress has pieces left
      lock.unlock();
      RunPieces(*job, w, /*timed=*/true);
      lock.lock();
      continue;
    }
    // Nothing to do: either the ready queue is full (the consumer is
    // behind) or the next batch waits on units loading elsewhere.
    const bool output_blocked =
        !pending.empty() && pending.front().missing == 0 && load_queue.empty();
    const auto t = Clock::now();
    work_cv.wait(lock);
    (output_blocked ? counters.wait_output_ns : counters.wait_input_ns) += NanosSince(t);
  }
}

// ---- the consumer ----------------------------------------------------------------

void Pipeline::Impl::NoteReadyChangeLocked() {
  const auto now = Clock::now();
  ready_integral += static_cast<double>(ready.size()) *
                    std::chrono::duration<double>(now - ready_changed).count();
  ready_changed = now;
}

BatchPtr Pipeline::Impl::Next() {
  std::unique_lock lock(mu);
  if (failure) std::rethrow_exception(failure);
  if (plan_done && consume_seq == next_seq) return BatchPtr(nullptr, BatchReturn{nullptr});
  const auto t = Clock::now();
  consumer_waiting = true;
  consumer_cv.wait(lock, [&] { return stop || ready.count(consume_seq) != 0; });
  consumer_waiting = false;
  const uint64_t waited = NanosSince(t);
  consumer_wait_ns += waited;
  if (opt.trace != nullptr && waited > 0) {
    const double secs = double(waited) * 1e-9;
    opt.trace->Complete(consumer_track, "wait for batch", "loader", opt.trace->Now() - secs, secs);
  }
  if (stop) throw InternalError("the pipeline stopped while a batch was awaited");
  NoteReadyChangeLocked();
  auto node = ready.extract(consume_seq);
  ++consume_seq;
  work_cv.notify_all();
  Result& r = node.mapped();
  if (r.error) {
    failure = r.error;
    std::rethrow_exception(failure);
  }
  state.epoch = r.epoch;
  state.next_batch = r.index + 1;
  if (state.next_batch == bpe) {
    state.next_batch = 0;
    ++state.epoch;
  }
  ++batches;
  samples += r.batch->num_lists;
  rows += r.rows;
  return std::move(r.batch);
}

PipelineStats Pipeline::Impl::Stats() const {
  PipelineStats s;
  for (int i = 0; i < kNumStages; ++i) {
    s.stages.push_back({kStageNames[i], double(stages.busy_ns[i].load()) * 1e-9,
                        stages.items[i].load(), stages.bytes[i].load()});
  }
  for (const auto& w : worker_counters) {
    s.workers.push_back({double(w->busy_ns.load()) * 1e-9, double(w->wait_input_ns.load()) * 1e-9,
                         double(w->wait_output_ns.load()) * 1e-9});
  }
  std::lock_guard lock(mu);
  const double elapsed = std::chrono::duration<double>(Clock::now() - created).count();
  const double integral =
      ready_integral +
      double(ready.size()) * std::chrono::duration<double>(Clock::now() - ready_changed).count();
  s.queue_capacity = static_cast<size_t>(active_prefetch);
  s.active_threads = active_threads;
  s.queue_ready = ready.size();
  s.queue_mean_ready = elapsed > 0 ? integral / elapsed : 0;
  s.consumer_wait_s = double(consumer_wait_ns) * 1e-9;
  s.elapsed_s = elapsed;
  s.batches = batches;
  s.samples = samples;
  s.rows = rows;
  s.skipped_units = skipped_units;
  s.cache_loads = cache_loads;
  s.cache_hits = cache_hits;
  s.cache_reloads = cache_reloads;
  s.cache_resident_bytes = resident_bytes;
  return s;
}

// ---- Pipeline ------------------------------------------------------------------

Pipeline::Pipeline(const RankingSpec& spec, const PipelineOptions& options,
                   const PipelineState& start)
    : impl_(std::make_shared<Impl>(MakeRankingSource(spec, options), options, start)) {
  impl_->Start(impl_);
}

Pipeline::Pipeline(const LanguageModelSpec& spec, const PipelineOptions& options,
                   const PipelineState& start)
    : impl_(std::make_shared<Impl>(MakeLanguageModelSource(spec, options), options, start)) {
  impl_->Start(impl_);
}

Pipeline::~Pipeline() {
  impl_->Stop();
}

BatchPtr Pipeline::Next() {
  return impl_->Next();
}
void Pipeline::SetParallelism(int threads, int prefetch) {
  Impl& p = *impl_;
  if (threads < 1 || threads > p.opt.threads || prefetch < 1 || prefetch > p.opt.prefetch) {
    throw ConfigError(fmt::format("pipeline parallelism {} threads, prefetch {} is outside what "
                                  "the pipeline was built with ({} threads, prefetch {})",
                                  threads, prefetch, p.opt.threads, p.opt.prefetch),
                      ErrorWhere{.field = threads < 1 || threads > p.opt.threads
                                              ? "pipeline.threads"
                                              : "pipeline.prefetch"},
                      "build the pipeline with the largest values it may be set to");
  }
  {
    std::lock_guard lock(p.mu);
    p.active_threads = threads;
    p.active_prefetch = prefetch;
  }
  p.work_cv.notify_all();
}
PipelineState Pipeline::state() const {
  std::lock_guard lock(impl_->mu);
  return impl_->state;
}
PipelineStats Pipeline::Stats() const {
  return impl_->Stats();
}
const BatchLayout& Pipeline::layout() const {
  return impl_->layout;
}
uint64_t Pipeline::samples_per_epoch() const {
  return impl_->source->samples();
}
uint64_t Pipeline::batches_per_epoch() const {
  return impl_->bpe;
}
const std::vector<std::string>& Pipeline::dense_names() const {
  return impl_->source->dense_names();
}
const std::vector<std::string>& Pipeline::sparse_names() const {
  return impl_->source->sparse_names();
}
const std::vector<uint64_t>& Pipeline::sparse_cardinalities() const {
  return impl_->source->sparse_cardinalities();
}

}  // namespace topspin
