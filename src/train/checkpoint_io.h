// Reading and writing the tensors of a training checkpoint
// (data/checkpoint_store.h: step-N directories of safetensors + a manifest).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <ATen/core/Tensor.h>

#include "topspin/data/checkpoint_store.h"
#include "topspin/data/safetensors.h"
#include "topspin/train/ranker_trainer.h"

namespace torch::nn {
class Module;
}

namespace topspin {

// RUN_DIR/best.json: the run's best checkpoint (train.best), rewritten
// whenever a better evaluation is checkpointed.
inline constexpr const char* kBestFile = "best.json";
// The file of every checkpoint that holds its tensors.
inline constexpr const char* kModelFile = "model.safetensors";

// A safetensors view of host tensor `t` (float32 or int64).
SafetensorsTensor View(const std::string& name, const at::Tensor& t);

// Copies checkpoint tensor `name` into the live tensor `t`: elements
// [offset, offset + t.numel()) of a saved tensor of `saved_numel` elements
// (by default the same shape as t). Error{kData} naming the tensor when it
// is missing or its dtype or shape differ; any device.
void CopyFromCheckpoint(const SafetensorsFile& file, const std::string& name, at::Tensor& t,
                        int64_t offset = 0, int64_t saved_numel = -1);

// A model's parameters from a checkpoint (inference): each dense.<name>
// tensor into the module's parameter of that name (or the flat
// dense.params of checkpoints before 2026-12).
void LoadModuleParameters(const SafetensorsFile& file, torch::nn::Module& module);

// A step-N checkpoint directory, loaded and verified.
Checkpoint LoadCheckpointDir(const std::filesystem::path& dir);

// A run directory's best checkpoint (best.json), or its newest when it has
// none, that one is gone or damaged, or `choice` asks for the newest; or a
// step-N directory as it is.
Checkpoint OpenCheckpoint(const std::filesystem::path& path,
                          CheckpointChoice choice = CheckpointChoice::kBest);

}  // namespace topspin
