#include "topspin/train/flat_params.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace topspin {
namespace {

torch::nn::Sequential SmallNet() {
  torch::manual_seed(1);
  return torch::nn::Sequential(torch::nn::Linear(4, 3), torch::nn::ReLU(), torch::nn::Linear(3, 1));
}

torch::Tensor Concat(torch::nn::Module& m, bool grads) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : m.parameters()) parts.push_back((grads ? p.grad() : p).reshape({-1}));
  return torch::cat(parts);
}

TEST(FlatParams, ParametersAndGradientsViewTheBuffers) {
  auto net = SmallNet();
  const torch::Tensor before = Concat(*net, false).clone();
  FlatParams flat(*net);
  EXPECT_EQ(flat.numel(), 4 * 3 + 3 + 3 + 1);
  EXPECT_TRUE(flat.Aliased());
  EXPECT_TRUE(torch::equal(flat.params(), before));  // values kept
  const auto x = torch::randn({5, 4});
  for (int pass = 0; pass < 2; ++pass) net->forward(x).sum().backward();  // accumulates
  EXPECT_TRUE(flat.Aliased());
  EXPECT_TRUE(torch::equal(flat.grads(), Concat(*net, true)));
  EXPECT_GT(flat.grads().abs().sum().item<float>(), 0);

  DenseOptimizer adam(flat.numel(), {});
  adam.Step(flat.params(), flat.grads(), 1e-2);
  EXPECT_TRUE(flat.Aliased());  // updated in place
  EXPECT_FALSE(torch::equal(Concat(*net, false), before));
  flat.ZeroGrad();
  EXPECT_EQ(Concat(*net, true).abs().sum().item<float>(), 0);
  flat.Load(before);  // a checkpoint load
  EXPECT_TRUE(flat.Aliased());
  EXPECT_TRUE(torch::equal(Concat(*net, false), before));
  EXPECT_THROW(flat.Load(torch::zeros({3})), std::exception);
}

TEST(FlatParams, IncludeKeepsOtherParametersOut) {
  auto net = SmallNet();
  FlatParams flat(*net,
                  [](const std::string& name) { return name.find("bias") != std::string::npos; });
  EXPECT_EQ(flat.numel(), 3 + 1);
  EXPECT_EQ(flat.slots().size(), 2u);
}

// Our one-pass optimizers against torch::optim on the same gradients.
void ExpectMatchesTorch(DenseOptimizer::Options options) {
  auto ours = SmallNet(), ref = SmallNet();
  FlatParams flat(*ours);
  DenseOptimizer opt(flat.numel(), options);
  std::unique_ptr<torch::optim::Optimizer> torch_opt;
  const double lr = 0.05;
  if (options.kind == DenseOptimizer::Kind::kAdamW) {
    torch_opt = std::make_unique<torch::optim::AdamW>(ref->parameters(),
                                                      torch::optim::AdamWOptions(lr)
                                                          .betas({options.beta1, options.beta2})
                                                          .eps(options.eps)
                                                          .weight_decay(options.weight_decay));
  } else {
    torch_opt = std::make_unique<torch::optim::SGD>(
        ref->parameters(),
        torch::optim::SGDOptions(lr).momentum(options.momentum).weight_decay(options.weight_decay));
  }
  torch::manual_seed(9);
  for (int step = 0; step < 5; ++step) {
    const auto x = torch::randn({8, 4});
    flat.ZeroGrad();
    ours->forward(x).pow(2).sum().backward();
    opt.Step(flat.params(), flat.grads(), lr);
    torch_opt->zero_grad();
    ref->forward(x).pow(2).sum().backward();
    torch_opt->step();
  }
  // fp32 evaluation order differs by a few ulps per step; a wrong rule
  // would differ by about lr = 0.05.
  EXPECT_TRUE(torch::allclose(Concat(*ours, false), Concat(*ref, false), 1e-5, 1e-5))
      << Concat(*ours, false) - Concat(*ref, false);
  EXPECT_EQ(opt.steps(), 5);
}

TEST(DenseOptimizer, AdamWMatchesTorch) {
  ExpectMatchesTorch({.kind = DenseOptimizer::Kind::kAdamW, .weight_decay = 0.1});
}

TEST(DenseOptimizer, ComposedAdamWMatchesTorch) {
  ExpectMatchesTorch({.kind = DenseOptimizer::Kind::kAdamW, .weight_decay = 0.1, .fused = false});
}

// The step reads grad_scale * grads (the trainer's 1 / terms and clipping)
// and leaves the gradient zero; the fused CPU loop is the composed ops'
// update to float rounding, and bitwise the same whether it runs over the
// whole buffer or in shards that start anywhere (ZeRO-1), on any number of
// threads.
TEST(DenseOptimizer, ScalesConsumesAndIsTheSameInShards) {
  const int64_t n = 100003;  // a vector body and a scalar tail
  torch::manual_seed(3);
  const auto p0 = torch::randn({n}), g0 = torch::randn({n}) * 10;
  const DenseOptimizer::Options adamw{.weight_decay = 0.1};
  auto run = [&](DenseOptimizer::Options o, std::vector<int64_t> cuts, int threads) {
    const int before = torch::get_num_threads();
    torch::set_num_threads(threads);
    auto p = p0.clone();
    cuts.insert(cuts.begin(), 0);
    cuts.push_back(n);
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      const int64_t a = cuts[i], len = cuts[i + 1] - a;
      DenseOptimizer opt(len, o);
      at::Tensor shard = p.narrow(0, a, len);
      for (int step = 0; step < 3; ++step) {
        at::Tensor g = g0.narrow(0, a, len).clone();
        opt.Step(shard, g, 0.01, 0.25);
        EXPECT_EQ(g.abs().max().item<float>(), 0.f) << "the gradient is consumed";
      }
    }
    torch::set_num_threads(before);
    return p;
  };
  const auto whole = run(adamw, {}, 1);
  EXPECT_TRUE(torch::equal(run(adamw, {37, 50000}, 2), whole));
  DenseOptimizer::Options composed = adamw;
  composed.fused = false;
  EXPECT_TRUE(torch::allclose(run(composed, {}, 1), whole, 1e-6, 1e-6));
  // grad_scale is the gradient's scale: 0.25 g with scale 1 is the same step.
  DenseOptimizer opt(n, adamw);
  auto p = p0.clone();
  for (int step = 0; step < 3; ++step) {
    at::Tensor g = g0 * 0.25;
    opt.Step(p, g, 0.01);
  }
  EXPECT_TRUE(torch::allclose(p, whole, 1e-6, 1e-7));
}

TEST(DenseOptimizer, SquaredNormIsExactInDoubleAndSeesNonFinite) {
  const auto x = torch::randn({70001});
  const double want = x.to(torch::kDouble).pow(2).sum().item<double>();
  EXPECT_NEAR(SquaredNorm(x).item<double>(), want, 1e-12 * want);
  auto bad = x.clone();
  bad[123] = std::numeric_limits<float>::quiet_NaN();
  bad[70000] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(std::isfinite(SquaredNorm(bad).item<double>()));
  EXPECT_EQ(CountNonFinite(bad), 2);
  // Finite floats whose squares overflow float stay finite in double.
  EXPECT_TRUE(std::isfinite(SquaredNorm(torch::full({4}, 3e38f)).item<double>()));
}

TEST(DenseOptimizer, SgdWithMomentumMatchesTorch) {
  ExpectMatchesTorch({.kind = DenseOptimizer::Kind::kSgd, .weight_decay = 0.01, .momentum = 0.9});
}

// The state is made where the table lives (the meta device stands in for
// a GPU here): a host accumulator beside a CUDA table would fail the first
// step (a device mismatch in StepRows).
TEST(SparseOptimizer, StateLivesOnTheTablesDevice) {
  const auto table = torch::empty({10, 4}, torch::TensorOptions().device(torch::kMeta));
  for (auto kind : {SparseOptimizer::Kind::kRowWiseAdagrad, SparseOptimizer::Kind::kLazyAdam}) {
    const SparseOptimizer opt(table, {.kind = kind});
    ASSERT_FALSE(opt.state().empty());
    for (const auto& t : opt.state()) EXPECT_EQ(t.device(), table.device());
  }
}

// Both update paths: the CPU loop (Step) and the tensor ops CUDA runs
// (StepRows), here on CPU tensors.
TEST(SparseOptimizer, MatchesADenseReferenceOnTouchedRows) {
  for (bool tensor_ops : {false, true}) {
  torch::manual_seed(2);  // both paths see the same tables and gradients
  for (auto kind : {SparseOptimizer::Kind::kRowWiseAdagrad, SparseOptimizer::Kind::kLazyAdam}) {
    SCOPED_TRACE(tensor_ops ? "StepRows" : "Step");
    auto table = torch::randn({10, 4});
    auto ref = table.clone();
    SparseOptimizer opt(table, {.kind = kind});
    auto acc = torch::zeros({10});
    auto m = torch::zeros({10, 4}), v = torch::zeros({10, 4});
    const double lr = 0.1;
    const std::vector<std::vector<int64_t>> batches = {{1, 3, 7}, {3, 9}, {1, 2, 3}};
    for (size_t step = 0; step < batches.size(); ++step) {
      const auto ids = torch::tensor(batches[step]);
      const auto grads = torch::randn({ids.size(0), 4});
      if (tensor_ops) {
        opt.StepRows(table, ids, grads, lr);
      } else {
        opt.Step(table, ids, grads, lr);
      }
      // Reference: the same rule with whole-tensor ops on the touched rows.
      const double t = double(step + 1);
      for (int64_t k = 0; k < ids.size(0); ++k) {
        const int64_t r = ids[k].item<int64_t>();
        const auto g = grads[k];
        if (kind == SparseOptimizer::Kind::kRowWiseAdagrad) {
          acc[r] += g.pow(2).mean();
          ref[r] -= lr * g / (acc[r].sqrt() + 1e-8);
        } else {
          m[r] = 0.9 * m[r] + 0.1 * g;
          v[r] = 0.999 * v[r] + 0.001 * g.pow(2);
          ref[r] -= lr * (m[r] / (1 - std::pow(0.9, t))) /
                    ((v[r] / (1 - std::pow(0.999, t))).sqrt() + 1e-8);
        }
      }
    }
    EXPECT_TRUE(torch::allclose(table, ref, 1e-5, 1e-6));
    EXPECT_TRUE(torch::equal(table[0], ref[0]));  // never touched: unchanged
    EXPECT_THROW(tensor_ops ? opt.StepRows(table, torch::tensor({int64_t{10}}), torch::zeros({1, 4}), lr)
                            : opt.Step(table, torch::tensor({int64_t{10}}), torch::zeros({1, 4}), lr),
                 std::exception);
  }
  }
}

}  // namespace
}  // namespace topspin
