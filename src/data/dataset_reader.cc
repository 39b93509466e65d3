// DatasetReader: the manifest, shards opened on first use, and Verify().
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "topspin/core/error.h"
#include "topspin/core/sha256.h"
#include "topspin/data/dataset.h"

namespace topspin {
namespace {

constexpr const char* kReconvertHint = "the dataset is damaged: re-run topspin convert";

// Opens a shard and checks that it is the one the manifest describes.
std::unique_ptr<ShardReader> OpenShard(const fs::path& dir, const Manifest& m, size_t index) {
  const ShardEntry& e = m.shards[index];
  auto reader = std::make_unique<ShardReader>(dir / e.file);
  const auto mismatch = [&](const std::string& what) {
    return DataError(what + " (manifest.json and the shard disagree)",
                     ErrorWhere{.file = (dir / e.file).string()}, kReconvertHint);
  };
  if (reader->schema() != m.schema)
    throw mismatch("the shard's columns differ from the manifest's");
  if (reader->rows() != e.rows) {
    throw mismatch(
        fmt::format("the shard holds {} rows, the manifest records {}", reader->rows(), e.rows));
  }
  if (reader->num_row_groups() != e.row_groups) {
    throw mismatch(fmt::format("the shard holds {} row groups, the manifest records {}",
                               reader->num_row_groups(), e.row_groups));
  }
  return reader;
}

}  // namespace

struct DatasetReader::Impl {
  explicit Impl(fs::path d)
      : dir(std::move(d)),
        manifest(Manifest::Load(dir)),
        opened(std::make_unique<std::once_flag[]>(manifest.shards.size())),
        shards(manifest.shards.size()) {}

  // Verifies shard `index` file-level (size, SHA-256), then chunk by chunk.
  void VerifyShard(const DatasetReader& reader, size_t index) const {
    const ShardEntry& e = manifest.shards[index];
    const fs::path path = dir / e.file;
    const std::string file = path.string();
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    if (ec) {
      throw DataError("the shard listed in manifest.json is missing or unreadable: " + ec.message(),
                      ErrorWhere{.file = file}, kReconvertHint);
    }
    if (size != e.bytes) {
      throw DataError(
          fmt::format("the shard has {} bytes, manifest.json records {}{}", size, e.bytes,
                      size < e.bytes ? " (truncated)" : ""),
          ErrorWhere{.file = file, .byte_offset = static_cast<int64_t>(std::min(size, e.bytes))},
          "the file was cut short or changed (an interrupted copy?): copy it again or re-run "
          "topspin convert");
    }
    const std::string sha = Sha256File(path);
    // On a mismatch, the chunk checks usually say where the damage is.
    reader.shard(index).VerifyAll();
    if (sha != e.sha256) {
      throw DataError(fmt::format("SHA-256 mismatch (manifest.json records {}, the file has {})",
                                  e.sha256, sha),
                      ErrorWhere{.file = file},
                      "the shard or manifest.json was modified after conversion: restore both "
                      "from the original or re-run topspin convert");
    }
  }

  fs::path dir;
  Manifest manifest;
  // shards[i] is written once, under opened[i]; call_once publishes it.
  std::unique_ptr<std::once_flag[]> opened;
  std::vector<std::unique_ptr<ShardReader>> shards;
};

DatasetReader::DatasetReader(std::filesystem::path dir)
    : impl_(std::make_unique<Impl>(std::move(dir))) {}

DatasetReader::~DatasetReader() = default;

const std::filesystem::path& DatasetReader::dir() const {
  return impl_->dir;
}

const Manifest& DatasetReader::manifest() const {
  return impl_->manifest;
}

size_t DatasetReader::num_shards() const {
  return impl_->manifest.shards.size();
}

const ShardReader& DatasetReader::shard(size_t index) const {
  Impl& s = *impl_;
  if (index >= s.shards.size()) {
    throw InternalError(fmt::format("DatasetReader::shard({}): the dataset {} has {} shards", index,
                                    s.dir.string(), s.shards.size()));
  }
  // A failed open throws out of call_once and leaves the flag unset, so a
  // later call retries (and reports the error again).
  std::call_once(s.opened[index], [&] { s.shards[index] = OpenShard(s.dir, s.manifest, index); });
  return *s.shards[index];
}

void DatasetReader::Verify() const {
  for (size_t i = 0; i < num_shards(); ++i) impl_->VerifyShard(*this, i);
}

}  // namespace topspin
