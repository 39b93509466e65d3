#include "topspin/train/flat_params.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "topspin/core/error.h"
#include "train/optimizer_kernels.h"

namespace topspin {
namespace {

void CheckFloat(const at::Tensor& t, const char* what) {
  if (t.scalar_type() != at::kFloat || !t.is_contiguous()) {
    throw InternalError(fmt::format("{}: expected a contiguous float32 tensor", what));
  }
}

}  // namespace

FlatParams::FlatParams(torch::nn::Module& module,
                       const std::function<bool(const std::string&)>& include, bool flat_grads) {
  int64_t total = 0;
  at::TensorOptions like = at::TensorOptions().dtype(at::kFloat);
  for (const auto& item : module.named_parameters()) {
    if (include && !include(item.key())) continue;
    CheckFloat(item.value(), item.key().c_str());
    if (parameters_.empty()) {
      like = item.value().options();
    } else if (item.value().device() != like.device()) {
      throw InternalError(fmt::format("FlatParams: {} is on {}, the others on {}", item.key(),
                                      item.value().device().str(), like.device().str()));
    }
    slots_.push_back({item.key(), total, item.value().numel(), item.value().sizes().vec()});
    parameters_.push_back(item.value());
    total += item.value().numel();
  }
  params_ = torch::empty({total}, like.requires_grad(false));
  grads_ = torch::zeros({flat_grads ? total : 0}, like.requires_grad(false));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    at::Tensor& p = parameters_[i];
    params_.narrow(0, s.offset, s.numel).copy_(p.reshape({-1}));
    p.set_data(params_.narrow(0, s.offset, s.numel).view(s.shape));
    if (flat_grads) p.mutable_grad() = grads_.narrow(0, s.offset, s.numel).view(s.shape);
  }
}

void FlatParams::ZeroGrad() {
  if (grads_.numel() == params_.numel()) {
    grads_.zero_();
  } else {
    for (auto& p : parameters_) p.mutable_grad().reset();
  }
}

void FlatParams::Load(const at::Tensor& values) {
  if (values.sizes() != params_.sizes() || values.scalar_type() != at::kFloat) {
    throw DataError(fmt::format("flat parameters: {} values for {} parameters", values.numel(),
                                params_.numel()),
                    {}, "the checkpoint was written by a different model configuration");
  }
  torch::NoGradGuard no_grad;
  params_.copy_(values);
}

bool FlatParams::Aliased() const {
  const auto* base = params_.data_ptr<float>();
  const auto* gbase = grads_.data_ptr<float>();
  for (size_t i = 0; i < slots_.size(); ++i) {
    const at::Tensor& p = parameters_[i];
    if (p.data_ptr<float>() != base + slots_[i].offset) return false;
    if (grads_.numel() != params_.numel()) continue;  // no flat gradient
    if (!p.grad().defined() || p.grad().data_ptr<float>() != gbase + slots_[i].offset) return false;
  }
  return true;
}

// ---- dense --------------------------------------------------------------------

DenseOptimizer::DenseOptimizer(int64_t numel, const Options& options,
                               const at::TensorOptions& like)
    : options_(options) {
  const auto o = like.dtype(at::kFloat).requires_grad(false);
  m_ = torch::zeros({numel}, o);
  if (options.kind == Kind::kAdamW) {
    v_ = torch::zeros({numel}, o);
    step_ = torch::zeros({}, o);
  }
}

void DenseOptimizer::set_steps(int64_t steps) {
  steps_ = steps;
  if (step_.defined()) step_.fill_(double(steps));
}

void DenseOptimizer::Step(at::Tensor& params, const at::Tensor& grads, double lr, double grad_scale) {
  CheckFloat(params, "DenseOptimizer params");
  CheckFloat(grads, "DenseOptimizer grads");
  if (params.numel() != m_.numel() || grads.numel() != m_.numel()) {
    throw InternalError("DenseOptimizer: buffer sizes changed");
  }
  torch::NoGradGuard no_grad;
  const bool first = steps_ == 0;
  ++steps_;
  if (params.numel() == 0) {  // an empty ZeRO shard
    if (step_.defined()) step_.fill_(double(steps_));
    return;
  }
  if (options_.kind == Kind::kSgd) {
    if (grad_scale != 1.0) grads.mul_(grad_scale);
    at::_fused_sgd_({params}, {grads}, {m_}, options_.weight_decay, options_.momentum, lr,
                    /*dampening=*/0.0, /*nesterov=*/false, /*maximize=*/false, first);
    grads.zero_();
    return;
  }
  step_.add_(1);  // the count a checkpoint keeps, and the CUDA kernel bias-corrects with
  const Options& o = options_;
  if (o.fused && params.is_cpu()) {
    AdamWStepCpu(params.mutable_data_ptr<float>(), grads.mutable_data_ptr<float>(),
                 m_.mutable_data_ptr<float>(), v_.mutable_data_ptr<float>(), params.numel(),
                 AdamWConstants::Make(lr, o.beta1, o.beta2, o.eps, o.weight_decay, steps_,
                                      grad_scale));
    return;
  }
  if (grad_scale != 1.0) grads.mul_(grad_scale);
  if (o.fused) {
    at::_fused_adamw_({params}, {grads}, {m_}, {v_}, /*max_exp_avg_sqs=*/{}, {step_}, lr,
                      o.beta1, o.beta2, o.weight_decay, o.eps,
                      /*amsgrad=*/false, /*maximize=*/false);
  } else {
    const double bc1 = 1 - std::pow(o.beta1, double(steps_));
    const double bc2_sqrt = std::sqrt(1 - std::pow(o.beta2, double(steps_)));
    params.mul_(1 - lr * o.weight_decay);
    m_.lerp_(grads, 1 - o.beta1);
    v_.mul_(o.beta2).addcmul_(grads, grads, 1 - o.beta2);
    params.addcdiv_(m_, v_.sqrt().div_(bc2_sqrt).add_(o.eps), -lr / bc1);
  }
  grads.zero_();
}

std::vector<at::Tensor> DenseOptimizer::state() const {
  return options_.kind == Kind::kAdamW ? std::vector<at::Tensor>{m_, v_}
                                       : std::vector<at::Tensor>{m_};
}

at::Tensor SquaredNorm(const at::Tensor& values) {
  CheckFloat(values, "SquaredNorm");
  if (values.is_cpu()) {
    return torch::full({1}, SumOfSquaresCpu(values.const_data_ptr<float>(), values.numel()),
                       torch::kDouble);
  }
  return values.pow(2).sum(torch::kDouble).reshape({1});
}

int64_t CountNonFinite(const at::Tensor& values) {
  if (values.is_cpu() && values.scalar_type() == at::kFloat && values.is_contiguous()) {
    return CountNonFiniteCpu(values.const_data_ptr<float>(), values.numel());
  }
  return values.isfinite().logical_not().sum().item<int64_t>();
}

// ---- sparse -------------------------------------------------------------------

SparseOptimizer::SparseOptimizer(const at::Tensor& table, const Options& options)
    : options_(options) {
  CheckFloat(table, "SparseOptimizer table");
  if (options.kind == Kind::kRowWiseAdagrad) {
    // On the table's device (a host accumulator would fail a CUDA run's first step).
    acc_ = torch::full({table.size(0)}, options.initial_accumulator,
                       torch::TensorOptions().dtype(torch::kFloat).device(table.device()));
  } else {
    m_ = torch::zeros_like(table);
    v_ = torch::zeros_like(table);
  }
}

void SparseOptimizer::StepRows(at::Tensor& table, const at::Tensor& ids, const at::Tensor& grads,
                               double lr) {
  torch::NoGradGuard no_grad;
  ++steps_;
  const at::Tensor id = ids.to(torch::kLong);
  if (options_.kind == Kind::kRowWiseAdagrad) {
    acc_.index_add_(0, id, grads.pow(2).mean(1));
    const auto scale = lr / (acc_.index_select(0, id).sqrt() + options_.eps);
    table.index_add_(0, id, grads * -scale.unsqueeze(1));
    return;
  }
  const double t = static_cast<double>(steps_);
  const double c1 = 1 / (1 - std::pow(options_.beta1, t));
  const double c2 = 1 / (1 - std::pow(options_.beta2, t));
  const auto m = m_.index_select(0, id).mul_(options_.beta1).add_(grads, 1 - options_.beta1);
  const auto v = v_.index_select(0, id).mul_(options_.beta2).addcmul_(grads, grads, 1 - options_.beta2);
  m_.index_copy_(0, id, m);
  v_.index_copy_(0, id, v);
  table.index_add_(0, id, (m * c1).div_((v * c2).sqrt_().add_(options_.eps)).mul_(-lr));
}

void SparseOptimizer::Step(at::Tensor& table, const at::Tensor& ids, const at::Tensor& grads,
                           double lr) {
  CheckFloat(table, "SparseOptimizer table");
  if (!table.device().is_cpu()) {
    StepRows(table, ids, grads, lr);
    return;
  }
  const at::Tensor g_c = grads.contiguous();
  CheckFloat(g_c, "SparseOptimizer grads");
  const at::Tensor id = ids.to(torch::kLong).contiguous();
  const int64_t u = id.numel(), e = table.size(1), rows = table.size(0);
  if (g_c.dim() != 2 || g_c.size(0) != u || g_c.size(1) != e) {
    throw InternalError("SparseOptimizer: grads must be [U, E]");
  }
  ++steps_;
  float* w = table.data_ptr<float>();
  const float* g = g_c.data_ptr<float>();
  const int64_t* r = id.data_ptr<int64_t>();
  const auto flr = static_cast<float>(lr), eps = static_cast<float>(options_.eps);
  for (int64_t k = 0; k < u; ++k) {
    if (r[k] < 0 || r[k] >= rows) throw InternalError("SparseOptimizer: id out of range");
  }
  if (options_.kind == Kind::kRowWiseAdagrad) {
    float* acc = acc_.data_ptr<float>();
    for (int64_t k = 0; k < u; ++k) {
      if (k + kSparseRowsAhead < u) {  // the weights' and accumulator's lines of a later row
        PrefetchRowForWrite(w, r[k + kSparseRowsAhead], e);
        PrefetchRowForWrite(acc, r[k + kSparseRowsAhead], 1);
      }
      const float* gr = g + k * e;
      float sq = 0;
      for (int64_t j = 0; j < e; ++j) sq += gr[j] * gr[j];
      acc[r[k]] += sq / static_cast<float>(e);
      const float scale = flr / (std::sqrt(acc[r[k]]) + eps);
      float* wr = w + r[k] * e;
      for (int64_t j = 0; j < e; ++j) wr[j] -= scale * gr[j];
    }
    return;
  }
  const double t = static_cast<double>(steps_);
  const LazyAdamConstants c{.lr = flr,
                            .beta1 = static_cast<float>(options_.beta1),
                            .beta2 = static_cast<float>(options_.beta2),
                            .c1 = static_cast<float>(1 / (1 - std::pow(options_.beta1, t))),
                            .c2 = static_cast<float>(1 / (1 - std::pow(options_.beta2, t))),
                            .eps = eps};
  LazyAdamRowsCpu(w, m_.data_ptr<float>(), v_.data_ptr<float>(), g, r, u, e, c);
}

std::vector<at::Tensor> SparseOptimizer::state() const {
  return options_.kind == Kind::kRowWiseAdagrad ? std::vector<at::Tensor>{acc_}
                                                : std::vector<at::Tensor>{m_, v_};
}

}  // namespace topspin
