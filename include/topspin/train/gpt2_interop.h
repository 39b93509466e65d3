// Hugging Face GPT-2 checkpoints in and out (`topspin import gpt2`,
// `topspin export gpt2`).
//
// A Hugging Face GPT-2 directory is what GPT2LMHeadModel.save_pretrained
// writes: config.json (GPT2Config), model.safetensors (float32, float16 or
// bfloat16; names with or without the "transformer." prefix; the attention
// mask buffers h.N.attn.bias of old files are ignored) and, for its
// tokenizer, vocab.json + merges.txt. Its Conv1D layers keep weights as
// [in, out]; ours (torch::nn::Linear) as [out, in]: both directions
// transpose them. The architectures agree otherwise (pre-LayerNorm blocks,
// learned positions, fused q|k|v projection split in that order, head
// tied to the token embedding unless tie_word_embeddings is false), so the
// imported model's logits are transformers' to float32 rounding.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "topspin/core/config.h"
#include "topspin/plan/transformer_cost.h"
#include "topspin/train/trainer.h"

namespace topspin {

struct Gpt2ImportResult {
  std::filesystem::path run_dir;
  std::filesystem::path checkpoint;  // run_dir/checkpoints/step-0
  GptShape shape;
  int64_t parameters = 0;
  std::string tokenizer;  // "gpt2" when vocab.json + merges.txt came along, else ""
};

// Makes run directory `run_dir` (new, or empty) from the Hugging Face GPT-2
// directory `hf_dir`: run_dir/config.yaml (model.kind gpt with the shape of
// config.json, gelu tanh for gelu_new) and run_dir/checkpoints/step-0 with
// the weights and the tokenizer, so generate, eval and train --init-from
// take it like a run of ours. Error{kData} naming the file and field for a
// config this architecture cannot represent (cross-attention, other
// activations or LayerNorm epsilons, layer-index attention scaling) or a
// tensor that is missing or has the wrong shape; Error{kUsage} when
// run_dir exists and is not empty.
Gpt2ImportResult ImportGpt2(const std::filesystem::path& hf_dir,
                            const std::filesystem::path& run_dir);

struct Gpt2ExportResult {
  std::filesystem::path checkpoint;  // the one exported
  std::filesystem::path out_dir;
  int64_t parameters = 0;
  bool tokenizer = false;  // vocab.json + merges.txt written (a gpt2 tokenizer)
};

// Writes the GPT of `checkpoint` (a run directory: its best checkpoint, or
// a step-N directory), whose run config is `config`, as a Hugging Face
// GPT-2 directory `out_dir` that transformers' GPT2LMHeadModel
// .from_pretrained loads: config.json, model.safetensors (float32) and,
// when the checkpoint's tokenizer is a GPT-2 BPE, vocab.json, merges.txt
// and tokenizer_config.json. A padded vocabulary (model.gpt.vocab_multiple)
// is exported padded: vocab_size is the model's row count. Error{kUsage}
// for a model transformers' GPT-2 has no setting for.
Gpt2ExportResult ExportGpt2(const Config& config, const std::filesystem::path& checkpoint,
                            const std::filesystem::path& out_dir,
                            CheckpointChoice choice = CheckpointChoice::kBest);

}  // namespace topspin
