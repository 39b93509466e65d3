#include "train/task.h"

#include <fmt/format.h>

#include "topspin/core/error.h"

namespace topspin {

std::unique_ptr<Task> MakeTask(const TaskContext& context) {
  const std::string& kind = context.settings.model.kind;
  if (kind == "gpt") return MakeGptTask(context);
  if (kind == "ranker") return MakeRankerTask(context);
  throw ConfigError("unknown model.kind " + kind, ErrorWhere{.field = "model.kind"},
                    "use ranker or gpt");
}

std::vector<std::string> TaskMetricNames(const std::string& kind) {
  if (kind == "gpt") return {"loss", "perplexity"};
  return {"ndcg@10", "ndcg@1", "ndcg@3", "ndcg@5", "map@10", "mrr"};
}

namespace {

// The keys only one model.kind reads.
bool RankerOnly(const std::string& key) {
  static const char* const kKeys[] = {
      "model.embedding_dim", "model.bottom", "model.top",     "model.interaction",
      "model.cross_layers",  "model.loss",   "optim.sparse",  "optim.sparse_lr",
      "pipeline.dense",      "pipeline.sparse"};
  for (const char* k : kKeys) {
    if (key == k) return true;
  }
  return false;
}

bool GptOnly(const std::string& key) {
  return key.starts_with("model.gpt.") || key == "dist.wrap_blocks";
}

}  // namespace

void CheckKeysApply(const Config& config) {
  const std::string& kind = config.GetString("model.kind");
  for (const FieldSpec& f : config.schema().fields()) {
    const bool other = kind == "gpt" ? RankerOnly(f.key) : GptOnly(f.key);
    const ValueOrigin& origin = config.Origin(f.key);
    if (!other || origin.kind == ValueOrigin::Kind::kDefault) continue;
    ErrorWhere where{.field = f.key};
    if (origin.kind == ValueOrigin::Kind::kFile) {
      where.file = origin.file;
      where.line = origin.line;
    } else {
      where.file = "--set " + origin.text;
    }
    throw ConfigError(
        fmt::format("{} is set, but model.kind {} does not read it", f.key, kind), where,
        fmt::format("remove it, or set model.kind {} (`topspin config schema` says which keys "
                    "each kind reads)",
                    kind == "gpt" ? "ranker" : "gpt"));
  }
}

}  // namespace topspin
