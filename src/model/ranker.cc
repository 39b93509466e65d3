#include "topspin/model/ranker.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include "topspin/core/error.h"

namespace topspin {
namespace {

torch::nn::Sequential Mlp(int64_t in, const std::vector<int64_t>& widths, bool final_linear) {
  torch::nn::Sequential seq;
  for (int64_t w : widths) {
    seq->push_back(torch::nn::Linear(in, w));
    seq->push_back(torch::nn::ReLU());
    in = w;
  }
  if (final_linear) seq->push_back(torch::nn::Linear(in, 1));
  return seq;
}

int64_t MlpFlops(int64_t in, const std::vector<int64_t>& widths, bool final_linear) {
  int64_t flops = 0;
  for (int64_t w : widths) {
    flops += 2 * in * w;
    in = w;
  }
  return flops + (final_linear ? 2 * in : 0);
}

}  // namespace

Interaction ParseInteraction(std::string_view name) {
  if (name == "concat") return Interaction::kConcat;
  if (name == "dcn") return Interaction::kDcn;
  throw ConfigError(fmt::format("unknown interaction \"{}\"", name),
                    ErrorWhere{.field = "model.interaction"}, "choose concat or dcn");
}

struct DenseNet : torch::nn::Module {
  DenseNet(const RankerOptions& o) {
    const int64_t bottom_out = o.bottom.empty() ? o.dense_dim : o.bottom.back();
    width = bottom_out + static_cast<int64_t>(o.table_sizes.size()) * o.embedding_dim;
    bottom = register_module("bottom", Mlp(o.dense_dim, o.bottom, false));
    if (o.interaction == Interaction::kDcn) {
      for (int l = 0; l < o.cross_layers; ++l) {
        cross.push_back(
            register_module(fmt::format("cross{}", l), torch::nn::Linear(width, width)));
      }
    }
    top = register_module("top", Mlp(width, o.top, true));
  }
  int64_t width;
  torch::nn::Sequential bottom{nullptr}, top{nullptr};
  std::vector<torch::nn::Linear> cross;
};

struct Ranker::Impl {
  RankerOptions options;
  std::shared_ptr<DenseNet> net;
  std::vector<at::Tensor> tables;
};

Ranker::Ranker(const RankerOptions& o) : impl_(std::make_unique<Impl>()) {
  if (o.dense_dim <= 0 && o.table_sizes.empty()) {
    throw ConfigError("the ranker has no inputs: no dense and no sparse features",
                      ErrorWhere{.field = "pipeline.dense"});
  }
  impl_->options = o;
  torch::manual_seed(o.seed);
  impl_->net = std::make_shared<DenseNet>(o);
  for (int64_t size : o.table_sizes) {
    // Small uniform init (DLRM uses U(-1/sqrt(S), 1/sqrt(S)); tiny for huge S).
    const double bound = std::max(1.0 / std::sqrt(static_cast<double>(size)), 0.01);
    impl_->tables.push_back(torch::empty({size, o.embedding_dim}).uniform_(-bound, bound));
  }
}

Ranker::~Ranker() = default;

Ranker::Output Ranker::Forward(const at::Tensor& dense, const at::Tensor& sparse,
                               bool train) const {
  const RankerOptions& o = impl_->options;
  const int64_t n = dense.size(0);
  if (dense.dim() != 2 || dense.size(1) != o.dense_dim || sparse.dim() != 2 ||
      sparse.size(0) != n || sparse.size(1) != static_cast<int64_t>(o.table_sizes.size())) {
    throw InternalError(
        fmt::format("ranker: dense [{}, {}] and sparse [{}, {}] do not match F = {}, "
                    "C = {}",
                    dense.size(0), dense.dim() > 1 ? dense.size(1) : 0, sparse.size(0),
                    sparse.dim() > 1 ? sparse.size(1) : 0, o.dense_dim, o.table_sizes.size()));
  }
  std::optional<torch::NoGradGuard> no_grad;
  if (!train) no_grad.emplace();
  Output out;
  std::vector<at::Tensor> parts = {o.bottom.empty() ? dense : impl_->net->bottom->forward(dense)};
  for (size_t c = 0; c < impl_->tables.size(); ++c) {
    const auto [ids, inverse, counts] =
        at::_unique2(sparse.select(1, static_cast<int64_t>(c)), /*sorted=*/true,
                     /*return_inverse=*/true, /*return_counts=*/false);
    at::Tensor rows = impl_->tables[c].index_select(0, ids);
    if (train) rows.requires_grad_(true);
    parts.push_back(rows.index_select(0, inverse));
    out.unique_ids.push_back(ids);
    out.rows.push_back(rows);
  }
  const at::Tensor x0 = torch::cat(parts, 1);
  at::Tensor x = x0;
  for (auto& layer : impl_->net->cross) x = x0 * layer->forward(x) + x;
  out.scores = impl_->net->top->forward(x).squeeze(1);
  return out;
}

torch::nn::Module& Ranker::dense_module() {
  return *impl_->net;
}
void Ranker::To(const c10::Device& device) {
  impl_->net->to(device);
  for (auto& t : impl_->tables) t = t.to(device);
}

std::vector<at::Tensor>& Ranker::tables() {
  return impl_->tables;
}
const std::vector<at::Tensor>& Ranker::tables() const {
  return impl_->tables;
}
const RankerOptions& Ranker::options() const {
  return impl_->options;
}

int64_t RankerDenseParameters(const RankerOptions& o) {
  const auto mlp = [](int64_t in, const std::vector<int64_t>& widths, bool final_linear) {
    int64_t params = 0;
    for (int64_t w : widths) {
      params += in * w + w;
      in = w;
    }
    return params + (final_linear ? in + 1 : 0);
  };
  const int64_t bottom_out = o.bottom.empty() ? o.dense_dim : o.bottom.back();
  const int64_t width = bottom_out + static_cast<int64_t>(o.table_sizes.size()) * o.embedding_dim;
  const int64_t cross = o.interaction == Interaction::kDcn ? o.cross_layers : 0;
  return mlp(o.dense_dim, o.bottom, false) + cross * (width * width + width) +
         mlp(width, o.top, true);
}

int64_t Ranker::ForwardFlopsPerDoc() const {
  const RankerOptions& o = impl_->options;
  const int64_t width = impl_->net->width;
  int64_t flops = MlpFlops(o.dense_dim, o.bottom, false) + MlpFlops(width, o.top, true);
  flops += static_cast<int64_t>(impl_->net->cross.size()) * (2 * width * width + 3 * width);
  return flops;
}

}  // namespace topspin
