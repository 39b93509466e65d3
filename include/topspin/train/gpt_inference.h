// A trained GPT outside training: text generation with a KV cache
// (`topspin generate`) and the validation loss of a checkpoint (`topspin
// eval` of a model.kind gpt run).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "topspin/core/config.h"
#include "topspin/model/sampling.h"
#include "topspin/train/trainer.h"

namespace topspin {

struct GenerateOptions {
  std::string prompt;  // "" starts a new document (the end-of-text token)
  int64_t max_new_tokens = 256;
  SamplingOptions sampling;
  uint64_t seed = 0;  // the same seed, checkpoint and machine give the same text
  // A tokenizer spec ("bytes", "sentencepiece:MODEL", "gpt2:DIR") instead of the
  // checkpoint's own (needed for checkpoints that hold none).
  std::string tokenizer;
  bool stop_at_end_of_text = true;  // stop when the model ends the document
  CheckpointChoice choice = CheckpointChoice::kBest;
  // When set, the logits of the prompt's positions ([prompt tokens, model
  // vocab] float32, tensor "logits"; the last context - 1 tokens of a longer
  // prompt) are written to this safetensors file: for comparing the model
  // with another implementation of it.
  std::filesystem::path prompt_logits;
};

struct GenerateResult {
  std::filesystem::path checkpoint;
  int64_t step = 0;
  std::string tokenizer;  // its spec
  int64_t prompt_tokens = 0;
  int64_t new_tokens = 0;
  std::string text;  // the new text, without the prompt
  std::vector<uint32_t> prompt_ids, new_ids;  // the token ids of the prompt and of the text
  bool ended = false;  // the model produced the end-of-text token
  double seconds = 0;
  double tokens_per_s = 0;  // new tokens, prompt included in the time
};

// Generates from `checkpoint` (a run directory: its best checkpoint unless
// options.choice says latest; or a step-N directory) of the model `config`
// describes. `stream` receives the new text as it is made, in pieces that
// end on whole UTF-8 characters. Past the context the window slides: the
// last context - 1 tokens are run again. Error{kUsage} for a checkpoint
// without a tokenizer when options.tokenizer is empty; Error{kConfig} for a
// tokenizer whose ids do not fit model.gpt.vocab.
GenerateResult GenerateText(const Config& config, const std::filesystem::path& checkpoint,
                            const GenerateOptions& options,
                            const std::function<void(std::string_view)>& stream = {});

struct GptEvalResult {
  std::filesystem::path checkpoint;
  int64_t step = 0;
  double loss = 0;  // mean next-token cross-entropy, nats
  double perplexity = 0;
  double tokens = 0;
  double seconds = 0;
};

// The loss over every window of `dataset_key`'s dataset.
GptEvalResult EvaluateGpt(const Config& config, const std::filesystem::path& checkpoint,
                          const std::string& dataset_key = "data.valid",
                          CheckpointChoice choice = CheckpointChoice::kBest);

}  // namespace topspin
