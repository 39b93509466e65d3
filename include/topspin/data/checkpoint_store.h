// Checkpoint store: a directory of training checkpoints, each written so a
// crash at any point leaves no checkpoint that looks complete, each checked
// end to end (SHA-256 of every file) before it is used.
//
// Layout under the store's root:
//   step-N/               a complete checkpoint for step N (decimal, no padding)
//     manifest.json       {"step": N,
//                          "files": {"NAME": {"bytes": n, "sha256": "<64 hex>"}, ...},
//                          "meta": {...}}   the caller's JSON object (config
//                                           hash, RNG states, pipeline state)
//     NAME...             the files the caller added
//   step-N.incomplete/    a checkpoint being written, or left by a crash or an
//                         abandoned writer: never listed, never loaded
//   step-N.deleting/      an old checkpoint being pruned (same)
//
// Writing: Begin(N) creates step-N.incomplete/; AddFile*() writes and fsyncs
// each file and records its size and SHA-256; Commit() writes manifest.json
// last, fsyncs, renames the directory to step-N/ and fsyncs the root. Then
// it prunes: it keeps the keep_last complete checkpoints with the highest
// steps plus the one just committed and the one Begin() was asked to keep (so the newest checkpoint is never
// deleted, even when a run resumed from an older step and committed a lower
// one), deletes the others and every *.incomplete and *.deleting directory.
// A failed prune is logged, not thrown: the commit has succeeded.
//
// One writer per root at a time (no cross-process locking). Reading may run
// alongside writing. All errors are topspin::Error naming the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace topspin {

struct CheckpointStoreOptions {
  size_t keep_last = 3;  // complete checkpoints kept after a commit; >= 1
};

// A complete checkpoint directory, as List() finds it (not yet verified).
struct CheckpointEntry {
  uint64_t step = 0;
  std::filesystem::path dir;  // ROOT/step-N
};

struct CheckpointFile {
  uint64_t bytes = 0;
  std::string sha256;  // lowercase hex, as sha256sum prints it
};

// A checkpoint whose manifest parsed and whose files matched their sizes and
// SHA-256 digests when it was loaded (or that was just committed).
struct Checkpoint {
  uint64_t step = 0;
  std::filesystem::path dir;
  std::map<std::string, CheckpointFile> files;  // by file name
  std::string meta_json;                        // the "meta" object, compact JSON

  std::filesystem::path FilePath(const std::string& name) const { return dir / name; }
};

// Builds one checkpoint (CheckpointStore::Begin). Move-only; not
// thread-safe. Destroying it without Commit() leaves step-N.incomplete/
// behind; it is never listed and the next successful commit removes it.
class CheckpointWriter {
 public:
  ~CheckpointWriter();
  CheckpointWriter(CheckpointWriter&&) noexcept;
  CheckpointWriter& operator=(CheckpointWriter&&) noexcept;

  uint64_t step() const;
  // The step-N.incomplete directory the files go to.
  const std::filesystem::path& dir() const;

  // File names: non-empty, no '/', not starting with '.', not manifest.json,
  // each added once (Error{kInternal} otherwise). The file is fsynced.
  void AddFile(const std::string& name, std::span<const std::byte> bytes);
  void AddFile(const std::string& name, std::string_view bytes);
  // `write` creates the file at the path it is given (e.g. WriteSafetensors);
  // it is then fsynced and hashed.
  void AddFileWith(const std::string& name,
                   const std::function<void(const std::filesystem::path&)>& write);
  // The manifest's "meta": JSON text of an object (Error{kInternal} if it is
  // not one). Defaults to {}.
  void SetMeta(std::string_view json_object);

  // Writes the manifest, publishes step-N/ and prunes (see the top of this
  // header). Call once.
  Checkpoint Commit();

 private:
  friend class CheckpointStore;
  struct Impl;
  explicit CheckpointWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class CheckpointStore {
 public:
  // The root need not exist yet. Throws Error{kConfig} when keep_last is 0.
  explicit CheckpointStore(std::filesystem::path root, CheckpointStoreOptions options = {});

  const std::filesystem::path& root() const { return root_; }

  // Starts checkpoint `step`: creates step-N.incomplete/ (clearing a stale
  // one). Throws Error{kIo} when step-N/ already exists. The commit's prune
  // also keeps checkpoint `also_keep` (the run's best), whatever its age.
  CheckpointWriter Begin(uint64_t step, std::optional<uint64_t> also_keep = std::nullopt) const;

  // Complete checkpoints, by increasing step (empty when the root is missing).
  std::vector<CheckpointEntry> List() const;

  // Checkpoint `step`, verified: throws Error{kData} naming the file when the
  // manifest does not parse or a file is missing, has the wrong size or the
  // wrong SHA-256; Error{kIo} when it cannot be read.
  Checkpoint Load(uint64_t step) const;

  // The newest checkpoint that Load() accepts. Each newer one that fails is
  // logged as a warning naming the damaged file. nullopt when there is no
  // complete checkpoint; Error{kData} when there are some and every one is
  // damaged (a caller must not start over on top of them).
  std::optional<Checkpoint> LoadLatest() const;

 private:
  std::filesystem::path root_;
  CheckpointStoreOptions options_;
};

}  // namespace topspin
