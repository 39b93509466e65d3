// Parsing feature chains and resolving their constants from a manifest
// (topspin/pipeline/transform.h).
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "topspin/core/error.h"
#include "topspin/core/strings.h"
#include "topspin/pipeline/transform.h"

namespace topspin {
namespace {

const std::map<std::string, TransformOp, std::less<>>& OpsByName() {
  static const std::map<std::string, TransformOp, std::less<>> ops = {
      {"impute", TransformOp::kImpute}, {"log1p", TransformOp::kLog1p},
      {"clip", TransformOp::kClip},     {"standardize", TransformOp::kStandardize},
      {"cast", TransformOp::kCast},     {"bucketize", TransformOp::kBucketize},
      {"hash", TransformOp::kHash},     {"cross", TransformOp::kCross}};
  return ops;
}

bool IsValueOp(TransformOp op) {
  return op == TransformOp::kImpute || op == TransformOp::kLog1p || op == TransformOp::kClip ||
         op == TransformOp::kStandardize;
}

constexpr const char* kChainHint =
    "write \"<column>: <op> | <op> ...\"; ops: impute(V[, flag]), log1p, clip(lo, hi), "
    "standardize, cast, bucketize(N), hash(S), cross(S); see docs/PIPELINE.md";

class ChainParser {
 public:
  ChainParser(std::string_view text, std::string field) : text_(text), field_(std::move(field)) {}

  Error Fail(size_t at, const std::string& what) const {
    return ConfigError(fmt::format("\"{}\" at character {}: {}", text_, at + 1, what),
                       ErrorWhere{.field = field_}, kChainHint);
  }

  double Number(std::string_view s, size_t at) const {
    const std::string copy(Trim(s));
    try {
      size_t used = 0;
      const double v = std::stod(copy, &used);
      if (used == copy.size() && std::isfinite(v)) return v;
    } catch (const std::exception&) {
    }
    throw Fail(at, fmt::format("\"{}\" is not a finite number", copy));
  }

  uint64_t Count(std::string_view s, size_t at, uint64_t lo, uint64_t hi) const {
    const double v = Number(s, at);
    if (v != std::floor(v) || v < static_cast<double>(lo) || v > static_cast<double>(hi)) {
      throw Fail(at, fmt::format("{} must be a whole number in [{}, {}]", Trim(s), lo, hi));
    }
    return static_cast<uint64_t>(v);
  }

  // One "name(args)" starting at text offset `at`.
  TransformStep Step(std::string_view piece, size_t at) const {
    const std::string_view call = Trim(piece);
    at += static_cast<size_t>(call.data() - piece.data());
    const size_t open = call.find('(');
    const std::string_view name = Trim(call.substr(0, open));
    std::vector<std::string> args;
    if (open != std::string_view::npos) {
      if (call.back() != ')') throw Fail(at + call.size() - 1, "missing \")\"");
      const auto inside = call.substr(open + 1, call.size() - open - 2);
      if (!Trim(inside).empty()) args = Split(inside, ',');
    }
    const auto it = OpsByName().find(name);
    if (it == OpsByName().end()) {
      std::vector<std::string> names;
      for (const auto& [n, op] : OpsByName()) names.push_back(n);
      const auto guess = ClosestMatch(name, names);
      throw Fail(at, fmt::format("unknown transform \"{}\"{}", name,
                                 guess ? fmt::format(" (did you mean \"{}\"?)", *guess) : ""));
    }
    TransformStep step{.op = it->second};
    const size_t args_at = at + (open == std::string_view::npos ? call.size() : open + 1);
    const auto want = [&](size_t lo, size_t hi) {
      if (args.size() < lo || args.size() > hi) {
        throw Fail(at, fmt::format("{} takes {} argument{}, got {}", name,
                                   lo == hi ? fmt::format("{}", lo) : fmt::format("{}-{}", lo, hi),
                                   hi == 1 ? "" : "s", args.size()));
      }
    };
    switch (step.op) {
      case TransformOp::kImpute: {
        want(1, 2);
        const std::string v(Trim(args[0]));
        if (v == "mean" || v == "median" || v == "min" || v == "max") {
          step.impute_stat = v;
        } else {
          step.a = Number(v, args_at);
        }
        if (args.size() == 2) {
          if (Trim(args[1]) != "flag") throw Fail(args_at, "impute's second argument is \"flag\"");
          step.flag = true;
        }
        break;
      }
      case TransformOp::kClip:
        want(2, 2);
        step.a = Number(args[0], args_at);
        step.b = Number(args[1], args_at);
        if (!(step.a <= step.b)) throw Fail(args_at, "clip needs lo <= hi");
        break;
      case TransformOp::kBucketize:
        want(1, 1);
        step.count = Count(args[0], args_at, 1, 64);
        break;
      case TransformOp::kHash:
      case TransformOp::kCross:
        want(1, 1);
        step.count = Count(args[0], args_at, 1, uint64_t{1} << 40);
        break;
      default: want(0, 0);
    }
    return step;
  }

  FeatureChain Parse(FeatureKind kind) {
    FeatureChain chain{.kind = kind, .text = std::string(text_), .field = field_};
    const size_t colon = text_.find(':');
    if (colon == std::string_view::npos) throw Fail(0, "no \":\" after the column name");
    const std::string lhs(Trim(text_.substr(0, colon)));
    const size_t cross = lhs.find(" x ");
    if (cross != std::string::npos) {
      chain.columns = {std::string(Trim(std::string_view(lhs).substr(0, cross))),
                       std::string(Trim(std::string_view(lhs).substr(cross + 3)))};
    } else {
      chain.columns = {lhs};
    }
    for (const auto& c : chain.columns) {
      if (c.empty()) throw Fail(0, "a column name is empty");
    }
    size_t at = colon + 1;
    for (const auto& piece : Split(text_.substr(colon + 1), '|')) {
      if (Trim(piece).empty()) throw Fail(at, "an empty transform");
      chain.steps.push_back(Step(text_.substr(at, piece.size()), at));
      at += piece.size() + 1;
    }
    Check(chain);
    return chain;
  }

 private:
  void Check(const FeatureChain& chain) const {
    const auto& steps = chain.steps;
    const size_t last = steps.size() - 1;
    const bool two = chain.columns.size() == 2;
    if (two != (steps[last].op == TransformOp::kCross)) {
      throw Fail(0, two ? "two columns (\"a x b\") need cross(S) as their only transform"
                        : "cross(S) needs two columns: \"<a> x <b>: cross(S)\"");
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      const TransformOp op = steps[i].op;
      const bool ends_sparse = op == TransformOp::kBucketize || op == TransformOp::kHash ||
                               op == TransformOp::kCross ||
                               (op == TransformOp::kCast && chain.kind == FeatureKind::kSparse);
      if (chain.kind == FeatureKind::kDense && ends_sparse) {
        throw Fail(0, fmt::format("{} makes ids: list this chain under pipeline.sparse",
                                  TransformOpName(op)));
      }
      if (chain.kind == FeatureKind::kSparse && i == last && !ends_sparse) {
        throw Fail(0, "a sparse chain ends in bucketize(N), hash(S), cross(S) or cast");
      }
      if (chain.kind == FeatureKind::kSparse && i < last &&
          (!IsValueOp(op) || steps[last].op != TransformOp::kBucketize)) {
        throw Fail(0, fmt::format("{} cannot stand before {} (only bucketize follows value "
                                  "transforms)",
                                  TransformOpName(op), TransformOpName(steps[last].op)));
      }
      if (op == TransformOp::kImpute && steps[i].flag && chain.kind == FeatureKind::kSparse) {
        throw Fail(0, "impute(..., flag) adds a dense feature: use it under pipeline.dense");
      }
      if (op == TransformOp::kImpute &&
          std::count_if(steps.begin(), steps.end(),
                        [](const TransformStep& s) { return s.op == TransformOp::kImpute; }) > 1) {
        throw Fail(0, "impute appears twice");
      }
    }
  }

  std::string_view text_;
  std::string field_;
};

// The value distribution at a point of a chain: present values only.
struct Sketch {
  std::vector<double> edges;  // kQuantileEdges quantiles, ascending
  double mean = 0, std = 0;
  double min = 0, max = 0;
  bool exact = true;  // mean/std are the manifest's, not estimates

  void Map(double (*f)(double, const TransformStep&), const TransformStep& s) {
    for (double& e : edges) e = f(e, s);
    min = f(min, s);
    max = f(max, s);
    exact = false;
    Estimate();
  }

  // Mean and std of the piecewise-uniform distribution between edges.
  void Estimate() {
    if (edges.size() < 2) return;
    const double k = static_cast<double>(edges.size() - 1);
    double m = 0, m2 = 0;
    for (size_t i = 0; i + 1 < edges.size(); ++i) {
      const double a = edges[i], b = edges[i + 1];
      m += (a + b) / 2;
      m2 += (a * a + a * b + b * b) / 3;
    }
    mean = m / k;
    std = std::sqrt(std::max(0.0, m2 / k - mean * mean));
  }

  double Quantile(double q) const {
    if (edges.empty()) return 0;
    const double pos = q * static_cast<double>(edges.size() - 1);
    const size_t i = std::min(edges.size() - 2, static_cast<size_t>(pos));
    return edges[i] + (edges[i + 1] - edges[i]) * (pos - static_cast<double>(i));
  }
};

double Slog1p(double x, const TransformStep&) {
  return std::copysign(std::log1p(std::fabs(x)), x);
}
double Clip(double x, const TransformStep& s) {
  return std::min(std::max(x, s.a), s.b);
}
double Standardize(double x, const TransformStep& s) {
  return (x - s.a) * s.b;
}

void ResolveStep(TransformStep& step, Sketch& sketch) {
  switch (step.op) {
    case TransformOp::kImpute:
      if (step.impute_stat == "mean") step.a = sketch.mean;
      if (step.impute_stat == "median") step.a = sketch.Quantile(0.5);
      if (step.impute_stat == "min") step.a = sketch.min;
      if (step.impute_stat == "max") step.a = sketch.max;
      break;
    case TransformOp::kLog1p: sketch.Map(Slog1p, step); break;
    case TransformOp::kClip: sketch.Map(Clip, step); break;
    case TransformOp::kStandardize:
      step.a = sketch.mean;
      step.b = sketch.std > 0 ? 1 / sketch.std : 1;
      sketch.Map(Standardize, step);
      break;
    case TransformOp::kBucketize: {
      step.edges.clear();
      for (uint64_t k = 1; k < step.count; ++k) {
        const auto e = static_cast<float>(sketch.Quantile(double(k) / double(step.count)));
        if (step.edges.empty() || e > step.edges.back()) step.edges.push_back(e);
      }
      break;
    }
    default: break;
  }
}

bool Hashable(DType d) {
  return d == DType::kInt32 || d == DType::kInt64 || d == DType::kUInt8 || d == DType::kBool ||
         d == DType::kString || d == DType::kFloat32 || d == DType::kFloat64;
}

uint64_t Cardinality(const FeatureChain& chain, std::map<std::string, ColumnStats>::const_iterator stats,
                     const Manifest& manifest) {
  const TransformStep& last = chain.steps.back();
  if (last.op == TransformOp::kBucketize) return last.count + 1;
  if (last.op != TransformOp::kCast) return last.count;
  if (stats == manifest.stats.end() || stats->second.min < 0 || stats->second.max > 1e12) {
    throw ConfigError(fmt::format("\"{}\": cast ids must lie in [0, 1e12]; the column's range is "
                                  "unknown or outside it",
                                  chain.text),
                      ErrorWhere{.field = chain.field}, "hash the column instead: hash(S)");
  }
  return static_cast<uint64_t>(stats->second.max) + 1;
}

}  // namespace

const char* TransformOpName(TransformOp op) {
  for (const auto& [name, o] : OpsByName()) {
    if (o == op) return name.c_str();
  }
  return "?";
}

size_t FeatureChain::width() const {
  if (kind == FeatureKind::kSparse) return 1;
  for (const auto& s : steps) {
    if (s.op == TransformOp::kImpute && s.flag) return 2;
  }
  return 1;
}

std::vector<std::string> FeatureChain::OutputNames() const {
  if (columns.size() == 2) return {columns[0] + "_x_" + columns[1]};
  if (steps.back().op == TransformOp::kBucketize) return {columns[0] + "_bucket"};
  std::vector<std::string> names = {columns[0]};
  if (width() == 2) names.push_back(columns[0] + "_missing");
  return names;
}

FeatureChain ParseFeatureChain(std::string_view text, FeatureKind kind, std::string field) {
  return ChainParser(text, std::move(field)).Parse(kind);
}

void ResolveFeatureChain(FeatureChain& chain, const Manifest& manifest, uint64_t seed) {
  std::vector<std::string> names;
  for (const auto& spec : manifest.schema) names.push_back(spec.name);
  for (const auto& column : chain.columns) {
    const auto spec = std::find_if(manifest.schema.begin(), manifest.schema.end(),
                                   [&](const ColumnSpec& s) { return s.name == column; });
    if (spec == manifest.schema.end()) {
      const auto guess = ClosestMatch(column, names);
      throw ConfigError(fmt::format("\"{}\": the dataset has no column \"{}\"", chain.text, column),
                        ErrorWhere{.field = chain.field},
                        guess ? fmt::format("did you mean \"{}\"?", *guess)
                              : fmt::format("columns: {}", Join(names, ", ")));
    }
    const bool hashed =
        chain.steps.back().op == TransformOp::kHash || chain.steps.back().op == TransformOp::kCross;
    if (hashed ? !Hashable(spec->dtype)
               : !(IsNumeric(spec->dtype) || spec->dtype == DType::kBool)) {
      throw ConfigError(
          fmt::format("\"{}\": column \"{}\" is {}, which {} cannot take", chain.text, column,
                      DTypeName(spec->dtype), TransformOpName(chain.steps.back().op)),
          ErrorWhere{.field = chain.field},
          "strings take hash or cross; token columns feed language models");
    }
  }
  Sketch sketch;
  const auto stats = manifest.stats.find(chain.columns[0]);
  if (stats != manifest.stats.end()) {
    sketch.edges = stats->second.quantiles;
    sketch.mean = stats->second.mean;
    sketch.std = stats->second.std;
    sketch.min = stats->second.min;
    sketch.max = stats->second.max;
  }
  // Infinite values (counted by the statistics, not part of them) would
  // reach the model and make every step non-finite unless clip bounds them.
  const bool clipped = std::any_of(chain.steps.begin(), chain.steps.end(),
                                   [](const TransformStep& s) { return s.op == TransformOp::kClip; });
  if (chain.kind == FeatureKind::kDense && stats != manifest.stats.end() &&
      stats->second.infinite > 0 && !clipped) {
    throw ConfigError(
        fmt::format("\"{}\": column \"{}\" holds {} infinite value{} (manifest statistics), "
                    "which this chain would pass to the model",
                    chain.text, chain.columns[0], stats->second.infinite,
                    stats->second.infinite == 1 ? "" : "s"),
        ErrorWhere{.field = chain.field},
        fmt::format("bound them: end the chain with clip(lo, hi), e.g. \"{} | clip({}, {})\"",
                    chain.text, stats->second.min, stats->second.max));
  }
  for (auto& step : chain.steps) {
    step.seed = seed;
    ResolveStep(step, sketch);
  }
  if (chain.kind == FeatureKind::kSparse) chain.cardinality = Cardinality(chain, stats, manifest);
}

}  // namespace topspin
