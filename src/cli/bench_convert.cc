// bench convert: raw data -> shards, each row against its peer in the same
// run (bench/peers/convert_pyarrow.py):
//   csv -> shards      vs the best of pandas.read_csv (C and pyarrow engines)
//                      and pyarrow.csv.read_csv, each + numpy.save
//   parquet -> shards  vs pyarrow.parquet.read_table + numpy.save
//   spark local[T]     scripts/spark/convert.py end to end, MB/s per core,
//                      vs topspin convert's own per-core rate (the rate
//                      `topspin plan cluster` used before this row existed)
// The peers' per-column rows, nulls and sums are checked against our
// manifest statistics, so both sides are shown to read the same values.
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/benches.h"
#include "cli/run_command.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/data/convert.h"
#include "topspin/data/gen_shop.h"
#ifdef TOPSPIN_HAVE_PARQUET
#include "topspin/parquet/parquet_import.h"
#endif

namespace topspin::cli {
namespace {

namespace fs = std::filesystem;

fs::path PeerScript() { return fs::path(TOPSPIN_SOURCE_DIR) / "bench/peers/convert_pyarrow.py"; }

nlohmann::json RunConvertPeer(const std::string& mode, const fs::path& input,
                              const fs::path& scratch, const DataBenchOptions& o) {
  const std::string command =
      fmt::format("{} '{}' {} '{}' '{}' --threads {} --repeats {} 2>&1", PeerPython(),
                  PeerScript().string(), mode, input.string(), (scratch / "peer-out").string(),
                  o.threads, o.repeats);
  auto result = nlohmann::json::parse(RunPeer(command, PeerScript().string()));
  fs::remove_all(scratch / "peer-out");
  return result;
}

// The peer read what we read: per column the same rows and nulls, and the
// sum of finite values within float32 rounding of each value.
void CheckPeerColumns(const nlohmann::json& peer, const Manifest& ours, const std::string& what) {
  size_t checked = 0;
  for (const auto& [name, column] : peer.at("columns").items()) {
    const auto it = ours.stats.find(name);
    if (it == ours.stats.end()) continue;
    const ColumnStats& s = it->second;
    const double sum = s.mean * static_cast<double>(s.count - s.nulls - s.infinite);
    const double theirs = column.at("sum").get<double>();
    const bool same_sum = std::fabs(sum - theirs) <= 1e-5 * std::max({std::fabs(sum), std::fabs(theirs), 1.0});
    if (column.at("rows").get<uint64_t>() != s.count || column.at("nulls").get<uint64_t>() != s.nulls ||
        !same_sum) {
      throw DataError(fmt::format("{}: the peer read other values than ours in column \"{}\": {} "
                                  "rows, {} nulls, sum {} against our {}, {}, {}",
                                  what, name, column.at("rows").get<uint64_t>(),
                                  column.at("nulls").get<uint64_t>(), theirs, s.count, s.nulls, sum),
                      ErrorWhere{.file = PeerScript().string(), .field = name},
                      "the bench compares the same transform only; fix the peer or ours");
    }
    ++checked;
  }
  if (checked < ours.schema.size() / 2) {
    throw DataError(fmt::format("{}: the peer reported {} of our {} columns", what, checked,
                                ours.schema.size()),
                    ErrorWhere{.file = PeerScript().string()}, "check the peer's column names");
  }
}

struct Ours {
  double seconds = 0;
  Manifest manifest;
};

Ours ConvertShop(const fs::path& input, const std::string& format, const DataBenchOptions& o) {
  ImportOptions import;
  import.format = format;
  import.label_column = "label";
  import.group_column = "qid";
  const auto out = o.scratch / "bench-convert-out";
  Ours ours;
  ours.seconds = BestSeconds(o.repeats, [&] {
    fs::remove_all(out);
    DatasetWriterOptions writer;
    writer.out = out;
    writer.threads = o.threads;
    writer.zstd_level = o.zstd_level;
    writer.byte_planes = o.byte_planes;
    ours.manifest = Convert({input}, import, writer, false, {});
  });
  fs::remove_all(out);
  return ours;
}

double Mb(const fs::path& file) { return static_cast<double>(fs::file_size(file)) / 1e6; }

BenchRow PeerRow(const std::string& name, double mb, const Ours& ours, const nlohmann::json& peer) {
  CheckPeerColumns(peer, ours.manifest, name);
  return {name, mb / ours.seconds, peer.at("best").get<std::string>() + " + np.save",
          mb / peer.at("seconds").get<double>(), "MB/s"};
}

// scripts/spark/convert.py on the CSV in local mode with 2 partitions per
// core; its own summary (JVM start-up not counted) gives MB/s per core.
BenchRow SparkRow(const fs::path& csv, double csv_core_rate, const DataBenchOptions& o) {
  const fs::path script = fs::path(TOPSPIN_SOURCE_DIR) / "scripts/spark/convert.py";
  const fs::path out = o.scratch / "bench-convert-spark", summary = o.scratch / "spark.json";
  fs::remove_all(out);
  fs::remove(summary);
  const std::string command = fmt::format(
      "{} '{}' '{}' --format csv --label label --group qid --master 'local[{}]' --partitions {} "
      "--topspin '{}' --out '{}' --json '{}' -- --zstd-level {}{} 2>&1",
      PeerPython(), script.string(), csv.string(), o.threads, 2 * o.threads,
      fs::read_symlink("/proc/self/exe").string(), out.string(), summary.string(), o.zstd_level,
      o.byte_planes ? "" : " --no-byte-planes");
  const auto [status, output] = RunCommand(command);
  fs::remove_all(out);
  if (status != 0 || !fs::exists(summary)) {
    throw IoError(fmt::format("the Spark conversion failed: {}",
                              output.substr(output.size() > 1500 ? output.size() - 1500 : 0)),
                  ErrorWhere{.file = script.string()},
                  "scripts/install-deps.sh installs pyspark and Java 17; or pass --no-spark");
  }
  const auto j = nlohmann::json::parse(ReadFile(summary));
  return {fmt::format("spark local[{}] csv -> dataset, per core", o.threads),
          j.at("mb_per_s_per_core").get<double>(), "topspin convert csv per core", csv_core_rate,
          "MB/s"};
}

}  // namespace

BenchTable RunConvertBench(const DataBenchOptions& o) {
  fs::create_directories(o.scratch);
#ifdef TOPSPIN_HAVE_PARQUET
  RegisterParquetImport();
  const bool parquet = true;
#else
  const bool parquet = false;
#endif
  BenchStages stages("convert", 2 + (parquet ? 2 : 0) + (parquet && o.spark ? 1 : 0));
  const auto csv = o.scratch / "bench-convert-shop.csv";
  ShopOptions shop;
  shop.queries = o.queries;
  WriteShopCsv(csv, shop);
  const double csv_mb = Mb(csv);

  BenchTable t{"convert", "", {}};
  stages.Begin("ours: csv -> shards");
  const Ours ours_csv = ConvertShop(csv, "csv", o);
  stages.Begin("peers: pandas.read_csv (C, pyarrow engines), pyarrow.csv.read_csv");
  t.rows.push_back(PeerRow(fmt::format("csv -> shards, {} threads", o.threads), csv_mb, ours_csv,
                           RunConvertPeer("csv", csv, o.scratch, o)));
  std::string setup = fmt::format("gen shop {} queries: {:.1f} MB CSV", o.queries, csv_mb);
  if (parquet) {
    const auto file = o.scratch / "bench-convert-shop.parquet";
    stages.Begin("ours: parquet -> shards (the CSV as zstd Parquet, written by pyarrow)");
    RunPeer(fmt::format("{} '{}' write-parquet '{}' '{}' 2>&1", PeerPython(), PeerScript().string(),
                        csv.string(), file.string()),
            PeerScript().string());
    const double mb = Mb(file);
    const Ours ours_parquet = ConvertShop(file, "parquet", o);
    stages.Begin("peer: pyarrow.parquet.read_table");
    t.rows.push_back(PeerRow(fmt::format("parquet -> shards, {} threads", o.threads), mb,
                             ours_parquet, RunConvertPeer("parquet", file, o.scratch, o)));
    fs::remove(file);
    setup += fmt::format(", {:.1f} MB zstd Parquet", mb);
    if (o.spark) {
      stages.Begin(fmt::format("scripts/spark/convert.py, local[{}], {} partitions", o.threads,
                               2 * o.threads));
      t.rows.push_back(SparkRow(csv, t.rows.front().ours / o.threads, o));
      setup += fmt::format("; spark: 1 run, {} partitions, JVM start-up not counted", 2 * o.threads);
    }
  }
  fs::remove(csv);
  t.setup = fmt::format(
      "{}; ours: {} threads, zstd level {}{}, stats + checksums; peers: Arrow "
      "threads {}, checked against our statistics; best of {}",
      setup, o.threads, o.zstd_level,
      o.byte_planes ? " (numbers also tried as byte planes)" : ", plain zstd", o.threads,
      o.repeats);
  return t;
}

}  // namespace topspin::cli
