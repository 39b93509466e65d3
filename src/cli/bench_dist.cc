// bench dist: the ranker trained by 1 and 2 local ranks (Gloo), with the
// gradient all-reduce overlapped with backward and without: throughput,
// scaling efficiency and the exposed sync share of rank 0's step. Each case
// is a `topspin train` run of this binary, so launch, rendezvous and
// supervision are part of what is measured. Then the same for a tiny GPT
// (model.kind gpt, also through `topspin train`), whose parameters are all
// dense, with ZeRO-0/1/2/3.
#include <unistd.h>

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/benches.h"
#include "cli/run_command.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/data/checkpoint_store.h"
#include "topspin/data/convert.h"
#include "topspin/data/gen_shop.h"
#include "topspin/data/gen_text.h"
#include "topspin/data/importer.h"
#include "topspin/data/safetensors.h"
#include "topspin/dist/spawn.h"
#include "topspin/pipeline/shop_features.h"

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

struct DistRun {
  double docs_per_s = 0;
  double sync_share = 0;        // of rank 0's phase time
  double optimizer_bytes = 0;   // rank 0's dense optimizer state
  double grad_bytes = 0;        // rank 0's dense gradient storage
  double params = 0;            // P
};

std::string SelfExe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) throw IoError("cannot resolve /proc/self/exe", {.file = "/proc/self/exe"});
  return std::string(buf, static_cast<size_t>(n));
}

// One `topspin train --nproc world` run of this binary with `sets` (more
// --set arguments); returns its summary.json (rank 0's own record, not its
// console text).
nlohmann::json TrainSummary(const fs::path& config, const fs::path& run, int world,
                            const std::string& sets) {
  fs::remove_all(run);
  const std::string cmd = fmt::format("'{}' train '{}' --nproc {} --run-dir '{}' {} 2>&1", SelfExe(),
                                      config.string(), world, run.string(), sets);
  const CommandResult r = RunCommand(cmd);
  const fs::path summary = run / "summary.json";
  if (r.status != 0 || !fs::exists(summary)) {
    throw Error(ErrorKind::kInternal, fmt::format("bench dist: `{}` failed:\n{}", cmd, r.output));
  }
  return nlohmann::json::parse(ReadFile(summary));
}

// The share of rank 0's phase time blocked on collectives.
double SyncShare(const nlohmann::json& summary) {
  double total = 0;
  for (const auto& [phase, seconds] : summary.at("phase_s").items()) total += seconds.get<double>();
  return total > 0 ? summary.at("phase_s").value("sync", 0.0) / total : 0.0;
}

std::string DistSets(bool overlap, int zero) {
  return fmt::format("--set dist.overlap={} --set dist.zero={}", overlap ? "true" : "false", zero);
}

DistRun RunTrain(const fs::path& config, const fs::path& run, int world, bool overlap,
                 int zero = 0) {
  const auto j = TrainSummary(config, run, world, DistSets(overlap, zero));
  return {.docs_per_s = j.at("items_per_s").get<double>(),
          .sync_share = SyncShare(j),
          .optimizer_bytes = j.at("dense_optimizer_bytes").get<double>(),
          .grad_bytes = j.at("dense_grad_bytes").get<double>(),
          .params = j.at("dense_params").get<double>()};
}

struct GptRun {
  double tokens_per_s = 0, sync_share = 0;
  double params = 0, param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;
  double staging_peak_bytes = 0;  // ZeRO-2 gradient staging, ZeRO-3 gathered units
  double param_abs_sum = 0;       // sum of |parameters| in the final checkpoint
};

// Sum of |x| over the dense parameters (dense.*, not the optimizer state)
// of a run's final checkpoint: every ZeRO stage must train the same model.
double CheckpointParamAbsSum(const fs::path& run) {
  const auto latest = CheckpointStore(run / "checkpoints").LoadLatest();
  if (!latest) throw Error(ErrorKind::kInternal, "bench dist: " + run.string() + " has no checkpoint");
  const SafetensorsFile file = SafetensorsFile::Open(latest->FilePath("model.safetensors"));
  double sum = 0;
  for (const auto& t : file.tensors()) {
    if (!t.name.starts_with("dense.") || t.name.starts_with("dense.opt")) continue;
    const auto* v = reinterpret_cast<const float*>(t.bytes.data());
    for (size_t k = 0; k < t.bytes.size() / sizeof(float); ++k) sum += std::abs(double(v[k]));
  }
  return sum;
}

// The tiny GPT trained by `world` ranks of `topspin train` (the trainer
// core, as users run it), `threads` LibTorch threads each.
GptRun RunGpt(const fs::path& config, const fs::path& run, int world, int threads, bool overlap,
              int zero) {
  const auto j = TrainSummary(
      config, run, world,
      fmt::format("{} --set train.torch_threads={}", DistSets(overlap, zero), threads));
  return {.tokens_per_s = j.at("items_per_s").get<double>(),
          .sync_share = SyncShare(j),
          .params = j.at("dense_params").get<double>(),
          .param_bytes = j.at("dense_param_bytes").get<double>(),
          .grad_bytes = j.at("dense_grad_bytes").get<double>(),
          .optimizer_bytes = j.at("dense_optimizer_bytes").get<double>(),
          .staging_peak_bytes = j.at("grad_staging_peak_bytes").get<double>(),
          .param_abs_sum = CheckpointParamAbsSum(run)};
}

// fp32 model state per rank with AdamW (two moments): parameters 4P,
// gradients 4P, optimizer 8P; ZeRO-1 shards the optimizer state over the
// N ranks (4P + 4P + 8P/N), ZeRO-2 the gradients too (4P + 4P/N + 8P/N),
// ZeRO-3 the parameters too (16P/N).
double ZeroFormula(double params, int zero, int world) {
  return ((zero >= 3 ? 4.0 / world : 4.0) + (zero >= 2 ? 4.0 / world : 4.0) +
          (zero >= 1 ? 8.0 / world : 8.0)) *
         params;
}

void AddGptRows(const DistBenchOptions& o, BenchTable& t) {
  const fs::path dir = o.scratch / "bench-dist-gpt";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Text every Debian machine has, tokenized by bytes; the shape of
  // BenchGptShape(). World 1 gets both cores as 2 LibTorch threads, world 2
  // one each.
  WriteTextCorpus(dir / "corpus.txt", TextCorpusOptions{});
  Convert({dir / "corpus.txt"}, ImportOptions{.format = "text"},
          DatasetWriterOptions{.out = dir / "data", .row_group_rows = 4096, .threads = 1},
          /*sort_groups=*/false, {});
  const GptShape shape = BenchGptShape();
  const fs::path config = dir / "gpt.yaml";
  WriteFileAtomic(config, fmt::format(R"yaml(
run: {{seed: 1}}
data: {{train: "{}"}}
pipeline: {{threads: 1, batch_size: {}, shuffle: global}}
model:
  kind: gpt
  gpt: {{vocab: {}, context: {}, layers: {}, d_model: {}, heads: {}}}
optim: {{lr: 0.0001, schedule: constant, warmup_steps: 0}}
dist: {{bucket_mib: 4}}
train: {{steps: {}, log_every: 1000, eval_every: 0, checkpoint_every: 0}}
)yaml",
                                      (dir / "data").string(), o.gpt_batch, shape.vocab,
                                      shape.context, shape.layers, shape.d_model, shape.heads,
                                      o.gpt_steps));
  BenchStages stages("dist (GPT)", 6);
  const auto gpt = [&](const char* name, int world, int threads, bool overlap, int zero) {
    stages.Begin(fmt::format("GPT world {}{}, ZeRO-{}, {} steps", world,
                             overlap ? "" : " not overlapped", zero, o.gpt_steps));
    return RunGpt(config, dir / name, world, threads, overlap, zero);
  };
  const GptRun one = gpt("w1", 1, 2, true, 0);
  const GptRun two = gpt("w2", 2, 1, true, 0);
  const GptRun serial = gpt("w2s", 2, 1, false, 0);
  const GptRun zero1 = gpt("w2z1", 2, 1, true, 1);
  const GptRun zero2 = gpt("w2z2", 2, 1, true, 2);
  const GptRun zero3 = gpt("w2z3", 2, 1, true, 3);
  fs::remove_all(dir);
  t.rows.push_back({"GPT world 2 throughput", two.tokens_per_s, "world 1 (2 threads)",
                    one.tokens_per_s, "tokens/s"});
  t.rows.push_back({"GPT world 2 sync share, overlapped", 100 * two.sync_share, "not overlapped",
                    100 * serial.sync_share, "% of step", Better::kLower});
  t.rows.push_back({"GPT world 2 throughput, overlapped", two.tokens_per_s, "not overlapped",
                    serial.tokens_per_s, "tokens/s"});
  for (const auto& [zero, run] :
       {std::pair{0, two}, std::pair{1, zero1}, std::pair{2, zero2}, std::pair{3, zero3}}) {
    t.rows.push_back({fmt::format("GPT ZeRO-{} model state, rank 0", zero),
                      run.param_bytes + run.grad_bytes + run.optimizer_bytes,
                      fmt::format("formula, P = {:.0f}", run.params),
                      ZeroFormula(run.params, zero, 2), "bytes", Better::kSame});
  }
  t.rows.push_back({"GPT ZeRO-2 staging peak, rank 0", zero2.staging_peak_bytes,
                    "whole gradient 4P", 4 * zero2.params, "bytes", Better::kLower});
  t.rows.push_back({"GPT ZeRO-3 gathered peak, rank 0", zero3.staging_peak_bytes,
                    "whole model 4P", 4 * zero3.params, "bytes", Better::kLower});
  // The same model trained, whatever is sharded.
  for (const auto& [zero, run] : {std::pair{1, zero1}, std::pair{2, zero2}, std::pair{3, zero3}}) {
    t.rows.push_back({fmt::format("GPT ZeRO-{} sum |params| after training", zero),
                      run.param_abs_sum, "ZeRO-0", two.param_abs_sum, "", Better::kSame});
  }
  t.rows.push_back({"GPT world 2 throughput, ZeRO-2", zero2.tokens_per_s, "ZeRO-0",
                    two.tokens_per_s, "tokens/s"});
  t.rows.push_back({"GPT world 2 throughput, ZeRO-3", zero3.tokens_per_s, "ZeRO-0",
                    two.tokens_per_s, "tokens/s"});
}

}  // namespace

GptShape BenchGptShape() {
  return GptShape{.vocab = 2048, .context = 128, .layers = 4, .d_model = 256, .heads = 4};
}

std::string YamlList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const auto& i : items) out += fmt::format("{}\"{}\"", out.size() > 1 ? ", " : "", i);
  return out + "]";
}

BenchTable RunDistBench(const DistBenchOptions& o) {
  fs::create_directories(o.scratch);
  const fs::path data = o.scratch / "bench-dist-train", config = o.scratch / "bench-dist.yaml";
  fs::remove_all(data);
  WriteShopShards(data, ShopOptions{.queries = o.queries, .seed = 1});
  // One thread per rank for the pipeline and for LibTorch: 2 ranks fill the
  // 2 cores the way 1 rank with 2 threads would.
  WriteFileAtomic(config, fmt::format(R"yaml(
run: {{seed: 1}}
data: {{train: "{}"}}
pipeline: {{threads: 1, batch_size: {}, shuffle: global, dense: {}, sparse: {}}}
model: {{embedding_dim: 16, bottom: [64], top: [128, 64], loss: softmax}}
optim: {{lr: 0.003, schedule: constant, warmup_steps: 0, sparse: adagrad, sparse_lr: 0.05}}
train: {{steps: {}, log_every: 100, eval_every: 0, checkpoint_every: 0, torch_threads: 1}}
)yaml",
                                      data.string(), o.batch, YamlList(ShopDenseChains()),
                                      YamlList(ShopSparseChains()), o.steps));
  DistRun one, two, two_serial, zero1, zero2;
  {
    BenchStages stages("dist (ranker)", 5);
    const auto ranker = [&](const char* name, int world, bool overlap, int zero) {
      stages.Begin(fmt::format("ranker world {}{}, ZeRO-{}, {} steps", world,
                               overlap ? "" : " not overlapped", zero, o.steps));
      return RunTrain(config, o.scratch / name, world, overlap, zero);
    };
    one = ranker("bench-dist-w1", 1, true, 0);
    two = ranker("bench-dist-w2", 2, true, 0);
    two_serial = ranker("bench-dist-w2s", 2, false, 0);
    zero1 = ranker("bench-dist-w2z1", 2, true, 1);
    zero2 = ranker("bench-dist-w2z2", 2, true, 2);
  }
  BenchTable t{"dist",
               fmt::format("ranker (shop features, 4 x 2^18 x 16 tables), global batch {} lists, "
                           "{} steps, 1 pipeline + 1 LibTorch thread per rank; GPT (4 x 256, "
                           "context 128, vocab 2048, {:.1f}M parameters), global batch {} "
                           "sequences, {} steps, 4 MiB buckets, byte tokens of "
                           "/usr/share/common-licenses; both through `topspin train`; Gloo over a "
                           "file store on this host; sync = rank 0's time blocked on collectives",
                           o.batch, o.steps, double(ParameterCount(BenchGptShape())) / 1e6,
                           o.gpt_batch, o.gpt_steps),
               {}};
  t.rows.push_back({"world 2 throughput", two.docs_per_s, "world 1", one.docs_per_s, "docs/s"});
  t.rows.push_back({"world 2 sync share, overlapped", 100 * two.sync_share, "not overlapped",
                    100 * two_serial.sync_share, "% of step", Better::kLower});
  t.rows.push_back({"world 2 throughput, overlapped", two.docs_per_s, "not overlapped",
                    two_serial.docs_per_s, "docs/s"});
  for (const auto& [zero, run] : {std::pair{0, two}, std::pair{1, zero1}, std::pair{2, zero2}}) {
    t.rows.push_back({fmt::format("ZeRO-{} model state, rank 0", zero),
                      4 * run.params + run.grad_bytes + run.optimizer_bytes,
                      fmt::format("formula, P = {:.0f}", run.params),
                      ZeroFormula(run.params, zero, 2), "bytes", Better::kSame});
  }
  t.rows.push_back({"world 2 throughput, ZeRO-1", zero1.docs_per_s, "ZeRO-0", two.docs_per_s,
                    "docs/s"});
  t.rows.push_back({"world 2 throughput, ZeRO-2", zero2.docs_per_s, "ZeRO-0", two.docs_per_s,
                    "docs/s"});
  AddGptRows(o, t);
  return t;
}

}  // namespace topspin::cli
