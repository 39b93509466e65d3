#include "topspin/model/ranker.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "model/cpu_kernels.h"
#include "topspin/core/deal.h"
#include "topspin/core/error.h"

namespace topspin {
namespace {

// Documents per parallel task when copying rows (about 600 KB of a
// batch-32 step's 1,149 x 160 concatenation per thread).
constexpr int64_t kRowGrain = 512;

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

// Throws InternalError for an id of `sparse` [n, C] outside its table (C =
// the tables' count), naming the document.
void CheckIds(const int64_t* sparse, int64_t n, const std::vector<int64_t>& table_sizes) {
  const auto columns = static_cast<int64_t>(table_sizes.size());
  for (int64_t c = 0; c < columns; ++c) {
    const int64_t size = table_sizes[size_t(c)];
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = sparse[i * columns + c];
      if (id < 0 || id >= size) {
        throw InternalError(
            fmt::format("ranker: id {} of document {} is outside table {} "
                        "({} rows)",
                        id, i, c, size));
      }
    }
  }
}

// Unique ids of one table's column of `sparse` [N, C] (ascending) and each
// document's index into them, in one sort of (id, document) keys.
struct UniqueIds {
  std::vector<int64_t> ids;
  std::vector<int32_t> inverse;  // [N]
};

UniqueIds UniqueColumn(const int64_t* sparse, int64_t n, int64_t columns, int64_t c,
                       int64_t table_size) {
  UniqueIds u;
  if (n == 0) return u;
  u.inverse.resize(static_cast<size_t>(n));
  if (table_size <= 4 * n) {  // a small table: mark, number in order, look up
    std::vector<int32_t> slot(static_cast<size_t>(table_size), -1);
    for (int64_t i = 0; i < n; ++i) slot[size_t(sparse[i * columns + c])] = 0;
    for (int64_t id = 0; id < table_size; ++id) {
      if (slot[size_t(id)] == 0) {
        slot[size_t(id)] = int32_t(u.ids.size());
        u.ids.push_back(id);
      }
    }
    for (int64_t i = 0; i < n; ++i) u.inverse[size_t(i)] = slot[size_t(sparse[i * columns + c])];
    return u;
  }
  // Keys (id << doc_bits) | document, in document order, sorted by their
  // id bits alone: a least-significant-digit radix sort is stable, so each
  // id's documents stay in order, and a shift and a mask split the keys
  // (dividing by n cost more than the sort). They fit 64 bits: table_size
  // * n fits int64 (checked by the caller) and 2^doc_bits < 2n. Digits of
  // at most 11 bits, as few passes as that allows: 2 passes of 9 bits for
  // 2^18-row tables.
  const int doc_bits = std::bit_width(static_cast<uint64_t>(n - 1));
  const uint64_t doc_mask = (uint64_t{1} << doc_bits) - 1;
  std::vector<uint64_t> keys(static_cast<size_t>(n)), spare(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    keys[size_t(i)] = static_cast<uint64_t>(sparse[i * columns + c]) << doc_bits | uint64_t(i);
  }
  const int id_bits = std::bit_width(static_cast<uint64_t>(table_size - 1));
  const int passes = (id_bits + 10) / 11, digit = passes ? (id_bits + passes - 1) / passes : 0;
  const uint64_t digit_mask = (uint64_t{1} << digit) - 1;
  std::vector<uint32_t> start((size_t{1} << digit) + 1);
  for (int pass = 0; pass < passes; ++pass) {
    const int shift = doc_bits + pass * digit;
    std::fill(start.begin(), start.end(), 0u);
    for (const uint64_t key : keys) ++start[((key >> shift) & digit_mask) + 1];
    for (size_t d = 1; d < start.size(); ++d) start[d] += start[d - 1];
    for (const uint64_t key : keys) spare[start[(key >> shift) & digit_mask]++] = key;
    keys.swap(spare);
  }
  for (const uint64_t key : keys) {
    const auto id = static_cast<int64_t>(key >> doc_bits);
    if (u.ids.empty() || u.ids.back() != id) u.ids.push_back(id);
    u.inverse[size_t(key & doc_mask)] = int32_t(u.ids.size() - 1);
  }
  return u;
}

// x0 = [d | rows_1[inverse_1] | ... | rows_C[inverse_C]] [N, b + C E] as
// one autograd node on the CPU (float32): the gather writes each
// document's rows straight into x0, and backward sums x0's gradient into
// each table's unique rows (duplicates added) and hands d its columns. It
// replaces, per table, a sort-based unique, two index_selects, the
// scatter-add of their backward and the concatenation.
class ConcatRows : public torch::autograd::Function<ConcatRows> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& d,
                            at::TensorList rows, const at::Tensor& inverse) {
    const int64_t n = d.size(0), b = d.size(1), c_count = int64_t(rows.size());
    const int64_t e = c_count ? rows[0].size(1) : 0, width = b + c_count * e;
    at::Tensor x0 = torch::empty({n, width}, d.options());
    const at::Tensor dc = d.contiguous();
    const float* dp = dc.data_ptr<float>();
    float* xp = x0.data_ptr<float>();
    const int32_t* inv = inverse.data_ptr<int32_t>();
    std::vector<const float*> r(static_cast<size_t>(c_count));
    for (int64_t c = 0; c < c_count; ++c) r[size_t(c)] = rows[size_t(c)].data_ptr<float>();
    // Each row of x0 is written by one thread: split by rows.
    at::parallel_for(0, n, kRowGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        float* out = xp + i * width;
        std::memcpy(out, dp + i * b, size_t(b) * sizeof(float));
        for (int64_t c = 0; c < c_count; ++c) {
          std::memcpy(out + b + c * e, r[size_t(c)] + int64_t(inv[c * n + i]) * e,
                      size_t(e) * sizeof(float));
        }
      }
    });
    std::vector<int64_t> unique_rows;
    for (const auto& t : rows) unique_rows.push_back(t.size(0));
    ctx->saved_data["rows"] = unique_rows;
    ctx->saved_data["b"] = b;
    ctx->saved_data["e"] = e;
    ctx->save_for_backward({inverse});
    return x0;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const at::Tensor inverse = ctx->get_saved_variables()[0];
    const std::vector<int64_t> unique_rows = ctx->saved_data["rows"].toIntVector();
    const int64_t b = ctx->saved_data["b"].toInt(), e = ctx->saved_data["e"].toInt();
    const at::Tensor g = grad[0].contiguous();
    const int64_t n = g.size(0), width = g.size(1);
    const float* gp = g.data_ptr<float>();
    const int32_t* inv = inverse.data_ptr<int32_t>();
    const auto c_count = static_cast<int64_t>(unique_rows.size());
    torch::autograd::variable_list out(static_cast<size_t>(c_count + 2));
    out[0] = g.slice(1, 0, b);
    std::vector<float*> rg(static_cast<size_t>(c_count));
    for (int64_t c = 0; c < c_count; ++c) {
      out[size_t(c + 1)] = torch::zeros({unique_rows[size_t(c)], e}, g.options());
      rg[size_t(c)] = out[size_t(c + 1)].data_ptr<float>();
    }
    // Rows of one table's gradient collide (documents share ids), so the
    // split is by table; each table adds its rows in document order, as on
    // one thread.
    at::parallel_for(0, c_count, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int32_t* ic = inv + c * n;
        const int64_t col = b + c * e;
        for (int64_t i = 0; i < n; ++i) {
          AddInto(gp + i * width + col, e, rg[size_t(c)] + int64_t(ic[i]) * e);
        }
      }
    });
    return out;  // the last entry (inverse) stays undefined
  }
};

// Rows per block of an MlpNode: the rows split into blocks of at least
// this many, a function of the row count alone, so every output is
// computed the same way on any number of threads.
constexpr int64_t kMlpBlockRows = 512;

struct RowBlocks {
  int64_t count, size;  // block k is rows [k size, min(n, (k + 1) size))
  int64_t begin(int64_t k) const { return k * size; }
};

RowBlocks BlocksOf(int64_t n) {
  const int64_t count = std::max<int64_t>(1, n / kMlpBlockRows);
  return {count, (n + count - 1) / count};
}

// Runs fn(k, begin, end) for each block: inline for one block (its GEMMs
// and loops then use LibTorch's threads), else one block per task, each
// task running its block's whole chain of layers on one thread with its
// rows in that core's cache, and one fork and join for the node.
// Grad mode is per thread and set off in each block: the weights require
// grad, and out= GEMMs on them are refused with it on (a node's forward
// runs with it off, but a worker thread's default is on, and so is a
// backward's under create_graph).
template <typename Fn>
void ForEachBlock(const RowBlocks& blocks, int64_t n, const Fn& fn) {
  if (blocks.count == 1) {
    const torch::NoGradGuard no_grad;
    fn(int64_t{0}, int64_t{0}, n);
    return;
  }
  at::parallel_for(0, blocks.count, 1, [&](int64_t k0, int64_t k1) {
    const torch::NoGradGuard no_grad;
    for (int64_t k = k0; k < k1; ++k) {
      fn(k, blocks.begin(k), std::min(n, blocks.begin(k + 1)));
    }
  });
}

// An MLP of Linear layers, ReLU after each but the last (and after the
// last too when relu_last), as one autograd node on the CPU (float32). Its
// activations are kept once, the bias and ReLU are one pass over each
// output, and backward masks, sums the bias gradient and multiplies with
// loops and GEMMs of its own: the module path's per-layer addmm (with its
// bias copy), ReLU, and their autograd nodes with their temporaries go.
// A large batch splits by rows into blocks (BlocksOf), one thread each, as
// data parallelism inside the step: a block's forward and backward run
// through every layer on its thread, and the blocks' weight and bias
// gradients are added in block order. One block runs its GEMMs and loops
// on LibTorch's threads instead.
class MlpNode : public torch::autograd::Function<MlpNode> {
 public:
  // params: W_0, b_0, W_1, b_1, ... (W_l [out, in]).
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            at::TensorList params, bool relu_last) {
    const int64_t layers = int64_t(params.size()) / 2, n = x.size(0);
    std::vector<at::Tensor> saved = {x.contiguous()};
    for (int64_t l = 0; l < layers; ++l) {
      saved.push_back(torch::empty({n, params[size_t(2 * l)].size(0)}, x.options()));
    }
    ForEachBlock(BlocksOf(n), n, [&](int64_t, int64_t r0, int64_t r1) {
      for (int64_t l = 0; l < layers; ++l) {
        const at::Tensor& w = params[size_t(2 * l)];
        at::Tensor z = saved[size_t(l + 1)].narrow(0, r0, r1 - r0);
        at::mm_out(z, saved[size_t(l)].narrow(0, r0, r1 - r0), w.t());
        AddBiasRelu(z.data_ptr<float>(), params[size_t(2 * l + 1)].data_ptr<float>(), r1 - r0,
                    w.size(0), l + 1 < layers || relu_last);
      }
    });
    const at::Tensor y = saved.back();
    for (const auto& p : params) saved.push_back(p);
    ctx->save_for_backward(saved);
    ctx->saved_data["layers"] = layers;
    ctx->saved_data["relu_last"] = relu_last;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const std::vector<at::Tensor> saved = ctx->get_saved_variables();
    const int64_t layers = ctx->saved_data["layers"].toInt();
    const bool relu_last = ctx->saved_data["relu_last"].toBool();
    const at::Tensor* h = saved.data();  // h[0] = x, h[l + 1] = layer l's output
    const at::Tensor* params = saved.data() + layers + 1;
    const bool input_grad = ctx->needs_input_grad(0);
    const at::Tensor g_out = grad[0].contiguous();
    const int64_t n = g_out.size(0);
    const RowBlocks blocks = BlocksOf(n);
    // Per layer: ReLU's backward (dz), the gradient into the layer (g[l] =
    // dz W_l, for l > 0 or when x needs one), and block 0's weight and
    // bias gradients; blocks 1.. write theirs to spares, added below.
    std::vector<at::Tensor> dz(static_cast<size_t>(layers)), g(static_cast<size_t>(layers + 1));
    g[size_t(layers)] = g_out;
    torch::autograd::variable_list out(size_t(1 + 2 * layers + 1));
    std::vector<std::vector<at::Tensor>> spare(size_t(blocks.count),
                                               std::vector<at::Tensor>(out.size()));
    for (int64_t l = 0; l < layers; ++l) {
      const bool relu = l + 1 < layers || relu_last;
      if (relu) dz[size_t(l)] = torch::empty_like(h[l + 1]);
      if (l > 0 || input_grad) g[size_t(l)] = torch::empty_like(h[l]);
      for (int64_t k = 0; k < blocks.count; ++k) {
        auto& into = k == 0 ? out : spare[size_t(k)];
        into[size_t(1 + 2 * l)] = torch::empty_like(params[2 * l]);
        into[size_t(2 + 2 * l)] = torch::zeros_like(params[2 * l + 1]);
      }
    }
    ForEachBlock(blocks, n, [&](int64_t k, int64_t r0, int64_t r1) {
      const int64_t m = r1 - r0;
      auto& into = k == 0 ? out : spare[size_t(k)];
      for (int64_t l = layers - 1; l >= 0; --l) {
        const at::Tensor gl = g[size_t(l + 1)].narrow(0, r0, m);
        const int64_t w = gl.size(1);
        at::Tensor dzl = gl;
        if (dz[size_t(l)].defined()) {  // ReLU's backward: where the output was 0, nothing
          dzl = dz[size_t(l)].narrow(0, r0, m);
          ReluBackward(gl.data_ptr<float>(), h[l + 1].narrow(0, r0, m).data_ptr<float>(), m * w,
                       dzl.data_ptr<float>());
        }
        AddColumnSums(dzl.data_ptr<float>(), m, w, into[size_t(2 + 2 * l)].data_ptr<float>());
        at::Tensor dw = into[size_t(1 + 2 * l)];
        at::mm_out(dw, dzl.t(), h[l].narrow(0, r0, m));
        if (g[size_t(l)].defined()) {
          at::Tensor gin = g[size_t(l)].narrow(0, r0, m);
          at::mm_out(gin, dzl, params[2 * l]);
        }
      }
    });
    for (int64_t k = 1; k < blocks.count; ++k) {  // in block order: the same sums on any threads
      for (int64_t l = 0; l < layers; ++l) {
        for (const int64_t i : {1 + 2 * l, 2 + 2 * l})
          out[size_t(i)].add_(spare[size_t(k)][size_t(i)]);
      }
    }
    if (input_grad) out[0] = g[0];
    return out;  // the last entry (relu_last) stays undefined
  }
};

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

  Output Forward(const at::Tensor& dense, const at::Tensor& sparse, bool train,
                 const Uniques* uniques) const;

  // The MLP `seq` on x: one MlpNode on the CPU in float32 (not under
  // autocast), the modules otherwise.
  at::Tensor Mlp(torch::nn::Sequential& seq, const at::Tensor& x, bool relu_last) const {
    if (!options.cpu_fused || !x.is_cpu() || x.scalar_type() != torch::kFloat ||
        at::autocast::is_autocast_enabled(at::kCPU)) {
      return seq->forward(x);
    }
    std::vector<at::Tensor> params;
    for (const auto& m : seq->children()) {
      if (const auto* linear = m->as<torch::nn::LinearImpl>()) {
        if (!linear->weight.is_cpu() || linear->weight.scalar_type() != torch::kFloat) {
          return seq->forward(x);
        }
        params.push_back(linear->weight);
        params.push_back(linear->bias);
      }
    }
    return MlpNode::apply(x, at::TensorList(params), relu_last);
  }

  // x0 = concat(d, the documents' embedding rows), recording each table's
  // unique ids and gathered rows in `out`.
  // `uniques`: from HostUniques, or null to find them here.
  at::Tensor Gather(const at::Tensor& d, const at::Tensor& sparse, bool train, Output& out,
                    const Uniques* uniques) const {
    if (GathersOnHost(d, sparse)) return GatherOnHost(d, sparse, train, out);
    std::vector<at::Tensor> parts = {d};
    int64_t first = 0;
    for (size_t c = 0; c < tables.size(); ++c) {
      at::Tensor ids, inverse;
      if (uniques != nullptr) {
        ids = uniques->ids.narrow(0, first, uniques->counts[c]);
        inverse = uniques->inverse.select(0, static_cast<int64_t>(c));
        first += uniques->counts[c];
      } else {
        std::tie(ids, inverse, std::ignore) =
            at::_unique2(sparse.select(1, static_cast<int64_t>(c)), /*sorted=*/true,
                         /*return_inverse=*/true, /*return_counts=*/false);
      }
      at::Tensor rows = tables[c].index_select(0, ids);
      if (train) rows.requires_grad_(true);
      parts.push_back(rows.index_select(0, inverse));
      out.unique_ids.push_back(ids);
      out.rows.push_back(rows);
    }
    return torch::cat(parts, 1);
  }

  // float32 on the CPU (not under bf16 autocast), with keys id * N + doc
  // that fit in int64.
  bool GathersOnHost(const at::Tensor& d, const at::Tensor& sparse) const {
    if (!options.cpu_fused || !d.is_cpu() || d.scalar_type() != torch::kFloat || !sparse.is_cpu() ||
        sparse.scalar_type() != torch::kLong || sparse.size(0) >= (int64_t{1} << 31)) {
      return false;
    }
    for (const auto& t : tables) {
      if (!t.is_cpu() || t.scalar_type() != torch::kFloat || !t.is_contiguous() ||
          t.size(0) > std::numeric_limits<int64_t>::max() / std::max<int64_t>(1, sparse.size(0))) {
        return false;
      }
    }
    return true;
  }

  at::Tensor GatherOnHost(const at::Tensor& d, const at::Tensor& sparse, bool train,
                          Output& out) const {
    const int64_t n = sparse.size(0), columns = sparse.size(1), e = options.embedding_dim;
    const at::Tensor sp = sparse.contiguous();
    const int64_t* ids = sp.data_ptr<int64_t>();
    CheckIds(ids, n, options.table_sizes);  // out-of-range ids fail like index_select
    at::Tensor inverse = torch::empty({columns, n}, torch::kInt);
    std::vector<at::Tensor> unique(static_cast<size_t>(columns)), rows(unique.size());
    // One column per task, dealt largest table first so that the threads'
    // shares are alike (a 17-row table's column is nearly free).
    std::vector<int64_t> sizes(static_cast<size_t>(columns));
    for (size_t c = 0; c < sizes.size(); ++c) sizes[c] = tables[c].size(0);
    const std::vector<int64_t> dealt = DealLargestFirst(sizes, at::get_num_threads());
    at::parallel_for(0, columns, 1, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        const int64_t c = dealt[size_t(k)];
        const at::Tensor& table = tables[size_t(c)];
        const UniqueIds u = UniqueColumn(ids, n, columns, c, table.size(0));
        const auto u_count = static_cast<int64_t>(u.ids.size());
        unique[size_t(c)] = torch::empty({u_count}, torch::kLong);
        std::memcpy(unique[size_t(c)].data_ptr<int64_t>(), u.ids.data(),
                    u.ids.size() * sizeof(int64_t));
        rows[size_t(c)] = torch::empty({u_count, e});
        const float* src = table.data_ptr<float>();
        float* dst = rows[size_t(c)].data_ptr<float>();
        for (int64_t j = 0; j < u_count; ++j) {
          std::memcpy(dst + j * e, src + u.ids[size_t(j)] * e, size_t(e) * sizeof(float));
        }
        std::memcpy(inverse.data_ptr<int32_t>() + c * n, u.inverse.data(),
                    u.inverse.size() * sizeof(int32_t));
      }
    });
    for (int64_t c = 0; c < columns; ++c) {
      if (train) rows[size_t(c)].requires_grad_(true);
      out.unique_ids.push_back(unique[size_t(c)]);
      out.rows.push_back(rows[size_t(c)]);
    }
    return ConcatRows::apply(d, at::TensorList(out.rows), inverse);
  }
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
  return impl_->Forward(dense, sparse, train, nullptr);
}

Ranker::Output Ranker::Forward(const at::Tensor& dense, const at::Tensor& sparse, bool train,
                               const Uniques& uniques) const {
  if (uniques.counts.size() != impl_->tables.size() ||
      (!impl_->tables.empty() && uniques.inverse.size(1) != sparse.size(0))) {
    throw InternalError(fmt::format("ranker: uniques for {} tables, the model has {}",
                                    uniques.counts.size(), impl_->tables.size()));
  }
  return impl_->Forward(dense, sparse, train, &uniques);
}

Ranker::Uniques Ranker::HostUniques(const int64_t* sparse, int64_t n, bool pinned) const {
  const auto columns = static_cast<int64_t>(impl_->tables.size());
  CheckIds(sparse, n, impl_->options.table_sizes);
  std::vector<UniqueIds> each(static_cast<size_t>(columns));
  int64_t total = 0;
  for (int64_t c = 0; c < columns; ++c) {
    const int64_t size = impl_->options.table_sizes[size_t(c)];
    if (size > std::numeric_limits<int64_t>::max() / std::max<int64_t>(1, n)) {
      throw InternalError(
          fmt::format("ranker: table {} ({} rows) is too large for the host's "
                      "unique ids of {} documents",
                      c, size, n));
    }
    each[size_t(c)] = UniqueColumn(sparse, n, columns, c, size);
    total += static_cast<int64_t>(each[size_t(c)].ids.size());
  }
  const auto options = torch::TensorOptions().dtype(torch::kLong).pinned_memory(pinned);
  Uniques u{.ids = torch::empty({total}, options), .inverse = torch::empty({columns, n}, options)};
  int64_t* ids = u.ids.data_ptr<int64_t>();
  int64_t* inverse = u.inverse.data_ptr<int64_t>();
  for (int64_t c = 0; c < columns; ++c) {
    const UniqueIds& e = each[size_t(c)];
    ids = std::copy(e.ids.begin(), e.ids.end(), ids);
    std::copy(e.inverse.begin(), e.inverse.end(), inverse + c * n);
    u.counts.push_back(static_cast<int64_t>(e.ids.size()));
  }
  return u;
}

Ranker::Output Ranker::Impl::Forward(const at::Tensor& dense, const at::Tensor& sparse, bool train,
                                     const Uniques* uniques) const {
  const RankerOptions& o = options;
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
  const at::Tensor d = o.bottom.empty() ? dense : Mlp(net->bottom, dense, /*relu_last=*/true);
  const at::Tensor x0 = Gather(d, sparse, train, out, uniques);
  at::Tensor x = x0;
  for (auto& layer : net->cross) x = x0 * layer->forward(x) + x;
  out.scores = Mlp(net->top, x, /*relu_last=*/false).squeeze(1);
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
