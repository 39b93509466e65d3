// topspin bench <workload>: named benchmarks, each one table comparing our
// figure with a peer measured in the same run.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "cli/benches.h"
#include "cli/commands.h"
#include "topspin/core/files.h"
#include "topspin/perf/bench_table.h"

namespace topspin::cli {
namespace {

struct BenchArgs {
  std::string json_path;
  int mib = 64;
  int repeats = 5;
};

void Report(const BenchTable& table, const BenchArgs& args) {
  fmt::print("{}", FormatBenchTable(table));
  if (!args.json_path.empty()) WriteFileAtomic(args.json_path, BenchTableJson(table));
}

}  // namespace

std::string PeerPython() {
  if (const char* p = std::getenv("TOPSPIN_PYTHON"); p != nullptr && *p) return p;
  const std::filesystem::path venv = std::filesystem::path(TOPSPIN_SOURCE_DIR) / ".venv/bin/python";
  if (std::filesystem::exists(venv)) return venv.string();
  return "python3";
}

namespace {
double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

BenchStages::BenchStages(std::string bench, int count) : bench_(std::move(bench)), count_(count) {}

BenchStages::~BenchStages() { End(); }

void BenchStages::Begin(const std::string& what) {
  End();
  ++index_;
  started_s_ = NowSeconds();
  fmt::print(stderr, "bench {} [{}/{}] {}\n", bench_, index_, count_, what);
  std::fflush(stderr);
}

void BenchStages::End() {
  if (index_ == 0 || started_s_ < 0) return;
  fmt::print(stderr, "bench {} [{}/{}] done in {:.1f} s\n", bench_, index_, count_,
             NowSeconds() - started_s_);
  std::fflush(stderr);
  started_s_ = -1;
}

void RegisterBench(CLI::App& app) {
  static BenchArgs args;
  auto* bench =
      app.add_subcommand("bench", "Run a named benchmark against its peer in the same run");
  bench->require_subcommand(1, 1);
  auto* core = bench->add_subcommand(
      "core", "crc32c, xxh3 and Philox throughput vs memcpy and std::mt19937_64");
  core->add_option("--json", args.json_path, "also write the table as JSON to this file");
  core->add_option("--mib", args.mib, "buffer size in MiB")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  core->add_option("--repeats", args.repeats, "timed runs; the best is reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  core->callback([] { Report(RunCoreBench(size_t(args.mib) << 20, args.repeats), args); });

  static DataBenchOptions data;
  data.scratch = std::filesystem::temp_directory_path() / "topspin-bench";
  const auto add_data_options = [&](CLI::App* cmd) {
    cmd->add_option("--json", args.json_path, "also write the table as JSON to this file");
    cmd->add_option("--queries", data.queries, "gen shop queries in the input (~36 rows each)")
        ->check(CLI::Range(uint64_t{1}, uint64_t{100000000}))
        ->capture_default_str();
    cmd->add_option("--threads", data.threads, "our threads (read: 1..N are all measured)")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    cmd->add_option("--repeats", data.repeats, "timed runs; the best is reported")
        ->check(CLI::Range(1, 100))
        ->capture_default_str();
    cmd->add_option("--zstd-level", data.zstd_level, "shard compression level (0: none)")
        ->check(CLI::Range(0, 19))
        ->capture_default_str();
    cmd->add_flag("--no-byte-planes{false}", data.byte_planes,
                  "shards as plain zstd only (the format before codec zstd-split), to compare");
    cmd->add_option("--scratch", data.scratch, "where inputs are generated")->capture_default_str();
  };
  auto* read = bench->add_subcommand(
      "read", "Shard reads (decompress, verify, decode) vs the zstd and memcpy limits");
  add_data_options(read);
  read->callback([] { Report(RunReadBench(data), args); });
  auto* convert = bench->add_subcommand(
      "convert",
      "CSV and Parquet -> shards vs pandas/pyarrow + numpy.save; the Spark path's MB/s per core");
  add_data_options(convert);
  convert->add_flag("--spark,!--no-spark", data.spark,
                    "run scripts/spark/convert.py in local mode (pyspark, Java 17)")
      ->capture_default_str();
  convert->callback([] { Report(RunConvertBench(data), args); });

  static PipelineBenchOptions pipe;
  pipe.scratch = data.scratch;
  auto* pipeline = bench->add_subcommand(
      "pipeline",
      "The shop transform through our pipeline vs per-batch PyTorch DataLoaders (in memory, "
      "Parquet) and the decode limit; RSS at two sizes and caches; LM windows");
  pipeline->add_option("--json", args.json_path, "also write the table as JSON to this file");
  pipeline->add_option("--queries", pipe.queries, "gen shop queries (~36 docs each)")
      ->check(CLI::Range(uint64_t{100}, uint64_t{100000000}))
      ->capture_default_str();
  pipeline->add_option("--threads", pipe.threads, "our pipeline threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  pipeline->add_option("--prefetch", pipe.prefetch, "our prefetch depth")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  pipeline->add_option("--batch", pipe.batch_queries, "queries per batch")
      ->check(CLI::Range(uint64_t{1}, uint64_t{65536}))
      ->capture_default_str();
  pipeline
      ->add_option("--peer-workers", pipe.peer_workers,
                   "DataLoader num_workers values to measure, comma-separated")
      ->capture_default_str();
  pipeline
      ->add_option("--small-cache-mib", pipe.small_cache_mib,
                   "the second pipeline.cache_mib RSS is measured at")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  pipeline->add_flag("--no-byte-planes{false}", pipe.byte_planes,
                     "write the bench's shards as plain zstd only (the format before codec "
                     "zstd-split), to compare");
  pipeline->add_option("--peer-script", pipe.peer_script, "the PyTorch peers")
      ->capture_default_str();
  pipeline->add_option("--lm-tokens", pipe.lm_tokens, "tokens in the language-model dataset")
      ->check(CLI::Range(uint64_t{1} << 16, uint64_t{1} << 34))
      ->capture_default_str();
  pipeline
      ->add_option("--lm-capped-batches", pipe.lm_capped_batches,
                   "batches of the LM runs with a cache of half the tokens (global and block "
                   "shuffle)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))
      ->capture_default_str();
  pipeline->add_option("--seq-len", pipe.seq_len, "language-model window length T")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  pipeline->add_option("--scratch", pipe.scratch, "where inputs are generated")
      ->capture_default_str();
  pipeline->callback([] { Report(RunPipelineBench(pipe), args); });

  static TrainRankerBenchOptions ranker;
  ranker.scratch = data.scratch;
  auto* ranker_cmd = bench->add_subcommand(
      "train-ranker", "Ranker training vs the same model in PyTorch and XGBoost rank:ndcg");
  ranker_cmd->add_option("--json", args.json_path, "also write the table as JSON to this file");
  ranker_cmd->add_option("--queries", ranker.queries, "training queries (~36 docs each)")
      ->check(CLI::Range(uint64_t{200}, uint64_t{100000000}))
      ->capture_default_str();
  ranker_cmd->add_option("--valid-queries", ranker.valid_queries, "held-out queries")
      ->check(CLI::Range(uint64_t{50}, uint64_t{100000000}))
      ->capture_default_str();
  ranker_cmd->add_option("--epochs", ranker.epochs, "epochs for us and the PyTorch peer")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  ranker_cmd->add_option("--batch", ranker.batch, "lists per step, for us and the PyTorch peer")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  ranker_cmd->add_option("--threads", ranker.threads, "threads for everyone")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  ranker_cmd
      ->add_option("--torch-threads", ranker.torch_threads,
                   "our LibTorch threads (train.torch_threads); the matmul-at-shape limit "
                   "uses the same")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  ranker_cmd
      ->add_option("--xgb-rounds", ranker.xgb_rounds,
                   "most boosting rounds for XGBoost and LightGBM (early stopping picks fewer)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  ranker_cmd->add_option("--xgb-depths", ranker.xgb_depths, "XGBoost max_depth grid (comma list)")
      ->capture_default_str();
  ranker_cmd->add_option("--lgb-leaves", ranker.lgb_leaves, "LightGBM num_leaves grid")
      ->capture_default_str();
  ranker_cmd->add_option("--tree-etas", ranker.tree_etas, "learning-rate grid of both tree peers")
      ->capture_default_str();
  ranker_cmd
      ->add_option("--peer-threads", ranker.peer_threads,
                   "torch threads the PyTorch peer tries (the fastest trial counts)")
      ->capture_default_str();
  ranker_cmd->add_option("--peer-workers", ranker.peer_workers, "DataLoader num_workers it tries")
      ->capture_default_str();
  ranker_cmd->add_option("--peers", ranker.peers, "directory of the Python peers")
      ->capture_default_str();
  ranker_cmd->add_flag("--trees,!--no-trees", ranker.trees,
                       "also the XGBoost and LightGBM peers (CPU; default on)");
  ranker_cmd
      ->add_option("--repeats", ranker.repeats,
                   "rounds of ours, the PyTorch peer and the floors, interleaved; the table "
                   "shows medians, the setup every round (a 2-core VM's speed moves run to run)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  ranker_cmd->add_option("--device", ranker.device, "where we and the PyTorch peer train")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  ranker_cmd->callback([] { Report(RunTrainRankerBench(ranker), args); });

  static TrainGptBenchOptions gpt;
  gpt.scratch = data.scratch;
  auto* gpt_cmd = bench->add_subcommand(
      "train-gpt",
      "GPT training vs nanoGPT in PyTorch (eager and torch.compile, fp32 and bf16), with MFU");
  gpt_cmd->add_option("--json", args.json_path, "also write the table as JSON to this file");
  gpt_cmd->add_option("--layers", gpt.layers, "transformer blocks")
      ->check(CLI::Range(int64_t{1}, int64_t{256}))
      ->capture_default_str();
  gpt_cmd->add_option("--d-model", gpt.d_model, "residual width")
      ->check(CLI::Range(int64_t{8}, int64_t{65536}))
      ->capture_default_str();
  gpt_cmd->add_option("--heads", gpt.heads, "attention heads (divide --d-model)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}))
      ->capture_default_str();
  gpt_cmd->add_option("--vocab", gpt.vocab,
                      "vocabulary (the data are byte tokens; 50304: GPT-2's, padded)")
      ->check(CLI::Range(int64_t{257}, int64_t{1} << 20))
      ->capture_default_str();
  gpt_cmd->add_option("--context", gpt.context, "tokens per sequence")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20))
      ->capture_default_str();
  gpt_cmd->add_option("--batch", gpt.batch, "sequences per step")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
      ->capture_default_str();
  gpt_cmd->add_option("--warmup", gpt.warmup, "untimed steps before the timed ones")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  gpt_cmd->add_option("--steps", gpt.steps, "timed steps")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  gpt_cmd->add_option("--threads", gpt.threads, "LibTorch threads for us and the peer")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  gpt_cmd->add_flag("--fp32,!--no-fp32", gpt.fp32, "compare in fp32 (default on)");
  gpt_cmd->add_flag("--bf16,!--no-bf16", gpt.bf16, "compare in bf16 autocast (default on)");
  gpt_cmd->add_flag("--switches", gpt.switches,
                    "also run ours with each speed-up switched off (attention, fused ops, fused "
                    "AdamW, vocabulary padding; TF32 on CUDA) against all on, in fp32");
  gpt_cmd->add_flag_callback(
      "--switches-only", [] { gpt.switches = true, gpt.compare = false; },
      "only the switches: no nanoGPT comparison (scripts/gpu-check.sh's bench-gpt-switches)");
  gpt_cmd->add_option("--device", gpt.device, "where we and the PyTorch peer train")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  gpt_cmd->add_option("--peers", gpt.peers, "directory of the Python peers")
      ->capture_default_str();
  gpt_cmd->add_option("--scratch", gpt.scratch, "where inputs are generated")
      ->capture_default_str();
  gpt_cmd->callback([] { Report(RunTrainGptBench(gpt), args); });

  static DistBenchOptions dist;
  dist.scratch = data.scratch;
  auto* dist_cmd = bench->add_subcommand(
      "dist",
      "Ranker and tiny GPT data parallel at world 1 and 2: throughput, scaling, exposed sync "
      "share, ZeRO memory");
  dist_cmd->add_option("--json", args.json_path, "also write the table as JSON to this file");
  dist_cmd->add_option("--queries", dist.queries, "training queries")
      ->check(CLI::Range(uint64_t{100}, uint64_t{100000000}))
      ->capture_default_str();
  dist_cmd->add_option("--batch", dist.batch, "global batch in lists")
      ->check(CLI::Range(2, 4096))
      ->capture_default_str();
  dist_cmd->add_option("--steps", dist.steps, "steps per run")
      ->check(CLI::Range(10, 1000000))
      ->capture_default_str();
  dist_cmd->add_option("--scratch", dist.scratch, "where inputs are generated")
      ->capture_default_str();
  dist_cmd->add_option("--gpt-batch", dist.gpt_batch, "the tiny GPT's global batch in sequences")
      ->check(CLI::Range(2, 4096))
      ->capture_default_str();
  dist_cmd->add_option("--gpt-steps", dist.gpt_steps, "timed steps per GPT run")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  dist_cmd->callback([] { Report(RunDistBench(dist), args); });

  // One rank of bench dist's GPT job; hidden (group ""), started by the bench.

  static TuneBenchOptions tune;
  tune.scratch = data.scratch;
  auto* tune_cmd = bench->add_subcommand(
      "tune",
      "The AutoTuner vs an exhaustive grid and the defaults (ranker, GPT), and its batch-size "
      "search vs Lightning's finder");
  tune_cmd->add_option("--json", args.json_path, "also write the table as JSON to this file");
  tune_cmd->add_option("--queries", tune.queries, "gen shop queries for the ranker")
      ->check(CLI::Range(uint64_t{500}, uint64_t{10000000}))
      ->capture_default_str();
  tune_cmd->add_option("--window", tune.window_s, "seconds per measurement window")
      ->check(CLI::Range(0.05, 60.0))
      ->capture_default_str();
  tune_cmd->add_option("--budget", tune.budget_s, "the tuner's budget in seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  tune_cmd->add_option("--rounds", tune.rounds, "windows in turns for the final comparisons")
      ->check(CLI::Range(2, 100))
      ->capture_default_str();
  tune_cmd->add_option("--wall", tune.wall, "the memory limit, in configured batches")
      ->check(CLI::Range(2.0, 1000.0))
      ->capture_default_str();
  tune_cmd->add_option("--scratch", tune.scratch, "where inputs are generated")
      ->capture_default_str();
  tune_cmd->add_option("--batch-config", tune.batch_config,
                       "only the batch-size search, on this config (its data: byte tokens "
                       "generated here) at the device's real memory, vs Lightning's finder")
      ->check(CLI::ExistingFile);
  tune_cmd->add_option("--set", tune.sets, "override a key of --batch-config (repeatable)")
      ->allow_extra_args(false);
  tune_cmd->add_option("--device", tune.device, "train.device for --batch-config")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  tune_cmd->add_option("--memory-limit", tune.memory_limit,
                       "with --batch-config: what a step may use, a fraction of the device's "
                       "memory or bytes (2GiB), as topspin tune --memory-limit")
      ->capture_default_str();
  tune_cmd->add_option("--margin", tune.margin, "with --batch-config: the tuner's margin")
      ->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  tune_cmd->callback([] { Report(RunTuneBench(tune), args); });

  static PlanBenchOptions plan;
  plan.scratch = data.scratch;
  plan.peers = std::filesystem::path(TOPSPIN_SOURCE_DIR) / "bench/peers";
  auto* plan_cmd = bench->add_subcommand(
      "plan", "The scaling-law fit vs the same fit in SciPy; plan memory vs the measured peak");
  plan_cmd->add_option("--json", args.json_path, "also write the table as JSON to this file");
  plan_cmd->add_option("--threads", plan.threads, "our threads and the SciPy peer's processes")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  plan_cmd->add_option("--repeats", plan.repeats, "timed fits each; the best counts")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  plan_cmd->add_option("--scratch", plan.scratch, "where inputs are generated")
      ->capture_default_str();
  plan_cmd->add_option("--device", plan.device, "where the memory rows run: cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  plan_cmd->add_flag("--memory-only", plan.memory_only, "only the memory rows (no SciPy fit)");
  plan_cmd->callback([] { Report(RunPlanBench(plan), args); });

  static OrderBenchOptions order;
  auto* order_cmd = bench->add_subcommand(
      "order", "Shuffle quality of none/block/global orders vs std::shuffle, and lookup speed");
  order_cmd->add_option("--json", args.json_path, "also write the table as JSON to this file");
  order_cmd->add_option("--samples", order.samples, "samples in the epoch")
      ->check(CLI::Range(uint64_t{1000}, uint64_t{1} << 30))
      ->capture_default_str();
  order_cmd->add_option("--block-size", order.block_size, "samples per block (row group)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))
      ->capture_default_str();
  order_cmd->add_option("--window-blocks", order.window_blocks, "blocks per shuffle window")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20))
      ->capture_default_str();
  order_cmd->add_option("--batch", order.batch_size, "samples per batch")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20))
      ->capture_default_str();
  order_cmd->callback([] { Report(RunOrderBench(order), args); });
}

}  // namespace topspin::cli
