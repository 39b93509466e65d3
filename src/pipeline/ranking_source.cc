// Ranking source: a sample is one group (query list); a unit is a row
// group transformed into row-major dense/sparse/label arrays plus the row
// offsets of its groups, so assembling a list is three memcpys.
#include <algorithm>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "pipeline/source.h"
#include "topspin/core/error.h"
#include "topspin/core/large_array.h"
#include "topspin/pipeline/transform.h"

namespace topspin::pipeline_internal {
namespace {

struct RankingUnit : Unit {
  LargeArray<float> dense;             // [rows, F]
  LargeArray<int64_t> sparse;          // [rows, C]
  LargeArray<float> labels;            // [rows]
  std::vector<uint32_t> group_starts;  // [groups + 1] row offsets
};

struct UnitPlace {
  size_t shard, row_group;
  uint64_t rows;
};

// Row offsets where the value of the group column changes.
std::vector<uint32_t> GroupStarts(const Column& group) {
  std::vector<uint32_t> starts = {0};
  const size_t rows = group.size();
  if (group.dtype() == DType::kString) {
    for (size_t r = 1; r < rows; ++r) {
      if (group.StringAt(r) != group.StringAt(r - 1)) starts.push_back(static_cast<uint32_t>(r));
    }
  } else if (group.dtype() == DType::kInt64) {
    const auto v = group.Values<int64_t>();
    for (size_t r = 1; r < rows; ++r) {
      if (v[r] != v[r - 1] || group.IsValid(r) != group.IsValid(r - 1)) {
        starts.push_back(static_cast<uint32_t>(r));
      }
    }
  } else {
    for (size_t r = 1; r < rows; ++r) {
      if (group.AsDouble(r) != group.AsDouble(r - 1) || group.IsValid(r) != group.IsValid(r - 1)) {
        starts.push_back(static_cast<uint32_t>(r));
      }
    }
  }
  if (rows > 0) starts.push_back(static_cast<uint32_t>(rows));
  return starts;
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
    IndexGroups();
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

  std::shared_ptr<const Unit> Load(size_t u, Table& table, StageClock& clock) const override {
    const UnitPlace& p = places_[u];
    const ShardReader& shard = reader_.shard(p.shard);
    clock.Lap(kRead, shard.VerifyRowGroup(p.row_group, columns_));
    shard.ReadRowGroupInto(p.row_group, columns_, table, /*verify=*/false);
    uint64_t decoded = 0;
    for (const auto& c : table.columns) decoded += c.values().size() + c.offsets().size_bytes();
    clock.Lap(kDecode, decoded);

    auto unit = std::make_shared<RankingUnit>();
    const size_t rows = p.rows, f = dense_names_.size(), c = sparse_names_.size();
    unit->group_starts = GroupStarts(table.columns[group_at_]);
    if (unit->group_starts.size() - 1 != GroupsIn(u)) {
      throw DataError(fmt::format("row group {} now has {} groups, {} when the pipeline opened it",
                                  p.row_group, unit->group_starts.size() - 1, GroupsIn(u)),
                      ErrorWhere{.file = shard.path().string(), .field = group_},
                      "the shard changed while reading: restart the run");
    }
    unit->dense = LargeArray<float>(rows * f);
    unit->sparse = LargeArray<int64_t>(rows * c);
    unit->labels = LargeArray<float>(rows);
    size_t dense_at = 0, sparse_at = 0;
    for (size_t i = 0; i < chains_.size(); ++i) {
      const FeatureChain& chain = chains_[i];
      const Column& a = table.columns[chain_at_[i][0]];
      if (chain.kind == FeatureKind::kDense) {
        RunDenseChain(chain, a, 0, rows, unit->dense.data() + dense_at, f);
        dense_at += chain.width();
      } else {
        const Column* b = chain.columns.size() == 2 ? &table.columns[chain_at_[i][1]] : nullptr;
        RunSparseChain(chain, a, b, 0, rows, unit->sparse.data() + sparse_at, c);
        ++sparse_at;
      }
    }
    if (unlabeled_) {
      std::fill_n(unit->labels.data(), rows, 0.0f);
    } else {
      RunDenseChain(label_chain_, table.columns[label_at_], 0, rows, unit->labels.data(), 1);
    }
    unit->bytes =
        unit->dense.size() * 4 + unit->sparse.size() * 8 + rows * 4 + unit->group_starts.size() * 4;
    clock.Lap(kTransform, unit->bytes);
    return unit;
  }

  uint64_t Assemble(uint64_t, std::span<const uint64_t> samples, const UnitLookup& units,
                    Batch& batch) const override {
    const size_t f = dense_names_.size(), c = sparse_names_.size();
    int64_t* offsets = batch.offsets_data();
    size_t lists = 0, docs = 0;
    offsets[0] = 0;
    for (uint64_t s : samples) {
      const size_t u = UnitOf(s);
      const auto* unit = static_cast<const RankingUnit*>(units.Get(u));
      if (unit == nullptr) continue;  // skipped row group
      const uint64_t g = s - first_sample_[u];
      const size_t begin = unit->group_starts[g], n = unit->group_starts[g + 1] - begin;
      std::memcpy(batch.dense_data() + docs * f, unit->dense.data() + begin * f, n * f * 4);
      std::memcpy(batch.sparse_data() + docs * c, unit->sparse.data() + begin * c, n * c * 8);
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
  // The decoded columns: every chain's inputs, the label and the group,
  // each once; chain_at_ etc. index into this projection.
  void Project() {
    const auto at = [&](const std::string& name) {
      const auto schema = reader_.manifest().schema;
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

  // Decodes each row group's group column once to count its groups.
  void IndexGroups() {
    first_sample_ = {0};
    const size_t group_column = columns_[group_at_];
    for (size_t s = 0; s < reader_.num_shards(); ++s) {
      const ShardReader& shard = reader_.shard(s);
      for (size_t rg = 0; rg < shard.num_row_groups(); ++rg) {
        const Column group = shard.ReadChunk(rg, group_column, /*verify=*/true);
        places_.push_back({s, rg, group.size()});
        const auto starts = GroupStarts(group);
        first_sample_.push_back(first_sample_.back() + starts.size() - 1);
        for (size_t g = 0; g + 1 < starts.size(); ++g) {
          max_list_ = std::max<size_t>(max_list_, starts[g + 1] - starts[g]);
        }
      }
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
};

}  // namespace

std::unique_ptr<Source> MakeRankingSource(const RankingSpec& spec, const PipelineOptions& options) {
  return std::make_unique<RankingSource>(spec, options);
}

}  // namespace topspin::pipeline_internal
