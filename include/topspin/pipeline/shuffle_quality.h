// How well an epoch order mixes, measured (docs/PIPELINE.md records the
// numbers; `topspin bench order` prints them against std::shuffle).
#pragma once

#include <cstdint>
#include <functional>

#include "topspin/pipeline/sample_order.h"

namespace topspin {

struct ShuffleQuality {
  // mean |sample(p) - p| / n; a uniform random permutation gives 1/3.
  double mean_displacement = 0;
  // Spearman correlation of position and sample index; uniform: 0 +- 1/sqrt(n).
  double rank_correlation = 0;
  // Fraction of neighbours p, p + 1 whose samples are neighbours too; uniform: 2/n.
  double adjacent_kept = 0;
  // Spearman correlation of each sample's position in this epoch and the next.
  double epoch_correlation = 0;
  // Mean distinct blocks (runs of `block_size` consecutive samples, i.e. row
  // groups) per batch of `batch_size`: how many units a batch touches.
  double blocks_per_batch = 0;
};

// Measures an order given as a function position -> sample for two
// consecutive epochs (a permutation of [0, n) each).
ShuffleQuality MeasureShuffleQuality(uint64_t n, const std::function<uint64_t(uint64_t)>& epoch0,
                                     const std::function<uint64_t(uint64_t)>& epoch1,
                                     uint64_t block_size, uint64_t batch_size);
// The same for epochs `epoch` and `epoch + 1` of `order`.
ShuffleQuality MeasureShuffleQuality(const SampleOrder& order, uint64_t epoch,
                                     uint64_t block_size, uint64_t batch_size);

}  // namespace topspin
