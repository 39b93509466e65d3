#include "plan/lbfgs.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <vector>

namespace topspin {
namespace {

double Dot(const LbfgsPoint& a, const LbfgsPoint& b) {
  double s = 0;
  for (size_t i = 0; i < kLbfgsDims; ++i) s += a[i] * b[i];
  return s;
}

double MaxAbs(const LbfgsPoint& a) {
  double m = 0;
  for (const double v : a) m = std::max(m, std::abs(v));
  return m;
}

struct Pair {
  LbfgsPoint s, y;  // step taken and the change of the gradient
  double rho;       // 1 / (y . s)
};

// -H grad by the two-loop recursion, H the inverse-Hessian estimate.
LbfgsPoint Direction(const std::deque<Pair>& pairs, const LbfgsPoint& grad) {
  LbfgsPoint q = grad;
  std::vector<double> alpha(pairs.size());
  for (size_t k = pairs.size(); k-- > 0;) {
    alpha[k] = pairs[k].rho * Dot(pairs[k].s, q);
    for (size_t i = 0; i < kLbfgsDims; ++i) q[i] -= alpha[k] * pairs[k].y[i];
  }
  if (!pairs.empty()) {
    const Pair& last = pairs.back();
    const double gamma = Dot(last.s, last.y) / Dot(last.y, last.y);
    for (double& v : q) v *= gamma;
  }
  for (size_t k = 0; k < pairs.size(); ++k) {
    const double beta = pairs[k].rho * Dot(pairs[k].y, q);
    for (size_t i = 0; i < kLbfgsDims; ++i) q[i] += pairs[k].s[i] * (alpha[k] - beta);
  }
  for (double& v : q) v = -v;
  return q;
}

}  // namespace

LbfgsResult MinimizeLbfgs(const LbfgsObjective& f, LbfgsPoint start, const LbfgsOptions& options) {
  LbfgsPoint x = start, grad{};
  double value = f(x, grad);
  std::deque<Pair> pairs;
  int it = 0;
  for (; it < options.max_iterations && std::isfinite(value); ++it) {
    if (MaxAbs(grad) < options.gradient_tolerance) break;
    LbfgsPoint dir = Direction(pairs, grad);
    double slope = Dot(dir, grad);
    if (!(slope < 0)) {  // not a descent direction: restart from steepest descent
      pairs.clear();
      for (size_t i = 0; i < kLbfgsDims; ++i) dir[i] = -grad[i];
      slope = Dot(dir, grad);
    }
    // The first step of a fresh memory is kept short: the gradient's scale
    // says nothing of the curvature.
    double step = pairs.empty() ? std::min(1.0, 1.0 / std::max(1e-300, MaxAbs(grad))) : 1.0;
    LbfgsPoint next{}, next_grad{};
    double next_value = 0;
    bool accepted = false;
    for (int tries = 0; tries < 60; ++tries, step *= 0.5) {
      for (size_t i = 0; i < kLbfgsDims; ++i) next[i] = x[i] + step * dir[i];
      next_value = f(next, next_grad);
      if (std::isfinite(next_value) && next_value <= value + 1e-4 * step * slope) {
        accepted = true;
        break;
      }
    }
    if (!accepted) break;
    Pair p{};
    for (size_t i = 0; i < kLbfgsDims; ++i) {
      p.s[i] = next[i] - x[i];
      p.y[i] = next_grad[i] - grad[i];
    }
    const double ys = Dot(p.y, p.s);
    if (ys > 1e-300) {
      p.rho = 1.0 / ys;
      pairs.push_back(p);
      if (static_cast<int>(pairs.size()) > options.memory) pairs.pop_front();
    }
    const double improvement = value - next_value;
    x = next;
    grad = next_grad;
    value = next_value;
    if (improvement <= options.value_tolerance * std::max(1.0, std::abs(value))) break;
  }
  return {.x = x, .value = value, .iterations = it};
}

}  // namespace topspin
