// Learning-to-rank losses over jagged batches.
//
// Shapes: scores [N] and labels [N] (float or double, N documents), offsets
// [B + 1] int64 with list i = documents [offsets[i], offsets[i + 1]). Every
// document is scored once; padding to [B, L] (L = the longest list) exists
// only inside the listwise and pairwise losses, masked out.
//
//   mse          mean over documents of (s - y)^2
//   bce          mean over documents of BCE-with-logits(s, y / label_max)
//   ranknet      per list, mean over pairs with y_i > y_j of
//                log(1 + exp(-(s_i - s_j))); mean over lists with a pair
//   lambdarank   the RankNet pair loss weighted by |delta NDCG| of swapping
//                i and j at the current ranking (weights not differentiated);
//                per list summed, divided by the number of lists
//   softmax      listwise: per list -sum_i t_i log softmax(s)_i / sum_i t_i
//                with t = 2^y - 1; mean over lists with a relevant document
//   approx_ndcg  1 - ApproxNDCG: ranks smoothed as 1 + sum_j sigmoid((s_j -
//                s_i) / temperature); mean over lists with a relevant document
// Each returns a scalar; a batch with nothing to learn from (no pair, no
// relevant document) returns 0 with a gradient of 0.
#pragma once

#include <string_view>

#include <ATen/core/Tensor.h>

namespace topspin {

enum class RankLoss { kMse, kBce, kRankNet, kLambdaRank, kSoftmax, kApproxNdcg };

const char* RankLossName(RankLoss loss);
// Throws Error{kConfig} naming model.loss with the choices.
RankLoss ParseRankLoss(std::string_view name);

struct RankLossOptions {
  double label_max = 4;      // bce: targets are labels / label_max
  double temperature = 0.1;  // approx_ndcg: sigmoid temperature of the smooth rank
  // softmax on the CPU (float or double scores): one pass over each list
  // with the gradient computed alongside; false pads to [B, L] like every
  // other device (the reference the fused pass is tested against).
  bool cpu_fused = true;
};

// The loss of a batch is sum / count, with count the terms it averages:
// documents (mse, bce), lists (lambdarank), or lists that can be ranked
// (ranknet: with a pair of different labels; softmax, approx_ndcg: with a
// positive label). Data-parallel training sums both over ranks, so the loss
// of a global batch does not depend on how it was split.
struct RankLossTerms {
  at::Tensor sum;  // scalar, differentiable
  int64_t count = 0;
};

// What the host knows of a batch's lists before the device computes
// (HostListFacts, from the host batch's labels and offsets). With them the
// padded losses read nothing back: on CUDA each read-back (.item()) waits
// for every kernel queued before it, so the host cannot run ahead of the
// GPU. -1 is "not known", and that number is read back as before.
struct ListFacts {
  int64_t longest = -1;    // the longest list: the padded width L
  int64_t with_pair = -1;  // lists with two different labels (ranknet's count)
  int64_t with_gain = -1;  // lists with a positive gain (softmax's and approx_ndcg's count)
};
// with_gain is known only when every label is 0 or at least 1e-3 (then a
// list's gains, 2^y - 1 in float32, sum above 0 exactly when it has a
// positive label); longest and with_pair always.
ListFacts HostListFacts(const float* labels, const int64_t* offsets, int64_t lists);

RankLossTerms RankingLossTerms(RankLoss loss, const at::Tensor& scores, const at::Tensor& labels,
                               const at::Tensor& offsets, const RankLossOptions& options = {},
                               const ListFacts& facts = {});

// sum / count of RankingLossTerms; 0 (with a zero gradient) when count is 0.
at::Tensor RankingLoss(RankLoss loss, const at::Tensor& scores, const at::Tensor& labels,
                       const at::Tensor& offsets, const RankLossOptions& options = {});

}  // namespace topspin
