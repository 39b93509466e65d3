#include "train/task.h"

#include "topspin/core/error.h"

namespace topspin {

std::unique_ptr<Task> MakeTask(const TaskContext& context) {
  const std::string kind = context.config.GetString("model.kind");
  if (kind == "gpt") return MakeGptTask(context);
  if (kind == "ranker") return MakeRankerTask(context);
  throw ConfigError("unknown model.kind " + kind, ErrorWhere{.field = "model.kind"},
                    "use ranker or gpt");
}

std::vector<std::string> TaskMetricNames(const std::string& kind) {
  if (kind == "gpt") return {"loss", "perplexity"};
  return {"ndcg@10", "ndcg@1", "ndcg@3", "ndcg@5", "map@10", "mrr"};
}

}  // namespace topspin
