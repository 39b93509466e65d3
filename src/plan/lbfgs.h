// A small L-BFGS minimiser for smooth objectives of a few variables (the
// scaling-law fit's five): two-loop recursion over the last `memory`
// steps, backtracking line search on the Armijo condition. Pure; the
// objective is called from the caller's thread only.
#pragma once

#include <array>
#include <cstddef>
#include <functional>

namespace topspin {

inline constexpr size_t kLbfgsDims = 5;
using LbfgsPoint = std::array<double, kLbfgsDims>;

// f(x, grad): the value at x, with its gradient written to grad.
using LbfgsObjective = std::function<double(const LbfgsPoint& x, LbfgsPoint& grad)>;

struct LbfgsOptions {
  int max_iterations = 1000;
  int memory = 10;
  double gradient_tolerance = 1e-12;  // stop when max |grad_i| is below
  double value_tolerance = 1e-16;     // or when f improves by less than this, relatively
};

struct LbfgsResult {
  LbfgsPoint x{};
  double value = 0;
  int iterations = 0;
};

LbfgsResult MinimizeLbfgs(const LbfgsObjective& f, LbfgsPoint start, const LbfgsOptions& options);

}  // namespace topspin
