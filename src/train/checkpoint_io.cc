#include "train/checkpoint_io.h"

#include <charconv>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"
#include "topspin/train/flat_params.h"

namespace topspin {

namespace fs = std::filesystem;

SafetensorsTensor View(const std::string& name, const at::Tensor& t) {
  const auto dtype =
      t.scalar_type() == torch::kLong ? SafetensorsDType::kI64 : SafetensorsDType::kF32;
  std::vector<uint64_t> shape;
  for (int64_t d : t.sizes()) shape.push_back(static_cast<uint64_t>(d));
  return {name, dtype, shape,
          std::span<const std::byte>(static_cast<const std::byte*>(t.data_ptr()), t.nbytes())};
}

void CopyFromCheckpoint(const SafetensorsFile& file, const std::string& name, at::Tensor& t,
                        int64_t offset, int64_t saved_numel) {
  const TensorView* v = file.Find(name);
  const ErrorWhere where{.file = file.path().string(), .field = name};
  constexpr const char* kOtherModel =
      "the checkpoint was written by a different model configuration (model.* or pipeline.* "
      "differ from the run's config.yaml)";
  if (v == nullptr) throw DataError("the checkpoint has no such tensor", where, kOtherModel);
  // Saved whole: the tensor's own shape; a shard is loaded from the flat
  // tensor of all of them.
  std::vector<uint64_t> shape;
  if (saved_numel < 0) {
    for (int64_t d : t.sizes()) shape.push_back(uint64_t(d));
  } else {
    shape = {uint64_t(saved_numel)};
  }
  const SafetensorsDType dtype =
      t.scalar_type() == torch::kLong ? SafetensorsDType::kI64 : SafetensorsDType::kF32;
  if (v->dtype != dtype || v->shape != shape) {
    const auto dims = [](const std::vector<uint64_t>& d) {
      return fmt::format("[{}]", fmt::join(d, ", "));
    };
    throw DataError(fmt::format("the checkpoint holds {} {}, the model needs {} {}",
                                SafetensorsDTypeName(v->dtype), dims(v->shape),
                                SafetensorsDTypeName(dtype), dims(shape)),
                    where, kOtherModel);
  }
  const void* from = v->bytes.data() + offset * t.element_size();
  if (t.device().is_cpu() && t.is_contiguous()) {
    std::memcpy(t.data_ptr(), from, t.nbytes());
  } else {  // through the host: checkpoints load on any device
    torch::NoGradGuard no_grad;
    t.copy_(torch::from_blob(const_cast<void*>(from), t.sizes(), t.options().device(torch::kCPU)));
  }
}

void LoadModuleParameters(const SafetensorsFile& file, torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  if (file.Find("dense.params") != nullptr) {
    FlatParams flat(module);
    CopyFromCheckpoint(file, "dense.params", flat.params());
    return;
  }
  for (auto& p : module.named_parameters()) {
    at::Tensor t = p.value();
    CopyFromCheckpoint(file, "dense." + p.key(), t);
  }
}

Checkpoint LoadCheckpointDir(const fs::path& dir) {
  const std::string name = dir.filename().string();
  uint64_t step = 0;
  const char* digits = name.data() + std::min<size_t>(5, name.size());
  const char* end = name.data() + name.size();
  const auto [stop, ec] = std::from_chars(digits, end, step);
  if (!name.starts_with("step-") || digits == end || ec != std::errc() || stop != end) {
    throw ConfigError(fmt::format("{} is not a checkpoint directory (step-N)", dir.string()),
                      ErrorWhere{.file = dir.string()},
                      "pass a run directory or one of its checkpoints/step-N directories");
  }
  return CheckpointStore(dir.parent_path()).Load(step);
}

Checkpoint OpenCheckpoint(const fs::path& path, CheckpointChoice choice) {
  if (!fs::is_directory(path / "checkpoints")) return LoadCheckpointDir(path);
  const CheckpointStore store(path / "checkpoints");
  if (choice == CheckpointChoice::kBest && fs::exists(path / kBestFile)) {
    try {
      const auto best = nlohmann::json::parse(ReadFile(path / kBestFile));
      const auto step = best.at("step").get<uint64_t>();
      if (fs::is_directory(store.root() / fmt::format("step-{}", step))) return store.Load(step);
      spdlog::warn("{} names step {}, which is gone: using the newest checkpoint",
                   (path / kBestFile).string(), step);
    } catch (const std::exception& e) {
      spdlog::warn("cannot use {} ({}): using the newest checkpoint", (path / kBestFile).string(),
                   e.what());
    }
  }
  auto latest = store.LoadLatest();
  if (!latest) {
    throw ConfigError(fmt::format("run directory {} has no complete checkpoint", path.string()),
                      ErrorWhere{.file = path.string()},
                      "train first, or pass a checkpoints/step-N directory");
  }
  return std::move(*latest);
}

}  // namespace topspin
