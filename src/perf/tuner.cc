#include "topspin/perf/tuner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "topspin/core/hash.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double MeanOf(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

double StdErrOf(const std::vector<double>& v) {
  const size_t n = v.size();
  if (n < 2) return 0;
  const double m = MeanOf(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / double(n - 1) / double(n));
}

double Rse(const TrialOutcome& o) {
  const double m = o.Mean();
  return m > 0 ? o.StdErr() / m : 1.0;
}

// "1.91M/s +- 0.8%"
std::string Rate(const TrialOutcome& o) {
  const double m = o.Mean();
  const std::string v = m >= 1e6 ? fmt::format("{:.3g}M", m / 1e6)
                        : m >= 1e3 ? fmt::format("{:.3g}k", m / 1e3)
                                   : fmt::format("{:.3g}", m);
  return fmt::format("{}/s +- {:.1f}%", v, 100 * Rse(o));
}

// `more` windows of the same setting appended to `into`.
void Merge(TrialOutcome& into, const TrialOutcome& more) {
  into.windows.insert(into.windows.end(), more.windows.begin(), more.windows.end());
  into.signals = more.signals;
  into.seconds += more.seconds;
  into.peak_bytes = std::max(into.peak_bytes, more.peak_bytes);
  into.oom = into.oom || more.oom;
  if (!more.error.empty()) into.error = more.error;
}

auto Key(const TuneKnobs& k) {
  return std::tuple(k.loader_threads, k.prefetch, k.compute_threads, k.pinned, k.micro_batch,
                    k.grad_accum);
}

// The throughput search's state: every setting measured, the best so far.
class Search {
 public:
  Search(TrialRunner& runner, const TuneSpace& space, const TuneOptions& options)
      : runner_(runner), space_(space), options_(options), started_(Clock::now()) {}

  bool TimeLeft() const { return Seconds(started_) < options_.budget_s; }

  // The first setting: windows until its spread is known.
  TrialOutcome Measure(const TuneKnobs& knobs, const std::string& purpose) {
    const TrialOutcome o = MeasureUntilKnown(runner_, knobs, options_, [this] { return TimeLeft(); });
    result_.trials.push_back({.search = "throughput", .purpose = purpose, .knobs = knobs,
                              .outcome = o});
    Remember(knobs, o);
    return o;
  }

  // `candidate` against `best` in turns, one window each, until the verdict
  // is clear (the difference beyond 2 standard errors either way, or too
  // small to matter) or max_windows pairs. True: the candidate is better.
  bool Challenge(const TuneKnobs& best, const TuneKnobs& candidate, const std::string& purpose,
                 TrialOutcome& best_o, TrialOutcome& candidate_o) {
    TrialOutcome b, c;
    std::vector<double> diffs;
    for (int i = 0; i < options_.max_windows; ++i) {
      Merge(b, runner_.Run(best, 1));
      Merge(c, runner_.Run(candidate, 1));
      if (c.oom || b.oom || c.windows.size() != b.windows.size()) break;
      diffs.push_back(c.windows.back() - b.windows.back());
      if (int(diffs.size()) >= options_.min_windows) {
        const double m = MeanOf(diffs), se = StdErrOf(diffs), base = b.Mean();
        if (std::abs(m) > 2 * se || 2 * se < options_.min_gain * base) break;
      }
      if (!TimeLeft()) break;
    }
    const bool better = !c.oom && BeatsNoise(b.windows, c.windows, options_.min_gain);
    result_.trials.push_back({.search = "throughput", .purpose = purpose, .knobs = candidate,
                              .outcome = c, .baseline = b.windows, .against = best,
                              .accepted = better});
    Remember(candidate, c);
    best_o = b;
    candidate_o = c;
    return better;
  }

  bool Tried(const TuneKnobs& k) const { return measured_.count(Key(k)) != 0; }

  // The moves worth trying from `best`, given what limits it.
  std::vector<std::pair<TuneKnobs, std::string>> Moves(const TuneKnobs& best,
                                                       const TrialOutcome& o) const {
    std::vector<std::pair<TuneKnobs, std::string>> moves;
    const auto add = [&](TuneKnobs k, std::string why) {
      if (!Tried(k)) moves.emplace_back(k, std::move(why));
    };
    const double wait = o.signals.data_wait_fraction;
    const std::string limit =
        wait > options_.data_wait_threshold
            ? fmt::format("data wait {:.0f}%: the loader limits", 100 * wait)
            : fmt::format("data wait {:.0f}%: compute limits", 100 * wait);
    TuneKnobs k = best;
    if (wait > options_.data_wait_threshold) {
      if (best.loader_threads < space_.max_loader_threads) {
        k.loader_threads = best.loader_threads + 1;
        add(k, "loader +1 (" + limit + ")");
      }
      k = best;
      if (best.prefetch * 2 <= space_.max_prefetch) {
        k.prefetch = best.prefetch * 2;
        add(k, "prefetch x2 (" + limit + ")");
      }
      k = best;
      if (space_.tune_compute_threads && best.compute_threads > 1) {
        k.compute_threads = best.compute_threads - 1;  // a core for the loader
        add(k, "compute -1 (" + limit + ")");
      }
    } else {
      if (space_.tune_compute_threads && best.compute_threads < space_.max_compute_threads) {
        k.compute_threads = best.compute_threads + 1;
        add(k, "compute +1 (" + limit + ")");
      }
      k = best;
      if (space_.tune_compute_threads && best.compute_threads > 1) {
        k.compute_threads = best.compute_threads - 1;
        add(k, "compute -1 (" + limit + ")");
      }
      k = best;
      if (best.loader_threads > 1) {
        k.loader_threads = best.loader_threads - 1;  // a core for compute
        add(k, "loader -1 (" + limit + ")");
      }
      k = best;
      if (best.prefetch > 1) {
        k.prefetch = best.prefetch / 2;  // memory for nothing, if as fast
        add(k, "prefetch /2 (" + limit + ")");
      }
    }
    if (space_.tune_pinned) {
      k = best;
      k.pinned = !best.pinned;
      add(k, fmt::format("pinned {}", k.pinned ? "on" : "off"));
    }
    return moves;
  }

  // Per knob: the value chosen and what each value tried measured.
  void Explain(const TuneKnobs& best) {
    struct Knob {
      const char* key;
      std::function<std::string(const TuneKnobs&)> value;
    };
    const std::vector<Knob> knobs = {
        {"pipeline.threads", [](const TuneKnobs& k) { return std::to_string(k.loader_threads); }},
        {"pipeline.prefetch", [](const TuneKnobs& k) { return std::to_string(k.prefetch); }},
        {"train.torch_threads",
         [](const TuneKnobs& k) { return std::to_string(k.compute_threads); }},
        {"pipeline.pinned_memory",
         [](const TuneKnobs& k) { return std::string(k.pinned ? "true" : "false"); }},
    };
    const TrialOutcome& chosen = measured_.at(Key(best)).second;
    for (const Knob& knob : knobs) {
      // The trials that changed this knob (alone, or with others: the
      // challenger), each in turns with the best of its time: the paired
      // difference (what was decided on).
      std::vector<std::string> others;
      for (const TrialRecord& t : result_.trials) {
        if (t.baseline.empty() || knob.value(t.knobs) == knob.value(t.against)) continue;
        bool alone = true;
        for (const Knob& other : knobs) {
          if (other.key != knob.key && other.value(t.knobs) != other.value(t.against)) {
            alone = false;
          }
        }
        const double base = MeanOf(t.baseline);
        others.push_back(
            t.outcome.oom ? fmt::format("{} out of memory", knob.value(t.knobs))
                          : fmt::format("{} {:+.1f}% against {}{}", knob.value(t.knobs),
                                        100 * (t.outcome.Mean() / base - 1),
                                        knob.value(t.against),
                                        alone ? "" : " (other knobs changed with it)"));
      }
      std::string why = fmt::format("{}: {}", knob.value(best), Rate(chosen));
      if (others.empty()) {
        why += "; no other value was worth a trial";
      } else {
        why += "; tried " + Join(others, ", ") + ", in turns";
      }
      result_.reasons.emplace_back(knob.key, why);
    }
  }

  ThroughputResult& result() { return result_; }

  void Remember(const TuneKnobs& knobs, const TrialOutcome& o) {
    auto [it, inserted] = measured_.emplace(Key(knobs), std::pair(knobs, o));
    if (!inserted) it->second.second = o;
  }
  double elapsed() const { return Seconds(started_); }

 private:
  TrialRunner& runner_;
  const TuneSpace& space_;
  const TuneOptions& options_;
  Clock::time_point started_;
  std::map<std::tuple<int64_t, int64_t, int64_t, bool, int64_t, int64_t>,
           std::pair<TuneKnobs, TrialOutcome>>
      measured_;
  ThroughputResult result_;
};

}  // namespace

std::string TuneKnobs::Describe() const {
  return fmt::format("loader {}, prefetch {}, compute {}{}, micro-batch {} x {}", loader_threads,
                     prefetch, compute_threads, pinned ? ", pinned" : "", micro_batch, grad_accum);
}

double TrialOutcome::Mean() const { return MeanOf(windows); }

double TrialOutcome::StdErr() const { return StdErrOf(windows); }

TrialOutcome MeasureUntilKnown(TrialRunner& runner, const TuneKnobs& knobs,
                               const TuneOptions& options,
                               const std::function<bool()>& time_left) {
  TrialOutcome o = runner.Run(knobs, options.min_windows);
  while (!o.oom && int(o.windows.size()) < options.max_windows && Rse(o) > options.target_rse &&
         (!time_left || time_left())) {
    Merge(o, runner.Run(knobs, 1));
  }
  return o;
}

bool BeatsNoise(const std::vector<double>& best, const std::vector<double>& candidate,
                double min_gain) {
  const size_t n = std::min(best.size(), candidate.size());
  if (n < 2) return false;
  std::vector<double> diffs;
  for (size_t i = 0; i < n; ++i) diffs.push_back(candidate[i] - best[i]);
  const double m = MeanOf(diffs);
  return m > std::max(2 * StdErrOf(diffs), min_gain * MeanOf(best));
}

ThroughputResult TuneThroughput(TrialRunner& runner, const TuneKnobs& start,
                                const TuneSpace& space, const TuneOptions& options,
                                const std::vector<TuneKnobs>& challengers) {
  Search search(runner, space, options);
  TuneKnobs best = start;
  best.loader_threads = 1;
  best.prefetch = std::min<int64_t>(2, space.max_prefetch);
  if (space.tune_compute_threads) best.compute_threads = space.max_compute_threads;
  ThroughputResult& r = search.result();
  r.start = best;
  TrialOutcome best_o = search.Measure(best, "start low");
  r.start_mean = best_o.Mean();
  r.trials.back().accepted = true;
  bool moved = true;
  while (moved && search.TimeLeft()) {
    moved = false;
    for (const auto& [knobs, why] : search.Moves(best, best_o)) {
      if (!search.TimeLeft()) break;
      TrialOutcome b, c;
      const bool better = search.Challenge(best, knobs, why, b, c);
      search.Remember(best, b);
      if (better) {
        best = knobs;
        best_o = c;
        moved = true;
        break;  // climb from the new best
      }
    }
  }
  for (const TuneKnobs& challenger : challengers) {
    if (challenger == best || !search.TimeLeft()) continue;
    TrialOutcome b, c;
    const bool better = search.Challenge(best, challenger, "challenger (the config's own)", b, c);
    search.Remember(best, b);
    if (better) {
      best = challenger;
      best_o = c;
    }
  }
  r.budget_hit = !search.TimeLeft();
  r.best = best;
  r.best_mean = best_o.Mean();
  r.best_stderr = best_o.StdErr();
  search.Explain(best);
  std::set<std::tuple<int64_t, int64_t, int64_t, bool, int64_t, int64_t>> distinct;
  for (const TrialRecord& t : r.trials) distinct.insert(Key(t.knobs));
  r.distinct_settings = int(distinct.size());
  r.seconds = search.elapsed();
  return std::move(r);
}

// ---- batch size ---------------------------------------------------------------

MemoryModel MemoryModel::Through(int64_t batch_a, double bytes_a, int64_t batch_b,
                                 double bytes_b) {
  MemoryModel m;
  m.per_sample = (bytes_b - bytes_a) / double(batch_b - batch_a);
  m.fixed = bytes_a - m.per_sample * double(batch_a);
  return m;
}

std::optional<int64_t> MemoryModel::LargestUnder(double bytes) const {
  if (per_sample <= 0) return std::nullopt;
  const double b = std::floor((bytes - fixed) / per_sample);
  if (b < 0) return int64_t{0};
  return b > 9e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(b);
}

BatchSearchResult SearchBatch(const std::function<MemoryProbe(int64_t)>& probe,
                              const BatchSearchOptions& options) {
  BatchSearchResult r;
  std::vector<int64_t> allowed = options.allowed;
  std::sort(allowed.begin(), allowed.end());
  allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
  if (allowed.empty() || allowed.front() < 1) {
    r.why = "no batch size is allowed";
    return r;
  }
  const double target = (1 - options.margin) * double(options.limit_bytes);
  // The largest allowed batch <= b (0: none).
  const auto snap = [&](int64_t b) -> int64_t {
    auto it = std::upper_bound(allowed.begin(), allowed.end(), b);
    return it == allowed.begin() ? 0 : *std::prev(it);
  };
  std::map<int64_t, MemoryProbe> seen;
  const auto run = [&](int64_t b) -> const MemoryProbe& {
    MemoryProbe p = probe(b);
    p.batch = b;
    r.probes.push_back(p);
    return seen[b] = p;
  };
  const auto fits = [&](const MemoryProbe& p) { return !p.oom && double(p.peak_bytes) <= target; };
  int64_t first = options.first_probe;
  if (first == 0) {
    first = allowed.front();
    for (int64_t a : allowed) {
      if (a * 16 >= allowed.back()) {
        first = a;
        break;
      }
    }
  }
  first = std::max(snap(first), allowed.front());
  // Downward until one fits (a first probe too large for the limit).
  while (!fits(run(first))) {
    const int64_t smaller = snap(first / 4);
    if (smaller == 0 || smaller >= first) {
      if (first != allowed.front() && !seen.count(allowed.front())) {
        first = allowed.front();
        continue;
      }
      r.why = fmt::format("batch {} needs {} bytes, over {:.0f} ({}% of the limit {})", first,
                          seen[first].peak_bytes, target, int(100 * (1 - options.margin) + 0.5),
                          options.limit_bytes);
      return r;
    }
    first = smaller;
  }
  while (int(r.probes.size()) < options.max_trials) {
    int64_t good = 0, bad = 0;  // the largest that fits, the smallest that does not
    std::vector<const MemoryProbe*> points;  // measured peaks, oom excluded
    for (const auto& [b, p] : seen) {
      if (fits(p)) good = b;
      if (!fits(p) && bad == 0) bad = b;
      if (!p.oom) points.push_back(&p);
    }
    if (good == allowed.back()) break;
    int64_t next = 0;
    if (points.size() >= 2) {
      // Through the two measurements nearest the frontier: the largest two.
      const MemoryProbe& a = *points[points.size() - 2];
      const MemoryProbe& b = *points[points.size() - 1];
      r.model = MemoryModel::Through(a.batch, double(a.peak_bytes), b.batch, double(b.peak_bytes));
      const auto largest = r.model.LargestUnder(target);
      next = largest ? snap(std::min(*largest, allowed.back())) : allowed.back();
    } else {
      next = snap(good * 4);  // a second size to fit the model through
    }
    if (bad != 0 && next >= bad) next = snap((good + bad) / 2);  // the model was refuted here
    if (next <= good && points.size() < 2) {  // no allowed batch up to 4x: the next one
      const auto above = std::upper_bound(allowed.begin(), allowed.end(), good);
      if (above != allowed.end() && (bad == 0 || *above < bad)) next = *above;
    }
    if (next <= good || seen.count(next)) break;
    run(next);
  }
  for (const auto& [b, p] : seen) {
    if (fits(p)) {
      r.batch = b;
      r.peak_bytes = p.peak_bytes;
    }
  }
  r.why = fmt::format("{} trials; peak {} bytes at batch {}, under {:.0f} ({:.0f}% of {})",
                      r.probes.size(), r.peak_bytes, r.batch, target, 100 * (1 - options.margin),
                      options.limit_bytes);
  return r;
}

LightningResult LightningBatchFinder(const std::function<MemoryProbe(int64_t)>& probe,
                                     int64_t start, int64_t max, uint64_t limit_bytes) {
  LightningResult r;
  int64_t b = std::max<int64_t>(1, start), low = 0, high = 0;
  while (r.trials < 64) {
    MemoryProbe p = probe(b);
    p.batch = b;
    r.probes.push_back(p);
    ++r.trials;
    const bool fail = p.oom || p.peak_bytes > limit_bytes;
    if (!fail) {
      low = b;
      if (high == 0) {
        if (b >= max) break;
        b = std::min(b * 2, max);
        continue;
      }
    } else {
      high = b;
    }
    if (high - low <= 1) break;
    b = (low + high) / 2;
  }
  r.batch = low;
  return r;
}

// ---- cache --------------------------------------------------------------------

MachineFingerprint FingerprintMachine(const std::string& accelerator) {
  std::string cpu = "unknown cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = std::string(Trim(line.substr(line.find(':') + 1)));
      break;
    }
  }
  std::string mem = "?";
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("MemTotal:", 0) == 0) {
      // Rounded to GiB: the kernel's reservation moves the last digits.
      const double kb = std::stod(line.substr(9));
      mem = fmt::format("{:.0f} GiB", kb / (1 << 20));
      break;
    }
  }
  MachineFingerprint f;
  f.text = fmt::format("cpu: {}; cores: {}; memory: {}; {}", cpu, sysconf(_SC_NPROCESSORS_ONLN),
                       mem, accelerator);
  f.hash = HexU64(Xxh3(f.text));
  return f;
}

}  // namespace topspin
