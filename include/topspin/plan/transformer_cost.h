// Analytic cost of a GPT-style decoder: parameters, training FLOPs per
// token, model FLOPs utilisation, compute-optimal sizes and training memory.
//
// All functions are pure and thread-safe. Invalid inputs (a non-positive
// size, d_model not divisible by heads, ...) throw Error{kConfig} whose
// where().field names the offending field ("d_model", "world_size", ...).
#pragma once

#include <cstdint>

namespace topspin {

// A GPT-2-style decoder: learned position embeddings, pre-LayerNorm blocks
// with biases everywhere, a final LayerNorm, and an output head that is the
// token embedding (tied) or its own vocab x d_model matrix (untied, no bias).
// d_ff's default is taken when the struct is initialised, so give d_model in
// the initialiser (GptShape{.vocab = ..., .d_model = 768, ...}); assigning
// d_model later leaves d_ff at 4 * 0 = 0, which is rejected.
struct GptShape {
  int64_t vocab = 0;            // tokens in the vocabulary
  int64_t context = 0;          // n_ctx: tokens per sequence (position embeddings)
  int64_t layers = 0;           // n_layer: transformer blocks
  int64_t d_model = 0;          // residual width
  int64_t heads = 0;            // attention heads; must divide d_model
  int64_t d_ff = 4 * d_model;   // MLP hidden width; 4 * d_model unless set
  bool tied_embeddings = true;  // output head shares the token embedding
  // The MLP's GELU: tanh approximation (GPT-2's) or exact erf. No effect on
  // the counts and costs below.
  bool gelu_tanh = false;
};

// Every trainable parameter: token embedding (vocab x d_model), position
// embedding (context x d_model), per layer two LayerNorms (weight + bias),
// QKV projection and attention output projection (with biases), the MLP's
// two linears (with biases), the final LayerNorm, and the head if untied.
// GPT-2 small (50257, 1024, 12, 768, 12) has 124,439,808.
int64_t ParameterCount(const GptShape& shape);

// One transformer block's weights and biases (two LayerNorms, QKV, the
// attention projection, the MLP's two linears): ParameterCount less the
// embeddings, the final LayerNorm and the untied head, over layers.
int64_t BlockParameterCount(const GptShape& shape);

// ParameterCount minus the token and position embeddings (and the untied
// head): the N of Kaplan et al. (2020), here exact rather than 12*L*d^2.
int64_t NonEmbeddingParameterCount(const GptShape& shape);

// Training FLOPs per token, Kaplan et al. (2020), "Scaling Laws for Neural
// Language Models", Table 1 (the convention Chinchilla's C = 6ND rests on):
//   forward  = 2 * N + 2 * layers * context * d_model   (N: non-embedding)
//   training = 3 * forward (backward costs twice the forward)
//            = 6 * N + 6 * layers * context * d_model.
// The attention term counts one n_ctx x d_model product per layer, as Kaplan
// does; the logits matmul (2 * d_model * vocab forward) is left out. PaLM's
// appendix B and nanoGPT count 12 * layers * context * d_model and include
// the head, so their MFU reads higher for small models.
double TrainingFlopsPerToken(const GptShape& shape);

// Model FLOPs utilisation in [0, 1] for a sane measurement:
// tokens_per_s * flops_per_token / peak_flops. tokens_per_s >= 0,
// flops_per_token > 0, peak_flops > 0 (FLOP/s of all devices together).
double Mfu(double tokens_per_s, double flops_per_token, double peak_flops);

// Compute-optimal model and data size for a training budget.
struct ComputeOptimalSize {
  double parameters = 0;  // N_opt
  double tokens = 0;      // D_opt
};

// Hoffmann et al. (2022), "Training Compute-Optimal Large Language Models"
// (Chinchilla), in its common approximation: C = 6 * N * D with D = 20 * N,
// so N = sqrt(C / 120) and D = 20 * N. compute_flops > 0.
// Chinchilla itself: 5.88e23 FLOPs -> 70e9 parameters, 1.4e12 tokens.
ComputeOptimalSize ComputeOptimal(double compute_flops);

// How parameters are stored during training.
enum class ParamPrecision {
  kFp32,  // fp32 parameters and gradients; no master copy
  kBf16,  // bf16 parameters and gradients plus an fp32 master copy
};

// Inputs of the training memory estimate.
struct MemoryPlan {
  int64_t parameters = 0;  // trainable parameters, > 0
  ParamPrecision precision = ParamPrecision::kBf16;
  int64_t optimizer_states = 2;  // fp32 states per parameter: AdamW 2 (m, v), SGD 1
  int zero_stage = 0;            // 0: replicate all; 1: shard optimizer states and
                                 // master copy; 2: also gradients; 3: also parameters
  int64_t world_size = 1;        // ranks the sharded parts are split over, > 0
};

// Bytes one rank holds for model state. Activations, temporary buffers,
// communication buckets and allocator fragmentation are not included.
// A sharded part holds ceil(parameters / world_size) elements per rank.
struct MemoryEstimate {
  int64_t param_bytes = 0;      // parameters, in their training precision
  int64_t grad_bytes = 0;       // gradients, same precision as parameters
  int64_t master_bytes = 0;     // fp32 master parameters (kBf16 only)
  int64_t optimizer_bytes = 0;  // fp32 optimizer states
  int64_t total_bytes = 0;      // the sum of the four above
};

// Mixed-precision AdamW without ZeRO: 2 + 2 + 4 + 4 + 4 = 16 bytes per
// parameter; with ZeRO-3 every part is divided by world_size.
MemoryEstimate EstimateTrainingMemory(const MemoryPlan& plan);

}  // namespace topspin
