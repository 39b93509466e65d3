#include "topspin/model/ranker.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace topspin {
namespace {

RankerOptions Small(Interaction interaction = Interaction::kConcat) {
  return RankerOptions{.dense_dim = 5,
                       .table_sizes = {10, 6},
                       .embedding_dim = 4,
                       .bottom = {8},
                       .top = {6},
                       .interaction = interaction,
                       .cross_layers = 2,
                       .seed = 3};
}

TEST(Ranker, ScoresEveryDocumentOnce) {
  for (Interaction i : {Interaction::kConcat, Interaction::kDcn}) {
    Ranker r(Small(i));
    const auto dense = torch::randn({7, 5});
    const auto sparse = torch::tensor({0, 1, 3, 1, 9, 5, 9, 0, 3, 2, 1, 1, 0, 4}).view({7, 2});
    const auto out = r.Forward(dense, sparse, /*train=*/false);
    EXPECT_EQ(out.scores.sizes(), (std::vector<int64_t>{7}));
    EXPECT_FALSE(out.scores.requires_grad());
    // Scoring documents one at a time gives the same scores (no batch coupling).
    for (int64_t d = 0; d < 7; ++d) {
      const auto one = r.Forward(dense.slice(0, d, d + 1), sparse.slice(0, d, d + 1), false);
      EXPECT_NEAR(one.scores[0].item<float>(), out.scores[d].item<float>(), 1e-6);
    }
  }
  EXPECT_THROW(
      Ranker(Small()).Forward(torch::randn({2, 4}), torch::zeros({2, 2}, torch::kLong), false),
      std::exception);
}

TEST(Ranker, RowGradientsEqualTheDenseEmbeddingGradient) {
  Ranker r(Small(Interaction::kDcn));
  const auto dense = torch::randn({6, 5});
  const auto sparse = torch::tensor({1, 0, 1, 5, 4, 0, 1, 5, 7, 2, 4, 0}).view({6, 2});
  auto out = r.Forward(dense, sparse, /*train=*/true);
  out.scores.pow(2).sum().backward();
  for (size_t c = 0; c < 2; ++c) {
    const auto ids = out.unique_ids[c];
    const auto g = out.rows[c].grad();
    ASSERT_TRUE(g.defined());
    EXPECT_EQ(g.size(0), ids.size(0));
    // Duplicates are summed: the gradient of a row used twice is the sum of
    // its two uses, i.e. the dense gradient; check through a finite
    // difference on the table row.
    for (int64_t k = 0; k < ids.size(0); ++k) {
      const int64_t id = ids[k].item<int64_t>();
      for (int64_t j = 0; j < 4; ++j) {
        const float eps = 1e-2f;
        auto& table = r.tables()[c];
        const float old = table[id][j].item<float>();
        table[id][j] = old + eps;
        const double up = r.Forward(dense, sparse, false).scores.pow(2).sum().item<double>();
        table[id][j] = old - eps;
        const double down = r.Forward(dense, sparse, false).scores.pow(2).sum().item<double>();
        table[id][j] = old;
        EXPECT_NEAR(g[k][j].item<float>(), (up - down) / (2 * eps), 2e-3) << "table " << c;
      }
    }
  }
  // Dense parameters got gradients too.
  double total = 0;
  for (const auto& p : r.dense_module().parameters()) total += p.grad().abs().sum().item<double>();
  EXPECT_GT(total, 0);
}

// The CPU's fused nodes (the gather with a small table numbered by
// marking and a large one by sorting; the MLPs) against the modules and
// the per-table unique / index_select / cat path: the same scores, unique
// ids, rows, row gradients and dense gradients. 40 documents run the MLPs
// as one block; 1,500 split them into row blocks whose weight gradients
// are added.
TEST(Ranker, FusedCpuPathEqualsTheModulePath) {
  for (const int64_t n : {40, 1500}) {
    torch::manual_seed(8);
    const auto dense = torch::randn({n, 5});
    const auto sparse =
        torch::stack({torch::randint(0, 3, {n}), torch::randint(0, 30, {n}) * 33}, 1);  // dups
    for (const Interaction i : {Interaction::kConcat, Interaction::kDcn}) {
      for (const std::vector<int64_t>& bottom : {std::vector<int64_t>{8}, std::vector<int64_t>{}}) {
        SCOPED_TRACE(testing::Message() << n << " documents, dcn " << (i == Interaction::kDcn)
                                        << ", bottom " << bottom.size());
        RankerOptions o = Small(i);
        o.table_sizes = {3, 1000};
        o.bottom = bottom;
        Ranker::Output outs[2];
        std::vector<torch::Tensor> dense_grads[2];
        for (int host = 0; host < 2; ++host) {
          o.cpu_fused = host == 1;
          Ranker r(o);
          outs[host] = r.Forward(dense, sparse, /*train=*/true);
          outs[host].scores.pow(2).sum().backward();
          for (const auto& p : r.dense_module().parameters()) dense_grads[host].push_back(p.grad());
          EXPECT_TRUE(torch::equal(r.Forward(dense, sparse, /*train=*/false).scores,
                                   outs[host].scores.detach()));
        }
        EXPECT_TRUE(torch::allclose(outs[1].scores, outs[0].scores, 1e-5, 1e-6));
        for (size_t c = 0; c < 2; ++c) {
          EXPECT_TRUE(torch::equal(outs[1].unique_ids[c], outs[0].unique_ids[c])) << c;
          EXPECT_TRUE(torch::equal(outs[1].rows[c], outs[0].rows[c])) << c;
          EXPECT_TRUE(torch::allclose(outs[1].rows[c].grad(), outs[0].rows[c].grad(), 1e-5, 1e-6));
        }
        EXPECT_LE(outs[1].unique_ids[1].size(0), 30);  // duplicates were merged (n > 30)
        for (size_t k = 0; k < dense_grads[0].size(); ++k) {
          EXPECT_TRUE(torch::allclose(dense_grads[1][k], dense_grads[0][k], 1e-5, 1e-4)) << k;
        }
      }
    }
  }
  torch::manual_seed(8);
  const auto dense = torch::randn({40, 5});
  const auto sparse =
      torch::stack({torch::randint(0, 3, {40}), torch::randint(0, 30, {40}) * 33}, 1);
  RankerOptions o = Small();
  o.table_sizes = {3, 1000};
  auto bad = sparse.clone();
  bad[7][1] = 1000;
  try {
    Ranker(o).Forward(dense, bad, /*train=*/true);
    FAIL() << "an id outside its table was gathered";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("document 7"), std::string::npos) << e.what();
  }
}

// The host's unique ids (what a CUDA step copies with its batch) are
// at::_unique2's, and the device path gives bitwise the same scores, rows
// and gradients with them as without.
// The radix sort's edges: batches whose document bits change (1, 2, 256,
// 257 documents) and the table's first and last ids.
TEST(Ranker, HostUniquesAtTheRadixSortsEdges) {
  torch::manual_seed(11);
  RankerOptions o = Small();
  o.table_sizes = {3, 5000, int64_t{1} << 20};
  o.cpu_fused = false;
  const Ranker r(o);
  for (const int64_t n : {1, 2, 255, 256, 257, 4097}) {
    auto sparse = torch::stack({torch::randint(0, 3, {n}), torch::randint(0, 5000, {n}),
                                torch::randint(0, int64_t{1} << 20, {n})},
                               1)
                      .contiguous();
    sparse.index_put_({0, 2}, (int64_t{1} << 20) - 1);
    sparse.index_put_({n - 1, 1}, 0);
    sparse.index_put_({n / 2, 1}, 4999);
    const Ranker::Uniques u = r.HostUniques(sparse.data_ptr<int64_t>(), n, /*pinned=*/false);
    int64_t first = 0;
    for (int64_t c = 0; c < 3; ++c) {
      const auto [ids, inverse, counts] = at::_unique2(sparse.select(1, c), true, true, false);
      EXPECT_TRUE(torch::equal(u.ids.narrow(0, first, u.counts[size_t(c)]), ids)) << n << " " << c;
      EXPECT_TRUE(torch::equal(u.inverse.select(0, c), inverse)) << n << " " << c;
      first += u.counts[size_t(c)];
    }
  }
}

TEST(Ranker, HostUniquesAreTheDevicePathsUniques) {
  torch::manual_seed(9);
  const int64_t n = 300;
  const auto dense = torch::randn({n, 5});
  // A small table (marked), and two large ones (sorted by a radix sort in
  // one pass and in two), with repeated ids.
  const auto sparse = torch::stack({torch::randint(0, 3, {n}), torch::randint(0, 30, {n}) * 33,
                                    torch::randint(0, 100, {n}) * 10007},
                                   1)
                          .contiguous();
  RankerOptions o = Small();
  o.table_sizes = {3, 2000, 1 << 20};
  o.cpu_fused = false;  // the path every device takes
  Ranker::Output outs[2];
  std::vector<torch::Tensor> grads[2];
  for (int host = 0; host < 2; ++host) {
    Ranker r(o);
    if (host == 0) {
      outs[host] = r.Forward(dense, sparse, /*train=*/true);
    } else {
      const Ranker::Uniques u = r.HostUniques(sparse.data_ptr<int64_t>(), n, /*pinned=*/false);
      ASSERT_EQ(u.counts.size(), 3u);
      EXPECT_EQ(u.ids.size(0), u.counts[0] + u.counts[1] + u.counts[2]);
      int64_t first = 0;
      for (int64_t c = 0; c < 3; ++c) {
        const auto [ids, inverse, counts] = at::_unique2(sparse.select(1, c), true, true, false);
        EXPECT_TRUE(torch::equal(u.ids.narrow(0, first, u.counts[size_t(c)]), ids)) << c;
        EXPECT_TRUE(torch::equal(u.inverse.select(0, c), inverse)) << c;
        first += u.counts[size_t(c)];
      }
      outs[host] = r.Forward(dense, sparse, /*train=*/true, u);
    }
    outs[host].scores.pow(2).sum().backward();
    for (const auto& p : r.dense_module().parameters()) grads[host].push_back(p.grad());
    for (const auto& rows : outs[host].rows) grads[host].push_back(rows.grad());
  }
  EXPECT_TRUE(torch::equal(outs[1].scores, outs[0].scores));
  for (size_t c = 0; c < 3; ++c) {
    EXPECT_TRUE(torch::equal(outs[1].unique_ids[c], outs[0].unique_ids[c])) << c;
  }
  ASSERT_EQ(grads[1].size(), grads[0].size());
  for (size_t k = 0; k < grads[0].size(); ++k) EXPECT_TRUE(torch::equal(grads[1][k], grads[0][k]));
  // The gather takes the ids it is given: reversed, with the inverse to
  // match, the rows come in that order and the scores stay the same.
  {
    const Ranker r(o);
    Ranker::Uniques u = r.HostUniques(sparse.data_ptr<int64_t>(), n, /*pinned=*/false);
    const int64_t first = u.counts[0], count = u.counts[1];
    const auto reversed = u.ids.narrow(0, first, count).flip(0);
    u.ids = torch::cat(
        {u.ids.narrow(0, 0, first), reversed, u.ids.narrow(0, first + count, u.counts[2])});
    u.inverse = torch::stack({u.inverse[0], count - 1 - u.inverse[1], u.inverse[2]});
    const Ranker::Output out = r.Forward(dense, sparse, /*train=*/false, u);
    EXPECT_TRUE(torch::equal(out.unique_ids[1], reversed));
    EXPECT_TRUE(torch::equal(out.scores, r.Forward(dense, sparse, /*train=*/false).scores));
  }
  auto bad = sparse.clone();
  bad[11][1] = 2000;
  try {
    Ranker(o).HostUniques(bad.data_ptr<int64_t>(), n, /*pinned=*/false);
    FAIL() << "an id outside its table was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("document 11"), std::string::npos) << e.what();
  }
}

// The fused CPU nodes split their loops over LibTorch's threads (rows,
// columns, tables); each output element is computed the same way however
// they split, so scores and every gradient are bitwise the same on 1, 2 and
// 3 threads. The batch is large enough to cross every split's grain.
TEST(Ranker, FusedCpuPathIsBitwiseTheSameOnAnyThreadCount) {
  torch::manual_seed(11);
  const int64_t n = 1500;
  const auto dense = torch::randn({n, 5});
  const auto sparse = torch::stack(
      {torch::randint(0, 17, {n}), torch::randint(0, 5000, {n}), torch::randint(0, 5000, {n})}, 1);
  RankerOptions o = Small();
  o.table_sizes = {17, 5000, 5000};
  o.embedding_dim = 16;
  o.bottom = {64};
  o.top = {128, 64};
  struct Result {
    at::Tensor scores;
    std::vector<at::Tensor> grads;
  };
  const int before = torch::get_num_threads();
  auto run = [&](int threads) {
    torch::set_num_threads(threads);
    Ranker r(o);
    Ranker::Output out = r.Forward(dense, sparse, /*train=*/true);
    out.scores.pow(2).sum().backward();
    Result res{out.scores.detach(), {}};
    for (const auto& row : out.rows) res.grads.push_back(row.grad());
    for (const auto& p : r.dense_module().parameters()) res.grads.push_back(p.grad());
    return res;
  };
  const Result one = run(1);
  for (int threads : {2, 3}) {
    const Result many = run(threads);
    EXPECT_TRUE(torch::equal(many.scores, one.scores)) << threads;
    ASSERT_EQ(many.grads.size(), one.grads.size());
    for (size_t k = 0; k < one.grads.size(); ++k) {
      EXPECT_TRUE(torch::equal(many.grads[k], one.grads[k])) << threads << " threads, grad " << k;
    }
  }
  torch::set_num_threads(before);
}

// The MLP nodes' GEMMs write into their outputs (out=), which autograd
// refuses on inputs that require grad while grad mode is on, as it is in a
// backward under create_graph: the nodes turn it off around them, on one
// block and on several, and the gradients are those of a plain backward.
TEST(Ranker, FusedCpuPathBackwardRunsUnderCreateGraph) {
  for (const int64_t n : {40, 1500}) {
    SCOPED_TRACE(testing::Message() << n << " documents");
    torch::manual_seed(12);
    const auto dense = torch::randn({n, 5});
    const auto sparse = torch::stack({torch::randint(0, 3, {n}), torch::randint(0, 30, {n})}, 1);
    RankerOptions o = Small();
    o.table_sizes = {3, 30};
    Ranker r(o);
    const std::vector<at::Tensor> params = r.dense_module().parameters();
    const auto loss = [&] { return r.Forward(dense, sparse, /*train=*/true).scores.pow(2).sum(); };
    const auto plain = torch::autograd::grad({loss()}, params);
    const auto created = torch::autograd::grad({loss()}, params, {}, /*retain_graph=*/true,
                                               /*create_graph=*/true);
    ASSERT_EQ(created.size(), plain.size());
    for (size_t k = 0; k < plain.size(); ++k) {
      EXPECT_TRUE(torch::equal(created[k].detach(), plain[k])) << k;
    }
  }
}

TEST(Ranker, SeedFixesTheInitialisationAndFlopsAreAnalytic) {
  Ranker a(Small()), b(Small());
  for (size_t c = 0; c < 2; ++c) EXPECT_TRUE(torch::equal(a.tables()[c], b.tables()[c]));
  const auto pa = a.dense_module().parameters(), pb = b.dense_module().parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i]));
  // bottom 5->8, top (8 + 2*4 = 16)->6->1: 2*(5*8 + 16*6 + 6*1).
  EXPECT_EQ(a.ForwardFlopsPerDoc(), 2 * (5 * 8 + 16 * 6 + 6));
  // DCN adds 2 layers of 2*16*16 + 3*16.
  EXPECT_EQ(Ranker(Small(Interaction::kDcn)).ForwardFlopsPerDoc(),
            2 * (5 * 8 + 16 * 6 + 6) + 2 * (2 * 16 * 16 + 3 * 16));
}

TEST(Ranker, DenseParameterCountMatchesTheBuiltModel) {
  for (const Interaction i : {Interaction::kConcat, Interaction::kDcn}) {
    RankerOptions o = Small(i);
    for (const std::vector<int64_t>& bottom : {std::vector<int64_t>{8}, std::vector<int64_t>{}}) {
      o.bottom = bottom;
      Ranker r(o);
      int64_t built = 0;
      for (const auto& p : r.dense_module().parameters()) built += p.numel();
      EXPECT_EQ(RankerDenseParameters(o), built);
    }
  }
}

}  // namespace
}  // namespace topspin
