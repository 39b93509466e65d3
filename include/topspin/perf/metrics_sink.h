// Metrics sinks: where the trainer's per-step scalars go. Entry header of
// the metrics half of perf; topspin/perf/tensorboard.h adds TensorBoard.
//
// The trainer builds one MultiSink (e.g. a JsonlWriter and a
// TensorBoardWriter) and logs each step once:
//
//   MultiSink sink;
//   sink.Add(std::make_unique<JsonlWriter>(run_dir / "metrics.jsonl"));
//   sink.Add(std::make_unique<TensorBoardWriter>(run_dir / "tensorboard"));
//   sink.Write(step, {{"loss", loss}, {"lr", lr}}, WallTimeNow());
//   ...
//   sink.Flush();  // e.g. at each checkpoint: bytes reach the disk
//
// Write() hands each record to the kernel at once (one write(2)): readers
// such as TensorBoard and `topspin report` see it while the run goes on, and
// it survives the process being killed. Flush() adds fdatasync, so it also
// survives the machine losing power. Callers log once per window, not per
// step: a write costs microseconds. No sink is thread-safe: log from one
// thread. Errors are topspin::Error (kind io) naming the file; a record a
// full disk refused is kept and goes out with the next call. Destructors
// flush and never throw: a failure there is logged.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace topspin {

// Metric name -> value for one step, e.g. {"loss", 2.31}, {"lr", 3e-4}.
using MetricValues = std::map<std::string, double>;

// Seconds since the Unix epoch (system clock), the wall_time sinks record.
inline double WallTimeNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  // Records `values` for `step` at `wall_time` (see WallTimeNow()) and
  // writes the record to the file.
  virtual void Write(int64_t step, const MetricValues& values, double wall_time) = 0;
  // Writes everything buffered and makes it durable (fdatasync).
  virtual void Flush() = 0;
};

// Fans every call out to the sinks it owns, in the order they were added.
// Flush() flushes every sink even when one fails, then rethrows the first
// failure.
class MultiSink final : public MetricsSink {
 public:
  MultiSink() = default;
  MultiSink(const MultiSink&) = delete;
  MultiSink& operator=(const MultiSink&) = delete;

  void Add(std::unique_ptr<MetricsSink> sink) { sinks_.push_back(std::move(sink)); }
  size_t size() const { return sinks_.size(); }

  void Write(int64_t step, const MetricValues& values, double wall_time) override {
    for (auto& sink : sinks_) sink->Write(step, values, wall_time);
  }
  void Flush() override {
    std::exception_ptr first;
    for (auto& sink : sinks_) {
      try {
        sink->Flush();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

 private:
  std::vector<std::unique_ptr<MetricsSink>> sinks_;
};

// Appends one JSON object per line to `path`:
//   {"step":100,"time":1767225600.25,"loss":2.31,"lr":0.0003}
// "step" and "time" come first, then the metrics by name. JSON has no NaN
// or infinity: those values are written as the strings "nan", "inf" and
// "-inf". Doubles are written so that they parse back to the same value.
//
// The file is opened in append mode (created with its parent directories
// if missing), so a resumed run continues it. If a crash left a partial
// last line, a newline is added first so that the torn line stays apart
// from the new ones (readers should skip lines that do not parse).
class JsonlWriter final : public MetricsSink {
 public:
  explicit JsonlWriter(std::filesystem::path path);
  ~JsonlWriter() override;
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;

  // A metric named "step" or "time" is Error{kInternal}.
  void Write(int64_t step, const MetricValues& values, double wall_time) override;
  void Flush() override;

  const std::filesystem::path& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace topspin
