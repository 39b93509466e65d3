// Ranking metrics over scored lists, with LightGBM's conventions so numbers
// compare with what practitioners already report:
//   - order: documents sorted by score, descending; ties keep the input
//     order (stable sort), as LightGBM does;
//   - NDCG@k: gain 2^label - 1, discount 1 / log2(rank + 1) for 1-based
//     ranks; ideal DCG from the labels sorted descending; a list with no
//     relevant document (ideal DCG 0) scores 1;
//   - MAP@k: relevant means label > 0; AP@k = (sum over relevant documents
//     at ranks r <= k of precision@r) / min(relevant count, k); a list with
//     no relevant document scores 1;
//   - MRR: 1 / rank of the first relevant document (label > 0); a list with
//     none scores 1, like the two above (LightGBM has no MRR).
// k <= 0 means the whole list. Torch-free; all functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace topspin {

double NdcgAt(std::span<const float> scores, std::span<const float> labels, int k);
double AveragePrecisionAt(std::span<const float> scores, std::span<const float> labels, int k);
double ReciprocalRank(std::span<const float> scores, std::span<const float> labels);

// Means over lists of NDCG@k for each k asked, MAP@k and MRR.
class RankMetricAccumulator {
 public:
  explicit RankMetricAccumulator(std::vector<int> ndcg_ks = {1, 3, 5, 10}, int map_k = 10);

  // One list: scores and labels of its documents, equal length >= 1.
  void AddList(std::span<const float> scores, std::span<const float> labels);
  // A jagged batch: list i is documents [offsets[i], offsets[i + 1]).
  void AddBatch(std::span<const float> scores, std::span<const float> labels,
                std::span<const int64_t> offsets);

  uint64_t lists() const { return lists_; }
  double ndcg(int k) const;  // k must be one of ndcg_ks
  double map() const { return lists_ ? map_sum_ / double(lists_) : 0; }
  double mrr() const { return lists_ ? mrr_sum_ / double(lists_) : 0; }
  // "ndcg@10 0.7312, ..., map@10 ..., mrr ..." for logs.
  std::string Summary() const;

 private:
  std::vector<int> ks_;
  std::vector<double> ndcg_sums_;
  int map_k_;
  double map_sum_ = 0, mrr_sum_ = 0;
  uint64_t lists_ = 0;
};

}  // namespace topspin
