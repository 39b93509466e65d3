#include "topspin/data/checkpoint_store.h"

#include <sstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"
#include "topspin/core/sha256.h"
#include "topspin/data/safetensors.h"

namespace topspin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string OptimizerBytes(uint64_t step) {
  return fmt::format("optimizer state at step {}\n", step) + std::string(100, 'x');
}

// Commits checkpoint `step`: a safetensors model, optimizer bytes and meta.
Checkpoint CommitStep(const CheckpointStore& store, uint64_t step,
                      std::optional<uint64_t> also_keep = std::nullopt) {
  CheckpointWriter writer = store.Begin(step, also_keep);
  const std::vector<float> weights = {1.0f, 2.0f, static_cast<float>(step)};
  writer.AddFileWith("model.safetensors", [&](const fs::path& path) {
    const std::vector<SafetensorsTensor> tensors = {
        {"w", SafetensorsDType::kF32, {3}, std::as_bytes(std::span(weights))}};
    WriteSafetensors(path, tensors, {{"step", std::to_string(step)}});
  });
  writer.AddFile("optimizer.bin", OptimizerBytes(step));
  writer.SetMeta(
      fmt::format(R"({{"config_hash":"9f1c","rng":[{},7],"pipeline":{{"epoch":1}}}})", step));
  return writer.Commit();
}

std::vector<uint64_t> Steps(const CheckpointStore& store) {
  std::vector<uint64_t> steps;
  for (const auto& entry : store.List()) steps.push_back(entry.step);
  return steps;
}

void FlipByte(const fs::path& path, size_t at) {
  std::string bytes = ReadFile(path);
  bytes.at(at) ^= 0x01;
  WriteFileAtomic(path, bytes);
}

TEST(CheckpointStore, CommitWritesFilesAndManifest) {
  testing::TempDir dir;
  const CheckpointStore store(dir / "ckpt");
  const Checkpoint c = CommitStep(store, 5);
  EXPECT_EQ(c.dir, dir / "ckpt" / "step-5");
  EXPECT_FALSE(fs::exists(dir / "ckpt" / "step-5.incomplete"));

  const auto manifest = nlohmann::json::parse(ReadFile(c.dir / "manifest.json"));
  EXPECT_EQ(manifest["step"], 5);
  const std::string optimizer = OptimizerBytes(5);
  EXPECT_EQ(manifest["files"]["optimizer.bin"]["bytes"], optimizer.size());
  EXPECT_EQ(manifest["files"]["optimizer.bin"]["sha256"], Sha256Hex(optimizer));
  EXPECT_EQ(manifest["files"]["model.safetensors"]["sha256"],
            Sha256File(c.FilePath("model.safetensors")));
  EXPECT_EQ(manifest["meta"]["rng"][0], 5);
  EXPECT_EQ(ReadFile(c.FilePath("optimizer.bin")), optimizer);

  const auto model = SafetensorsFile::Open(c.FilePath("model.safetensors"));
  EXPECT_EQ(model.metadata().at("step"), "5");
}

TEST(CheckpointStore, ListsByStepAndLoadsTheLatestWithItsMeta) {
  testing::TempDir dir;
  const CheckpointStore store(dir / "ckpt", {.keep_last = 10});
  EXPECT_TRUE(store.List().empty());
  EXPECT_EQ(store.LoadLatest(), std::nullopt);
  for (uint64_t step : {100, 20, 3}) CommitStep(store, step);
  EXPECT_THAT(Steps(store), ElementsAre(3, 20, 100));  // numeric, not lexical

  const auto latest = store.LoadLatest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 100u);
  EXPECT_EQ(latest->files.size(), 2u);
  EXPECT_EQ(latest->files.at("optimizer.bin").bytes, OptimizerBytes(100).size());
  const auto meta = nlohmann::json::parse(latest->meta_json);
  EXPECT_EQ(meta["config_hash"], "9f1c");
  EXPECT_EQ(meta["rng"], nlohmann::json::array({100, 7}));
  EXPECT_EQ(meta["pipeline"]["epoch"], 1);
  EXPECT_EQ(store.Load(20).step, 20u);
  EXPECT_THROW(store.Load(21), Error);
}

TEST(CheckpointStore, LoadingAMissingStepListsTheOnesThatExist) {
  testing::TempDir dir;
  const CheckpointStore store(dir / "ckpt", {.keep_last = 10});
  for (uint64_t step : {3, 20}) CommitStep(store, step);
  try {
    store.Load(5);
    FAIL() << "loaded a step that was never written";
  } catch (const Error& e) {
    EXPECT_THAT(e.Message(), HasSubstr("no checkpoint for step 5"));
    EXPECT_THAT(e.hint(), HasSubstr("steps 3, 20"));
  }
}

TEST(CheckpointStore, KeepsTheLastK) {
  testing::TempDir dir;
  const CheckpointStore store(dir / "ckpt", {.keep_last = 2});
  CommitStep(store, 1);
  CommitStep(store, 2);
  EXPECT_THAT(Steps(store), ElementsAre(1, 2));
  CommitStep(store, 3);
  EXPECT_THAT(Steps(store), ElementsAre(2, 3));
  CommitStep(store, 4);
  EXPECT_THAT(Steps(store), ElementsAre(3, 4));
  EXPECT_FALSE(fs::exists(dir / "ckpt" / "step-1"));
  EXPECT_FALSE(fs::exists(dir / "ckpt" / "step-2.deleting"));
}

TEST(CheckpointStore, KeepsTheCheckpointItIsAskedToKeepWhateverItsAge) {
  // The run's best (step 1) outlives keep_last = 2 while it stays the best.
  testing::TempDir dir;
  const CheckpointStore store(dir / "ckpt", {.keep_last = 2});
  CommitStep(store, 1);
  CommitStep(store, 2, 1);
  CommitStep(store, 3, 1);
  CommitStep(store, 4, 1);
  EXPECT_THAT(Steps(store), ElementsAre(1, 3, 4));
  // Once another is the best, the old one goes with the next prune.
  CommitStep(store, 5, 4);
  EXPECT_THAT(Steps(store), ElementsAre(4, 5));
}

TEST(CheckpointStore, NeverDeletesTheNewestEvenWhenKWould) {
  // A run that resumed from step 10 commits step 15 while step 20 (from the
  // abandoned run) is still there: with keep_last = 1 the K rule alone would
  // keep only step 20 and delete the checkpoint just written.
  testing::TempDir dir;
  const CheckpointStore store(dir / "ckpt", {.keep_last = 1});
  CommitStep(store, 10);
  CommitStep(store, 20);
  EXPECT_THAT(Steps(store), ElementsAre(20));
  CommitStep(store, 15);
  EXPECT_THAT(Steps(store), ElementsAre(15, 20));
  EXPECT_EQ(store.Load(15).step, 15u);
  CommitStep(store, 30);
  EXPECT_THAT(Steps(store), ElementsAre(30));
}

TEST(CheckpointStore, AnUncommittedWriterIsNeverListed) {
  testing::TempDir dir;
  const CheckpointStore store(dir / "ckpt");
  CommitStep(store, 5);
  {
    CheckpointWriter writer = store.Begin(6);
    writer.AddFile("optimizer.bin", OptimizerBytes(6));
    EXPECT_EQ(writer.dir(), dir / "ckpt" / "step-6.incomplete");
  }  // destroyed without Commit: a crash mid-write
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "step-6.incomplete" / "optimizer.bin"));
  EXPECT_THAT(Steps(store), ElementsAre(5));
  EXPECT_EQ(store.LoadLatest()->step, 5u);
}

TEST(CheckpointStore, ALeftoverIncompleteDirectoryIsNeverListedAndIsCleanedUp) {
  testing::TempDir dir;
  const CheckpointStore store(dir / "ckpt");
  CommitStep(store, 5);
  // A crash after the manifest was written but before the rename.
  fs::copy(dir / "ckpt" / "step-5", dir / "ckpt" / "step-7.incomplete");
  fs::create_directories(dir / "ckpt" / "step-3.deleting");
  fs::create_directories(dir / "ckpt" / "notes");  // not ours: left alone
  EXPECT_THAT(Steps(store), ElementsAre(5));
  EXPECT_EQ(store.LoadLatest()->step, 5u);

  CommitStep(store, 8);
  EXPECT_THAT(Steps(store), ElementsAre(5, 8));
  EXPECT_FALSE(fs::exists(dir / "ckpt" / "step-7.incomplete"));
  EXPECT_FALSE(fs::exists(dir / "ckpt" / "step-3.deleting"));
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "notes"));
}

TEST(CheckpointStore, AFlippedByteFallsBackToThePreviousWithAWarning) {
  testing::TempDir dir;
  const CheckpointStore store(dir / "ckpt");
  CommitStep(store, 1);
  const Checkpoint newest = CommitStep(store, 2);
  FlipByte(newest.FilePath("model.safetensors"), 100);

  testing::LogCapture log;
  const auto loaded = store.LoadLatest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 1u);
  EXPECT_THAT(log.text(), HasSubstr("[warning]"));
  EXPECT_THAT(log.text(), HasSubstr((dir / "ckpt" / "step-2" / "model.safetensors").string()));
  EXPECT_THAT(log.text(), HasSubstr("SHA-256 mismatch"));
  EXPECT_THAT(log.text(), HasSubstr("falling back to " + (dir / "ckpt" / "step-1").string()));
  try {
    store.Load(2);
    ADD_FAILURE() << "a damaged checkpoint loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData);
  }
}

TEST(CheckpointStore, ATruncatedOrMissingFileFallsBack) {
  testing::TempDir dir;
  const CheckpointStore store(dir / "ckpt");
  CommitStep(store, 1);
  CommitStep(store, 2);
  const Checkpoint newest = CommitStep(store, 3);
  WriteFileAtomic(newest.FilePath("optimizer.bin"), "short");
  fs::remove(dir / "ckpt" / "step-2" / "optimizer.bin");

  testing::LogCapture log;
  EXPECT_EQ(store.LoadLatest()->step, 1u);
  EXPECT_THAT(log.text(), HasSubstr("step-3/optimizer.bin: 5 bytes, the manifest says"));
  EXPECT_THAT(log.text(), HasSubstr("step-2/optimizer.bin: a file the manifest lists is missing"));
}

TEST(CheckpointStore, ManifestDamageFallsBack) {
  testing::TempDir dir;
  const CheckpointStore store(dir / "ckpt", {.keep_last = 10});
  for (uint64_t step = 1; step <= 5; ++step) CommitStep(store, step);
  const auto manifest = [&](uint64_t step) {
    return dir / "ckpt" / fmt::format("step-{}", step) / "manifest.json";
  };
  const std::string text = ReadFile(manifest(5));
  WriteFileAtomic(manifest(5), text.substr(0, text.size() / 2));  // truncated
  FlipByte(manifest(4), text.find("\"sha256\"") + 12);            // a digest
  fs::remove(manifest(3));                                        // gone
  auto j = nlohmann::json::parse(ReadFile(manifest(2)));
  j["step"] = 7;  // edited
  WriteFileAtomic(manifest(2), j.dump());

  testing::LogCapture log;
  const auto loaded = store.LoadLatest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 1u);
  const std::string warnings = log.text();
  EXPECT_THAT(warnings, HasSubstr(manifest(5).string() + ": byte"));
  EXPECT_THAT(warnings, HasSubstr("manifest is not valid JSON"));
  EXPECT_THAT(warnings, HasSubstr("step-4/"));
  EXPECT_THAT(warnings, HasSubstr(manifest(3).string() + ": the checkpoint has no manifest.json"));
  EXPECT_THAT(warnings, HasSubstr(manifest(2).string() + ": \"step\": manifest: expected 2"));
}

TEST(CheckpointStore, RefusesWhenEveryCheckpointIsDamaged) {
  testing::TempDir dir;
  const CheckpointStore store(dir / "ckpt");
  const Checkpoint only = CommitStep(store, 1);
  FlipByte(only.FilePath("optimizer.bin"), 0);
  testing::LogCapture log;
  try {
    store.LoadLatest();
    FAIL() << "a store of damaged checkpoints loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kData);
    EXPECT_THAT(e.Message(), HasSubstr("all 1 checkpoint in " + (dir / "ckpt").string() +
                                       " are damaged (newest: "));
    EXPECT_THAT(e.Message(), HasSubstr("optimizer.bin"));
    EXPECT_THAT(e.Message(), HasSubstr("to start fresh, move"));
  }
  EXPECT_THAT(log.text(), HasSubstr("no older checkpoint is left"));
  EXPECT_TRUE(fs::exists(only.FilePath("optimizer.bin")));  // nothing removed
}

TEST(CheckpointStore, RejectsMisuse) {
  testing::TempDir dir;
  EXPECT_THROW(CheckpointStore(dir / "ckpt", {.keep_last = 0}), Error);
  const CheckpointStore store(dir / "ckpt");
  CommitStep(store, 1);
  EXPECT_THROW(store.Begin(1), Error);  // exists
  CheckpointWriter writer = store.Begin(2);
  EXPECT_THROW(writer.AddFile("manifest.json", "x"), Error);
  EXPECT_THROW(writer.AddFile("a/b", "x"), Error);
  EXPECT_THROW(writer.AddFile(".hidden", "x"), Error);
  writer.AddFile("a", "x");
  EXPECT_THROW(writer.AddFile("a", "y"), Error);
  EXPECT_THROW(writer.AddFileWith("b", [](const fs::path&) {}), Error);  // wrote nothing
  EXPECT_THROW(writer.SetMeta("[1, 2]"), Error);
  EXPECT_THROW(writer.SetMeta("{not json"), Error);
  writer.Commit();
  EXPECT_THROW(writer.Commit(), Error);
  EXPECT_THAT(Steps(store), ElementsAre(1, 2));
  EXPECT_EQ(store.Load(2).meta_json, "{}");  // the rejected meta was not kept
}

}  // namespace
}  // namespace topspin
