// Scaling laws for language models: the parametric loss of Hoffmann et
// al. (2022), "Training Compute-Optimal Large Language Models" (Chinchilla),
//   L(N, D) = E + A / N^alpha + B / D^beta
// for N parameters trained on D tokens, its compute-optimal split of a
// budget C = 6 N D, and a fit of its five constants to measured runs.
//
// The fit is Chinchilla's approach 3 as Besiroglu et al. (2024), "Chinchilla
// Scaling: A replication attempt" (Epoch AI), redid it: the Huber loss
// (delta 1e-3) of log L against
//   LSE(a - alpha log N, b - beta log D, e),   A = e^a, B = e^b, E = e^e,
// summed (not averaged) over the runs, minimised by L-BFGS from every point
// of a grid of initialisations, and bootstrap intervals from refits on
// resampled runs. All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace topspin {

struct ScalingLaw {
  double E = 0, A = 0, B = 0, alpha = 0, beta = 0;
  double Loss(double parameters, double tokens) const;
};

// Published fits, for planning without runs of one's own and for tests.
// Hoffmann et al. (2022), eq. 10 (rounded as printed there).
ScalingLaw ChinchillaLaw();
// Besiroglu et al. (2024), Epoch AI's refit of the same data (as rounded
// in their abstract table: E 1.82, A 482.0, B 2085.4, 0.348, 0.366).
ScalingLaw EpochLaw();

// The minimum of law.Loss on the budget 6 N D = compute_flops, in closed
// form: G = (alpha A / (beta B))^(1 / (alpha + beta)),
// N* = G (C / 6)^(beta / (alpha + beta)), D* = (C / 6) / N*.
struct ComputeOptimalPoint {
  double compute = 0;     // FLOPs
  double parameters = 0;  // N*
  double tokens = 0;      // D*
  double tokens_per_parameter = 0;
  double loss = 0;        // L(N*, D*)
};
// compute_flops > 0 and alpha, beta, A, B > 0, else Error{kConfig}.
ComputeOptimalPoint ComputeOptimalFor(const ScalingLaw& law, double compute_flops);

// One measured run: N parameters, D tokens seen, its loss.
struct ScalingRun {
  double parameters = 0;
  double tokens = 0;
  double loss = 0;
  std::string source;  // where it came from ("runs.csv:4", a run directory)
};

// Runs from a CSV whose header names the columns N (or parameters), D (or
// tokens) and loss, in any order; other columns are ignored, and so are
// blank lines and lines starting with # (before the header too). Error{kData}
// naming the file, line and column for a missing column or a value that is
// not a positive number.
std::vector<ScalingRun> ReadScalingCsv(const std::filesystem::path& path);

struct ScalingFitOptions {
  double huber_delta = 1e-3;
  // Refits on runs drawn with replacement, each started from the full
  // fit's constants; 0: no intervals.
  int bootstrap = 200;
  uint64_t seed = 0;
  double interval = 0.90;   // two-sided coverage of the bootstrap intervals
  double compute = 0;       // FLOPs to report the compute-optimal point at (0: none)
  int threads = 0;          // the grid's starts run on this many threads (0: one per core)
  // The initialisation grid (Chinchilla's): every combination of these.
  std::vector<double> grid_alpha = {0, 0.5, 1.0, 1.5, 2.0};
  std::vector<double> grid_beta = {0, 0.5, 1.0, 1.5, 2.0};
  std::vector<double> grid_e = {-1, -0.5, 0, 0.5, 1};
  std::vector<double> grid_a = {0, 5, 10, 15, 20, 25};
  std::vector<double> grid_b = {0, 5, 10, 15, 20, 25};
};

// [low, high] of a bootstrap distribution, at the options' coverage.
struct Interval {
  double low = 0, high = 0;
};

// Is the data able to separate the N and D terms? With every run at about
// the same tokens per parameter, log D is a linear function of log N and
// the fit trades A/N^alpha against B/D^beta freely: the constants, and
// N*/D* far from the runs, are then not determined by the data.
struct RatioSpread {
  double min_ratio = 0, max_ratio = 0;  // tokens per parameter over the runs
  double decades = 0;                   // log10(max / min)
  int distinct_sizes = 0;               // model sizes more than 10% apart
  bool narrow = false;                  // decades < kMinRatioDecades or one size
  std::string advice;                   // what to run to fix it ("" unless narrow)
};
// A band narrower than 1.2 decades (16x) is flagged.
inline constexpr double kMinRatioDecades = 1.2;
RatioSpread MeasureRatioSpread(const std::vector<ScalingRun>& runs);

struct ScalingFit {
  ScalingLaw law;
  double objective = 0;     // the summed Huber loss at the fit
  double rms_log_error = 0; // sqrt(mean((log L_pred - log L)^2))
  int starts = 0;           // grid points tried
  int bootstrap = 0;        // refits the intervals come from
  Interval E, A, B, alpha, beta;
  ComputeOptimalPoint optimal;   // at options.compute (zeros when 0)
  Interval optimal_parameters, optimal_tokens, optimal_tokens_per_parameter;
  RatioSpread spread;
  std::vector<std::string> warnings;
};

// Needs at least 5 runs with positive N, D and loss (Error{kData} naming
// the first bad run's source otherwise).
ScalingFit FitScalingLaw(const std::vector<ScalingRun>& runs, const ScalingFitOptions& options);

}  // namespace topspin
