// The data benchmark workloads of `topspin bench` (read, convert). Each
// builds its input in a scratch directory, measures ours and the peer or
// limit in the same run, and returns one table.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "topspin/data/manifest.h"
#include "topspin/perf/bench_table.h"
#include "topspin/plan/transformer_cost.h"

namespace topspin::cli {

// The Python the peers run under: $TOPSPIN_PYTHON, else the project's venv
// (.venv/bin/python of the source tree this binary was built from, where
// scripts/install-deps.sh --bench puts torch 2.11, numpy, pandas, XGBoost),
// else python3 from PATH.
std::string PeerPython();

// The stages of a long bench, announced on stderr as each begins and ends,
// so a run of minutes is never silent:
//   bench train-ranker [2/4] PyTorch peer (bench/peers/ranker_pytorch.py)
//   bench train-ranker [2/4] done in 212.4 s
class BenchStages {
 public:
  BenchStages(std::string bench, int count);
  ~BenchStages();  // ends the last stage
  BenchStages(const BenchStages&) = delete;
  BenchStages& operator=(const BenchStages&) = delete;
  // Ends the stage before (with its time) and announces this one.
  void Begin(const std::string& what);

 private:
  void End();
  std::string bench_;
  int count_, index_ = 0;
  double started_s_ = 0;
};

struct DataBenchOptions {
  std::filesystem::path scratch;  // inputs are generated here (and removed after)
  uint64_t queries = 20000;       // gen shop queries (~36 rows each)
  int threads = 2;
  int repeats = 3;
  int zstd_level = 3;
  bool byte_planes = true;  // shards may store numbers as byte planes (zstd-split)
  bool spark = true;  // convert: also scripts/spark/convert.py in local mode
};

// Decoded bytes/s per thread reading projected columns with checksum
// verification, against single-thread zstd decompression of the same
// chunks and memcpy of the decoded bytes.
BenchTable RunReadBench(const DataBenchOptions& options);

// CSV and Parquet -> shards MB/s against pandas/pyarrow readers + numpy.save
// of the same file (bench/peers/convert_pyarrow.py, checked against our
// statistics), and scripts/spark/convert.py's MB/s per core in local mode.
BenchTable RunConvertBench(const DataBenchOptions& options);

struct PipelineBenchOptions {
  std::filesystem::path scratch;
  std::filesystem::path peer_script = "bench/peers/pipeline_pytorch.py";
  std::string peer_workers = "0,1,2";  // DataLoader num_workers to try; the best counts
  uint64_t queries = 20000;
  uint64_t batch_queries = 64;
  int threads = 2;
  int prefetch = 4;
  uint64_t seed = 1;
  uint64_t lm_tokens = 64ull << 20;
  size_t seq_len = 1024;
  uint64_t lm_batch = 16;
  uint64_t lm_capped_batches = 1000;  // the LM runs with a cache of half the tokens
  size_t small_cache_mib = 64;  // the second cache size RSS is shown at
  bool byte_planes = true;      // shards may store numbers as byte planes (zstd-split)
};

// "shop transform" docs/s over two epochs against the best PyTorch
// DataLoader configuration, RSS at 10% and 100% of each epoch, and the
// language-model window stream against memcpy.
BenchTable RunPipelineBench(const PipelineBenchOptions& options);

// The shop transform as JSON for the Python peers (bench/peers/*.py), with
// the constants our pipeline resolves from `statistics`.
std::string ShopPeerSpecJson(const Manifest& statistics, uint64_t seed);

struct TrainRankerBenchOptions {
  std::filesystem::path scratch;
  std::filesystem::path peers = "bench/peers";
  std::string device = "cpu";  // train.device for us, --device for the PyTorch peer
  uint64_t queries = 20000;
  uint64_t valid_queries = 4000;
  int epochs = 1;
  int batch = 32;  // lists per step, for us and the PyTorch peer
  int threads = 2;
  int torch_threads = 2;  // our train.torch_threads (the default, one per core, on 2 cores)
  std::string peer_threads = "1,2";  // torch threads the PyTorch peer tries
  std::string peer_workers = "0,1,2";  // its DataLoader num_workers
  int xgb_rounds = 800;  // at most (early stopping), XGBoost and LightGBM
  std::string xgb_depths = "8";
  std::string lgb_leaves = "63";
  std::string tree_etas = "0.1";
  bool trees = true;  // the XGBoost and LightGBM peers (CPU; need those modules)
  // Rounds of ours, the PyTorch peer (its sweep in round 1, its best trial
  // after) and the floors, interleaved; the table shows each series' median.
  int repeats = 3;
  uint64_t seed = 1;
};

// ["a", "b"]: feature chains as a YAML flow list, for generated configs.
std::string YamlList(const std::vector<std::string>& items);

struct DistBenchOptions {
  std::filesystem::path scratch;
  uint64_t queries = 20000;
  int batch = 64;    // global batch, lists
  int steps = 600;
  int gpt_batch = 8;   // the tiny GPT's global batch, sequences
  int gpt_steps = 20;  // steps per GPT run
};

// The ranker at world 1 and 2 on this host (`topspin train --nproc`), then
// the tiny GPT (BenchGptShape()): throughput, scaling, exposed sync share
// with and without overlap, per-rank model state with ZeRO-0/1/2 against
// the formulas.
BenchTable RunDistBench(const DistBenchOptions& options);

// The tiny GPT of bench dist: 4 layers of width 256, 4 heads, context 128,
// vocabulary 2048, tied head (3.7M parameters).
GptShape BenchGptShape();


struct PlanBenchOptions {
  std::filesystem::path scratch;
  std::filesystem::path peers = "bench/peers";
  int threads = 2;   // ours and the SciPy peer's processes
  int repeats = 3;
  uint64_t seed = 7;
  std::string device = "cpu";  // where the memory rows run: cpu | cuda
  bool memory_only = false;    // skip the fit (the GPU check)
};

// The scaling-law fit against the same fit in SciPy (constants checked
// equal, then wall time), and with LibTorch `plan memory` against the
// measured peak of the real GPT step.
BenchTable RunPlanBench(const PlanBenchOptions& options);

struct TuneBenchOptions {
  std::filesystem::path scratch;
  uint64_t queries = 4000;  // gen shop queries for the ranker
  double window_s = 0.5;    // a measurement window
  double budget_s = 120;    // the tuner's
  int rounds = 6;           // windows in turns for the final comparisons
  double wall = 12.3;       // the memory limit sits at this many configured batches
  // Set: only the batch-size search, on this config at the device's real
  // memory (memory_limit of it), against Lightning's finder with no margin
  // (the largest batch that fits); scripts/gpu-check.sh runs GPT-2 124M so.
  std::filesystem::path batch_config;
  std::vector<std::string> sets;     // --set, on batch_config
  std::string device = "cpu";        // train.device for batch_config
  std::string memory_limit = "0.8";  // of the device's memory (or bytes), as topspin tune
  double margin = 0.10;              // the tuner's
};

// The AutoTuner against an exhaustive grid over the same knobs and against
// the defaults (throughput in turns, time), and its batch-size search
// against Lightning's finder (trials, batch), on the ranker and a small GPT
// through the real step. Needs LibTorch.
BenchTable RunTuneBench(const TuneBenchOptions& options);

struct TrainGptBenchOptions {
  std::filesystem::path scratch;
  std::filesystem::path peers = "bench/peers";
  int64_t layers = 6, d_model = 384, heads = 6, context = 256;
  int64_t vocab = 257;  // the data are byte tokens; GPT-2's is 50257 (50304 padded)
  int64_t batch = 8;  // sequences per step
  int warmup = 3;     // untimed steps (torch.compile compiles in them)
  int steps = 12;     // timed steps (rounded up to whole multiples of warmup)
  int threads = 2;
  bool fp32 = true;   // the fp32 pass
  bool bf16 = true;   // the bf16 pass
  std::string device = "cpu";  // train.device for us, --device for the peer
  uint64_t seed = 1;
  bool switches = false;  // also each speed-up switch off against on (fp32, ours only)
  bool compare = true;    // the nanoGPT comparison (false: the switches alone, --switches-only)
};

// Our GPT training against nanoGPT's model and loop in PyTorch, eager and
// torch.compile, fp32 and bf16: steady-state tokens/s, MFU against the
// matmul peak, the loss after the same steps, and the parameter count
// (the same model). Needs LibTorch.
BenchTable RunTrainGptBench(const TrainGptBenchOptions& options);

// Our ranker training against the same model in PyTorch (docs/s, NDCG@10)
// and XGBoost rank:ndcg (NDCG@10), plus our compute floor. Needs LibTorch.
BenchTable RunTrainRankerBench(const TrainRankerBenchOptions& options);

struct OrderBenchOptions {
  uint64_t samples = 1000000;
  uint64_t block_size = 1800;  // ~gen shop lists per 64k-row row group
  uint64_t window_blocks = 16;
  uint64_t batch_size = 64;
  uint64_t seed = 1;
};

// Shuffle quality of none, block and global orders (pipeline/shuffle_quality.h)
// next to std::shuffle's, and lookups per second.
BenchTable RunOrderBench(const OrderBenchOptions& options);

}  // namespace topspin::cli
