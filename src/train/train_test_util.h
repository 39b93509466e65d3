// What the trainer tests read back from a run directory.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topspin/data/checkpoint_store.h"

namespace topspin::testing {

// The SHA-256 of the newest checkpoint's tensors.
inline std::string FinalSha(const std::filesystem::path& run) {
  const auto c = CheckpointStore(run / "checkpoints").LoadLatest();
  EXPECT_TRUE(c.has_value());
  return c ? c->files.at("model.safetensors").sha256 : "";
}

// The "loss" of every training record in metrics.jsonl.
inline std::vector<double> Losses(const std::filesystem::path& run) {
  std::ifstream in(run / "metrics.jsonl");
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

}  // namespace topspin::testing
