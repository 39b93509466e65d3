// Generation and evaluation of GPT checkpoints (`topspin generate`,
// `topspin eval`), outside training.
#include "topspin/train/gpt_inference.h"

#include <chrono>
#include <cmath>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/rng.h"
#include "topspin/data/safetensors.h"
#include "train/checkpoint_io.h"
#include "train/gpt_parts.h"
#include "train/task.h"
#include "train/torch_device.h"

namespace topspin {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::unique_ptr<Tokenizer> CheckpointTokenizer(const Checkpoint& checkpoint) {
  if (!checkpoint.files.contains(kTokenizerFile)) return nullptr;
  const fs::path path = checkpoint.FilePath(kTokenizerFile);
  const auto j = nlohmann::json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("spec") || !j["spec"].is_string()) {
    throw DataError("not a tokenizer description", ErrorWhere{.file = path.string(), .field = "spec"},
                    "pass the tokenizer with --tokenizer bytes|sentencepiece:MODEL|gpt2:DIR");
  }
  const std::string spec = j["spec"];
  if (spec == "gpt2") {
    // OpenTokenizer("gpt2:DIR") reads DIR/vocab.json and DIR/merges.txt.
    if (j.value("vocab", std::string(kTokenizerVocabFile)) != kTokenizerVocabFile ||
        j.value("merges", std::string(kTokenizerMergesFile)) != kTokenizerMergesFile ||
        !checkpoint.files.contains(kTokenizerVocabFile) ||
        !checkpoint.files.contains(kTokenizerMergesFile)) {
      throw DataError(fmt::format("a gpt2 tokenizer needs the checkpoint's own {} and {}",
                                  kTokenizerVocabFile, kTokenizerMergesFile),
                      ErrorWhere{.file = path.string(), .field = "vocab"},
                      "pass the tokenizer with --tokenizer gpt2:DIR");
    }
    return OpenTokenizer("gpt2:" + checkpoint.dir.string());  // FilePath(name) is dir / name
  }
  if (spec != "sentencepiece") return OpenTokenizer(spec);
  const std::string file = j.value("file", std::string(kTokenizerModelFile));
  if (!checkpoint.files.contains(file)) {
    throw DataError(fmt::format("the checkpoint names tokenizer file {} but does not hold it", file),
                    ErrorWhere{.file = path.string(), .field = "file"},
                    "pass the tokenizer with --tokenizer sentencepiece:MODEL");
  }
  return OpenTokenizer("sentencepiece:" + checkpoint.FilePath(file).string());
}

namespace {

// A checkpoint's GPT on the device train.device names.
struct LoadedGpt {
  Checkpoint checkpoint;
  ComputeDevice device;
  std::unique_ptr<Gpt> gpt;
};

LoadedGpt LoadGpt(const Settings& settings, const fs::path& path, CheckpointChoice choice) {
  if (settings.model.kind != "gpt") {
    throw Error(ErrorKind::kUsage,
                fmt::format("the run's model.kind is {}, not gpt", settings.model.kind),
                {.file = path.string(), .field = "model.kind"},
                "generate needs a GPT run; for a ranker use topspin eval or topspin score");
  }
  LoadedGpt m;
  m.checkpoint = OpenCheckpoint(path, choice);
  m.device = ResolveDevice(settings.train.device, VisibleGpus(), 0);
  UseDevice(m.device);
  m.gpt = std::make_unique<Gpt>(GptShapeFromConfig(settings.model.gpt), 0);
  m.gpt->module().to(TorchDevice(m.device));
  LoadModuleParameters(SafetensorsFile::Open(m.checkpoint.FilePath(kModelFile)), m.gpt->module());
  m.gpt->module().eval();
  return m;
}

// The longest prefix of `text` that ends on a whole UTF-8 character (an
// incomplete multi-byte sequence at the end waits for its next bytes).
size_t CompleteUtf8(std::string_view text) {
  size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

}  // namespace

GenerateResult GenerateText(const Config& config, const fs::path& checkpoint,
                            const GenerateOptions& o,
                            const std::function<void(std::string_view)>& stream) {
  CheckSamplingOptions(o.sampling);
  if (o.max_new_tokens < 0) {
    throw ConfigError("--max-new-tokens is negative", ErrorWhere{.field = "--max-new-tokens"});
  }
  const auto started = Clock::now();
  const Settings settings = Settings::From(config);
  LoadedGpt m = LoadGpt(settings, checkpoint, o.choice);
  const std::unique_ptr<Tokenizer> tokenizer =
      o.tokenizer.empty() ? CheckpointTokenizer(m.checkpoint) : OpenTokenizer(o.tokenizer);
  if (!tokenizer) {
    throw Error(ErrorKind::kUsage,
                fmt::format("checkpoint {} holds no tokenizer (its data was converted before "
                            "manifests named theirs)",
                            m.checkpoint.dir.string()),
                {.file = m.checkpoint.dir.string(), .field = "--tokenizer"},
                "pass the one its data was converted with: --tokenizer bytes, "
                "--tokenizer sentencepiece:MODEL or --tokenizer gpt2:DIR");
  }
  const GptShape& shape = m.gpt->shape();
  if (int64_t(tokenizer->vocab_size()) > settings.model.gpt.vocab) {
    throw ConfigError(fmt::format("tokenizer {} has {} ids, more than the model's vocabulary ({})",
                                  tokenizer->name(), tokenizer->vocab_size(),
                                  settings.model.gpt.vocab),
                      ErrorWhere{.field = "model.gpt.vocab"},
                      "pass the tokenizer the training data was converted with");
  }
  std::vector<int64_t> tokens;
  for (const uint32_t t : tokenizer->Encode(o.prompt)) tokens.push_back(t);
  if (tokens.empty()) {
    if (!tokenizer->end_of_text()) {
      throw ConfigError("an empty prompt needs a tokenizer with an end-of-text token",
                        ErrorWhere{.field = "--prompt"}, "pass a prompt");
    }
    tokens.push_back(*tokenizer->end_of_text());
  }
  GenerateResult r;
  r.checkpoint = m.checkpoint.dir;
  r.step = int64_t(m.checkpoint.step);
  r.tokenizer = tokenizer->name();
  r.prompt_tokens = int64_t(tokens.size());

  torch::NoGradGuard no_grad;
  const Precision precision(settings.train, m.device);
  const torch::Device device = TorchDevice(m.device);
  const auto as_tensor = [&](size_t from) {
    return torch::tensor(std::vector<int64_t>(tokens.begin() + ptrdiff_t(from), tokens.end()),
                         torch::kLong)
        .unsqueeze(0)
        .to(device);
  };
  for (const int64_t t : tokens) r.prompt_ids.push_back(uint32_t(t));
  if (!o.prompt_logits.empty()) {
    Gpt::KvCache fresh;
    const size_t keep = std::min(tokens.size(), size_t(std::max<int64_t>(1, shape.context - 1)));
    const at::Tensor all =
        precision.Run([&] { return m.gpt->Extend(as_tensor(tokens.size() - keep), fresh); })
            .squeeze(0)
            .to(torch::kCPU, torch::kFloat)
            .contiguous();
    const std::vector<SafetensorsTensor> views{View("logits", all)};
    WriteSafetensors(o.prompt_logits, views);
  }
  PhiloxStream rng(o.seed, /*stream=*/0x67656e);  // "gen"
  Gpt::KvCache cache;
  std::vector<uint32_t> generated;
  size_t emitted = 0;
  at::Tensor logits;
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    if (i == 0 || cache.length == shape.context) {
      // The first step, or the window is full: run the last tokens that
      // leave room for one more.
      cache = Gpt::KvCache{};
      const size_t keep =
          std::min(tokens.size(), size_t(std::max<int64_t>(1, shape.context - 1)));
      logits = precision.Run([&] { return m.gpt->Extend(as_tensor(tokens.size() - keep), cache); });
    } else {
      logits = precision.Run([&] { return m.gpt->Extend(as_tensor(tokens.size() - 1), cache); });
    }
    const at::Tensor last = logits.select(1, -1).squeeze(0).to(torch::kCPU, torch::kFloat).contiguous();
    // Only the tokenizer's ids: padded rows (model.gpt.vocab_multiple) are
    // never drawn.
    const int64_t next = SampleToken({last.data_ptr<float>(), size_t(tokenizer->vocab_size())},
                                     o.sampling, rng.NextDouble());
    const auto eot = tokenizer->end_of_text();
    if (o.stop_at_end_of_text && eot && next == int64_t(*eot)) {
      r.ended = true;
      break;
    }
    tokens.push_back(next);
    ++r.new_tokens;
    generated.push_back(uint32_t(next));
    r.new_ids.push_back(uint32_t(next));
    r.text = tokenizer->Decode(generated);
    const size_t ready = CompleteUtf8(r.text);
    if (stream && ready > emitted) stream(std::string_view(r.text).substr(emitted, ready - emitted));
    emitted = std::max(emitted, ready);
  }
  if (stream && r.text.size() > emitted) stream(std::string_view(r.text).substr(emitted));
  r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  r.tokens_per_s = r.seconds > 0 ? double(r.new_tokens) / r.seconds : 0;
  return r;
}

GptEvalResult EvaluateGpt(const Config& config, const fs::path& checkpoint,
                          const std::string& dataset_key, CheckpointChoice choice) {
  const auto started = Clock::now();
  const Settings settings = Settings::From(config);
  LoadedGpt m = LoadGpt(settings, checkpoint, choice);
  const auto pipeline = GptEvalPipeline(settings, dataset_key);
  const GptLoss l = GptValidLoss(*m.gpt, *pipeline, Precision(settings.train, m.device), 0,
                                 m.device, settings, dataset_key);
  GptEvalResult r;
  r.checkpoint = m.checkpoint.dir;
  r.step = int64_t(m.checkpoint.step);
  r.loss = l.loss;
  r.perplexity = std::exp(l.loss);
  r.tokens = l.tokens;
  r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return r;
}

}  // namespace topspin
