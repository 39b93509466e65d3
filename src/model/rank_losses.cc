#include "topspin/model/rank_losses.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

using torch::Tensor;

constexpr std::pair<RankLoss, const char*> kNames[] = {
    {RankLoss::kMse, "mse"},         {RankLoss::kBce, "bce"},
    {RankLoss::kRankNet, "ranknet"}, {RankLoss::kLambdaRank, "lambdarank"},
    {RankLoss::kSoftmax, "softmax"}, {RankLoss::kApproxNdcg, "approx_ndcg"}};

// The jagged batch as [B, L] with a mask of real documents.
struct Padded {
  Tensor s, y, mask;  // [B, L]; s and y are 0 at padding
};

// `longest` is the longest list when the host knows it (else read back).
Padded Pad(const Tensor& scores, const Tensor& labels, const Tensor& offsets, int64_t longest) {
  const Tensor off = offsets.to(torch::kLong);
  const int64_t b = off.size(0) - 1;
  const Tensor lengths = off.slice(0, 1) - off.slice(0, 0, b);
  const int64_t l = longest >= 0 ? longest : lengths.max().item<int64_t>();
  // With its output size given, repeat_interleave reads nothing back; given
  // only with the host's facts, whose offsets the pipeline made (otherwise
  // ATen's own checks catch offsets that do not cover the scores).
  const Tensor list = torch::repeat_interleave(
      torch::arange(b, off.options()), lengths, /*dim=*/0,
      /*output_size=*/longest >= 0 ? std::optional<int64_t>(scores.size(0)) : std::nullopt);
  const Tensor pos = torch::arange(scores.size(0), off.options()) - off.index_select(0, list);
  const auto index = c10::List<c10::optional<Tensor>>({list, pos});
  Padded p;
  p.s = torch::zeros({b, l}, scores.options()).index_put(index, scores);
  p.y = torch::zeros({b, l}, scores.options()).index_put(index, labels.to(scores.dtype()));
  p.mask = torch::zeros({b, l}, off.options().dtype(torch::kBool))
               .index_put(index, torch::ones_like(list, torch::kBool));
  return p;
}

Tensor Gains(const Padded& p) {
  return (torch::exp2(p.y) - 1) * p.mask;
}

// 1 / log2(rank + 2) for 0-based ranks, [B, L].
Tensor Discounts(const Tensor& ranks) {
  return 1.0 / torch::log2(ranks.to(torch::kDouble) + 2);
}

// Ideal DCG per list, [B] (no gradient).
Tensor IdealDcg(const Padded& p) {
  const Tensor sorted = std::get<0>(Gains(p).sort(/*dim=*/1, /*descending=*/true));
  const Tensor ranks = torch::arange(sorted.size(1), p.mask.options().dtype(torch::kLong));
  return (sorted * Discounts(ranks).to(sorted.dtype())).sum(1);
}

// The sum over the lists in `valid` of `per_list`, and how many there are
// (`known` when the host counted them, else read back).
RankLossTerms SumOver(const Tensor& per_list, const Tensor& valid, int64_t known) {
  return {torch::where(valid, per_list, torch::zeros_like(per_list)).sum(),
          known >= 0 ? known : valid.sum().item<int64_t>()};
}

// Pairs (i, j) of the same list with y_i > y_j, and s_i - s_j: [B, L, L].
std::pair<Tensor, Tensor> Pairs(const Padded& p) {
  const Tensor both = p.mask.unsqueeze(2) & p.mask.unsqueeze(1);
  const Tensor pair = both & (p.y.unsqueeze(2) > p.y.unsqueeze(1));
  return {pair, p.s.unsqueeze(2) - p.s.unsqueeze(1)};
}

RankLossTerms RankNet(const Padded& p, int64_t with_pair) {
  const auto [pair, diff] = Pairs(p);
  const Tensor loss = torch::softplus(-diff) * pair;
  const Tensor count = pair.sum({1, 2});
  return SumOver(loss.sum({1, 2}) / count.clamp_min(1), count > 0, with_pair);
}

RankLossTerms LambdaRank(const Padded& p) {
  const auto [pair, diff] = Pairs(p);
  Tensor weight;
  {
    torch::NoGradGuard no_grad;
    const Tensor ranked = p.s.masked_fill(~p.mask, -std::numeric_limits<double>::infinity());
    const Tensor order = std::get<1>(ranked.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true));
    const Tensor ranks = order.argsort(/*dim=*/int64_t{1}, /*descending=*/false);
    const Tensor d = Discounts(ranks).to(p.s.dtype());
    const Tensor g = Gains(p);
    const Tensor idcg = IdealDcg(p).clamp_min(1e-12).unsqueeze(1).unsqueeze(2);
    weight = ((g.unsqueeze(2) - g.unsqueeze(1)) * (d.unsqueeze(2) - d.unsqueeze(1))).abs() / idcg;
  }
  return {(torch::softplus(-diff) * weight * pair).sum(), p.s.size(0)};
}

RankLossTerms Softmax(const Padded& p, int64_t with_gain) {
  const Tensor t = Gains(p);
  const Tensor logp =
      torch::log_softmax(p.s.masked_fill(~p.mask, -std::numeric_limits<double>::infinity()), 1)
          .masked_fill(~p.mask, 0);
  const Tensor total = t.sum(1);
  const Tensor per_list = -(t * logp).sum(1) / total.clamp_min(1e-12);
  return SumOver(per_list, total > 0, with_gain);
}

// The softmax loss on the CPU in one pass per list, without padding to
// [B, L]: per list with T = sum_i t_i > 0, loss = lse(s) - sum_i t_i s_i / T
// and d loss / d s_i = softmax(s)_i - t_i / T. The sum is computed in
// double; the gradient is kept for the backward of JaggedSoftmaxNode.
struct SoftmaxPass {
  double sum = 0;
  int64_t count = 0;
  Tensor grad;  // [N], the scores' dtype
};

template <typename T>
SoftmaxPass SoftmaxByList(const Tensor& scores, const Tensor& labels, const Tensor& offsets) {
  const Tensor s_t = scores.contiguous(), y_t = labels.to(torch::kDouble).contiguous();
  const Tensor off_t = offsets.to(torch::kLong).contiguous();
  const T* s = s_t.data_ptr<T>();
  const double* y = y_t.data_ptr<double>();
  const int64_t* off = off_t.data_ptr<int64_t>();
  SoftmaxPass pass{.grad = torch::zeros_like(s_t)};
  T* g = pass.grad.data_ptr<T>();
  for (int64_t list = 0; list + 1 < off_t.size(0); ++list) {
    const int64_t begin = off[list], end = off[list + 1];
    double total = 0, weighted = 0, top = -std::numeric_limits<double>::infinity();
    for (int64_t i = begin; i < end; ++i) {
      const double t = std::exp2(y[i]) - 1;
      total += t;
      weighted += t * double(s[i]);
      top = std::max(top, double(s[i]));
    }
    if (!(total > 0)) continue;
    double z = 0;
    for (int64_t i = begin; i < end; ++i) z += std::exp(double(s[i]) - top);
    const double lse = top + std::log(z);
    pass.sum += lse - weighted / total;
    ++pass.count;
    for (int64_t i = begin; i < end; ++i) {
      g[i] = T(std::exp(double(s[i]) - lse) - (std::exp2(y[i]) - 1) / total);
    }
  }
  return pass;
}

// The loss value as an autograd node whose backward is the gradient the
// forward pass already computed.
class JaggedSoftmaxNode : public torch::autograd::Function<JaggedSoftmaxNode> {
 public:
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& scores, double sum,
                        const Tensor& grad) {
    ctx->save_for_backward({grad});
    return torch::scalar_tensor(sum, scores.options());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list out_grad) {
    return {ctx->get_saved_variables()[0] * out_grad[0], Tensor(), Tensor()};
  }
};

RankLossTerms FusedSoftmax(const Tensor& scores, const Tensor& labels, const Tensor& offsets) {
  SoftmaxPass pass;
  {
    torch::NoGradGuard no_grad;
    pass = scores.scalar_type() == torch::kDouble ? SoftmaxByList<double>(scores, labels, offsets)
                                                  : SoftmaxByList<float>(scores, labels, offsets);
  }
  return {JaggedSoftmaxNode::apply(scores, pass.sum, pass.grad), pass.count};
}

RankLossTerms ApproxNdcg(const Padded& p, double temperature, int64_t with_gain) {
  const int64_t l = p.s.size(1);
  // The identity on the scores' device (a host one here failed on CUDA).
  const Tensor others = p.mask.unsqueeze(1) & ~torch::eye(l, p.mask.options()).unsqueeze(0);
  // rank_i = 1 + sum_j sigmoid((s_j - s_i) / T) over the list's other documents.
  const Tensor sig = torch::sigmoid((p.s.unsqueeze(1) - p.s.unsqueeze(2)) / temperature);
  const Tensor rank = 1 + (sig * others).sum(2);
  const Tensor dcg = (Gains(p) / torch::log2(1 + rank)).sum(1);
  const Tensor idcg = IdealDcg(p);
  return SumOver(1 - dcg / idcg.clamp_min(1e-12), idcg > 0, with_gain);
}

void CheckShapes(const Tensor& scores, const Tensor& labels, const Tensor& offsets) {
  if (scores.dim() != 1 || labels.sizes() != scores.sizes() || offsets.dim() != 1 ||
      offsets.size(0) < 1) {
    throw InternalError(fmt::format(
        "ranking loss: scores [{}], labels [{}], offsets [{}]", fmt::join(scores.sizes(), ", "),
        fmt::join(labels.sizes(), ", "), fmt::join(offsets.sizes(), ", ")));
  }
  // Host offsets are checked where it costs no read-back: the lists must
  // cover the documents exactly.
  if (offsets.is_cpu()) {
    const Tensor off = offsets.to(torch::kLong).contiguous();
    const int64_t first = off.data_ptr<int64_t>()[0];
    const int64_t last = off.data_ptr<int64_t>()[off.numel() - 1];
    if (first != 0 || last != scores.size(0)) {
      throw InternalError(fmt::format(
          "ranking loss: offsets run from {} to {}, but there are {} scores (they must run "
          "from 0 to the number of scores)",
          first, last, scores.size(0)));
    }
  }
}

}  // namespace

const char* RankLossName(RankLoss loss) {
  for (const auto& [l, name] : kNames) {
    if (l == loss) return name;
  }
  return "?";
}

RankLoss ParseRankLoss(std::string_view name) {
  std::string choices;
  for (const auto& [l, n] : kNames) {
    if (name == n) return l;
    choices += fmt::format("{}{}", choices.empty() ? "" : ", ", n);
  }
  throw ConfigError(fmt::format("unknown ranking loss \"{}\"", name),
                    ErrorWhere{.field = "model.loss"}, "choose one of " + choices);
}

ListFacts HostListFacts(const float* labels, const int64_t* offsets, int64_t lists) {
  ListFacts f{.longest = 0, .with_pair = 0, .with_gain = 0};
  bool gains_known = true;
  for (int64_t list = 0; list < lists; ++list) {
    const int64_t begin = offsets[list], end = offsets[list + 1];
    f.longest = std::max(f.longest, end - begin);
    // NaN compares false both ways, as in the device's pair mask.
    float low = std::numeric_limits<float>::infinity(), high = -low;
    bool gain = false;
    for (int64_t i = begin; i < end; ++i) {
      const float y = labels[i];
      low = y < low ? y : low;
      high = y > high ? y : high;
      gain |= y > 0;
      gains_known &= y == 0 || y >= 1e-3f;  // false for NaN and negatives
    }
    f.with_pair += high > low ? 1 : 0;
    f.with_gain += gain ? 1 : 0;
  }
  if (!gains_known) f.with_gain = -1;
  return f;
}

RankLossTerms RankingLossTerms(RankLoss loss, const at::Tensor& scores, const at::Tensor& labels,
                               const at::Tensor& offsets, const RankLossOptions& options,
                               const ListFacts& facts) {
  CheckShapes(scores, labels, offsets);
  if (offsets.size(0) == 1 || scores.size(0) == 0) return {(scores * 0).sum(), 0};
  switch (loss) {
    case RankLoss::kMse: return {(scores - labels.to(scores.dtype())).pow(2).sum(), scores.size(0)};
    case RankLoss::kBce:
      return {torch::binary_cross_entropy_with_logits(
                  scores, (labels.to(scores.dtype()) / options.label_max).clamp(0, 1),
                  /*weight=*/{}, /*pos_weight=*/{}, at::Reduction::Sum),
              scores.size(0)};
    case RankLoss::kSoftmax:
      if (options.cpu_fused && scores.is_cpu() &&
          (scores.scalar_type() == torch::kFloat || scores.scalar_type() == torch::kDouble)) {
        return FusedSoftmax(scores, labels, offsets);
      }
      break;
    default: break;
  }
  const Padded p = Pad(scores, labels, offsets, facts.longest);
  switch (loss) {
    case RankLoss::kRankNet: return RankNet(p, facts.with_pair);
    case RankLoss::kLambdaRank: return LambdaRank(p);
    case RankLoss::kSoftmax: return Softmax(p, facts.with_gain);
    case RankLoss::kApproxNdcg: return ApproxNdcg(p, options.temperature, facts.with_gain);
    default: throw InternalError("unhandled ranking loss");
  }
}

at::Tensor RankingLoss(RankLoss loss, const at::Tensor& scores, const at::Tensor& labels,
                       const at::Tensor& offsets, const RankLossOptions& options) {
  const RankLossTerms t = RankingLossTerms(loss, scores, labels, offsets, options);
  if (t.count == 0) return (scores * 0).sum();  // a zero gradient, not NaN
  return t.sum / static_cast<double>(t.count);
}

}  // namespace topspin
