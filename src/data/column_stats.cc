#include "topspin/data/column_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include <fmt/format.h>

#include "data/byte_io.h"
#include "topspin/core/error.h"
#include "topspin/core/hash.h"

namespace topspin {
namespace {

// The value a row contributes: the number itself, or the row's length for
// variable-length columns. NaN (null, or a NaN float) contributes nothing.
double RowValue(const Column& column, size_t row) {
  if (!column.IsValid(row)) return std::nan("");
  if (IsVariableLength(column.dtype())) {
    const auto offsets = column.offsets();
    return static_cast<double>(offsets[row + 1] - offsets[row]);
  }
  return column.AsDouble(row);
}

// q in [0, 1] over sorted values, linear interpolation between ranks.
double Interpolate(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  if (lo + 1 >= sorted.size()) return sorted.back();
  const double frac = pos - static_cast<double>(lo);
  if (frac == 0 || sorted[lo] == sorted[lo + 1]) return sorted[lo];  // no inf - inf
  return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

using SampleItem = std::pair<uint64_t, double>;  // (key, value)

// XXH3-64 of the row index as a little-endian u64 (docs/FORMAT.md).
uint64_t SampleKey(uint64_t row, uint64_t seed) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(row >> (8 * i));
  return Xxh3(bytes, sizeof(bytes), seed);
}

// The sample is the kSampleSize smallest (key, value) items offered. Keys of
// distinct rows collide with probability ~2^-64; ordering by (key, value)
// keeps even that case deterministic.
//
// `sample` holds candidates: every item that may still be among the
// smallest. Once it has kSampleSize items, its front is a threshold: the
// largest of the kSampleSize smallest seen when it was set, so an item not
// below it can never be in the sample. Candidates accumulate up to twice
// the size; then nth_element keeps the smallest half and the threshold
// tightens. That is amortised O(1) per offered item, where a heap pays
// O(log kSampleSize) per kept one (and most early items are kept).
constexpr size_t kSampleSize = ColumnStatsBuilder::kSampleSize;

// Cuts `sample` to its kSampleSize smallest, the largest of them in front.
void CompactSample(std::vector<SampleItem>& sample) {
  if (sample.size() > kSampleSize) {
    std::nth_element(sample.begin(), sample.begin() + (kSampleSize - 1), sample.end());
    sample.resize(kSampleSize);
  }
  std::iter_swap(sample.begin(), std::max_element(sample.begin(), sample.end()));
}

void OfferSample(std::vector<SampleItem>& sample, const SampleItem& item) {
  if (sample.size() >= kSampleSize && !(item < sample.front())) return;
  sample.push_back(item);
  if (sample.size() == kSampleSize || sample.size() == 2 * kSampleSize) CompactSample(sample);
}

// The sample proper: the kSampleSize smallest candidates, largest first
// (which is also a valid max-heap, the order Serialize has always written).
std::vector<SampleItem> SampleOf(std::vector<SampleItem> candidates) {
  if (candidates.size() > kSampleSize) CompactSample(candidates);
  std::sort(candidates.begin(), candidates.end(), std::greater<>());
  return candidates;
}

}  // namespace

ColumnStatsBuilder::ColumnStatsBuilder(uint64_t seed) : seed_(seed) {}

template <typename RowId>
void ColumnStatsBuilder::AddRows(const Column& column, RowId&& row_id) {
  count_ += column.size();
  for (size_t r = 0; r < column.size(); ++r) {
    const double value = RowValue(column, r);
    if (std::isnan(value)) {
      ++nulls_;
    } else if (std::isinf(value)) {
      ++infinite_;
    } else {
      AddValue(value, row_id(r));
    }
  }
}

void ColumnStatsBuilder::Add(const Column& column, uint64_t first_row) {
  AddRows(column, [first_row](size_t r) { return first_row + r; });
}

void ColumnStatsBuilder::Add(const Column& column, std::span<const uint64_t> row_ids) {
  if (row_ids.size() != column.size()) {
    throw InternalError(fmt::format("ColumnStatsBuilder::Add: {} row ids for {} rows",
                                    row_ids.size(), column.size()));
  }
  AddRows(column, [row_ids](size_t r) { return row_ids[r]; });
}

void ColumnStatsBuilder::AddValue(double value, uint64_t row) {
  // Welford's update.
  ++values_;
  const double delta = value - mean_;
  mean_ += delta / static_cast<double>(values_);
  m2_ += delta * (value - mean_);
  min_ = values_ == 1 ? value : std::min(min_, value);
  max_ = values_ == 1 ? value : std::max(max_, value);

  // The sample key hashes the row id, so which values are kept
  // does not depend on how rows were split across builders.
  OfferSample(sample_, {SampleKey(row, seed_), value});
}

void ColumnStatsBuilder::Merge(const ColumnStatsBuilder& other) {
  if (other.seed_ != seed_) throw InternalError("ColumnStatsBuilder::Merge: different seeds");
  if (values_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
    mean_ = other.mean_;
    m2_ = other.m2_;
    values_ = other.values_;
  } else if (other.values_ > 0) {
    // Chan, Golub and LeVeque's pairwise combination of (n, mean, M2).
    const double na = static_cast<double>(values_), nb = static_cast<double>(other.values_);
    const double n = na + nb;
    const double delta = other.mean_ - mean_;
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
    mean_ += delta * nb / n;
    m2_ += other.m2_ + delta * delta * na * nb / n;
    values_ += other.values_;
  }
  count_ += other.count_;
  nulls_ += other.nulls_;
  infinite_ += other.infinite_;
  for (const auto& item : other.sample_) OfferSample(sample_, item);
}

ColumnStats ColumnStatsBuilder::Finish() const {
  ColumnStats stats;
  stats.count = count_;
  stats.nulls = nulls_;
  stats.infinite = infinite_;
  if (values_ == 0) return stats;
  stats.min = min_;
  stats.max = max_;
  stats.mean = mean_;
  stats.std = std::sqrt(std::max(0.0, m2_ / static_cast<double>(values_)));
  std::vector<double> sorted;
  sorted.reserve(kSampleSize);
  for (const auto& [key, value] : SampleOf(sample_)) sorted.push_back(value);
  std::sort(sorted.begin(), sorted.end());
  stats.quantiles.resize(kQuantileEdges);
  for (int i = 0; i < kQuantileEdges; ++i) {
    stats.quantiles[i] = Interpolate(sorted, static_cast<double>(i) / (kQuantileEdges - 1));
  }
  // The ends are known exactly, whatever the sample holds.
  stats.quantiles.front() = min_;
  stats.quantiles.back() = max_;
  return stats;
}

namespace {

constexpr char kStateMagic[8] = {'T', 'S', 'S', 'T', 'A', 'T', 'S', '1'};

}  // namespace

std::string ColumnStatsBuilder::Serialize() const {
  std::string out(kStateMagic, sizeof(kStateMagic));
  const std::vector<SampleItem> sample = SampleOf(sample_);
  for (uint64_t v : {seed_, count_, nulls_, infinite_, values_, uint64_t(sample.size())}) PutBytes(out, v);
  for (double v : {min_, max_, mean_, m2_}) PutBytes(out, v);
  for (const auto& [key, value] : sample) {
    PutBytes(out, key);
    PutBytes(out, value);
  }
  return out;
}

ColumnStatsBuilder ColumnStatsBuilder::Deserialize(std::string_view bytes,
                                                   const std::string& source) {
  ByteCursor in(bytes, source, "column statistics state: ");
  in.Magic(kStateMagic, "is not TSSTATS1");
  ColumnStatsBuilder b(in.Get<uint64_t>("seed"));
  b.count_ = in.Get<uint64_t>("count");
  b.nulls_ = in.Get<uint64_t>("nulls");
  b.infinite_ = in.Get<uint64_t>("infinite");
  b.values_ = in.Get<uint64_t>("values");
  const uint64_t sample = in.Get<uint64_t>("sample size");
  b.min_ = in.Get<double>("min");
  b.max_ = in.Get<double>("max");
  b.mean_ = in.Get<double>("mean");
  b.m2_ = in.Get<double>("m2");
  if (sample > kSampleSize || sample > b.values_ || in.left() != sample * 16 ||
      b.nulls_ + b.infinite_ + b.values_ != b.count_) {
    in.Fail("sample", "does not match the counts");
  }
  b.sample_.reserve(sample);
  for (uint64_t i = 0; i < sample; ++i) {
    const uint64_t key = in.Get<uint64_t>("sample key");
    b.sample_.emplace_back(key, in.Get<double>("sample value"));
  }
  // Written largest first (a max-heap): the front is the threshold OfferSample expects.
  if (!std::is_heap(b.sample_.begin(), b.sample_.end())) in.Fail("sample", "is not a heap");
  return b;
}

}  // namespace topspin
