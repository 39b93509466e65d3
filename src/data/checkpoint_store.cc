// CheckpointStore (topspin/data/checkpoint_store.h): writes checkpoints
// through AtomicDirectory, verifies them against their manifest, prunes old
// ones after each commit.
#include "topspin/data/checkpoint_store.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/log.h"
#include "topspin/core/sha256.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kManifestName = "manifest.json";
constexpr const char* kIncompleteSuffix = ".incomplete";
constexpr const char* kDeletingSuffix = ".deleting";
constexpr const char* kDamagedHint =
    "the checkpoint is damaged (disk error, partial copy or hand edit): load an older one, "
    "or restore this directory from a backup";

std::string StepDirName(uint64_t step) {
  return fmt::format("step-{}", step);
}

// The step of a directory named exactly StepDirName(step) + suffix.
std::optional<uint64_t> ParseStepDirName(std::string_view name, std::string_view suffix = "") {
  constexpr std::string_view kPrefix = "step-";
  if (!name.starts_with(kPrefix) || !name.ends_with(suffix)) return std::nullopt;
  const std::string_view digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - suffix.size());
  uint64_t step = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  if (StepDirName(step) != name.substr(0, name.size() - suffix.size())) return std::nullopt;
  return step;
}

bool IsValidFileName(const std::string& name) {
  return !name.empty() && name[0] != '.' && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos && name != kManifestName;
}

bool IsSha256Hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::vector<fs::path> ListDir(const fs::path& root) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  fs::directory_iterator it(root, ec), end;
  for (; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  if (ec) {
    throw IoError("cannot list checkpoints: " + ec.message(), ErrorWhere{.file = root.string()});
  }
  return out;
}

// ---- manifest ---------------------------------------------------------------

std::string ManifestText(uint64_t step, const std::map<std::string, CheckpointFile>& files,
                         const Json& meta) {
  Json j;
  j["step"] = step;
  j["files"] = Json::object();
  for (const auto& [name, file] : files) {
    j["files"][name] = {{"bytes", file.bytes}, {"sha256", file.sha256}};
  }
  j["meta"] = meta;
  return j.dump(2) + "\n";
}

// Reads and checks one manifest.json; every error names it and the field.
class ManifestReader {
 public:
  explicit ManifestReader(fs::path path) : path_(std::move(path)), file_(path_.string()) {}

  Checkpoint Read(uint64_t step) const {
    const Json j = Parse();
    CheckKeys(j, "", {"step", "files", "meta"});
    if (!j["step"].is_number_unsigned() || j["step"].get<uint64_t>() != step) {
      throw Bad("step",
                fmt::format("expected {} (the directory's step), got {}", step, j["step"].dump()));
    }
    if (!j["meta"].is_object()) throw Bad("meta", "expected an object, got " + j["meta"].dump());
    Checkpoint c{.step = step, .dir = path_.parent_path(), .meta_json = j["meta"].dump()};
    if (!j["files"].is_object()) throw Bad("files", "expected an object");
    for (const auto& [name, entry] : j["files"].items()) c.files[name] = ReadEntry(name, entry);
    return c;
  }

 private:
  [[nodiscard]] Error Bad(const std::string& field, const std::string& what) const {
    return DataError("manifest: " + what, ErrorWhere{.file = file_, .field = field}, kDamagedHint);
  }

  Json Parse() const {
    if (!fs::exists(path_)) {
      throw DataError("the checkpoint has no manifest.json", ErrorWhere{.file = file_},
                      kDamagedHint);
    }
    const std::string text = topspin::ReadFile(path_);
    try {
      return Json::parse(text);
    } catch (const Json::parse_error& e) {
      throw DataError(fmt::format("manifest is not valid JSON: {}", e.what()),
                      ErrorWhere{.file = file_, .byte_offset = static_cast<int64_t>(e.byte)},
                      kDamagedHint);
    } catch (const Json::exception& e) {  // e.g. out_of_range: a number overflows a double
      throw DataError(fmt::format("manifest is not valid JSON: {}", e.what()),
                      ErrorWhere{.file = file_}, kDamagedHint);
    }
  }

  void CheckKeys(const Json& j, const std::string& path,
                 std::initializer_list<const char*> keys) const {
    if (!j.is_object()) throw Bad(path, "expected an object, got " + j.dump());
    for (const auto& [key, value] : j.items()) {
      if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; })) {
        throw Bad(path.empty() ? key : path + "." + key, "unknown field");
      }
    }
    for (const char* key : keys) {
      if (!j.contains(key)) throw Bad(path.empty() ? key : path + "." + key, "missing field");
    }
  }

  CheckpointFile ReadEntry(const std::string& name, const Json& entry) const {
    const std::string field = "files." + name;
    if (!IsValidFileName(name)) throw Bad(field, "not a valid checkpoint file name");
    CheckKeys(entry, field, {"bytes", "sha256"});
    if (!entry["bytes"].is_number_unsigned()) throw Bad(field + ".bytes", "expected a size");
    if (!entry["sha256"].is_string() || !IsSha256Hex(entry["sha256"].get<std::string>())) {
      throw Bad(field + ".sha256", "expected 64 lowercase hex digits");
    }
    return CheckpointFile{.bytes = entry["bytes"].get<uint64_t>(),
                          .sha256 = entry["sha256"].get<std::string>()};
  }

  fs::path path_;
  std::string file_;
};

// Checks one file of a checkpoint against its manifest entry.
void VerifyFile(const fs::path& path, const CheckpointFile& expected) {
  const std::string file = path.string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw DataError("a file the manifest lists is missing", ErrorWhere{.file = file}, kDamagedHint);
  }
  const uint64_t size = fs::file_size(path, ec);
  if (ec) throw IoError("cannot stat: " + ec.message(), ErrorWhere{.file = file});
  if (size != expected.bytes) {
    throw DataError(fmt::format("{} bytes, the manifest says {}", size, expected.bytes),
                    ErrorWhere{.file = file}, kDamagedHint);
  }
  const std::string got = Sha256File(path);
  if (got != expected.sha256) {
    throw DataError(fmt::format("SHA-256 mismatch (expected {}, got {})", expected.sha256, got),
                    ErrorWhere{.file = file}, kDamagedHint);
  }
}

// ---- pruning ----------------------------------------------------------------

// Removes `dir` by renaming it to *.deleting first, so a crash midway leaves
// nothing that looks like a complete checkpoint.
void RemoveCheckpointDir(const fs::path& dir, uint64_t step) {
  const fs::path doomed = dir.parent_path() / (StepDirName(step) + kDeletingSuffix);
  std::error_code ec;
  fs::remove_all(doomed, ec);
  fs::rename(dir, doomed, ec);
  if (ec)
    throw IoError("cannot rename for deletion: " + ec.message(), ErrorWhere{.file = dir.string()});
  FsyncPath(dir.parent_path());
  fs::remove_all(doomed, ec);
  if (ec) throw IoError("cannot delete: " + ec.message(), ErrorWhere{.file = doomed.string()});
}

void RemoveStaleDirs(const fs::path& root) {
  for (const fs::path& path : ListDir(root)) {
    const std::string name = path.filename().string();
    if (ParseStepDirName(name, kIncompleteSuffix) || ParseStepDirName(name, kDeletingSuffix)) {
      std::error_code ec;
      fs::remove_all(path, ec);
      if (ec) throw IoError("cannot delete: " + ec.message(), ErrorWhere{.file = path.string()});
    }
  }
}

// Keeps the `keep_last` highest steps, `committed` and `also_keep`; deletes
// the rest.
void Prune(const CheckpointStore& store, size_t keep_last, uint64_t committed,
           std::optional<uint64_t> also_keep) {
  const auto entries = store.List();
  const size_t keep_from = entries.size() > keep_last ? entries.size() - keep_last : 0;
  for (size_t i = 0; i < keep_from; ++i) {
    if (entries[i].step != committed && entries[i].step != also_keep) {
      RemoveCheckpointDir(entries[i].dir, entries[i].step);
    }
  }
  RemoveStaleDirs(store.root());
}

void WarnPruneFailed(uint64_t step, const fs::path& root, const std::string& why) {
  spdlog::warn("checkpoint step {} is committed, but pruning old checkpoints in {} failed: {}",
               step, root.string(), why);
}

}  // namespace

// ---- CheckpointWriter -----------------------------------------------------------

struct CheckpointWriter::Impl {
  Impl(const CheckpointStore& s, size_t keep, uint64_t st, std::optional<uint64_t> also)
      : store(s), keep_last(keep), step(st), also_keep(also), dir(s.root() / StepDirName(st)) {}

  void CheckNewName(const std::string& name) const {
    if (!IsValidFileName(name) || files.contains(name)) {
      throw InternalError(fmt::format("checkpoint {}: file name \"{}\" is invalid or added twice",
                                      dir.path().string(), name));
    }
  }

  CheckpointStore store;
  size_t keep_last;
  uint64_t step;
  std::optional<uint64_t> also_keep;
  AtomicDirectory dir;
  std::map<std::string, CheckpointFile> files;
  Json meta = Json::object();
  bool committed = false;
};

CheckpointWriter::CheckpointWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointWriter::~CheckpointWriter() = default;
CheckpointWriter::CheckpointWriter(CheckpointWriter&&) noexcept = default;
CheckpointWriter& CheckpointWriter::operator=(CheckpointWriter&&) noexcept = default;

uint64_t CheckpointWriter::step() const {
  return impl_->step;
}
const fs::path& CheckpointWriter::dir() const {
  return impl_->dir.path();
}

void CheckpointWriter::AddFile(const std::string& name, std::span<const std::byte> bytes) {
  AddFile(name, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

void CheckpointWriter::AddFile(const std::string& name, std::string_view bytes) {
  impl_->CheckNewName(name);
  WriteFileAtomic(dir() / name, bytes);  // fsyncs the file
  impl_->files[name] = CheckpointFile{.bytes = bytes.size(), .sha256 = Sha256Hex(bytes)};
}

void CheckpointWriter::AddFileWith(const std::string& name,
                                   const std::function<void(const fs::path&)>& write) {
  impl_->CheckNewName(name);
  const fs::path path = dir() / name;
  write(path);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw InternalError(
        fmt::format("checkpoint {}: the writer of \"{}\" created no file", dir().string(), name));
  }
  FsyncPath(path);
  const uint64_t bytes = fs::file_size(path, ec);
  if (ec) throw IoError("cannot stat: " + ec.message(), ErrorWhere{.file = path.string()});
  impl_->files[name] = CheckpointFile{.bytes = bytes, .sha256 = Sha256File(path)};
}

void CheckpointWriter::SetMeta(std::string_view json_object) {
  Json meta = Json::parse(json_object, nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object()) {
    throw InternalError(fmt::format("checkpoint {}: meta must be a JSON object, got: {}",
                                    dir().string(), json_object));
  }
  impl_->meta = std::move(meta);
}

Checkpoint CheckpointWriter::Commit() {
  Impl& w = *impl_;
  if (w.committed) throw InternalError("CheckpointWriter::Commit twice: " + dir().string());
  WriteFileAtomic(dir() / kManifestName, ManifestText(w.step, w.files, w.meta));
  w.dir.Commit();  // fsyncs every file and the directory, renames, fsyncs the root
  w.committed = true;
  try {
    Prune(w.store, w.keep_last, w.step, w.also_keep);
  } catch (const Error& e) {
    WarnPruneFailed(w.step, w.store.root(), e.Message());
  } catch (const std::exception& e) {
    WarnPruneFailed(w.step, w.store.root(), e.what());
  }
  return Checkpoint{
      .step = w.step, .dir = w.dir.final_path(), .files = w.files, .meta_json = w.meta.dump()};
}

// ---- CheckpointStore --------------------------------------------------------------

CheckpointStore::CheckpointStore(fs::path root, CheckpointStoreOptions options)
    : root_(std::move(root)), options_(options) {
  if (options_.keep_last == 0) {
    throw ConfigError("keep_last must be at least 1", ErrorWhere{.field = "keep_last"},
                      "the newest checkpoint is always kept; set keep_last >= 1");
  }
}

CheckpointWriter CheckpointStore::Begin(uint64_t step, std::optional<uint64_t> also_keep) const {
  const fs::path final_dir = root_ / StepDirName(step);
  if (fs::exists(final_dir)) {
    throw IoError(fmt::format("checkpoint step {} already exists", step),
                  ErrorWhere{.file = final_dir.string()},
                  "a step is checkpointed once: remove the directory to write it again");
  }
  return CheckpointWriter(
      std::make_unique<CheckpointWriter::Impl>(*this, options_.keep_last, step, also_keep));
}

std::vector<CheckpointEntry> CheckpointStore::List() const {
  std::vector<CheckpointEntry> out;
  for (const fs::path& path : ListDir(root_)) {
    const auto step = ParseStepDirName(path.filename().string());
    std::error_code ec;
    if (step && fs::is_directory(path, ec)) out.push_back({*step, path});
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step < b.step; });
  return out;
}

Checkpoint CheckpointStore::Load(uint64_t step) const {
  const fs::path dir = root_ / StepDirName(step);
  if (!fs::is_directory(dir)) {
    std::vector<std::string> steps;
    for (const auto& entry : List()) steps.push_back(std::to_string(entry.step));
    throw IoError(fmt::format("no checkpoint for step {}", step), ErrorWhere{.file = dir.string()},
                  steps.empty() ? fmt::format("{} holds no complete checkpoint", root_.string())
                                : fmt::format("complete checkpoints in {}: steps {}",
                                              root_.string(), Join(steps, ", ")));
  }
  Checkpoint c = ManifestReader(dir / kManifestName).Read(step);
  for (const auto& [name, file] : c.files) VerifyFile(c.FilePath(name), file);
  return c;
}

std::optional<Checkpoint> CheckpointStore::LoadLatest() const {
  const auto entries = List();
  std::optional<Error> newest_failure;
  for (size_t i = entries.size(); i-- > 0;) {
    try {
      return Load(entries[i].step);
    } catch (const Error& e) {
      spdlog::warn("checkpoint {} is damaged, {}: {}", entries[i].dir.string(),
                   i > 0 ? "falling back to " + entries[i - 1].dir.string()
                         : std::string("and no older checkpoint is left"),
                   e.Message());
      if (!newest_failure) newest_failure = e;
    }
  }
  if (!newest_failure) return std::nullopt;
  // Starting over would overwrite them, and with them what a user may still
  // recover: never implicitly.
  throw DataError(
      fmt::format("all {} checkpoint{} in {} are damaged (newest: {})", entries.size(),
                  entries.size() == 1 ? "" : "s", root_.string(), newest_failure->Message()),
      {.file = root_.string()},
      fmt::format("to start fresh, move {} aside (it is kept for inspection) and run again; to "
                  "resume, restore a checkpoint from a copy",
                  root_.string()));
}

}  // namespace topspin
