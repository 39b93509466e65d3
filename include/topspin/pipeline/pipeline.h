// The FAST input pipeline: dataset shards -> read -> decode -> transform ->
// batch -> bounded prefetch, on worker threads, handing out ready batches
// (topspin/pipeline/batch.h) in a deterministic order.
//
//   Pipeline p(RankingSpec{...}, {.threads = 2, .batch_size = 64});
//   while (BatchPtr b = p.Next()) { train on *b; }   // b returns to the pool
//
// Order. Samples are lists (ranking: every row of one group) or windows of
// T + 1 tokens (language model: window i starts at token i * T + s_e, s_e
// in [0, T) drawn per epoch from the seed). The order of an epoch is
// SampleOrder(seed, epoch) (sample_order.h); global batch k is positions
// [k * G, (k + 1) * G) for G = batch_size, and rank r of W takes
// RankSlice(G, r, W) of it. Batches are therefore the same for any thread
// count, and the union over ranks is the world-1 batch at any world size.
// With drop_last false the last global batch of an epoch is short and
// positions past the end are skipped, so late ranks may get fewer samples,
// or none (a batch with num_lists == 0 keeps ranks in step).
//
// Work. A unit is one row group. Workers read it (checksums over the
// mapped bytes), decode it (zstd into per-thread reused tables), transform
// it (feature chains, transform.h) into a cached, batch-ready unit, and
// assemble batches by copying each sample's rows (one memcpy per array per
// list) into a pooled buffer. Units needed by upcoming batches are loaded
// in first-use order; transformed units stay cached (LRU) within
// cache_bytes, so a global shuffle of a dataset that fits touches each row
// group once. Batches are delivered strictly in order, at most `prefetch`
// ahead of the consumer.
//
// Errors. A damaged row group fails the pipeline: Next() throws the
// shard's Error{kData} (file, column, row group, byte offset) in the
// consumer's thread, and again on later calls. With on_error kSkip the
// row group's samples are left out and counted (stats().skipped_units).
//
// Threads. Next(), state() and Stats() are for one consumer thread;
// Stats() may also be called from any other thread. The destructor stops
// and joins every worker promptly, mid-epoch or not.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "topspin/core/error.h"
#include "topspin/data/manifest.h"
#include "topspin/pipeline/batch.h"
#include "topspin/pipeline/sample_order.h"

namespace topspin {

class TraceRecorder;

// Learning to rank: one sample per group (query list).
struct RankingSpec {
  std::filesystem::path dataset;
  std::vector<std::string> dense;   // feature chains -> dense [N, F]
  std::vector<std::string> sparse;  // feature chains -> sparse [N, C]
  std::string label;                // empty: the manifest's label column
  std::string group;                // empty: the manifest's group column
  // The manifest whose column statistics fix the transform constants
  // (standardize, impute(mean), bucketize edges, cast cardinalities); null:
  // the dataset's own. Evaluation data must be transformed with the
  // training data's statistics, or its bucket ids and scales drift from
  // what the model learned.
  std::shared_ptr<const Manifest> statistics;
  // Scoring data that has no label column (the statistics' label column
  // absent, every other column as the statistics' schema has it) is read
  // with labels 0. false: a missing label column is an error.
  bool allow_unlabeled = false;
};

// Language model: windows of seq_len + 1 tokens of a token column.
struct LanguageModelSpec {
  std::filesystem::path dataset;
  std::string column = "tokens";
  size_t seq_len = 256;  // T
};

struct PipelineOptions {
  int threads = 2;           // workers for read, decode, transform, assemble
  int prefetch = 4;          // ready batches ahead of the consumer
  uint64_t batch_size = 64;  // global batch G in samples; G % world_size == 0
  ShuffleMode shuffle = ShuffleMode::kGlobal;
  uint64_t window_blocks = 16;  // block shuffle: row-group-sized blocks per window
  bool drop_last = true;
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  uint64_t max_epochs = 0;  // 0: endless
  OnError on_error = OnError::kFail;
  bool verify = true;                          // check chunk checksums
  // Each stage a worker runs becomes a span on a "loader W" track
  // (topspin/perf/trace.h); null: no trace. Must outlive the pipeline.
  TraceRecorder* trace = nullptr;
  size_t cache_bytes = size_t{2} << 30;        // transformed units kept for reuse
  std::shared_ptr<BufferAllocator> allocator;  // null: HostAllocator()
};

// Resume point: the pipeline built with it produces exactly the batches
// that would have followed the batch it was taken after.
struct PipelineState {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t next_batch = 0;  // global batch index within the epoch
  bool operator==(const PipelineState&) const = default;
};

struct StageStats {
  std::string name;  // read, decode, transform, assemble
  double busy_s = 0;
  uint64_t items = 0;  // units (read, decode, transform) or batches (assemble)
  uint64_t bytes = 0;  // read: stored; decode: decoded; transform, assemble: produced
};

struct WorkerStats {
  double busy_s = 0;         // in a stage
  double wait_input_s = 0;   // nothing to do until a unit loads or memory frees
  double wait_output_s = 0;  // blocked: the ready queue is full (consumer is slow)
};

struct PipelineStats {
  std::vector<StageStats> stages;
  std::vector<WorkerStats> workers;
  size_t queue_capacity = 0;    // prefetch (as SetParallelism last set it)
  int active_threads = 0;       // workers not parked (SetParallelism)
  size_t queue_ready = 0;       // batches ready now
  double queue_mean_ready = 0;  // time-weighted mean of queue_ready
  double consumer_wait_s = 0;   // time Next() spent waiting (the trainer's data stall)
  double elapsed_s = 0;         // since construction
  uint64_t batches = 0;         // delivered
  uint64_t samples = 0;         // lists or windows delivered
  uint64_t rows = 0;            // documents or tokens delivered
  uint64_t skipped_units = 0;   // on_error skip
  uint64_t cache_loads = 0;     // units transformed
  uint64_t cache_hits = 0;      // units found already transformed
  uint64_t cache_reloads = 0;   // loads of a unit already transformed for the same epoch
  size_t cache_resident_bytes = 0;
};

class Pipeline {
 public:
  Pipeline(const RankingSpec& spec, const PipelineOptions& options,
           const PipelineState& start = {});
  Pipeline(const LanguageModelSpec& spec, const PipelineOptions& options,
           const PipelineState& start = {});
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The next batch of this rank, waiting for it if needed; nullptr after
  // max_epochs. Rethrows a worker's error.
  BatchPtr Next();
  // Where the pipeline stands after the last batch Next() returned (or
  // `start` before the first).
  PipelineState state() const;
  PipelineStats Stats() const;
  // Changes the workers in use and the prefetch depth while the pipeline
  // runs (the AutoTuner's trials), within the threads and prefetch it was
  // built with: workers past `threads` park, and batches are assembled at
  // most `prefetch` ahead. The batches and their order do not change.
  // Throws Error{kConfig} outside those bounds. Any thread.
  void SetParallelism(int threads, int prefetch);

  const BatchLayout& layout() const;
  uint64_t samples_per_epoch() const;
  uint64_t batches_per_epoch() const;
  // Names of the dense and sparse outputs, in column order.
  const std::vector<std::string>& dense_names() const;
  const std::vector<std::string>& sparse_names() const;
  // Per sparse output, the id range [0, cardinality) (embedding table rows).
  const std::vector<uint64_t>& sparse_cardinalities() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace topspin
