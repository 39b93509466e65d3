// What a pipeline samples from (internal to the pipeline module): a source
// maps samples to units (row groups), loads a unit through the read,
// decode and transform stages, and assembles batches from loaded units.
// The scheduler in pipeline.cc owns threads, caching and order.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "topspin/data/column.h"
#include "topspin/data/dataset.h"
#include "topspin/pipeline/batch.h"
#include "topspin/perf/trace.h"
#include "topspin/pipeline/pipeline.h"

namespace topspin::pipeline_internal {

enum Stage { kRead = 0, kDecode, kTransform, kAssemble, kNumStages };
inline constexpr const char* kStageNames[kNumStages] = {"read", "decode", "transform", "assemble"};

// Lock-free per-stage totals, added to by every worker.
struct StageCounters {
  std::atomic<uint64_t> busy_ns[kNumStages] = {};
  std::atomic<uint64_t> items[kNumStages] = {};
  std::atomic<uint64_t> bytes[kNumStages] = {};
};

// Times consecutive stages of one worker: Lap(stage) charges the time since
// the previous lap (or construction) to `stage`.
class StageClock {
 public:
  // `trace` (may be null): each lap also becomes a span on `track`.
  StageClock(StageCounters& counters, std::atomic<uint64_t>& worker_busy_ns,
             TraceRecorder* trace = nullptr, int track = 0)
      : counters_(counters),
        worker_busy_ns_(worker_busy_ns),
        trace_(trace),
        track_(track),
        last_(Now()) {}
  void Lap(Stage stage, uint64_t bytes, uint64_t items = 1) {
    const auto now = Now();
    const auto ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count());
    counters_.busy_ns[stage] += ns;
    counters_.items[stage] += items;
    counters_.bytes[stage] += bytes;
    worker_busy_ns_ += ns;
    last_ = now;
    if (trace_ != nullptr) {
      const double secs = double(ns) * 1e-9;
      trace_->Complete(track_, kStageNames[stage], "loader", trace_->Now() - secs, secs);
    }
  }

 private:
  static std::chrono::steady_clock::time_point Now() { return std::chrono::steady_clock::now(); }
  StageCounters& counters_;
  std::atomic<uint64_t>& worker_busy_ns_;
  TraceRecorder* trace_;
  int track_;
  std::chrono::steady_clock::time_point last_;
};

// Splits one load into independent pieces (a row group's columns, its
// blocks of rows) that any worker with nothing else to do may run: without
// it a dataset of few row groups leaves workers idle while the last loads
// finish. For(stage, n, fn) runs fn(0) .. fn(n - 1), each exactly once, on
// the calling worker and on idle ones, charges their time to `stage`, and
// returns when all have run; it rethrows the first exception one threw
// (pieces after it are skipped).
class LoadHelpers {
 public:
  virtual ~LoadHelpers() = default;
  virtual void For(Stage stage, size_t n, const std::function<void(size_t)>& fn) = 0;
};

// A loaded (transformed) unit; immutable, shared by the batches using it.
struct Unit {
  virtual ~Unit() = default;
  size_t bytes = 0;  // memory it holds (for the cache budget)
};

// Resolves a unit index to its loaded unit; nullptr for a skipped unit.
class UnitLookup {
 public:
  virtual ~UnitLookup() = default;
  virtual const Unit* Get(size_t unit) const = 0;
};

class Source {
 public:
  virtual ~Source() = default;
  virtual uint64_t samples() const = 0;
  virtual size_t units() const = 0;
  // Samples per block for block shuffle (about one row group's worth).
  virtual uint64_t block_size() const = 0;
  virtual BatchLayout Layout(size_t max_lists) const = 0;
  // Appends the units sample `sample` of `epoch` needs (in order, no repeats).
  virtual void UnitsOf(uint64_t epoch, uint64_t sample, std::vector<size_t>& out) const = 0;
  // Reads, decodes and transforms `unit`, lapping `clock` after each stage;
  // may share the work through `helpers`. `scratch` is the worker's reused
  // decode table. Throws Error{kData}.
  virtual std::shared_ptr<const Unit> Load(size_t unit, Table& scratch, StageClock& clock,
                                           LoadHelpers& helpers) const = 0;
  // Fills `batch` (num_lists, num_docs, arrays) with `samples`, in order;
  // samples whose unit is skipped are left out. Returns rows written.
  virtual uint64_t Assemble(uint64_t epoch, std::span<const uint64_t> samples,
                            const UnitLookup& units, Batch& batch) const = 0;
  virtual const std::vector<std::string>& dense_names() const = 0;
  virtual const std::vector<std::string>& sparse_names() const = 0;
  virtual const std::vector<uint64_t>& sparse_cardinalities() const = 0;
};

std::unique_ptr<Source> MakeRankingSource(const RankingSpec& spec, const PipelineOptions& options);
std::unique_ptr<Source> MakeLanguageModelSource(const LanguageModelSpec& spec,
                                                const PipelineOptions& options);

}  // namespace topspin::pipeline_internal
