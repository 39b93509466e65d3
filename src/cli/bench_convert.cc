// bench convert: CSV -> shards against pandas.read_csv + numpy.save.
#include <string>

#include <fmt/format.h>

#include "cli/benches.h"
#include "cli/run_command.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/data/convert.h"
#include "topspin/data/gen_shop.h"

namespace topspin::cli {
namespace {


// The peer, timed inside Python so interpreter start-up is not counted.
constexpr const char* kPandasScript = R"(
import sys, time
import numpy, pandas
best = float("inf")
for _ in range(int(sys.argv[3])):
    start = time.perf_counter()
    frame = pandas.read_csv(sys.argv[1])
    numpy.save(sys.argv[2], frame.to_numpy())
    best = min(best, time.perf_counter() - start)
print(best)
)";

double PandasSeconds(const std::filesystem::path& csv, const std::filesystem::path& scratch,
                     int repeats) {
  const auto script = scratch / "bench_convert_pandas.py";
  WriteFileAtomic(script, kPandasScript);
  const std::string command = fmt::format("{} '{}' '{}' '{}' {} 2>&1", PeerPython(), script.string(),
                                          csv.string(), (scratch / "pandas.npy").string(), repeats);
  const auto [status, output] = RunCommand(command);
  std::filesystem::remove(scratch / "pandas.npy");
  try {
    if (status != 0) throw std::invalid_argument(output);
    return std::stod(output);
  } catch (const std::exception&) {
    throw IoError(fmt::format("the pandas peer failed: {}", output.substr(0, 300)),
                  ErrorWhere{.file = PeerPython()},
                  "install the benchmark peers: scripts/install-deps.sh --bench");
  }
}

}  // namespace

BenchTable RunConvertBench(const DataBenchOptions& o) {
  std::filesystem::create_directories(o.scratch);
  const auto csv = o.scratch / "bench-convert-shop.csv";
  ShopOptions shop;
  shop.queries = o.queries;
  WriteShopCsv(csv, shop);
  const double mb = static_cast<double>(std::filesystem::file_size(csv)) / 1e6;

  ImportOptions import;
  import.format = "csv";
  import.label_column = "label";
  import.group_column = "qid";
  const auto out = o.scratch / "bench-convert-out";
  const double ours = BestSeconds(o.repeats, [&] {
    std::filesystem::remove_all(out);
    DatasetWriterOptions writer;
    writer.out = out;
    writer.threads = o.threads;
    writer.zstd_level = o.zstd_level;
    Convert({csv}, import, writer, false, {});
  });
  std::filesystem::remove_all(out);
  const double pandas = PandasSeconds(csv, o.scratch, o.repeats);
  std::filesystem::remove(csv);

  BenchTable t{"convert",
               fmt::format("gen shop {} queries: {:.1f} MB CSV; ours: {} threads, zstd level {}, "
                           "stats + checksums; best of {}",
                           o.queries, mb, o.threads, o.zstd_level, o.repeats),
               {}};
  t.rows.push_back({fmt::format("csv -> shards, {} threads", o.threads), mb / ours,
                    "pandas.read_csv+np.save", mb / pandas, "MB/s"});
  return t;
}

}  // namespace topspin::cli
