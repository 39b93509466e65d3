// Language-model source: the token column's rows, concatenated in dataset
// order, form one stream; sample i of epoch e is the window of T + 1
// tokens starting at i * T + s_e (pipeline.h). A unit is a row group's
// tokens widened to int32.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "data/shard_layout.h"
#include "pipeline/source.h"
#include "topspin/core/error.h"
#include "topspin/core/rng.h"

namespace topspin::pipeline_internal {
namespace {

// The decoded token column itself (u16 or u32): decoded once straight into
// the unit's memory, widened to int32 only when copied into a batch (pooled
// memory), so a cold epoch touches 2 fresh bytes per u16 token, not 2 + 4.
struct TokenUnit : Unit {
  Table decoded;
};

template <typename T>
void Widen(const std::byte* values, uint64_t begin, uint64_t n, int32_t* out) {
  const T* v = reinterpret_cast<const T*>(values) + begin;
  for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(v[i]);
}

struct UnitPlace {
  size_t shard, row_group;
};

// Tokens in a token chunk, from the footer alone: the raw size minus the
// chunk header, the validity bitmap (present only with nulls) and the
// offsets (rows + 1 uint64), over the token width.
uint64_t TokensInChunk(const ChunkInfo& info, uint64_t rows, DType dtype) {
  const uint64_t validity = info.null_count > 0 ? (rows + 7) / 8 : 0;
  const uint64_t fixed = shard_layout::kChunkHeaderSize + validity + 8 * (rows + 1);
  return info.raw_size > fixed ? (info.raw_size - fixed) / FixedWidth(dtype) : 0;
}

class LanguageModelSource final : public Source {
 public:
  LanguageModelSource(const LanguageModelSpec& spec, const PipelineOptions& options)
      : reader_(spec.dataset), seq_len_(spec.seq_len), seed_(options.seed) {
    const std::string dir = spec.dataset.string();
    const auto& schema = reader_.manifest().schema;
    const auto it = std::find_if(schema.begin(), schema.end(),
                                 [&](const ColumnSpec& s) { return s.name == spec.column; });
    if (it == schema.end() || (it->dtype != DType::kTokensU16 && it->dtype != DType::kTokensU32)) {
      throw ConfigError(
          fmt::format("dataset {} has no token column \"{}\"", dir, spec.column),
          ErrorWhere{.file = dir, .field = spec.column},
          "convert text with topspin convert --format text (it writes column \"tokens\")");
    }
    if (seq_len_ == 0) throw ConfigError("sequence length 0", ErrorWhere{.field = "seq_len"});
    column_ = {static_cast<size_t>(it - schema.begin())};
    dtype_ = it->dtype;
    token_start_ = {0};
    for (size_t s = 0; s < reader_.num_shards(); ++s) {
      const ShardReader& shard = reader_.shard(s);
      for (size_t rg = 0; rg < shard.num_row_groups(); ++rg) {
        const RowGroupInfo& info = shard.row_group(rg);
        places_.push_back({s, rg});
        token_start_.push_back(token_start_.back() +
                               TokensInChunk(info.chunks[column_[0]], info.rows, dtype_));
      }
    }
    const uint64_t total = token_start_.back();
    if (total < 2 * seq_len_) {
      throw DataError(fmt::format("dataset {} holds {} tokens; windows of {} + 1 need at least {}",
                                  dir, total, seq_len_, 2 * seq_len_),
                      ErrorWhere{.file = dir}, "use more text or a shorter sequence length");
    }
    windows_ = (total - seq_len_) / seq_len_;
  }

  uint64_t samples() const override { return windows_; }
  size_t units() const override { return places_.size(); }
  uint64_t block_size() const override {
    return std::max<uint64_t>(1, windows_ / std::max<size_t>(1, units()));
  }
  BatchLayout Layout(size_t max_lists) const override {
    return BatchLayout{
        .kind = BatchKind::kLanguageModel, .max_lists = max_lists, .seq_len = seq_len_};
  }

  void UnitsOf(uint64_t epoch, uint64_t sample, std::vector<size_t>& out) const override {
    const uint64_t begin = WindowStart(epoch, sample), end = begin + seq_len_ + 1;
    for (size_t u = UnitOf(begin); u < places_.size() && token_start_[u] < end; ++u) {
      out.push_back(u);
    }
  }

  std::shared_ptr<const Unit> Load(size_t u, Table&, StageClock& clock,
                                   LoadHelpers&) const override {
    const UnitPlace& p = places_[u];
    const ShardReader& shard = reader_.shard(p.shard);
    clock.Lap(kRead, shard.VerifyRowGroup(p.row_group, column_));
    auto unit = std::make_shared<TokenUnit>();
    shard.ReadRowGroupInto(p.row_group, column_, unit->decoded, /*verify=*/false);
    shard.ReleaseRowGroup(p.row_group);
    const Column& c = unit->decoded.columns[0];
    clock.Lap(kDecode, c.values().size() + c.offsets().size_bytes());
    const uint64_t n = token_start_[u + 1] - token_start_[u];
    if (c.values().size() != n * FixedWidth(dtype_)) {
      throw DataError(fmt::format("row group {} decodes to {} token bytes, the footer implies {}",
                                  p.row_group, c.values().size(), n * FixedWidth(dtype_)),
                      ErrorWhere{.file = shard.path().string(), .field = c.name()});
    }
    if (dtype_ == DType::kTokensU32) {
      const auto* v = reinterpret_cast<const uint32_t*>(c.values().data());
      const uint32_t max = n == 0 ? 0 : *std::max_element(v, v + n);
      if (max > 0x7fffffffu) {
        throw DataError(fmt::format("token id {} does not fit int32", max),
                        ErrorWhere{.file = shard.path().string(), .field = c.name()});
      }
    }
    unit->bytes = c.values().size() + c.offsets().size_bytes() + c.validity().size();
    clock.Lap(kTransform, 0);
    return unit;
  }

  uint64_t Assemble(uint64_t epoch, std::span<const uint64_t> samples, const UnitLookup& units,
                    Batch& batch) const override {
    const size_t width = seq_len_ + 1;
    size_t rows = 0;
    for (uint64_t s : samples) {
      int32_t* out = batch.tokens_data() + rows * width;
      uint64_t at = WindowStart(epoch, s);
      const uint64_t end = at + width;
      bool complete = true;
      for (size_t u = UnitOf(at); at < end; ++u) {
        const auto* unit = static_cast<const TokenUnit*>(units.Get(u));
        const uint64_t stop = std::min(end, token_start_[u + 1]);
        if (unit == nullptr) {
          complete = false;  // a skipped row group: drop the window
          break;
        }
        const std::byte* values = unit->decoded.columns[0].values().data();
        if (dtype_ == DType::kTokensU16) {
          Widen<uint16_t>(values, at - token_start_[u], stop - at, out);
        } else {
          Widen<uint32_t>(values, at - token_start_[u], stop - at, out);
        }
        out += stop - at;
        at = stop;
      }
      if (complete) ++rows;
    }
    batch.num_lists = rows;
    batch.num_docs = 0;
    return rows * width;
  }

  const std::vector<std::string>& dense_names() const override { return none_; }
  const std::vector<std::string>& sparse_names() const override { return none_; }
  const std::vector<uint64_t>& sparse_cardinalities() const override { return no_ids_; }

 private:
  uint64_t WindowStart(uint64_t epoch, uint64_t sample) const {
    const auto r = Philox4x32(
        {static_cast<uint32_t>(epoch), static_cast<uint32_t>(epoch >> 32), 0x4c4d, 0},  // "LM"
        {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)});
    return sample * seq_len_ + r[0] % seq_len_;
  }
  size_t UnitOf(uint64_t token) const {
    const auto it = std::upper_bound(token_start_.begin(), token_start_.end(), token);
    return static_cast<size_t>(it - token_start_.begin()) - 1;
  }

  DatasetReader reader_;
  size_t seq_len_;
  uint64_t seed_;
  std::vector<size_t> column_;
  DType dtype_ = DType::kTokensU16;
  std::vector<UnitPlace> places_;
  std::vector<uint64_t> token_start_;  // [units + 1]
  uint64_t windows_ = 0;
  std::vector<std::string> none_;
  std::vector<uint64_t> no_ids_;
};

}  // namespace

std::unique_ptr<Source> MakeLanguageModelSource(const LanguageModelSpec& spec,
                                                const PipelineOptions& options) {
  return std::make_unique<LanguageModelSource>(spec, options);
}

}  // namespace topspin::pipeline_internal
