// Drawing the next token from a language model's logits: temperature,
// top-k and top-p (nucleus) sampling, on the host in double precision, so
// a seed gives the same token on any machine that computed the same logits.
#pragma once

#include <cstdint>
#include <span>

namespace topspin {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (the most likely token)
  int64_t top_k = 0;         // > 0: only the k most likely tokens
  double top_p = 1.0;        // < 1: only the most likely tokens whose probabilities sum to p
};

// Error{kConfig} naming the flag for options outside their ranges
// (temperature < 0, top_k < 0, top_p outside (0, 1]).
void CheckSamplingOptions(const SamplingOptions& options);

// The token `u` (uniform in [0, 1)) picks from the distribution the
// options make of `logits`: softmax(logits / temperature) restricted to the
// top_k most likely tokens, then to the smallest set of most likely tokens
// whose probability reaches top_p, renormalised. Ties rank the lower id
// first. Non-finite logits never win unless every logit is one.
int64_t SampleToken(std::span<const float> logits, const SamplingOptions& options, double u);

}  // namespace topspin
