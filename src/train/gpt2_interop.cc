// `topspin import gpt2` / `topspin export gpt2`: Hugging Face GPT-2
// directories <-> topspin runs (topspin/train/gpt2_interop.h).
#include "topspin/train/gpt2_interop.h"

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/data/checkpoint_store.h"
#include "topspin/data/safetensors.h"
#include "topspin/model/gpt.h"
#include "train/checkpoint_io.h"
#include "train/gpt_parts.h"
#include "train/task.h"

namespace topspin {

namespace fs = std::filesystem;

namespace {

// One of our parameters and its Hugging Face name (without the
// "transformer." prefix) and layout.
struct HfName {
  std::string name;
  bool transposed = false;  // a Conv1D weight: [in, out] there, [out, in] here
};

// Our parameter `ours` (Gpt's module names: wte.weight, h3.qkv.bias, ...)
// under its Hugging Face GPT-2 name.
HfName HfNameOf(const std::string& ours) {
  static const std::vector<std::pair<std::string, HfName>> kBlock = {
      {"ln1.weight", {"ln_1.weight"}},          {"ln1.bias", {"ln_1.bias"}},
      {"qkv.weight", {"attn.c_attn.weight", true}}, {"qkv.bias", {"attn.c_attn.bias"}},
      {"proj.weight", {"attn.c_proj.weight", true}}, {"proj.bias", {"attn.c_proj.bias"}},
      {"ln2.weight", {"ln_2.weight"}},          {"ln2.bias", {"ln_2.bias"}},
      {"fc.weight", {"mlp.c_fc.weight", true}}, {"fc.bias", {"mlp.c_fc.bias"}},
      {"out.weight", {"mlp.c_proj.weight", true}}, {"out.bias", {"mlp.c_proj.bias"}}};
  if (ours == "head.weight") return {"lm_head.weight"};
  if (ours.starts_with("h")) {
    const size_t dot = ours.find('.');
    const std::string layer = ours.substr(1, dot - 1);
    const std::string rest = ours.substr(dot + 1);
    for (const auto& [mine, hf] : kBlock) {
      if (rest == mine) return {fmt::format("h.{}.{}", layer, hf.name), hf.transposed};
    }
    throw InternalError("GPT-2 export: no Hugging Face name for parameter " + ours);
  }
  return {ours};  // wte.weight, wpe.weight, ln_f.weight, ln_f.bias
}

at::Tensor AsFloat(const TensorView& t, const fs::path& file) {
  at::ScalarType type;
  switch (t.dtype) {
    case SafetensorsDType::kF32: type = at::kFloat; break;
    case SafetensorsDType::kF16: type = at::kHalf; break;
    case SafetensorsDType::kBF16: type = at::kBFloat16; break;
    default:
      throw DataError(fmt::format("tensor {} is {}; GPT-2 weights are F32, F16 or BF16", t.name,
                                  SafetensorsDTypeName(t.dtype)),
                      ErrorWhere{.file = file.string(), .field = t.name});
  }
  std::vector<int64_t> shape(t.shape.begin(), t.shape.end());
  at::Tensor out = torch::empty(shape, torch::TensorOptions().dtype(type));
  std::memcpy(out.data_ptr(), t.bytes.data(), t.bytes.size());  // the map need not be aligned
  return out.to(at::kFloat);
}

const nlohmann::json& Field(const nlohmann::json& config, const char* key, const fs::path& file) {
  if (!config.contains(key) || !config[key].is_number_integer() || config[key].get<int64_t>() <= 0) {
    throw DataError(fmt::format("config.json needs a positive integer {}", key),
                    ErrorWhere{.file = file.string(), .field = key},
                    "is this a GPT-2 config (GPT2Config.save_pretrained)?");
  }
  return config[key];
}

// The GPT-2 shape of a Hugging Face config.json, and whether its GELU is
// the tanh one; everything this architecture does not have is refused.
GptShape ShapeOfHfConfig(const fs::path& file) {
  const auto c = nlohmann::json::parse(ReadFile(file), nullptr, /*allow_exceptions=*/false);
  if (!c.is_object()) {
    throw DataError("not a JSON object", ErrorWhere{.file = file.string()},
                    "pass a directory written by GPT2LMHeadModel.save_pretrained");
  }
  const std::string type = c.value("model_type", std::string("gpt2"));
  if (type != "gpt2") {
    throw DataError(fmt::format("model_type is \"{}\", not \"gpt2\"", type),
                    ErrorWhere{.file = file.string(), .field = "model_type"},
                    "topspin imports GPT-2 models (GPT2LMHeadModel)");
  }
  const auto refuse = [&](const char* key, const std::string& why) {
    throw DataError(fmt::format("{}: {}", key, why), ErrorWhere{.file = file.string(), .field = key},
                    "topspin's GPT is GPT-2 as published; this variant has no setting here");
  };
  if (c.value("add_cross_attention", false)) refuse("add_cross_attention", "cross-attention");
  if (c.value("scale_attn_by_inverse_layer_idx", false)) {
    refuse("scale_attn_by_inverse_layer_idx", "attention scaled by the layer index");
  }
  if (!c.value("scale_attn_weights", true)) refuse("scale_attn_weights", "unscaled attention");
  const double eps = c.value("layer_norm_epsilon", 1e-5);
  if (std::abs(eps - 1e-5) > 1e-12) refuse("layer_norm_epsilon", fmt::format("{} (ours is 1e-5)", eps));
  GptShape s;
  s.vocab = Field(c, "vocab_size", file).get<int64_t>();
  s.context = c.contains("n_positions") ? Field(c, "n_positions", file).get<int64_t>()
                                        : Field(c, "n_ctx", file).get<int64_t>();
  s.layers = Field(c, "n_layer", file).get<int64_t>();
  s.d_model = Field(c, "n_embd", file).get<int64_t>();
  s.heads = Field(c, "n_head", file).get<int64_t>();
  s.d_ff = c.contains("n_inner") && !c["n_inner"].is_null() ? Field(c, "n_inner", file).get<int64_t>()
                                                              : 4 * s.d_model;
  s.tied_embeddings = c.value("tie_word_embeddings", true);
  const std::string act = c.value("activation_function", std::string("gelu_new"));
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") {
    s.gelu_tanh = true;
  } else if (act != "gelu") {
    refuse("activation_function", fmt::format("\"{}\" (ours: gelu, gelu_new)", act));
  }
  return s;
}

// config.yaml of an imported run: the model's shape; the data and the
// schedule are the user's to add for fine-tuning.
std::string RunConfigText(const GptShape& s, const fs::path& from) {
  return fmt::format(
      "# Imported from the Hugging Face GPT-2 directory {} by `topspin import gpt2`.\n"
      "# Generate from it, evaluate it, or fine-tune it with\n"
      "#   topspin train THIS_FILE --set data.train=DIR --init-from RUN/checkpoints/step-0\n"
      "run: {{name: gpt2-import}}\n"
      "model:\n"
      "  kind: gpt\n"
      "  gpt:\n"
      "    vocab: {}\n"
      "    context: {}\n"
      "    layers: {}\n"
      "    d_model: {}\n"
      "    heads: {}\n"
      "    d_ff: {}\n"
      "    tied_embeddings: {}\n"
      "    gelu: {}\n",
      from.string(), s.vocab, s.context, s.layers, s.d_model, s.heads, s.d_ff,
      s.tied_embeddings ? "true" : "false", s.gelu_tanh ? "tanh" : "exact");
}

bool IgnoredHfTensor(const std::string& name) {
  // Causal-mask buffers older transformers saved; the tied head's copy.
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

std::string Unprefixed(const std::string& name) {
  constexpr std::string_view kPrefix = "transformer.";
  return name.starts_with(kPrefix) ? name.substr(kPrefix.size()) : name;
}

}  // namespace

Gpt2ImportResult ImportGpt2(const fs::path& hf_dir, const fs::path& run_dir) {
  if (fs::exists(run_dir) && !fs::is_empty(run_dir)) {
    throw Error(ErrorKind::kUsage, fmt::format("{} exists and is not empty", run_dir.string()),
                {.file = run_dir.string()}, "pass --to a new directory");
  }
  for (const char* need : {"config.json", "model.safetensors"}) {
    if (!fs::exists(hf_dir / need)) {
      throw IoError(fmt::format("{} has no {}", hf_dir.string(), need),
                    ErrorWhere{.file = (hf_dir / need).string()},
                    "pass a directory written by GPT2LMHeadModel.save_pretrained(DIR) "
                    "(safetensors, the default)");
    }
  }
  const fs::path weights_path = hf_dir / "model.safetensors";
  const GptShape shape = ShapeOfHfConfig(hf_dir / "config.json");
  const SafetensorsFile weights = SafetensorsFile::Open(weights_path);
  std::map<std::string, const TensorView*> by_name;
  for (const TensorView& t : weights.tensors()) by_name[Unprefixed(t.name)] = &t;

  Gpt gpt(shape, 0);
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  std::vector<std::pair<std::string, at::Tensor>> params;
  for (const auto& item : gpt.module().named_parameters()) {
    const HfName hf = HfNameOf(item.key());
    const auto it = by_name.find(hf.name);
    if (it == by_name.end()) {
      throw DataError(fmt::format("tensor {} is missing", hf.name),
                      ErrorWhere{.file = weights_path.string(), .field = hf.name},
                      "the weights do not belong to this config.json");
    }
    used.insert(hf.name);
    at::Tensor t = AsFloat(*it->second, weights_path);
    if (hf.transposed && t.dim() == 2) t = t.t();
    if (t.sizes() != item.value().sizes()) {
      throw DataError(fmt::format("tensor {} has shape {}, the config.json asks for {}{}", hf.name,
                                  fmt::join(t.sizes(), "x"), fmt::join(item.value().sizes(), "x"),
                                  hf.transposed ? " (transposed: a Conv1D weight)" : ""),
                      ErrorWhere{.file = weights_path.string(), .field = hf.name},
                      "the weights do not belong to this config.json");
    }
    item.value().copy_(t);
    params.emplace_back("dense." + item.key(), item.value().contiguous());
  }
  for (const auto& [name, view] : by_name) {
    if (used.contains(name) || IgnoredHfTensor(name)) continue;
    if (name == "lm_head.weight" && shape.tied_embeddings) continue;  // wte's copy
    throw DataError(fmt::format("tensor {} has no place in a GPT-2 of this config", name),
                    ErrorWhere{.file = weights_path.string(), .field = view->name},
                    "is this a GPT2LMHeadModel checkpoint?");
  }

  fs::create_directories(run_dir);
  const fs::path config_path = run_dir / "config.yaml";
  WriteFileAtomic(config_path, RunConfigText(shape, fs::absolute(hf_dir)));
  const Config config = Config::Load(config_path.string(), {}, TopspinSchema());

  const CheckpointStore store(run_dir / "checkpoints");
  CheckpointWriter w = store.Begin(0);
  std::vector<SafetensorsTensor> views;
  for (const auto& [name, t] : params) views.push_back(View(name, t));
  w.AddFileWith(kModelFile, [&](const fs::path& path) { WriteSafetensors(path, views); });
  Gpt2ImportResult r;
  if (fs::exists(hf_dir / "vocab.json") && fs::exists(hf_dir / "merges.txt")) {
    w.AddFile(kTokenizerFile, nlohmann::json{{"spec", "gpt2"},
                                             {"vocab", "vocab.json"},
                                             {"merges", "merges.txt"}}
                                      .dump() +
                                  "\n");
    w.AddFile("vocab.json", ReadFile(hf_dir / "vocab.json"));
    w.AddFile("merges.txt", ReadFile(hf_dir / "merges.txt"));
    r.tokenizer = "gpt2";
  }
  w.SetMeta(nlohmann::json{{"step", 0},
                           {"model_kind", "gpt"},
                           {"config_hash", config.Hash()},
                           {"config", config.CanonicalText()},
                           {"imported_from", fs::absolute(hf_dir).string()},
                           {"dense_steps", 0}}
                .dump());
  r.checkpoint = w.Commit().dir;
  r.run_dir = run_dir;
  r.shape = shape;
  r.parameters = ParameterCount(shape);
  return r;
}

Gpt2ExportResult ExportGpt2(const Config& config, const fs::path& checkpoint,
                            const fs::path& out_dir, CheckpointChoice choice) {
  const Settings settings = Settings::From(config);
  if (settings.model.kind != "gpt") {
    throw Error(ErrorKind::kUsage,
                fmt::format("the run's model.kind is {}, not gpt", settings.model.kind),
                {.file = checkpoint.string(), .field = "model.kind"},
                "export gpt2 takes a GPT run");
  }
  const Checkpoint ckpt = OpenCheckpoint(checkpoint, choice);
  const GptShape shape = GptShapeFromConfig(settings.model.gpt);
  Gpt gpt(shape, 0);
  LoadModuleParameters(SafetensorsFile::Open(ckpt.FilePath(kModelFile)), gpt.module());

  torch::NoGradGuard no_grad;
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& item : gpt.module().named_parameters()) {
    const HfName hf = HfNameOf(item.key());
    at::Tensor t = item.value().detach();
    if (hf.transposed) t = t.t();
    const std::string name = hf.name == "lm_head.weight" ? hf.name : "transformer." + hf.name;
    tensors.emplace_back(name, t.contiguous().to(at::kFloat));
  }
  fs::create_directories(out_dir);
  std::vector<SafetensorsTensor> views;
  for (const auto& [name, t] : tensors) views.push_back(View(name, t));
  WriteSafetensors(out_dir / "model.safetensors", views, {{"format", "pt"}});

  Gpt2ExportResult r;
  r.checkpoint = ckpt.dir;
  r.out_dir = out_dir;
  r.parameters = ParameterCount(shape);
  std::optional<int64_t> eot;
  if (ckpt.files.contains(kTokenizerFile)) {
    const auto tok = nlohmann::json::parse(ReadFile(ckpt.FilePath(kTokenizerFile)), nullptr, false);
    if (tok.is_object() && tok.value("spec", std::string()) == "bytes") eot = kBytesEndOfText;
    if (tok.is_object() && tok.value("spec", std::string()) == "gpt2") {
      const std::string vocab = tok.value("vocab", std::string("vocab.json"));
      const std::string merges = tok.value("merges", std::string("merges.txt"));
      const std::string vocab_text = ReadFile(ckpt.FilePath(vocab));
      WriteFileAtomic(out_dir / "vocab.json", vocab_text);
      WriteFileAtomic(out_dir / "merges.txt", ReadFile(ckpt.FilePath(merges)));
      const auto ids = nlohmann::json::parse(vocab_text, nullptr, false);
      nlohmann::json tc{{"tokenizer_class", "GPT2Tokenizer"},
                        {"model_max_length", shape.context},
                        {"add_prefix_space", false}};
      if (ids.is_object() && ids.contains("<|endoftext|>")) {
        eot = ids["<|endoftext|>"].get<int64_t>();
        for (const char* k : {"bos_token", "eos_token", "unk_token"}) tc[k] = "<|endoftext|>";
      }
      WriteFileAtomic(out_dir / "tokenizer_config.json", tc.dump(2) + "\n");
      r.tokenizer = true;
    }
  }
  nlohmann::json hf{{"architectures", {"GPT2LMHeadModel"}},
                    {"model_type", "gpt2"},
                    {"vocab_size", shape.vocab},
                    {"n_positions", shape.context},
                    {"n_ctx", shape.context},
                    {"n_embd", shape.d_model},
                    {"n_layer", shape.layers},
                    {"n_head", shape.heads},
                    {"n_inner", shape.d_ff},
                    {"activation_function", shape.gelu_tanh ? "gelu_new" : "gelu"},
                    {"layer_norm_epsilon", 1e-5},
                    {"resid_pdrop", 0.0},
                    {"embd_pdrop", 0.0},
                    {"attn_pdrop", 0.0},
                    {"scale_attn_weights", true},
                    {"tie_word_embeddings", shape.tied_embeddings},
                    {"torch_dtype", "float32"},
                    {"use_cache", true}};
  // GPT2Config's defaults (50256) would name a token this vocabulary may
  // not have: the tokenizer's end of text, or none.
  hf["bos_token_id"] = eot ? nlohmann::json(*eot) : nlohmann::json(nullptr);
  hf["eos_token_id"] = hf["bos_token_id"];
  WriteFileAtomic(out_dir / "config.json", hf.dump(2) + "\n");
  return r;
}

}  // namespace topspin
