#include <charconv>

#include <fmt/format.h>
#include <torch/torch.h>

#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"
#include "topspin/core/strings.h"
#include "topspin/data/safetensors.h"
#include "topspin/train/sparse_state.h"
#include "train/checkpoint_io.h"
#include "train/trainer_core.h"

namespace topspin {
namespace {

namespace fs = std::filesystem;

// A hashed key whose value differs between two CanonicalText()s.
struct KeyDifference {
  std::string key, saved, now;  // "unset" where the key is absent
};

std::vector<KeyDifference> ConfigDifferences(const std::string& saved, const std::string& now) {
  const auto parse = [](const std::string& text) {
    std::map<std::string, std::string> values;
    for (const std::string& line : Split(text, '\n')) {
      const auto eq = line.find('=');
      if (eq != std::string::npos) values[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return values;
  };
  const auto a = parse(saved), b = parse(now);
  std::vector<KeyDifference> out;
  for (const auto& [key, value] : a) {
    const auto it = b.find(key);
    const std::string here = it == b.end() ? "unset" : it->second;
    if (here != value) out.push_back({key, value, here});
  }
  for (const auto& [key, value] : b) {
    if (!a.contains(key)) out.push_back({key, "unset", value});
  }
  return out;
}

// "model.top is 32 in the checkpoint and 64 here; optim.lr ...".
std::string DescribeConfigDifference(const std::vector<KeyDifference>& differences) {
  std::vector<std::string> parts;
  for (const auto& d : differences) {
    parts.push_back(d.saved == "unset" ? fmt::format("{} is new here ({})", d.key, d.now)
                                       : fmt::format("{} is {} in the checkpoint and {} here",
                                                     d.key, d.saved, d.now));
  }
  return Join(parts, "; ");
}

}  // namespace

// Rank 0 evaluates on data.valid and judges the result (train.best,
// train.early_stop); every rank learns the verdict: whether this step is a
// new best (it is checkpointed and kept) and whether to stop early.
//
// Under ZeRO-3 every rank evaluates (the forward gathers each unit, a
// collective), on the same data; rank 0 alone judges and logs.
Trainer::Verdict Trainer::EvaluateAllRanks() {
  Verdict v;
  if (task_->has_validation() && (leader() || dense_->zero3() != nullptr)) {
    std::optional<Evaluation> e;
    {
      const PhaseTimer timer = phases_.Time("eval");
      e = task_->Evaluate(precision_);
    }
    if (leader()) v = Judge(*e);
  }
  if (comm_) {
    auto flags = torch::tensor({double(v.best), double(v.stop)}, torch::kDouble);
    comm_->Broadcast(flags, 0);
    v = {flags[0].item<double>() > 0, flags[1].item<double>() > 0};
  }
  return v;
}

Trainer::Verdict Trainer::Judge(const Evaluation& e) {
  const PhaseTimer timer = phases_.Time("eval");
  result_.valid = e.metrics;
  if (const auto it = e.metrics.find("ndcg@10"); it != e.metrics.end()) {
    result_.valid_ndcg10 = it->second;
  }
  std::map<std::string, double> record;
  for (const auto& [name, m] : e.metrics) record["valid/" + name] = m;
  if (best_.metric == "none") {  // no judging: no best checkpoint, no early stop
    sinks_.Write(step_, record, WallTimeNow());
    spdlog::info("step {}: valid {}", step_, e.summary);
    return {};
  }
  const double value = e.metrics.at(best_.metric);
  Verdict v;
  const bool better = best_.step < 0 ? std::isfinite(value)
                                     : (best_.max ? value > best_.value + best_.min_delta
                                                  : value < best_.value - best_.min_delta);
  if (better) {
    best_.step = step_;
    best_.value = value;
    best_.evals_since = 0;
    v.best = true;
  } else {
    ++best_.evals_since;
    v.stop = best_.patience > 0 && best_.evals_since >= best_.patience;
  }
  if (best_.step >= 0) record["best_step"] = double(best_.step);
  sinks_.Write(step_, record, WallTimeNow());
  spdlog::info("step {}: valid {}{}", step_, e.summary,
               better ? fmt::format(" (best {} so far)", best_.metric)
                      : fmt::format(" (best {} {:.4f} at step {})", best_.metric, best_.value,
                                    best_.step));
  if (v.stop) {
    result_.early_stop = fmt::format(
        "valid {} has not improved by more than {} in {} evaluations (best {:.4f} at step {})",
        best_.metric, best_.min_delta, best_.evals_since, best_.value, best_.step);
  }
  return v;
}

// Every rank calls this at a checkpoint step: sharded state is gathered (a
// collective) so the checkpoint holds the whole state and loads at any
// world size. Rank 0 writes it.
void Trainer::CheckpointAllRanks() {
  NamedTensors state = dense_->Gather();
  if (sparse_) {
    for (auto& t : sparse_->Gather()) state.push_back(std::move(t));
  }
  if (leader()) SaveCheckpoint(state);
}

nlohmann::json Trainer::CheckpointMeta() const {
  const PipelineState ps = task_->LoaderState();
  nlohmann::json meta{
      {"step", step_},
      {"model_kind", settings_.model.kind},
      {"config_hash", config_.Hash()},
      {"config", config_.CanonicalText()},
      {"pipeline", {{"seed", ps.seed}, {"epoch", ps.epoch}, {"next_batch", ps.next_batch}}},
      {"dense_steps", dense_->optimizer_steps()},
      {"skipped_steps", result_.skipped_steps},
      {"bad_in_a_row", bad_in_a_row_}};
  if (!init_from_.empty()) meta["init_from"] = init_from_.string();
  if (best_.step >= 0) {
    meta["best"] = {{"step", best_.step},
                    {"metric", best_.metric},
                    {"value", best_.value},
                    {"evals_since", best_.evals_since}};
  }
  return meta;
}

void Trainer::SaveCheckpoint(const NamedTensors& state) {
  const PhaseTimer timer = phases_.Time("checkpoint");
  // A checkpoint of this step exists when this run resumed from an older
  // one (the newer was damaged, or the run died after writing it): the
  // deterministic rerun replaces it.
  const fs::path existing = store_.root() / fmt::format("step-{}", step_);
  if (fs::exists(existing)) {
    const fs::path doomed = store_.root() / fmt::format("step-{}.deleting", step_);
    fs::remove_all(doomed);
    fs::rename(existing, doomed);
    fs::remove_all(doomed);
  }
  CheckpointWriter w = store_.Begin(
      static_cast<uint64_t>(step_),
      best_.step >= 0 ? std::optional<uint64_t>(uint64_t(best_.step)) : std::nullopt);
  std::vector<SafetensorsTensor> views;
  for (const auto& [name, t] : state) views.push_back(View(name, t));
  w.AddFileWith(kModelFile, [&](const fs::path& path) { WriteSafetensors(path, views); });
  task_->AddCheckpointFiles(w);
  w.SetMeta(CheckpointMeta().dump());
  result_.checkpoint = w.Commit().dir;
  if (best_.step == step_) {
    // The best checkpoint is on disk: eval, score and report find it here.
    WriteFileAtomic(options_.run_dir / kBestFile,
                    nlohmann::json{{"step", best_.step},
                                   {"metric", "valid/" + best_.metric},
                                   {"mode", best_.max ? "max" : "min"},
                                   {"value", best_.value},
                                   {"checkpoint", fmt::format("checkpoints/step-{}", step_)}}
                            .dump(2) +
                        "\n");
  }
}

std::optional<Checkpoint> Trainer::FindCheckpoint() {
  if (options_.resume.empty()) return std::nullopt;
  if (options_.resume == "auto") {
    auto latest = store_.LoadLatest();
    if (!latest) spdlog::info("no checkpoint in {}: starting fresh", store_.root().string());
    return latest;
  }
  return LoadCheckpointDir(options_.resume);
}

// The checkpoint's config differs from this run's: a resume is refused
// unless it is an extension (options_.extend) whose only hashed change is
// a larger train.steps. The schedule is then the extended run's:
// lr(step) over the new train.steps, logged where it differs from the
// rate the old schedule had at this step. Rank 0 rewrites config.yaml so
// later resumes of the run use the extended config.
void Trainer::CheckExtension(const Checkpoint& c, const nlohmann::json& meta) {
  const std::string saved_hash = meta.at("config_hash").get<std::string>();
  const ErrorWhere where{.file = c.dir.string()};
  if (!meta.contains("config")) {
    throw ConfigError(fmt::format("checkpoint {} was written with config hash {}, this run has {}",
                                  c.dir.string(), saved_hash, config_.Hash()),
                      where,
                      "resume with the run's config (its config.yaml); `topspin config hash` "
                      "shows what a config hashes to");
  }
  const auto differences =
      ConfigDifferences(meta.at("config").get<std::string>(), config_.CanonicalText());
  const std::string described = DescribeConfigDifference(differences);
  std::vector<std::string> other;
  int64_t saved_steps = -1;
  for (const auto& d : differences) {
    if (d.key != "train.steps") {
      other.push_back(d.key);
      continue;
    }
    std::from_chars(d.saved.data(), d.saved.data() + d.saved.size(), saved_steps);
  }
  if (!options_.extend) {
    throw ConfigError(
        fmt::format("checkpoint {} was written with config hash {}, this run has {}: {}",
                    c.dir.string(), saved_hash, config_.Hash(), described),
        where,
        other.empty()
            ? "to train a finished run on for more steps, add --extend (the schedule becomes "
              "the one over the new train.steps)"
            : "resume with the run's config (its config.yaml), or start a new run from this "
              "checkpoint's weights with --init-from CHECKPOINT");
  }
  const int64_t steps = settings_.train.steps;
  if (!other.empty()) {
    throw ConfigError(
        fmt::format("--extend changes only train.steps, but {} differ too: {}", Join(other, ", "),
                    described),
        ErrorWhere{.file = c.dir.string(), .field = other.front()},
        "start a new run from this checkpoint's weights with --init-from CHECKPOINT (optimizer "
        "state and schedule start fresh)");
  }
  if (saved_steps < 0 || steps <= saved_steps) {
    throw ConfigError(
        fmt::format("--extend needs a larger train.steps than the checkpoint's run ({}), not {}",
                    saved_steps < 0 ? std::string("unknown") : std::to_string(saved_steps), steps),
        ErrorWhere{.file = c.dir.string(), .field = "train.steps"},
        fmt::format("pass --set train.steps=N with N > {}", std::max<int64_t>(saved_steps, 0)));
  }
  const int64_t at = meta.at("step").get<int64_t>();
  TrainConfig old_train = settings_.train;
  old_train.steps = saved_steps;
  const double old_lr = LrSchedule(settings_.optim, old_train).At(at);
  const double new_lr = schedule_.At(at);
  spdlog::info("extending the run from {} to {} steps at step {}{}", saved_steps, steps, at,
               old_lr == new_lr ? std::string()
                                : fmt::format(": the schedule over {} steps sets lr {:.3g} at this "
                                              "step (the old one had {:.3g})",
                                              steps, new_lr, old_lr));
  if (leader()) WriteFileAtomic(options_.run_dir / "config.yaml", config_.ToYaml());
}

// A new run that starts from a checkpoint's weights: the dense parameters
// and embedding tables are copied (every tensor's shape must match this
// config's model); optimizer state, step, schedule and data order start
// fresh.
void Trainer::InitFrom(const fs::path& path) {
  const Checkpoint c = OpenCheckpoint(path);
  const SafetensorsFile file = SafetensorsFile::Open(c.FilePath(kModelFile));
  dense_->LoadParameters(file);
  if (sparse_) sparse_->LoadParameters(file);
  init_from_ = c.dir;
  spdlog::info("initialised from {} (step {}): its {}; the optimizer state, step and schedule "
               "start fresh",
               c.dir.string(), c.step,
               sparse_ ? "dense parameters and embedding tables" : "parameters");
}

void Trainer::Restore(const Checkpoint& c) {
  const auto meta = nlohmann::json::parse(c.meta_json);
  if (meta.at("config_hash").get<std::string>() != config_.Hash()) CheckExtension(c, meta);
  const SafetensorsFile file = SafetensorsFile::Open(c.FilePath(kModelFile));
  dense_->Load(file);
  if (sparse_) sparse_->Load(file);
  step_ = meta.at("step").get<int64_t>();
  const auto optimizer_steps = meta.at("dense_steps").get<int64_t>();
  dense_->set_optimizer_steps(optimizer_steps);
  if (sparse_) sparse_->set_optimizer_steps(optimizer_steps);
  result_.skipped_steps = meta.at("skipped_steps").get<int64_t>();
  if (meta.contains("best") && meta["best"].value("metric", "") == best_.metric) {
    const auto& b = meta["best"];
    best_.step = b.at("step").get<int64_t>();
    best_.value = b.at("value").is_number() ? b.at("value").get<double>() : NAN;
    best_.evals_since = b.at("evals_since").get<int64_t>();
  }
  bad_in_a_row_ = meta.at("bad_in_a_row").get<int64_t>();
  result_.resumed_from = step_;
  result_.checkpoint = c.dir;  // until this run writes a newer one
  spdlog::info("resumed from {} (step {})", c.dir.string(), step_);
}

}  // namespace topspin
