// Ranking source: a sample is one group (query list); a unit is a row
// group transformed into compact row-major arrays plus the row offsets of
// its groups. Compact, because in the first epoch every cached byte is
// memory the kernel must zero on first touch, which costs more than the
// transform itself on a VM: missing flags are kept as bits and ids as
// int32 when every cardinality fits (127 bytes per shop document, not
// 244), and assembly widens them into the batch.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "pipeline/source.h"
#include "topspin/core/error.h"
#include "topspin/core/large_array.h"
#include "topspin/core/thread_pool.h"
#include "topspin/pipeline/transform.h"

namespace topspin::pipeline_internal {
namespace {

struct RankingUnit : Unit {
  LargeArray<float> values;            // [rows, V]: the dense outputs that are not missing flags
  LargeArray<uint8_t> flags;           // [rows, ceil(flags / 8)]: flag i is bit i % 8 of byte i / 8
  LargeArray<int32_t> ids32;           // [rows, C] when every cardinality fits int32
  LargeArray<int64_t> ids64;           // [rows, C] otherwise
  LargeArray<float> labels;            // [rows]
  std::vector<uint32_t> group_starts;  // [groups + 1] row offsets
};

struct UnitPlace {
  size_t shard, row_group;
  uint64_t rows;
};

constexpr size_t kMaxFlagBytes = 512;  // 4096 missing flags per row

// Byte b of a row's flags as 8 floats (bit i -> element i).
const std::array<std::array<float, 8>, 256>& FlagBytes() {
  static const auto table = [] {
    std::array<std::array<float, 8>, 256> t{};
    for (size_t b = 0; b < 256; ++b) {
      for (size_t i = 0; i < 8; ++i) t[b][i] = static_cast<float>((b >> i) & 1);
    }
    return t;
  }();
  return table;
}

class RankingSource final : public Source {
 public:
  RankingSource(const RankingSpec& spec, const PipelineOptions& options) : reader_(spec.dataset) {
    const Manifest& m = reader_.manifest();
    label_ = spec.label.empty() ? m.label_column : spec.label;
    group_ = spec.group.empty() ? m.group_column : spec.group;
    const std::string dir = spec.dataset.string();
    if (group_.empty()) {
      throw ConfigError(fmt::format("dataset {} has no group column: a ranking pipeline samples "
                                    "whole lists",
                                    dir),
                        ErrorWhere{.file = dir},
                        "convert it with --group COL (the query id column)");
    }
    const Manifest& stats = spec.statistics ? *spec.statistics : m;
    std::vector<ColumnSpec> reference = stats.schema;
    if (spec.allow_unlabeled) {
      // Unlabeled scoring data: the reference's label column may be absent.
      if (label_.empty()) label_ = stats.label_column;
      const auto has = [&](const std::vector<ColumnSpec>& s) {
        return std::any_of(s.begin(), s.end(), [&](const ColumnSpec& c) { return c.name == label_; });
      };
      if (!label_.empty() && !has(m.schema) && has(reference)) {
        std::erase_if(reference, [&](const ColumnSpec& c) { return c.name == label_; });
        unlabeled_ = true;
      }
    }
    if (label_.empty()) {
      throw ConfigError(fmt::format("dataset {} has no label column", dir), ErrorWhere{.file = dir},
                        "convert it with --label COL, or set the label in the spec");
    }
    for (size_t i = 0; i < spec.dense.size(); ++i) {
      chains_.push_back(ParseFeatureChain(spec.dense[i], FeatureKind::kDense,
                                          fmt::format("pipeline.dense[{}]", i)));
    }
    for (size_t i = 0; i < spec.sparse.size(); ++i) {
      chains_.push_back(ParseFeatureChain(spec.sparse[i], FeatureKind::kSparse,
                                          fmt::format("pipeline.sparse[{}]", i)));
    }
    label_chain_ = ParseFeatureChain(label_ + ": impute(0)", FeatureKind::kDense, "label");
    if (reference != m.schema) {
      throw ConfigError(
          fmt::format("dataset {} has a different schema from the dataset whose statistics fix "
                      "its transforms (the training data, the reference): {}",
                      dir, DescribeSchemaDifference(m.schema, reference)),
          ErrorWhere{.file = dir},
          "evaluate on data converted with the same columns and types as the training data");
    }
    ResolveFeatureChain(label_chain_, stats, options.seed);
    for (auto& chain : chains_) {
      ResolveFeatureChain(chain, stats, options.seed);
      auto& names = chain.kind == FeatureKind::kDense ? dense_names_ : sparse_names_;
      for (const auto& n : chain.OutputNames()) names.push_back(n);
      if (chain.kind == FeatureKind::kSparse) cardinalities_.push_back(chain.cardinality);
    }
    Project();
    IndexGroups(options.threads);
    PlanPacking();
  }

  uint64_t samples() const override { return first_sample_.back(); }
  size_t units() const override { return places_.size(); }
  uint64_t block_size() const override {
    return std::max<uint64_t>(1, samples() / std::max<size_t>(1, units()));
  }

  BatchLayout Layout(size_t max_lists) const override {
    return BatchLayout{.kind = BatchKind::kRanking,
                       .max_lists = max_lists,
                       .max_docs = max_lists * max_list_,
                       .dense_dim = dense_names_.size(),
                       .sparse_dim = sparse_names_.size()};
  }

  void UnitsOf(uint64_t, uint64_t sample, std::vector<size_t>& out) const override {
    out.push_back(UnitOf(sample));
  }

  std::shared_ptr<const Unit> Load(size_t u, Table& table, StageClock& clock,
                                   LoadHelpers& helpers) const override {
    const UnitPlace& p = places_[u];
    const ShardReader& shard = reader_.shard(p.shard);
    // Column by column, so that idle workers can take columns.
    std::atomic<uint64_t> stored{0};
    helpers.For(kRead, columns_.size(), [&](size_t i) {
      stored += shard.VerifyRowGroup(p.row_group, std::span(&columns_[i], 1));
    });
    clock.Lap(kRead, stored.load());
    table.columns.resize(columns_.size());
    helpers.For(kDecode, columns_.size(), [&](size_t i) {
      table.columns[i] = shard.ReadChunk(p.row_group, columns_[i], /*verify=*/false,
                                         std::move(table.columns[i]));
    });
    shard.ReleaseRowGroup(p.row_group);
    uint64_t decoded = 0;
    for (const auto& c : table.columns) decoded += c.values().size() + c.offsets().size_bytes();
    clock.Lap(kDecode, decoded);

    auto unit = std::make_shared<RankingUnit>();
    const size_t rows = p.rows, c = sparse_names_.size();
    unit->group_starts = RunStarts(table.columns[group_at_]);
    if (unit->group_starts.size() - 1 != GroupsIn(u)) {
      throw DataError(fmt::format("row group {} now has {} groups, {} when the pipeline opened it",
                                  p.row_group, unit->group_starts.size() - 1, GroupsIn(u)),
                      ErrorWhere{.file = shard.path().string(), .field = group_},
                      "the shard changed while reading, or its footer's runs are wrong: restart "
                      "the run, and if it repeats, convert the data again");
    }
    for (size_t g = 0; g + 1 < unit->group_starts.size(); ++g) {
      const size_t list = unit->group_starts[g + 1] - unit->group_starts[g];
      if (list > max_list_) {
        throw DataError(fmt::format("row group {} has a list of {} rows; the footer's longest_run "
                                    "of its group column said at most {}",
                                    p.row_group, list, max_list_),
                        ErrorWhere{.file = shard.path().string(), .field = group_},
                        "the shard is damaged: convert the data again");
      }
    }
    unit->values = LargeArray<float>(rows * values_);
    unit->flags = LargeArray<uint8_t>(rows * flag_bytes_);
    if (narrow_ids_) {
      unit->ids32 = LargeArray<int32_t>(rows * c);
    } else {
      unit->ids64 = LargeArray<int64_t>(rows * c);
    }
    // Pieces of 16 blocks of 256 rows, for idle workers to share.
    constexpr size_t kBlockRows = 256, kPieceRows = 16 * kBlockRows;
    helpers.For(kTransform, (rows + kPieceRows - 1) / kPieceRows, [&](size_t piece) {
      TransformRows(table, piece * kPieceRows, std::min(rows, (piece + 1) * kPieceRows),
                    kBlockRows, *unit);
    });
    unit->labels = LargeArray<float>(rows);
    if (unlabeled_) {
      std::fill_n(unit->labels.data(), rows, 0.0f);
    } else {
      RunDenseChain(label_chain_, table.columns[label_at_], 0, rows, unit->labels.data(), 1);
    }
    unit->bytes = unit->values.size_bytes() + unit->flags.size_bytes() +
                  unit->ids32.size_bytes() + unit->ids64.size_bytes() +
                  unit->labels.size_bytes() + unit->group_starts.size() * 4;
    clock.Lap(kTransform, unit->bytes);
    return unit;
  }

  uint64_t Assemble(uint64_t, std::span<const uint64_t> samples, const UnitLookup& units,
                    Batch& batch) const override {
    const size_t f = dense_names_.size(), c = sparse_names_.size();
    int64_t* offsets = batch.offsets_data();
    size_t lists = 0, docs = 0;
    offsets[0] = 0;
    // Where each list is, first; then the copies, each list's first cache
    // lines requested while the one before is copied (lists sit at random
    // places in the cache, so each start would otherwise wait on memory).
    thread_local std::vector<ListPlace> places;
    places.clear();
    for (uint64_t s : samples) {
      const size_t u = UnitOf(s);
      const auto* unit = static_cast<const RankingUnit*>(units.Get(u));
      if (unit == nullptr) continue;  // skipped row group
      const uint64_t g = s - first_sample_[u];
      const size_t begin = unit->group_starts[g];
      places.push_back({unit, begin, unit->group_starts[g + 1] - begin});
    }
    for (size_t k = 0; k < places.size(); ++k) {
      if (k + 1 < places.size()) Prefetch(places[k + 1]);
      const auto [unit, begin, n] = places[k];
      Unpack(*unit, begin, n, batch.dense_data() + docs * f, batch.sparse_data() + docs * c);
      std::memcpy(batch.labels_data() + docs, unit->labels.data() + begin, n * 4);
      docs += n;
      offsets[++lists] = static_cast<int64_t>(docs);
    }
    batch.num_lists = lists;
    batch.num_docs = docs;
    return docs;
  }

  const std::vector<std::string>& dense_names() const override { return dense_names_; }
  const std::vector<std::string>& sparse_names() const override { return sparse_names_; }
  const std::vector<uint64_t>& sparse_cardinalities() const override { return cardinalities_; }

 private:
  // Rows [first, last) of the decoded `table` through every chain into
  // `unit`'s compact layout, `block_rows` at a time: each chain's values
  // into a column of this thread's tile, then the tile transposed into the
  // unit's row-major values; missing flags as one byte per row and 8 flags
  // (a plane, in this thread's reused scratch), then packed into each
  // row's flag bytes. Blocks are small enough that the tile stays in L1.
  void TransformRows(const Table& table, size_t first, size_t last, size_t block_rows,
                     RankingUnit& unit) const {
    const size_t c = sparse_names_.size();
    thread_local std::vector<int64_t> sparse;
    thread_local std::vector<uint8_t> planes;
    thread_local std::vector<float> tile;  // [values_][block_rows]: each chain's block contiguous
    sparse.resize(block_rows * c);
    planes.resize(block_rows * flag_bytes_);
    tile.resize(block_rows * values_);
    for (size_t begin = first; begin < last; begin += block_rows) {
      const size_t n = std::min(block_rows, last - begin);
      std::fill(planes.begin(), planes.end(), uint8_t{0});
      size_t value = 0, flag = 0, sparse_at = 0;
      for (size_t i = 0; i < chains_.size(); ++i) {
        const FeatureChain& chain = chains_[i];
        const Column& a = table.columns[chain_at_[i][0]];
        if (chain.kind == FeatureKind::kDense) {
          uint8_t* plane = nullptr;
          uint8_t bit = 0;
          if (chain.width() == 2) {
            plane = planes.data() + (flag / 8) * block_rows;
            bit = static_cast<uint8_t>(1u << (flag % 8));
            ++flag;
          }
          RunDenseChainCompact(chain, a, begin, n, tile.data() + value * block_rows, 1, plane, bit);
          ++value;
        } else {
          const Column* b = chain.columns.size() == 2 ? &table.columns[chain_at_[i][1]] : nullptr;
          RunSparseChain(chain, a, b, begin, n, sparse.data() + sparse_at, c);
          ++sparse_at;
        }
      }
      TransposeTile(tile.data(), block_rows, values_, n, unit.values.data() + begin * values_);
      PackFlagsAndIds(planes.data(), block_rows, sparse.data(), begin, n, unit);
    }
  }

  // Where each dense output is cached, and the id width, from the resolved chains.
  void PlanPacking() {
    uint32_t at = 0;
    for (const auto& chain : chains_) {
      if (chain.kind != FeatureKind::kDense) continue;
      value_pos_.push_back(at++);
      if (chain.width() == 2) flag_pos_.push_back(at++);
    }
    values_ = value_pos_.size();
    flag_bytes_ = (flag_pos_.size() + 7) / 8;
    paired_ = flag_pos_.size() == values_;
    if (flag_bytes_ > kMaxFlagBytes) {
      throw ConfigError(fmt::format("{} dense features with missing flags; at most {} are supported",
                                    flag_pos_.size(), kMaxFlagBytes * 8),
                        ErrorWhere{.field = "pipeline.dense"},
                        "drop the flag (impute(V) without \"flag\") from some features");
    }
    narrow_ids_ = std::all_of(cardinalities_.begin(), cardinalities_.end(), [](uint64_t n) {
      return n <= uint64_t{std::numeric_limits<int32_t>::max()} + 1;
    });
  }

  // Rows [begin, begin + n) of `unit`'s flag bytes from their planes
  // (plane b holds flags 8b..8b+7 of row r at planes[b * plane_rows + r]),
  // and its ids from the batch layout.
  void PackFlagsAndIds(const uint8_t* planes, size_t plane_rows, const int64_t* sparse,
                       size_t begin, size_t n, RankingUnit& unit) const {
    const size_t c = sparse_names_.size();
    uint8_t* bits = unit.flags.data() + begin * flag_bytes_;
    for (size_t b = 0; b < flag_bytes_; ++b) {
      const uint8_t* plane = planes + b * plane_rows;
      for (size_t r = 0; r < n; ++r) bits[r * flag_bytes_ + b] = plane[r];
    }
    if (narrow_ids_) {
      int32_t* ids = unit.ids32.data() + begin * c;
      for (size_t i = 0; i < n * c; ++i) ids[i] = static_cast<int32_t>(sparse[i]);
    } else {
      std::memcpy(unit.ids64.data() + begin * c, sparse, n * c * sizeof(int64_t));
    }
  }

  // Where one list's rows are.
  struct ListPlace {
    const RankingUnit* unit;
    size_t begin, n;
  };

  // The first cache lines of a list's rows in each of the unit's arrays.
  void Prefetch(const ListPlace& p) const {
    const auto* values = reinterpret_cast<const char*>(p.unit->values.data() + p.begin * values_);
    for (size_t line = 0; line < 4; ++line) __builtin_prefetch(values + 64 * line);
    __builtin_prefetch(p.unit->flags.data() + p.begin * flag_bytes_);
    const size_t c = sparse_names_.size();
    __builtin_prefetch(narrow_ids_ ? static_cast<const void*>(p.unit->ids32.data() + p.begin * c)
                                   : static_cast<const void*>(p.unit->ids64.data() + p.begin * c));
    __builtin_prefetch(p.unit->labels.data() + p.begin);
  }

  // Rows [begin, begin + n) of `unit` in the batch layout.
  void Unpack(const RankingUnit& unit, size_t begin, size_t n, float* dense, int64_t* sparse) const {
    const size_t f = dense_names_.size(), c = sparse_names_.size();
    const size_t flags = flag_pos_.size();
    if (paired_) {  // every dense chain is (value, flag): one vectorised pass over the rows
      InterleavePairRows(unit.values.data() + begin * values_, unit.flags.data() + begin * flag_bytes_,
                         n, values_, flag_bytes_, dense);
    } else {
      const auto& lut = FlagBytes();
      alignas(64) float expanded[kMaxFlagBytes * 8];
      for (size_t r = begin; r < begin + n; ++r, dense += f) {
        const float* v = unit.values.data() + r * values_;
        const uint8_t* bits = unit.flags.data() + r * flag_bytes_;
        for (size_t b = 0; b < flag_bytes_; ++b) {
          std::memcpy(expanded + 8 * b, lut[bits[b]].data(), 32);
        }
        for (size_t j = 0; j < values_; ++j) dense[value_pos_[j]] = v[j];
        for (size_t i = 0; i < flags; ++i) dense[flag_pos_[i]] = expanded[i];
      }
    }
    if (narrow_ids_) {
      WidenInt32(unit.ids32.data() + begin * c, n * c, sparse);
    } else {
      std::memcpy(sparse, unit.ids64.data() + begin * c, n * c * sizeof(int64_t));
    }
  }

  // The decoded columns: every chain's inputs, the label and the group,
  // each once; chain_at_ etc. index into this projection.
  void Project() {
    const auto at = [&](const std::string& name) {
      const auto& schema = reader_.manifest().schema;
      const auto it = std::find_if(schema.begin(), schema.end(),
                                   [&](const ColumnSpec& s) { return s.name == name; });
      if (it == schema.end()) {
        throw ConfigError(fmt::format("the dataset has no column \"{}\"", name),
                          ErrorWhere{.file = reader_.dir().string(), .field = name});
      }
      const size_t index = static_cast<size_t>(it - schema.begin());
      const auto pos = std::find(columns_.begin(), columns_.end(), index);
      if (pos != columns_.end()) return static_cast<size_t>(pos - columns_.begin());
      columns_.push_back(index);
      return columns_.size() - 1;
    };
    for (const auto& chain : chains_) {
      std::vector<size_t> ats;
      for (const auto& name : chain.columns) ats.push_back(at(name));
      chain_at_.push_back(ats);
    }
    if (!unlabeled_) label_at_ = at(label_);
    group_at_ = at(group_);
    for (size_t s = 0; s < reader_.num_shards(); ++s) {
      if (reader_.shard(s).schema() != reader_.manifest().schema) {
        throw DataError("the shard's schema differs from the manifest's",
                        ErrorWhere{.file = reader_.shard(s).path().string()},
                        "re-run topspin convert");
      }
    }
  }

  // Each row group's rows and groups: from the footer where the shard
  // records its group column's runs, else from the column, decoded on
  // `threads` threads. Done before the first batch, so it delays it.
  void IndexGroups(int threads) {
    const size_t group_column = columns_[group_at_];
    struct Found {
      uint64_t groups = 0;
      size_t max_list = 0;
      std::exception_ptr error;
    };
    std::vector<Found> found;
    std::vector<size_t> unrecorded;  // places whose group column must be read
    for (size_t s = 0; s < reader_.num_shards(); ++s) {
      for (size_t rg = 0; rg < reader_.shard(s).num_row_groups(); ++rg) {
        const RowGroupInfo& info = reader_.shard(s).row_group(rg);
        const ChunkInfo& chunk = info.chunks[group_column];
        places_.push_back({s, rg, info.rows});
        found.push_back({.groups = chunk.runs, .max_list = size_t(chunk.longest_run), .error = {}});
        if (chunk.runs == 0) unrecorded.push_back(places_.size() - 1);
      }
    }
    if (!unrecorded.empty()) {
      std::atomic<size_t> next{0};
      ThreadPool pool(std::clamp<size_t>(static_cast<size_t>(threads), 1, unrecorded.size()));
      pool.ParallelFor(0, pool.size(), [&](size_t) {
        Column group;  // reused: each row group's decode lands in memory already touched
        for (size_t i; (i = next++) < unrecorded.size();) {
          Found& f = found[unrecorded[i]];
          const UnitPlace& place = places_[unrecorded[i]];
          try {
            group = reader_.shard(place.shard)
                        .ReadChunk(place.row_group, group_column, /*verify=*/true, std::move(group));
            const ColumnRuns runs = CountRuns(group);
            f.groups = runs.runs;
            f.max_list = size_t(runs.longest);
          } catch (...) {
            f.error = std::current_exception();
          }
        }
      });
    }
    first_sample_ = {0};
    for (const Found& f : found) {
      if (f.error) std::rethrow_exception(f.error);  // the first damaged row group, in order
      first_sample_.push_back(first_sample_.back() + f.groups);
      max_list_ = std::max(max_list_, f.max_list);
    }
    if (samples() == 0) {
      throw DataError("the dataset has no rows", ErrorWhere{.file = reader_.dir().string()});
    }
  }

  size_t UnitOf(uint64_t sample) const {
    const auto it = std::upper_bound(first_sample_.begin(), first_sample_.end(), sample);
    return static_cast<size_t>(it - first_sample_.begin()) - 1;
  }
  uint64_t GroupsIn(size_t u) const { return first_sample_[u + 1] - first_sample_[u]; }

  DatasetReader reader_;
  std::string label_, group_;
  std::vector<FeatureChain> chains_;
  FeatureChain label_chain_;
  std::vector<std::string> dense_names_, sparse_names_;
  std::vector<uint64_t> cardinalities_;
  std::vector<size_t> columns_;                // schema indices decoded per unit
  std::vector<std::vector<size_t>> chain_at_;  // per chain: its inputs in columns_
  size_t label_at_ = 0, group_at_ = 0;
  bool unlabeled_ = false;  // allow_unlabeled and the label column is absent: labels 0
  std::vector<UnitPlace> places_;
  std::vector<uint64_t> first_sample_;  // [units + 1]
  size_t max_list_ = 1;
  // The batch's dense column of each cached value and of each missing flag.
  std::vector<uint32_t> value_pos_, flag_pos_;
  size_t values_ = 0, flag_bytes_ = 0;
  bool paired_ = false;  // the dense outputs are (value, flag) pairs, in order
  bool narrow_ids_ = true;
};

}  // namespace

std::unique_ptr<Source> MakeRankingSource(const RankingSpec& spec, const PipelineOptions& options) {
  return std::make_unique<RankingSource>(spec, options);
}

}  // namespace topspin::pipeline_internal
