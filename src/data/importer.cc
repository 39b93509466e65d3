#include "topspin/data/importer.h"

#include <fmt/format.h>

#include "data/importers.h"
#include "topspin/core/error.h"
#include "topspin/core/hash.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

ImporterOpener& ParquetOpener() {
  static ImporterOpener opener = nullptr;
  return opener;
}

// The share of plain file inputs (csv, jsonl, letor) options.part names.
InputShare FileShare(const std::vector<std::filesystem::path>& inputs,
                     const ImportOptions& options) {
  std::vector<uint64_t> sizes;
  for (const auto& path : inputs) {
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path, ec);
    if (ec) {
      throw IoError(fmt::format("cannot read the size of the input: {}", ec.message()),
                    ErrorWhere{.file = path.string()}, "check that the file exists and is readable");
    }
    sizes.push_back(size);
  }
  return SelectShare(inputs, sizes, options);
}

std::unique_ptr<Importer> WithShare(std::unique_ptr<Importer> importer, InputShare share) {
  importer->set_share(std::move(share));
  return importer;
}

}  // namespace

void RegisterParquetImporter(ImporterOpener opener) {
  ParquetOpener() = opener;
}

InputShare SelectShare(const std::vector<std::filesystem::path>& inputs,
                       const std::vector<uint64_t>& sizes, uint32_t part, uint32_t parts) {
  const uint64_t total = inputs.size();
  if (parts == 0 || part >= parts) {
    throw Error(ErrorKind::kUsage, fmt::format("--part {}/{}: K must be in 0..N-1", part, parts),
                ErrorWhere{.field = "--part"}, "e.g. --part 0/4 .. --part 3/4 for four parts");
  }
  if (parts > total) {
    throw Error(ErrorKind::kUsage,
                fmt::format("--part {}/{}: there are {} input file{}, fewer than {} parts", part,
                            parts, total, total == 1 ? "" : "s", parts),
                ErrorWhere{.field = "--part"},
                fmt::format("use at most {} parts (each part converts whole files), or write the "
                            "input as more files (Spark: repartition)",
                            total));
  }
  InputShare share{.part = part, .parts = parts, .total_inputs = total};
  std::string listing;
  for (size_t i = 0; i < inputs.size(); ++i) {
    listing += fmt::format("{}\t{}\n", inputs[i].string(), sizes.at(i));
  }
  share.fingerprint = HexU64(Xxh3(listing));
  const uint64_t begin = total * part / parts, end = total * (part + 1) / parts;
  share.first_input = begin;
  share.inputs.assign(inputs.begin() + static_cast<std::ptrdiff_t>(begin),
                      inputs.begin() + static_cast<std::ptrdiff_t>(end));
  return share;
}

InputShare SelectShare(const std::vector<std::filesystem::path>& inputs,
                       const std::vector<uint64_t>& sizes, const ImportOptions& options) {
  return options.parts == 0 ? SelectShare(inputs, sizes, 0, 1)
                            : SelectShare(inputs, sizes, options.part, options.parts);
}

std::unique_ptr<Importer> OpenImporter(const std::vector<std::filesystem::path>& inputs,
                                       const ImportOptions& options, const ImportTuning& tuning) {
  if (options.format == "parquet") {
    if (ParquetOpener() == nullptr) {
      throw ConfigError(
          "this topspin was built without Parquet import (pyarrow's Arrow C++ was not found when "
          "it was configured)",
          ErrorWhere{.field = "format"},
          "run scripts/install-deps.sh (it installs pyarrow into .venv), then rebuild: rm -rf "
          "build && make");
    }
    return ParquetOpener()(inputs, options, tuning);
  }
  if (options.format == "text") {
    if (options.parts != 0) {
      throw Error(ErrorKind::kUsage, "--part does not apply to --format text",
                  ErrorWhere{.field = "--part"},
                  "convert text on one host, or convert directories of documents separately");
    }
    auto importer = OpenTextImporter(inputs, options);
    return WithShare(std::move(importer), FileShare(inputs, options));
  }
  if (options.format == "csv" || options.format == "jsonl" || options.format == "letor") {
    InputShare share = FileShare(inputs, options);
    const std::vector<std::filesystem::path> selected = share.inputs;
    std::unique_ptr<Importer> importer;
    if (options.format == "csv") importer = OpenCsvImporter(selected, options, tuning);
    if (options.format == "jsonl") importer = OpenJsonlImporter(selected, options, tuning);
    if (options.format == "letor") importer = OpenLetorImporter(selected, options, tuning);
    return WithShare(std::move(importer), std::move(share));
  }
  const std::vector<std::string> formats = {"csv", "jsonl", "letor", "parquet", "text"};
  const auto guess = ClosestMatch(options.format, formats);
  throw ConfigError(
      fmt::format("unknown import format \"{}\"", options.format), ErrorWhere{.field = "format"},
      fmt::format("{}the formats are {}", guess ? fmt::format("did you mean \"{}\"? ", *guess) : "",
                  Join(formats, ", ")));
}

std::unique_ptr<Importer> OpenImporter(const std::vector<std::filesystem::path>& inputs,
                                       const ImportOptions& options) {
  return OpenImporter(inputs, options, ImportTuning{});
}

}  // namespace topspin
