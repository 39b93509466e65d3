// The GPT's pieces shared by its Task (gpt_task.cc) and generation and
// evaluation outside training (gpt_inference.cc).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "topspin/core/config_schema.h"
#include "topspin/data/checkpoint_store.h"
#include "topspin/data/tokenizer.h"
#include "topspin/model/gpt.h"
#include "topspin/pipeline/pipeline.h"
#include "topspin/train/device.h"
#include "train/precision.h"

namespace topspin {

// Every GPT checkpoint's tokenizer: tokenizer.json ({"spec": "bytes"},
// {"spec": "sentencepiece", "file": "tokenizer.model"} or {"spec": "gpt2",
// "vocab": "vocab.json", "merges": "merges.txt"}) and the files it names
// (the SentencePiece model; GPT-2's vocab.json and merges.txt), so
// generation needs neither the data nor the tokenizer's original path.
inline constexpr const char* kTokenizerFile = "tokenizer.json";
inline constexpr const char* kTokenizerModelFile = "tokenizer.model";
inline constexpr const char* kTokenizerVocabFile = "vocab.json";
inline constexpr const char* kTokenizerMergesFile = "merges.txt";

// The tokenizer of the training data (its manifest names it), as files to
// add to each checkpoint; nothing for data converted before manifests
// named their tokenizer.
struct TokenizerFiles {
  std::map<std::string, std::string> files;  // name -> bytes
  static TokenizerFiles Of(const std::string& dataset_dir);
  void AddTo(CheckpointWriter& writer) const;
};

// The tokenizer a checkpoint holds; null when it has none.
std::unique_ptr<Tokenizer> CheckpointTokenizer(const Checkpoint& checkpoint);

// The pipeline over `dataset_key` (data.train or data.valid) in windows of
// the model's context + 1 tokens: every window once, in order.
std::unique_ptr<Pipeline> GptEvalPipeline(const Settings& settings, const std::string& dataset_key);

// The mean next-token loss of up to `max_batches` batches (0: all) of
// `pipeline`, and the tokens it was taken over.
struct GptLoss {
  double loss = 0;
  double tokens = 0;
};
GptLoss GptValidLoss(const Gpt& gpt, Pipeline& pipeline, const Precision& precision,
                     int64_t max_batches, const ComputeDevice& device, const Settings& settings,
                     const std::string& dataset_key);

}  // namespace topspin
