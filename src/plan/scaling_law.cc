#include "topspin/plan/scaling_law.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "plan/lbfgs.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/rng.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

// theta = (a, b, e, alpha, beta): A = e^a, B = e^b, E = e^e.
enum : size_t { kA, kB, kE, kAlpha, kBeta };

struct LogRun {
  double log_n, log_d, log_loss;
};

double Huber(double r, double delta, double* slope) {
  if (std::abs(r) <= delta) {
    *slope = r;
    return 0.5 * r * r;
  }
  *slope = r > 0 ? delta : -delta;
  return delta * (std::abs(r) - 0.5 * delta);
}

// The summed Huber loss of log L against the law's log prediction, with
// its gradient in theta.
double Objective(const std::vector<LogRun>& runs, double delta, const LbfgsPoint& t,
                 LbfgsPoint& grad) {
  grad.fill(0);
  double total = 0;
  for (const LogRun& r : runs) {
    const double u = t[kA] - t[kAlpha] * r.log_n;
    const double v = t[kB] - t[kBeta] * r.log_d;
    const double w = t[kE];
    const double top = std::max({u, v, w});
    const double eu = std::exp(u - top), ev = std::exp(v - top), ew = std::exp(w - top);
    const double sum = eu + ev + ew;
    const double predicted = top + std::log(sum);
    double slope = 0;
    total += Huber(predicted - r.log_loss, delta, &slope);
    const double pu = slope * eu / sum, pv = slope * ev / sum, pw = slope * ew / sum;
    grad[kA] += pu;
    grad[kAlpha] -= pu * r.log_n;
    grad[kB] += pv;
    grad[kBeta] -= pv * r.log_d;
    grad[kE] += pw;
  }
  return total;
}

LbfgsResult FitFrom(const std::vector<LogRun>& runs, double delta, const LbfgsPoint& start) {
  const LbfgsObjective f = [&](const LbfgsPoint& t, LbfgsPoint& g) {
    return Objective(runs, delta, t, g);
  };
  return MinimizeLbfgs(f, start, LbfgsOptions{});
}

ScalingLaw LawOf(const LbfgsPoint& t) {
  return {.E = std::exp(t[kE]), .A = std::exp(t[kA]), .B = std::exp(t[kB]),
          .alpha = t[kAlpha], .beta = t[kBeta]};
}

// Every grid point, split over the machine's cores; the best fit wins,
// ties to the earlier grid point, so the result does not depend on the
// thread count.
LbfgsResult BestOfGrid(const std::vector<LogRun>& runs, const ScalingFitOptions& o, int* starts) {
  std::vector<LbfgsPoint> grid;
  for (const double alpha : o.grid_alpha)
    for (const double beta : o.grid_beta)
      for (const double e : o.grid_e)
        for (const double a : o.grid_a)
          for (const double b : o.grid_b) grid.push_back({a, b, e, alpha, beta});
  *starts = static_cast<int>(grid.size());
  std::vector<LbfgsResult> fits(grid.size());
  const size_t wanted = o.threads > 0 ? static_cast<size_t>(o.threads)
                                      : static_cast<size_t>(std::thread::hardware_concurrency());
  const size_t workers = std::clamp<size_t>(wanted, 1, std::max<size_t>(1, grid.size()));
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      for (size_t i = w; i < grid.size(); i += workers) fits[i] = FitFrom(runs, o.huber_delta, grid[i]);
    });
  }
  for (auto& t : threads) t.join();
  size_t best = 0;
  for (size_t i = 1; i < fits.size(); ++i) {
    if (fits[i].value < fits[best].value) best = i;
  }
  return fits[best];
}

Interval Percentiles(std::vector<double> values, double coverage) {
  std::erase_if(values, [](double v) { return !std::isfinite(v); });
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  const auto at = [&](double q) {
    const double pos = q * static_cast<double>(values.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(values.size() - 1, lo + 1);
    return std::lerp(values[lo], values[hi], pos - static_cast<double>(lo));
  };
  const double tail = (1 - coverage) / 2;
  return {.low = at(tail), .high = at(1 - tail)};
}

void Validate(const std::vector<ScalingRun>& runs) {
  if (runs.size() < 5) {
    throw DataError(fmt::format("a scaling-law fit needs at least 5 runs, got {}", runs.size()),
                    {}, "the law has 5 constants: give runs at several model sizes and token counts");
  }
  for (const ScalingRun& r : runs) {
    if (r.parameters > 0 && r.tokens > 0 && r.loss > 0 && std::isfinite(r.parameters) &&
        std::isfinite(r.tokens) && std::isfinite(r.loss)) {
      continue;
    }
    throw DataError(fmt::format("run {}: N, D and loss must be positive numbers, got N={} D={} loss={}",
                                r.source, r.parameters, r.tokens, r.loss),
                    ErrorWhere{.file = r.source}, "drop the run or fix its values");
  }
}

std::string Sig(double v) { return fmt::format("{:.3g}", v); }

}  // namespace

double ScalingLaw::Loss(double parameters, double tokens) const {
  return E + A / std::pow(parameters, alpha) + B / std::pow(tokens, beta);
}

ScalingLaw ChinchillaLaw() { return {.E = 1.69, .A = 406.4, .B = 410.7, .alpha = 0.34, .beta = 0.28}; }

ScalingLaw EpochLaw() { return {.E = 1.82, .A = 482.0, .B = 2085.4, .alpha = 0.348, .beta = 0.366}; }

ComputeOptimalPoint ComputeOptimalFor(const ScalingLaw& law, double compute_flops) {
  if (!(compute_flops > 0) || !std::isfinite(compute_flops)) {
    throw ConfigError(fmt::format("the compute budget must be a positive number of FLOPs, got {}",
                                  compute_flops),
                      ErrorWhere{.field = "compute"}, "pass it like 5.76e23");
  }
  if (!(law.A > 0 && law.B > 0 && law.alpha > 0 && law.beta > 0)) {
    throw ConfigError(fmt::format("the law has no compute-optimal point: A={} B={} alpha={} beta={} "
                                  "(all must be positive)",
                                  law.A, law.B, law.alpha, law.beta),
                      ErrorWhere{.field = "law"},
                      "the fit did not find decreasing N and D terms: add runs (see the ratio advice)");
  }
  const double s = law.alpha + law.beta;
  const double g = std::pow(law.alpha * law.A / (law.beta * law.B), 1.0 / s);
  const double k = compute_flops / 6.0;
  ComputeOptimalPoint p;
  p.compute = compute_flops;
  p.parameters = g * std::pow(k, law.beta / s);
  p.tokens = k / p.parameters;
  p.tokens_per_parameter = p.tokens / p.parameters;
  p.loss = law.Loss(p.parameters, p.tokens);
  return p;
}

std::vector<ScalingRun> ReadScalingCsv(const std::filesystem::path& path) {
  const std::string text = ReadFile(path);
  const std::vector<std::string> lines = Split(text, '\n');
  // The header is the first line that is not blank or a # comment.
  size_t first = 0;
  while (first < lines.size() && (Trim(lines[first]).empty() || Trim(lines[first]).starts_with("#"))) {
    ++first;
  }
  if (first == lines.size()) {
    throw DataError("the CSV is empty", ErrorWhere{.file = path.string()},
                    "give a header line N,D,loss and one line per run");
  }
  const std::vector<std::string> header = Split(lines[first], ',');
  const int64_t header_line = static_cast<int64_t>(first + 1);
  const auto column = [&](std::initializer_list<const char*> names, const char* field) {
    for (size_t i = 0; i < header.size(); ++i) {
      for (const char* n : names) {
        if (Trim(header[i]) == n) return i;
      }
    }
    throw DataError(fmt::format("the header has no {} column", field),
                    ErrorWhere{.file = path.string(), .field = field, .line = header_line},
                    "name the columns N (or parameters), D (or tokens) and loss");
  };
  const size_t cn = column({"N", "parameters", "params"}, "N");
  const size_t cd = column({"D", "tokens"}, "D");
  const size_t cl = column({"loss", "L"}, "loss");
  std::vector<ScalingRun> runs;
  for (size_t i = first + 1; i < lines.size(); ++i) {
    if (Trim(lines[i]).empty() || Trim(lines[i]).starts_with("#")) continue;
    const std::vector<std::string> cells = Split(lines[i], ',');
    const auto value = [&](size_t c, const char* field) {
      const std::string cell = c < cells.size() ? std::string(Trim(cells[c])) : "";
      char* end = nullptr;
      const double v = std::strtod(cell.c_str(), &end);
      if (cell.empty() || end != cell.c_str() + cell.size() || !(v > 0) || !std::isfinite(v)) {
        throw DataError(fmt::format("{} is \"{}\", not a positive number", field, cell),
                        ErrorWhere{.file = path.string(), .field = field,
                                   .line = static_cast<int64_t>(i + 1)},
                        "fix or delete that line");
      }
      return v;
    };
    runs.push_back({.parameters = value(cn, "N"), .tokens = value(cd, "D"), .loss = value(cl, "loss"),
                    .source = fmt::format("{}:{}", path.string(), i + 1)});
  }
  return runs;
}

RatioSpread MeasureRatioSpread(const std::vector<ScalingRun>& runs) {
  RatioSpread s;
  if (runs.empty()) return s;
  std::vector<double> ratios, sizes;
  for (const ScalingRun& r : runs) {
    ratios.push_back(r.tokens / r.parameters);
    sizes.push_back(r.parameters);
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(sizes.begin(), sizes.end());
  s.min_ratio = ratios.front();
  s.max_ratio = ratios.back();
  s.decades = std::log10(s.max_ratio / s.min_ratio);
  s.distinct_sizes = 1;
  for (size_t i = 1; i < sizes.size(); ++i) {
    if (sizes[i] > 1.1 * sizes[i - 1]) ++s.distinct_sizes;
  }
  s.narrow = s.decades < kMinRatioDecades || s.distinct_sizes < 2;
  if (!s.narrow) return s;
  // Three ratios a 16x band apart around the runs' median, at the smallest
  // and largest sizes (a 4x larger size when there is one only).
  const double median = ratios[ratios.size() / 2];
  const double small = sizes.front();
  const double large = s.distinct_sizes < 2 ? 4 * sizes.back() : sizes.back();
  s.advice = fmt::format(
      "the runs span {:.2f} decades of tokens per parameter ({} to {}) over {} model size{}: "
      "the fit cannot tell the N term from the D term, so its constants and N*/D* are not "
      "determined by the data. Add runs at N = {} and N = {}, each at D = N x {}, {} and {} "
      "(3 ratios per size, a 16x band): 6 runs, fewer where you have them already",
      s.decades, Sig(s.min_ratio), Sig(s.max_ratio), s.distinct_sizes,
      s.distinct_sizes == 1 ? "" : "s", Sig(small), Sig(large), Sig(median / 4), Sig(median),
      Sig(median * 4));
  return s;
}

ScalingFit FitScalingLaw(const std::vector<ScalingRun>& runs, const ScalingFitOptions& o) {
  Validate(runs);
  std::vector<LogRun> logs;
  for (const ScalingRun& r : runs) {
    logs.push_back({std::log(r.parameters), std::log(r.tokens), std::log(r.loss)});
  }
  ScalingFit fit;
  const LbfgsResult best = BestOfGrid(logs, o, &fit.starts);
  fit.law = LawOf(best.x);
  fit.objective = best.value;
  double sq = 0;
  for (const ScalingRun& r : runs) {
    const double e = std::log(fit.law.Loss(r.parameters, r.tokens)) - std::log(r.loss);
    sq += e * e;
  }
  fit.rms_log_error = std::sqrt(sq / static_cast<double>(runs.size()));
  fit.spread = MeasureRatioSpread(runs);
  const bool has_optimum = fit.law.alpha > 0 && fit.law.beta > 0;
  if (o.compute > 0 && has_optimum) fit.optimal = ComputeOptimalFor(fit.law, o.compute);

  // Bootstrap: refit resampled runs from the full fit.
  std::vector<std::vector<double>> draws(8);
  PhiloxStream rng(o.seed, /*stream=*/0x5ca11e);
  for (int k = 0; k < o.bootstrap; ++k) {
    std::vector<LogRun> sample;
    for (size_t i = 0; i < logs.size(); ++i) sample.push_back(logs[rng.NextBelow(logs.size())]);
    const ScalingLaw law = LawOf(FitFrom(sample, o.huber_delta, best.x).x);
    const double v[5] = {law.E, law.A, law.B, law.alpha, law.beta};
    for (int j = 0; j < 5; ++j) draws[j].push_back(v[j]);
    if (o.compute > 0 && law.alpha > 0 && law.beta > 0) {
      const ComputeOptimalPoint p = ComputeOptimalFor(law, o.compute);
      draws[5].push_back(p.parameters);
      draws[6].push_back(p.tokens);
      draws[7].push_back(p.tokens_per_parameter);
    }
  }
  fit.bootstrap = o.bootstrap;
  if (o.bootstrap > 0) {
    fit.E = Percentiles(draws[0], o.interval);
    fit.A = Percentiles(draws[1], o.interval);
    fit.B = Percentiles(draws[2], o.interval);
    fit.alpha = Percentiles(draws[3], o.interval);
    fit.beta = Percentiles(draws[4], o.interval);
    fit.optimal_parameters = Percentiles(draws[5], o.interval);
    fit.optimal_tokens = Percentiles(draws[6], o.interval);
    fit.optimal_tokens_per_parameter = Percentiles(draws[7], o.interval);
  }

  if (fit.spread.narrow) fit.warnings.push_back(fit.spread.advice);
  if (!has_optimum) {
    fit.warnings.push_back(fmt::format(
        "the fit has alpha = {:.3f}, beta = {:.3f}: a term that does not fall with scale, so "
        "there is no compute-optimal point; the runs do not cover enough of N and D",
        fit.law.alpha, fit.law.beta));
  }
  double lowest = runs.front().loss;
  for (const ScalingRun& r : runs) lowest = std::min(lowest, r.loss);
  if (fit.law.E < 1e-3 * lowest) {
    fit.warnings.push_back(fmt::format(
        "E fell to {:.3g}: the runs show no loss floor (their loss still falls as fast with N or D "
        "as a power law allows), so the predicted loss far beyond them is too low; runs at larger "
        "N and D pin E down",
        fit.law.E));
  }
  if (runs.size() < 10) {
    fit.warnings.push_back(fmt::format(
        "{} runs for 5 constants: the intervals are wide and the fit rests on every run", runs.size()));
  }
  if (o.compute > 0) {
    double largest = 0;
    for (const ScalingRun& r : runs) largest = std::max(largest, 6 * r.parameters * r.tokens);
    if (o.compute > 1e3 * largest) {
      fit.warnings.push_back(fmt::format(
          "the budget {:.3g} FLOPs is {:.0f}x the largest run's ({:.3g}): an extrapolation of "
          "over 3 decades, trust the interval more than the point",
          o.compute, o.compute / largest, largest));
    }
  }
  return fit;
}

}  // namespace topspin
