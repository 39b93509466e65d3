#include "topspin/train/flat_params.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

void CheckFloat(const at::Tensor& t, const char* what) {
  if (t.scalar_type() != at::kFloat || !t.is_contiguous() || t.device().type() != at::kCPU) {
    throw InternalError(fmt::format("{}: expected a contiguous float32 CPU tensor", what));
  }
}

}  // namespace

FlatParams::FlatParams(torch::nn::Module& module,
                       const std::function<bool(const std::string&)>& include, bool flat_grads) {
  int64_t total = 0;
  for (const auto& item : module.named_parameters()) {
    if (include && !include(item.key())) continue;
    CheckFloat(item.value(), item.key().c_str());
    slots_.push_back({item.key(), total, item.value().numel(), item.value().sizes().vec()});
    parameters_.push_back(item.value());
    total += item.value().numel();
  }
  params_ = torch::empty({total}, torch::kFloat);
  grads_ = torch::zeros({flat_grads ? total : 0}, torch::kFloat);
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

DenseOptimizer::DenseOptimizer(int64_t numel, const Options& options) : options_(options) {
  m_ = torch::zeros({numel}, torch::kFloat);
  if (options.kind == Kind::kAdamW) v_ = torch::zeros({numel}, torch::kFloat);
}

void DenseOptimizer::Step(at::Tensor& params, const at::Tensor& grads, double lr) {
  CheckFloat(params, "DenseOptimizer params");
  CheckFloat(grads, "DenseOptimizer grads");
  if (params.numel() != m_.numel() || grads.numel() != m_.numel()) {
    throw InternalError("DenseOptimizer: buffer sizes changed");
  }
  ++steps_;
  float* p = params.data_ptr<float>();
  const float* g = grads.data_ptr<float>();
  float* m = m_.data_ptr<float>();
  const int64_t n = params.numel();
  const auto wd = static_cast<float>(options_.weight_decay), flr = static_cast<float>(lr);
  if (options_.kind == Kind::kSgd) {
    const auto mu = static_cast<float>(options_.momentum);
    for (int64_t i = 0; i < n; ++i) {
      m[i] = mu * m[i] + g[i] + wd * p[i];
      p[i] -= flr * m[i];
    }
    return;
  }
  float* v = v_.data_ptr<float>();
  const auto b1 = static_cast<float>(options_.beta1), b2 = static_cast<float>(options_.beta2);
  const double t = static_cast<double>(steps_);
  const auto c1 = static_cast<float>(1 / (1 - std::pow(options_.beta1, t)));
  const auto c2 = static_cast<float>(1 / (1 - std::pow(options_.beta2, t)));
  const auto eps = static_cast<float>(options_.eps);
  for (int64_t i = 0; i < n; ++i) {  // one pass; vectorises
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    p[i] -= flr * (m[i] * c1 / (std::sqrt(v[i] * c2) + eps) + wd * p[i]);
  }
}

std::vector<at::Tensor> DenseOptimizer::state() const {
  return options_.kind == Kind::kAdamW ? std::vector<at::Tensor>{m_, v_}
                                       : std::vector<at::Tensor>{m_};
}

// ---- sparse -------------------------------------------------------------------

SparseOptimizer::SparseOptimizer(const at::Tensor& table, const Options& options)
    : options_(options) {
  CheckFloat(table, "SparseOptimizer table");
  if (options.kind == Kind::kRowWiseAdagrad) {
    acc_ = torch::full({table.size(0)}, options.initial_accumulator, torch::kFloat);
  } else {
    m_ = torch::zeros_like(table);
    v_ = torch::zeros_like(table);
  }
}

void SparseOptimizer::Step(at::Tensor& table, const at::Tensor& ids, const at::Tensor& grads,
                           double lr) {
  CheckFloat(table, "SparseOptimizer table");
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
  float* m = m_.data_ptr<float>();
  float* v = v_.data_ptr<float>();
  const auto b1 = static_cast<float>(options_.beta1), b2 = static_cast<float>(options_.beta2);
  const double t = static_cast<double>(steps_);
  const auto c1 = static_cast<float>(1 / (1 - std::pow(options_.beta1, t)));
  const auto c2 = static_cast<float>(1 / (1 - std::pow(options_.beta2, t)));
  for (int64_t k = 0; k < u; ++k) {
    const float* gr = g + k * e;
    float *wr = w + r[k] * e, *mr = m + r[k] * e, *vr = v + r[k] * e;
    for (int64_t j = 0; j < e; ++j) {
      mr[j] = b1 * mr[j] + (1 - b1) * gr[j];
      vr[j] = b2 * vr[j] + (1 - b2) * gr[j] * gr[j];
      wr[j] -= flr * mr[j] * c1 / (std::sqrt(vr[j] * c2) + eps);
    }
  }
}

std::vector<at::Tensor> SparseOptimizer::state() const {
  return options_.kind == Kind::kRowWiseAdagrad ? std::vector<at::Tensor>{acc_}
                                                : std::vector<at::Tensor>{m_, v_};
}

}  // namespace topspin
