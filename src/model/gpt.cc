#include "topspin/model/gpt.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <torch/torch.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

// LayerNorm over the last dimension, composed (GptKernels::fused_ops off).
at::Tensor ComposedLayerNorm(const torch::nn::LayerNorm& ln, const at::Tensor& x) {
  const auto mean = x.mean(-1, /*keepdim=*/true);
  const auto var = (x - mean).pow(2).mean(-1, /*keepdim=*/true);
  return (x - mean) * torch::rsqrt(var + 1e-5) * ln->weight + ln->bias;
}

at::Tensor ComposedGelu(const at::Tensor& x, bool tanh) {
  if (tanh) {
    return 0.5 * x * (1 + torch::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x.pow(3))));
  }
  return 0.5 * x * (1 + torch::erf(x * M_SQRT1_2));
}

struct Block : torch::nn::Module {
  Block(const GptShape& s) : heads(s.heads), gelu(s.gelu_tanh ? "tanh" : "none") {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.d_model})));
    qkv = register_module("qkv", torch::nn::Linear(s.d_model, 3 * s.d_model));
    proj = register_module("proj", torch::nn::Linear(s.d_model, s.d_model));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.d_model})));
    fc = register_module("fc", torch::nn::Linear(s.d_model, s.d_ff));
    out = register_module("out", torch::nn::Linear(s.d_ff, s.d_model));
  }

  // x [B, T, D] -> [B, T, D]. Causal attention through
  // scaled_dot_product_attention: LibTorch picks flash or memory-efficient
  // kernels on CUDA and a fused kernel on the CPU; no [T, T] mask is built.
  // With `keys` and `values` (decoding), x's tokens follow the ones those
  // hold, and are appended to them.
  // `kernels` (training forwards) picks the attention and the LayerNorm
  // and GELU implementations; `mask` is the stored causal mask those that
  // want one use.
  torch::Tensor Forward(const torch::Tensor& x, at::Tensor* keys = nullptr,
                        at::Tensor* values = nullptr, const GptKernels& kernels = {},
                        const at::Tensor& mask = {}) {
    const int64_t b = x.size(0), t = x.size(1), d = x.size(2), hd = d / heads;
    const auto norm = [&](torch::nn::LayerNorm& ln, const at::Tensor& in) {
      return kernels.fused_ops ? ln->forward(in) : ComposedLayerNorm(ln, in);
    };
    const auto split = qkv->forward(norm(ln1, x)).view({b, t, 3, heads, hd}).permute({2, 0, 3, 1, 4});
    auto q = split[0], k = split[1], v = split[2];  // [B, H, T, hd]
    int64_t past = 0;
    if (keys != nullptr) {
      if (keys->defined()) {
        past = keys->size(2);
        k = torch::cat({*keys, k}, 2);
        v = torch::cat({*values, v}, 2);
      }
      *keys = k;
      *values = v;
    }
    at::Tensor attended;
    using A = GptKernels::Attention;
    if (keys == nullptr && kernels.attention == A::kSdpaMask) {
      attended = at::scaled_dot_product_attention(q, k, v, mask.narrow(0, 0, t).narrow(1, 0, t));
    } else if (keys == nullptr && kernels.attention == A::kComposed) {
      auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(hd));
      scores = scores.masked_fill(mask.narrow(0, 0, t).narrow(1, 0, t).logical_not(),
                                  -std::numeric_limits<float>::infinity());
      attended = torch::matmul(torch::softmax(scores, -1), v);
    } else if (past == 0 || t == 1) {
      // A single new token sees every earlier one: no mask at all.
      attended = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                                  /*is_causal=*/past == 0);
    } else {
      // New token i sees the past and new tokens 0..i.
      const auto rows = torch::arange(t, x.options().dtype(torch::kLong)).unsqueeze(1) + past;
      const auto cols = torch::arange(past + t, x.options().dtype(torch::kLong)).unsqueeze(0);
      attended = at::scaled_dot_product_attention(q, k, v, cols <= rows, 0.0, false);
    }
    auto h = x + proj->forward(attended.transpose(1, 2).reshape({b, t, d}));
    const auto hidden = fc->forward(norm(ln2, h));
    return h + out->forward(kernels.fused_ops ? torch::gelu(hidden, gelu)
                                              : ComposedGelu(hidden, gelu[0] == 't'));
  }

  int64_t heads;
  const char* gelu;  // torch::gelu's approximate: "tanh" | "none"
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc{nullptr}, out{nullptr};
};

struct Net : torch::nn::Module {
  explicit Net(const GptShape& s) {
    wte = register_module("wte", torch::nn::Embedding(s.vocab, s.d_model));
    wpe = register_module("wpe", torch::nn::Embedding(s.context, s.d_model));
    for (int64_t l = 0; l < s.layers; ++l) {
      blocks.push_back(register_module(fmt::format("h{}", l), std::make_shared<Block>(s)));
    }
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.d_model})));
    if (!s.tied_embeddings) {
      head = register_module("head", torch::nn::Linear(
                                          torch::nn::LinearOptions(s.d_model, s.vocab).bias(false)));
    }
  }
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  std::vector<std::shared_ptr<Block>> blocks;
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear head{nullptr};
};

}  // namespace

struct Gpt::Impl {
  GptShape shape;
  std::shared_ptr<Net> net;
  GptKernels kernels;
  at::Tensor mask;  // [context, context] bool, lower triangle; made for kernels that store it
  UnitHooks* hooks = nullptr;
  int64_t blocks_per_unit = 1;
};

Gpt::Gpt(const GptShape& shape, uint64_t seed) : impl_(std::make_unique<Impl>()) {
  ParameterCount(shape);  // validates the shape, naming the field
  impl_->shape = shape;
  torch::manual_seed(seed);
  impl_->net = std::make_shared<Net>(shape);
  torch::NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * double(shape.layers));
  for (auto& item : impl_->net->named_parameters()) {
    const std::string& name = item.key();
    auto& p = item.value();
    if (name.find(".ln") != std::string::npos || name.starts_with("ln_f")) continue;  // 1 and 0
    if (name.ends_with(".bias")) {
      p.zero_();
    } else if (name.ends_with("proj.weight") || name.ends_with("out.weight")) {
      p.normal_(0, residual_std);
    } else {
      p.normal_(0, 0.02);
    }
  }
}

Gpt::~Gpt() = default;

at::Tensor Gpt::Logits(const at::Tensor& tokens) const {
  Net& net = *impl_->net;  // the impl is not const; forward() is not either
  const int64_t t = tokens.size(1);
  if (t > impl_->shape.context) {
    throw InternalError(fmt::format("Gpt: {} tokens for a context of {}", t, impl_->shape.context));
  }
  UnitHooks* hooks = impl_->hooks;
  const int64_t per_unit = impl_->blocks_per_unit, layers = int64_t(net.blocks.size());
  if (hooks) hooks->Before(0);
  const auto positions = torch::arange(t, tokens.options().dtype(torch::kLong));
  auto x = net.wte->forward(tokens) + net.wpe->forward(positions);
  for (int64_t l = 0; l < layers; ++l) {
    const size_t unit = size_t(1 + l / per_unit);
    if (hooks && l % per_unit == 0) hooks->Before(unit);
    x = net.blocks[size_t(l)]->Forward(x, nullptr, nullptr, impl_->kernels, impl_->mask);
    if (hooks && ((l + 1) % per_unit == 0 || l + 1 == layers)) x = hooks->After(unit, x);
  }
  x = impl_->kernels.fused_ops ? net.ln_f->forward(x) : ComposedLayerNorm(net.ln_f, x);
  auto logits = net.head ? net.head->forward(x) : torch::matmul(x, net.wte->weight.t());
  return hooks ? hooks->After(0, logits) : logits;
}

at::Tensor Gpt::Extend(const at::Tensor& tokens, KvCache& cache) const {
  Net& net = *impl_->net;
  const int64_t t = tokens.size(1), start = cache.length;
  if (start + t > impl_->shape.context) {
    throw InternalError(fmt::format("Gpt::Extend: {} + {} tokens for a context of {}", start, t,
                                    impl_->shape.context));
  }
  cache.keys.resize(net.blocks.size());
  cache.values.resize(net.blocks.size());
  const auto positions = torch::arange(start, start + t, tokens.options().dtype(torch::kLong));
  auto x = net.wte->forward(tokens) + net.wpe->forward(positions);
  for (size_t l = 0; l < net.blocks.size(); ++l) {
    x = net.blocks[l]->Forward(x, &cache.keys[l], &cache.values[l]);
  }
  cache.length = start + t;
  x = net.ln_f->forward(x);
  return net.head ? net.head->forward(x) : torch::matmul(x, net.wte->weight.t());
}

std::vector<std::vector<at::Tensor>> Gpt::Units(int64_t blocks_per_unit) {
  if (blocks_per_unit < 1) throw InternalError("Gpt::Units: blocks_per_unit < 1");
  Net& net = *impl_->net;
  std::vector<std::vector<at::Tensor>> units(1);
  for (auto* m : std::initializer_list<torch::nn::Module*>{net.wte.get(), net.wpe.get(),
                                                          net.ln_f.get()}) {
    for (const auto& p : m->parameters()) units[0].push_back(p);
  }
  if (net.head) {
    for (const auto& p : net.head->parameters()) units[0].push_back(p);
  }
  for (size_t l = 0; l < net.blocks.size(); ++l) {
    if (l % size_t(blocks_per_unit) == 0) units.emplace_back();
    for (const auto& p : net.blocks[l]->parameters()) units.back().push_back(p);
  }
  return units;
}

void Gpt::SetUnitHooks(UnitHooks* hooks, int64_t blocks_per_unit) {
  impl_->hooks = hooks;
  impl_->blocks_per_unit = std::max<int64_t>(1, blocks_per_unit);
}

at::Tensor Gpt::LossSum(const at::Tensor& windows) const {
  const int64_t t = windows.size(1) - 1;
  const auto logits = Logits(windows.narrow(1, 0, t));
  return torch::nn::functional::cross_entropy(
      logits.reshape({-1, impl_->shape.vocab}), windows.narrow(1, 1, t).reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

void Gpt::SetKernels(const GptKernels& kernels) {
  impl_->kernels = kernels;
  impl_->mask = at::Tensor();
  if (kernels.attention != GptKernels::Attention::kSdpa) {
    const auto device = impl_->net->wte->weight.device();
    const int64_t c = impl_->shape.context;
    impl_->mask = torch::ones({c, c}, torch::TensorOptions().dtype(torch::kBool).device(device)).tril();
  }
}

const GptKernels& Gpt::kernels() const { return impl_->kernels; }

torch::nn::Module& Gpt::module() { return *impl_->net; }
const GptShape& Gpt::shape() const { return impl_->shape; }

}  // namespace topspin
