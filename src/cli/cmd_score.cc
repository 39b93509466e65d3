// topspin score RUN_DIR|CHECKPOINT --data DIR --out FILE.csv [--config FILE]
// [--set k=v]...: the ranker's score of every document of a dataset
// (topspin/train/ranker_trainer.h ScoreRanker), one CSV line per document
// in dataset order: the group value, the dataset row, the label (when the
// data has one) and the score. The loader transforms batches on
// pipeline.threads while the model scores the previous one; the file is
// written atomically (an existing FILE is replaced only by a complete one).
#include <filesystem>

#include <fmt/format.h>

#include "cli/commands.h"
#include "topspin/core/config_schema.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"
#include "topspin/data/dataset.h"

#ifdef TOPSPIN_HAVE_TORCH
#include "topspin/train/ranker_trainer.h"
#endif

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

struct ScoreArgs {
  std::string checkpoint;
  std::string data;
  std::string out;
  std::string config;
  std::vector<std::string> overrides;
  std::string which = "best";
};

// A CSV field: quoted when it holds a comma, quote or line break.
void AppendCsvField(std::string& out, std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) {
    out += text;
    return;
  }
  out += '"';
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

// The group column of a dataset, row by row in dataset order: the value
// each scored document is written with.
class GroupCursor {
 public:
  explicit GroupCursor(const fs::path& dir) : reader_(dir) {
    name_ = reader_.manifest().group_column;
  }
  const std::string& name() const { return name_; }

  // Appends the next row's group value to `out`; returns its dataset row.
  uint64_t Next(std::string& out) {
    while (index_ >= column_.size()) Advance();
    if (!column_.IsValid(index_)) {
      // empty field: a null group
    } else if (column_.dtype() == DType::kString) {
      AppendCsvField(out, column_.StringAt(index_));
    } else if (column_.dtype() == DType::kFloat32 || column_.dtype() == DType::kFloat64) {
      fmt::format_to(std::back_inserter(out), "{}", column_.AsDouble(index_));
    } else {
      fmt::format_to(std::back_inserter(out), "{}", static_cast<int64_t>(column_.AsDouble(index_)));
    }
    ++index_;
    return row_++;
  }

 private:
  void Advance() {
    while (shard_ < reader_.num_shards()) {
      const ShardReader& shard = reader_.shard(shard_);
      if (row_group_ < shard.num_row_groups()) {
        column_ = shard.ReadChunk(row_group_++, shard.ColumnIndex(name_), /*verify=*/true,
                                  std::move(column_));
        index_ = 0;
        return;
      }
      ++shard_;
      row_group_ = 0;
    }
    throw Error(ErrorKind::kInternal, "the scores run past the dataset's last row",
                {.file = reader_.dir().string(), .field = name_});
  }

  DatasetReader reader_;
  std::string name_;
  size_t shard_ = 0, row_group_ = 0, index_ = 0;
  uint64_t row_ = 0;
  Column column_;
};

void RunScore(const ScoreArgs& args) {
#ifdef TOPSPIN_HAVE_TORCH
  const fs::path checkpoint(args.checkpoint), out(args.out);
  CheckCheckpointDir(checkpoint);
  if (out.extension() != ".csv") {
    throw Error(ErrorKind::kUsage,
                fmt::format("cannot tell the format of {}: score writes CSV", out.string()),
                {.field = "--out"}, "name the output FILE.csv");
  }
  const fs::path config_path = args.config.empty() ? RunConfigOf(checkpoint) : fs::path(args.config);
  const Config config = Config::Load(config_path.string(), args.overrides, TopspinSchema());
  const Settings settings = Settings::From(config);
  ApplyProcessPolicy(settings.train.torch_threads);
  SetLogLevel(settings.run.log_level);
  if (settings.model.kind != "ranker") {
    throw Error(ErrorKind::kUsage,
                fmt::format("score is for rankers, and this run's model.kind is {}",
                            settings.model.kind),
                {.file = config_path.string(), .field = "model.kind"},
                "for a GPT use topspin eval (loss, perplexity) or topspin generate");
  }
  GroupCursor groups(args.data);
  AtomicFileWriter file(out);
  std::string buffer;
  bool header = false;
  const auto write = [&](const ScoredBatch& b) {
    if (!header) {
      buffer = groups.name() + ",row,";
      buffer += b.labeled ? "label,score\n" : "score\n";
      header = true;
    }
    for (size_t list = 0; list + 1 < b.offsets.size(); ++list) {
      for (auto d = b.offsets[list]; d < b.offsets[list + 1]; ++d) {
        const uint64_t row = groups.Next(buffer);
        const size_t i = static_cast<size_t>(d);
        if (b.labeled) {
          fmt::format_to(std::back_inserter(buffer), ",{},{},{}\n", row, b.labels[i], b.scores[i]);
        } else {
          fmt::format_to(std::back_inserter(buffer), ",{},{}\n", row, b.scores[i]);
        }
      }
    }
    file.Write(buffer);
    buffer.clear();
  };
  const RankerScoreResult r =
      ScoreRanker(config, checkpoint, args.data, write,
                  args.which == "latest" ? CheckpointChoice::kLatest : CheckpointChoice::kBest);
  file.Commit();
  fmt::print("checkpoint    {} (step {})\n", r.checkpoint.string(), r.step);
  fmt::print("scored        {} documents in {} lists of {} in {:.2f} s ({:.0f} docs/s)\n", r.docs,
             r.lists, args.data, r.seconds, r.seconds > 0 ? double(r.docs) / r.seconds : 0.0);
  fmt::print("wrote         {} ({}, row, {}score)\n", out.string(), groups.name(),
             r.labeled ? "label, " : "");
#else
  (void)args;
  throw Error(ErrorKind::kUsage, "this topspin was built without LibTorch, which scoring needs",
              {}, "run scripts/install-deps.sh (the torch wheel into .venv/) and rebuild");
#endif
}

}  // namespace

void RegisterScore(CLI::App& app) {
  static ScoreArgs args;
  auto* cmd = app.add_subcommand(
      "score", "Write a trained ranker's score of every document of a dataset (CSV)");
  AddCheckpointArgs(cmd, args.checkpoint, args.which);
  cmd->add_option("--data", args.data,
                  "dataset to score: the training data's columns (the label may be absent)")
      ->required();
  cmd->add_option("--out", args.out, "CSV file to write: group, row, label (if any), score")
      ->required();
  cmd->add_option("--config", args.config, "config of the run (default: the run's config.yaml)");
  cmd->add_option("--set", args.overrides, "override a key, e.g. --set pipeline.threads=4")
      ->allow_extra_args(false);
  cmd->callback([] { RunScore(args); });
}

}  // namespace topspin::cli
