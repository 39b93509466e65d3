// The GPT as a Task of the trainer core (src/train/task.h): windows of
// context + 1 tokens of a text dataset's "tokens" column (topspin convert
// --format text) in the pipeline's deterministic order, the decoder of
// topspin/model/gpt.h (every parameter dense, in ZeRO-3 units of
// dist.wrap_blocks blocks), next-token cross-entropy summed over the
// tokens, and the validation loss and perplexity on data.valid.
#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"
#include "topspin/data/manifest.h"
#include "topspin/ddp/zero3.h"
#include "topspin/model/gpt.h"
#include "topspin/pipeline/pipeline_config.h"
#include "train/torch_device.h"
#include "train/batch_copier.h"
#include "train/gpt_parts.h"
#include "train/task.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

// ZeRO-3's brackets in the GPT's forward.
struct Zero3Hooks : Gpt::UnitHooks {
  explicit Zero3Hooks(Zero3& z) : zero(z) {}
  void Before(size_t unit) override { zero.Gather(unit); }
  at::Tensor After(size_t unit, const at::Tensor& output) override {
    return zero.Release(unit, output);
  }
  Zero3& zero;
};

// The pipeline over `dataset_key` (data.train or data.valid) in windows of
// the model's context + 1 tokens.
LanguageModelSpec LmSpec(const Settings& settings, const std::string& dataset_key) {
  const std::string& dir = settings.data.Dir(dataset_key);
  if (dir.empty()) {
    throw ConfigError(fmt::format("{} is not set", dataset_key), ErrorWhere{.field = dataset_key},
                      "point it at a text dataset (topspin gen text, then topspin convert --format "
                      "text)");
  }
  return {.dataset = dir, .column = "tokens",
          .seq_len = size_t(settings.model.gpt.context)};
}

// The token ids of a batch of `dataset_key` must fit the model's
// vocabulary (checked on the host, before the copy: a max over the batch).
void CheckTokens(const Batch& b, int64_t vocab, const Settings& settings,
                 const std::string& dataset_key) {
  int32_t top = 0;
  for (const int32_t t : b.tokens()) top = std::max(top, t);
  if (top < vocab) return;
  throw ConfigError(fmt::format("{} ({}) holds token id {} (batch {} of epoch {}), but "
                                "model.gpt.vocab is {}",
                                dataset_key, settings.data.Dir(dataset_key), top, b.index,
                                b.epoch, vocab),
                    ErrorWhere{.file = settings.data.Dir(dataset_key), .field = "model.gpt.vocab"},
                    "set model.gpt.vocab to the tokenizer's vocabulary (257 for bytes)");
}

}  // namespace

GptKernels GptKernelsFromConfig(const GptModelConfig& gpt) {
  using A = GptKernels::Attention;
  return {.attention = gpt.attention == "composed"    ? A::kComposed
                       : gpt.attention == "sdpa_mask" ? A::kSdpaMask
                                                      : A::kSdpa,
          .fused_ops = gpt.fused_ops};
}

namespace {

class GptTask final : public Task {
 public:
  explicit GptTask(const TaskContext& c)
      : settings_(c.settings),
        device_(c.device),
        shape_(GptShapeFromConfig(c.settings.model.gpt)),
        wrap_blocks_(c.settings.dist.wrap_blocks),
        copier_(c.device) {
    PipelineOptions popt = PipelineOptionsFrom(settings_, c.rank, c.world_size);
    popt.trace = c.trace;
    if (device_.cuda && settings_.pipeline.pinned_memory) popt.allocator = PinnedAllocator();
    train_ = std::make_unique<Pipeline>(LmSpec(settings_, "data.train"), popt, c.start);
    if (c.rank == 0 && has_validation()) GptEvalPipeline(settings_, "data.valid");
    tokenizer_ = TokenizerFiles::Of(settings_.data.train);
    gpt_ = std::make_unique<Gpt>(shape_, uint64_t(settings_.run.seed));
    gpt_->module().to(TorchDevice(device_));
    gpt_->SetKernels(GptKernelsFromConfig(settings_.model.gpt));
  }

  const char* unit() const override { return "tokens"; }
  torch::nn::Module& dense_module() override { return gpt_->module(); }
  std::vector<std::vector<at::Tensor>> Units() override { return gpt_->Units(wrap_blocks_); }
  void BracketUnits(Zero3& zero) override {
    hooks_ = std::make_unique<Zero3Hooks>(zero);
    gpt_->SetUnitHooks(hooks_.get(), wrap_blocks_);
  }

  void NextBatch(Phases& phases) override {
    BatchPtr b;
    {
      const PhaseTimer timer = phases.Time("data_wait");
      b = train_->Next();
    }
    CheckTokens(*b, settings_.model.gpt.vocab, settings_, "data.train");
    batch_ = copier_.Copy(std::move(b));
    if (device_.cuda) copier_.Use(*batch_, *phases.device);
  }

  LossTerms Forward(const Precision& precision) override {
    const at::Tensor windows = batch_->t.tokens.to(torch::kLong);
    at::Tensor sum = precision.Run([&] { return gpt_->LossSum(windows); });
    if (precision.bf16()) sum = sum.to(torch::kFloat);
    const int64_t tokens = windows.size(0) * (windows.size(1) - 1);
    return {sum, tokens, tokens};
  }

  void EndMicroBatch() override { batch_.reset(); }
  PipelineState LoaderState() const override { return train_->state(); }
  std::vector<StageStats> LoaderStages() const override { return train_->Stats().stages; }
  Pipeline& training_pipeline() override { return *train_; }
  bool has_validation() const override { return !settings_.data.valid.empty(); }

  // Mean next-token loss over data.valid's windows (train.eval_batches of
  // them, 0: all), and its perplexity.
  Evaluation Evaluate(const Precision& precision) override {
    const auto valid = GptEvalPipeline(settings_, "data.valid");
    const GptLoss l = GptValidLoss(*gpt_, *valid, precision, settings_.train.eval_batches,
                                   device_, settings_, "data.valid");
    return {{{"loss", l.loss}, {"perplexity", std::exp(l.loss)}},
            fmt::format("loss {:.4f}, perplexity {:.2f} over {:.0f} tokens", l.loss,
                        std::exp(l.loss), l.tokens)};
  }

  double TrainFlopsPerItem() const override { return TrainingFlopsPerToken(shape_); }

 void AddCheckpointFiles(CheckpointWriter& writer) const override { tokenizer_.AddTo(writer); }

 private:
  const Settings& settings_;
  ComputeDevice device_;
  GptShape shape_;
  int64_t wrap_blocks_;
  BatchCopier copier_;
  std::unique_ptr<Pipeline> train_;
  std::unique_ptr<Gpt> gpt_;
  std::unique_ptr<Zero3Hooks> hooks_;
  TokenizerFiles tokenizer_;
  std::optional<DeviceBatch> batch_;
};

}  // namespace

TokenizerFiles TokenizerFiles::Of(const std::string& dataset_dir) {
  TokenizerFiles out;
  const std::string spec = Manifest::Load(dataset_dir).tokenizer;
  constexpr std::string_view kSpm = "sentencepiece:";
  constexpr std::string_view kGpt2 = "gpt2:";
  if (spec == "bytes") {
    out.files[kTokenizerFile] = nlohmann::json{{"spec", "bytes"}}.dump() + "\n";
  } else if (spec.starts_with(kGpt2)) {
    const fs::path dir = spec.substr(kGpt2.size());
    const fs::path vocab = dir / kTokenizerVocabFile, merges = dir / kTokenizerMergesFile;
    if (!fs::exists(vocab) || !fs::exists(merges)) {
      spdlog::warn("{} was tokenized by {}, which is gone: checkpoints will hold no tokenizer "
                   "(generate then needs --tokenizer)",
                   dataset_dir, spec);
      return out;
    }
    const nlohmann::json description = {
        {"spec", "gpt2"}, {"vocab", kTokenizerVocabFile}, {"merges", kTokenizerMergesFile}};
    out.files[kTokenizerFile] = description.dump() + "\n";
    out.files[kTokenizerVocabFile] = ReadFile(vocab);
    out.files[kTokenizerMergesFile] = ReadFile(merges);
  } else if (spec.starts_with(kSpm)) {
    const fs::path model = spec.substr(kSpm.size());
    if (!fs::exists(model)) {
      spdlog::warn("{} was tokenized by {}, which is gone: checkpoints will hold no tokenizer "
                   "(generate then needs --tokenizer)",
                   dataset_dir, model.string());
      return out;
    }
    out.files[kTokenizerFile] =
        nlohmann::json{{"spec", "sentencepiece"}, {"file", kTokenizerModelFile}}.dump() + "\n";
    out.files[kTokenizerModelFile] = ReadFile(model);
  }
  return out;
}

void TokenizerFiles::AddTo(CheckpointWriter& writer) const {
  for (const auto& [name, bytes] : files) writer.AddFile(name, std::string_view(bytes));
}

std::unique_ptr<Pipeline> GptEvalPipeline(const Settings& settings,
                                          const std::string& dataset_key) {
  PipelineOptions o = PipelineOptionsFrom(settings);
  o.shuffle = ShuffleMode::kNone;
  o.drop_last = false;
  o.max_epochs = 1;
  return std::make_unique<Pipeline>(LmSpec(settings, dataset_key), o);
}

GptLoss GptValidLoss(const Gpt& gpt, Pipeline& pipeline, const Precision& precision,
                     int64_t max_batches, const ComputeDevice& device, const Settings& settings,
                     const std::string& dataset_key) {
  torch::NoGradGuard no_grad;
  double sum = 0, count = 0;
  int64_t n = 0;
  while (BatchPtr b = pipeline.Next()) {
    if (b->num_lists == 0) continue;
    CheckTokens(*b, settings.model.gpt.vocab, settings, dataset_key);
    const BatchTensors t = WrapHost(*b);
    const at::Tensor windows = t.tokens.to(TorchDevice(device), torch::kLong);
    sum += precision.Run([&] { return gpt.LossSum(windows); }).item<double>();
    count += double(windows.size(0) * (windows.size(1) - 1));
    if (max_batches > 0 && ++n >= max_batches) break;
  }
  return {count > 0 ? sum / count : NAN, count};
}

std::unique_ptr<Task> MakeGptTask(const TaskContext& context) {
  return std::make_unique<GptTask>(context);
}

std::vector<std::string> CheckGptConfig(const Settings& settings) {
  std::vector<std::string> out;
  const GptShape shape = GptShapeFromConfig(settings.model.gpt);
  out.push_back(fmt::format("model: GPT of {} parameters ({} layers, d_model {}, {} heads, "
                            "context {}, vocab {})",
                            ParameterCount(shape), shape.layers, shape.d_model, shape.heads,
                            shape.context, shape.vocab));
  for (const char* key : {"data.train", "data.valid"}) {
    if (settings.data.Dir(key).empty()) continue;
    Pipeline p(LmSpec(settings, key), PipelineOptionsFrom(settings));
    if (BatchPtr b = p.Next()) CheckTokens(*b, settings.model.gpt.vocab, settings, key);  // the first batch
    out.push_back(fmt::format("{}: {} windows of {} tokens", key, p.samples_per_epoch(),
                              shape.context + 1));
  }
  return out;
}

}  // namespace topspin
