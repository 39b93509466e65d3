// DatasetWriter: rows -> row groups (RowGroupAssembler) -> shards written
// and summarised on a thread pool -> manifest.json -> atomic rename.
//
// Determinism: where row groups and shards end depends only on the rows and
// the options; each shard is written by one task, its per-column statistics
// are built in row order by other tasks, and results are collected in shard
// order. So the bytes of every file are the same for any thread count.
#include <algorithm>
#include <atomic>
#include <deque>
#include <future>
#include <memory>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/row_group_assembler.h"
#include "data/shard_chunk.h"
#include "topspin/build_info.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/sha256.h"
#include "topspin/core/thread_pool.h"
#include "topspin/data/dataset.h"

namespace topspin {
namespace {

constexpr int kMaxZstdLevel = 19;
constexpr uint64_t kFreeSpaceMargin = uint64_t{1} << 20;  // footer, headers, manifest

// Everything a task needs to write one shard; shared by its tasks, owned by
// none of the writer's members.
struct ShardJob {
  size_t index = 0;
  fs::path path;
  std::string file;  // relative to the dataset directory
  std::vector<ColumnSpec> schema;
  ShardWriterOptions options;
  std::vector<ClosedRowGroup> row_groups;
  uint64_t groups = 0;
  uint64_t raw_bytes = 0;
};

// The shards a writer has submitted and not yet collected, oldest first.
struct InFlightShard {
  std::shared_ptr<const ShardJob> job;
  std::future<ShardEntry> entry;
  std::vector<std::future<ColumnStatsBuilder>> stats;  // one per column
};

std::string ShardFileName(size_t index) {
  return fmt::format("shard-{:05d}{}", index, kShardExtension);
}

// Writes the shard and hashes the file as it landed on disk. Returns an
// empty entry without writing when `cancelled` (the writer is being
// destroyed; nobody reads the result).
ShardEntry WriteShard(const ShardJob& job, const std::atomic<bool>& cancelled) {
  if (cancelled) return {};
  ShardWriter writer(job.path, job.schema, job.options);
  for (const auto& group : job.row_groups) {
    if (cancelled) return {};  // the writer's destructor removes its temporary file
    writer.WriteRowGroup(group.rows);
  }
  const ShardSummary summary = writer.Finish();
  ShardEntry entry{.file = job.file,
                   .rows = summary.rows,
                   .groups = job.groups,
                   .row_groups = summary.row_groups,
                   .bytes = summary.file_bytes,
                   .raw_bytes = summary.raw_bytes,
                   .sha256 = Sha256File(job.path)};
  if (!summary.sha256.empty() && summary.sha256 != entry.sha256) {
    throw IoError(fmt::format("the shard changed on disk while it was written (SHA-256 {} "
                              "written, {} read back)",
                              summary.sha256, entry.sha256),
                  ErrorWhere{.file = job.path.string()},
                  "check the disk and that no other process writes to the output directory");
  }
  return entry;
}

ColumnStatsBuilder ColumnStatsOf(const ShardJob& job, size_t column) {
  ColumnStatsBuilder builder;
  for (const auto& group : job.row_groups) builder.Add(group.rows.columns[column], group.row_ids);
  return builder;
}

int FindColumn(const std::vector<ColumnSpec>& schema, const std::string& name) {
  for (size_t i = 0; i < schema.size(); ++i) {
    if (schema[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

void CheckRoleColumn(const DatasetWriterOptions& o, const std::string& name, const char* field) {
  if (name.empty() || FindColumn(o.schema, name) >= 0) return;
  std::vector<std::string> names;
  for (const auto& c : o.schema) names.push_back(c.name);
  throw ConfigError(fmt::format("{} \"{}\" is not a column of the data", field, name),
                    ErrorWhere{.field = field},
                    fmt::format("the columns are: {}", fmt::join(names, ", ")));
}

DatasetWriterOptions CheckedOptions(DatasetWriterOptions o) {
  if (o.schema.empty()) throw ConfigError("a dataset needs at least one column");
  std::set<std::string> names;
  for (const auto& c : o.schema) {
    if (c.name.empty() || !names.insert(c.name).second) {
      throw ConfigError(fmt::format("column names must be unique and non-empty (\"{}\")", c.name));
    }
  }
  CheckRoleColumn(o, o.label_column, "label_column");
  CheckRoleColumn(o, o.group_column, "group_column");
  if (!o.group_column.empty()) {
    const DType dtype = o.schema[FindColumn(o.schema, o.group_column)].dtype;
    if (dtype != DType::kInt64 && dtype != DType::kString) {
      throw ConfigError(fmt::format("group column \"{}\" is {}", o.group_column, DTypeName(dtype)),
                        ErrorWhere{.field = "group_column"},
                        "a group column must be int64 or string: declare its type as int or str");
    }
  }
  if (o.shard_bytes == 0 || o.row_group_rows == 0) {
    throw ConfigError("shard_bytes and row_group_rows must be positive");
  }
  if (o.zstd_level < 0 || o.zstd_level > kMaxZstdLevel) {
    throw ConfigError(
        fmt::format("zstd level {} is out of range 0..{}", o.zstd_level, kMaxZstdLevel),
        ErrorWhere{.field = "zstd_level"}, "use 0 to store uncompressed, or 1..19");
  }
  if (o.threads < 0) throw ConfigError("threads must be >= 0 (0: one per core)");
  if (o.created_by.empty()) o.created_by = fmt::format("topspin {}", build::kVersion);
  return o;
}

// The writer's own output must pass the reader's validation; a failure is
// a bug in the writer, not bad data.
void SelfCheck(const std::string& manifest_json) {
  try {
    Manifest::FromJson(manifest_json, kManifestFile);
  } catch (const Error& e) {
    throw InternalError("DatasetWriter produced an invalid manifest: " + e.Message());
  }
}

}  // namespace

struct DatasetWriter::Impl {
  explicit Impl(DatasetWriterOptions o)
      : options(CheckedOptions(std::move(o))),
        dir(options.out),
        assembler(options.schema, FindColumn(options.schema, options.group_column),
                  options.row_group_rows),
        stats(options.schema.size()),
        cancelled(std::make_shared<std::atomic<bool>>(false)),
        pool(static_cast<size_t>(options.threads)) {}

  ~Impl() { *cancelled = true; }  // queued tasks return early; `pool` joins them first

  void CheckUsable(const char* what) const {
    if (committed) throw InternalError(fmt::format("DatasetWriter::{} after Commit", what));
    if (failed) {
      throw InternalError(fmt::format("DatasetWriter::{} after an earlier error", what));
    }
  }

  void AddRowGroup(ClosedRowGroup group) {
    shard_raw_bytes += group.raw_bytes;
    shard_groups += group.groups;
    shard_row_groups.push_back(std::move(group));
    if (shard_raw_bytes >= options.shard_bytes) CloseShard();
  }

  void CloseShard() {
    if (shard_row_groups.empty()) return;
    while (in_flight.size() >= pool.size()) CollectOldest();
    auto job = std::make_shared<ShardJob>();
    job->index = next_shard++;
    job->file = ShardFileName(job->index);
    job->path = dir.path() / job->file;
    job->schema = options.schema;
    job->options =
        ShardWriterOptions{.zstd_level = options.zstd_level, .byte_planes = options.byte_planes};
    job->row_groups = std::exchange(shard_row_groups, {});
    job->groups = std::exchange(shard_groups, 0);
    job->raw_bytes = std::exchange(shard_raw_bytes, 0);
    // The shards not yet on disk, at the compression they are expected to
    // get: that of the worst written shard, or before any is written, of
    // this shard's first row group, plus 10% either way.
    uint64_t pending_raw = job->raw_bytes;
    for (const auto& s : in_flight) pending_raw += s.job->raw_bytes;
    if (shards.empty() && worst_ratio == 0) worst_ratio = SampleRatio(job->row_groups.front());
    const double ratio = std::min(1.0, 1.1 * worst_ratio);
    EnsureFreeSpace(dir.path(), uint64_t(double(pending_raw) * ratio) + kFreeSpaceMargin,
                    job->file);
    Submit(std::move(job));
  }

  void Submit(std::shared_ptr<const ShardJob> job) {
    InFlightShard s{.job = job, .entry = {}, .stats = {}};
    s.entry = pool.Submit([job, flag = cancelled] { return WriteShard(*job, *flag); });
    for (size_t c = 0; c < options.schema.size(); ++c) {
      s.stats.push_back(pool.Submit([job, c] { return ColumnStatsOf(*job, c); }));
    }
    in_flight.push_back(std::move(s));
  }

  // Waits for the oldest shard; re-raises its tasks' errors here.
  void CollectOldest() {
    InFlightShard s = std::move(in_flight.front());
    in_flight.pop_front();
    shards.push_back(s.entry.get());
    const ShardEntry& written = shards.back();
    if (written.raw_bytes > 0) {
      const double ratio = double(written.bytes) / double(written.raw_bytes);
      worst_ratio = shards.size() == 1 ? ratio : std::max(worst_ratio, ratio);
    }
    for (size_t c = 0; c < s.stats.size(); ++c) stats[c].Merge(s.stats[c].get());
  }

  Manifest BuildManifest() const {
    Manifest m;
    m.schema = options.schema;
    m.label_column = options.label_column;
    m.group_column = options.group_column;
    m.created_by = options.created_by;
    m.tokenizer = options.tokenizer;
    m.shards = shards;
    for (size_t c = 0; c < stats.size(); ++c) m.stats[options.schema[c].name] = stats[c].Finish();
    if (!options.group_column.empty()) m.group_stats = assembler.group_stats();
    return m;
  }

  // Stored over raw bytes of one row group, encoded as the shard will be.
  double SampleRatio(const ClosedRowGroup& group) const {
    if (options.zstd_level == 0 || group.raw_bytes == 0) return 1.0;
    shard_layout::ChunkEncoder encoder(options.zstd_level, options.byte_planes);
    uint64_t stored = 0;
    for (const Column& column : group.rows.columns) {
      if (column.size() == 0) continue;
      ChunkInfo info;
      stored += encoder.Encode(column, info).size();
    }
    return double(stored) / double(group.raw_bytes);
  }

  DatasetWriterOptions options;
  AtomicDirectory dir;
  // Stored / raw bytes: the worst written shard's, or a sample's before the
  // first shard is written (0: not known yet).
  double worst_ratio = 0;
  RowGroupAssembler assembler;
  std::vector<ClosedRowGroup> shard_row_groups;  // of the shard being filled
  uint64_t shard_raw_bytes = 0, shard_groups = 0;
  size_t next_shard = 0;
  std::deque<InFlightShard> in_flight;
  std::vector<ShardEntry> shards;         // collected, in order
  std::vector<ColumnStatsBuilder> stats;  // collected shards, by column
  bool committed = false, failed = false;
  std::shared_ptr<std::atomic<bool>> cancelled;
  ThreadPool pool;  // last member: destroyed (joined) first
};

DatasetWriter::DatasetWriter(DatasetWriterOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

DatasetWriter::~DatasetWriter() = default;

void DatasetWriter::Append(const Table& rows, std::span<const uint64_t> row_ids) {
  Impl& s = *impl_;
  s.CheckUsable("Append");
  if (rows.schema() != s.options.schema) {
    throw InternalError("DatasetWriter::Append: the table's schema differs from the writer's");
  }
  for (const auto& c : rows.columns) {
    if (c.size() != rows.rows()) {
      throw InternalError(fmt::format("DatasetWriter::Append: column \"{}\" has {} rows, not {}",
                                      c.name(), c.size(), rows.rows()));
    }
  }
  if (!row_ids.empty() && row_ids.size() != rows.rows()) {
    throw InternalError(fmt::format("DatasetWriter::Append: {} row ids for {} rows",
                                    row_ids.size(), rows.rows()));
  }
  try {
    std::vector<ClosedRowGroup> closed;
    s.assembler.Append(rows, row_ids, closed);
    for (auto& group : closed) s.AddRowGroup(std::move(group));
  } catch (...) {
    s.failed = true;
    throw;
  }
}

void DatasetWriter::BreakRowGroup() {
  impl_->CheckUsable("BreakRowGroup");
  impl_->assembler.BreakAtNextGroup();
}

uint64_t DatasetWriter::rows_appended() const {
  return impl_->assembler.rows();
}

Manifest DatasetWriter::Commit(const CommitHook& hook) {
  Impl& s = *impl_;
  s.CheckUsable("Commit");
  try {
    if (auto last = s.assembler.Finish()) s.AddRowGroup(std::move(*last));
    s.CloseShard();
    while (!s.in_flight.empty()) s.CollectOldest();
    const Manifest manifest = s.BuildManifest();
    const std::string text = manifest.ToJson();
    SelfCheck(text);
    if (hook) hook(s.dir.path(), manifest, s.stats);
    WriteFileAtomic(s.dir.path() / kManifestFile, text);
    s.dir.Commit();
    s.committed = true;
    return manifest;
  } catch (...) {
    s.failed = true;
    throw;
  }
}

}  // namespace topspin
