#include "topspin/data/importer.h"

#include <fmt/format.h>

#include "data/importers.h"
#include "topspin/core/error.h"
#include "topspin/core/strings.h"

namespace topspin {

std::unique_ptr<Importer> OpenImporter(const std::vector<std::filesystem::path>& inputs,
                                       const ImportOptions& options, const ImportTuning& tuning) {
  if (options.format == "csv") return OpenCsvImporter(inputs, options, tuning);
  if (options.format == "jsonl") return OpenJsonlImporter(inputs, options, tuning);
  if (options.format == "letor") return OpenLetorImporter(inputs, options, tuning);
  if (options.format == "text") return OpenTextImporter(inputs, options);
  const std::vector<std::string> formats = {"csv", "jsonl", "letor", "text"};
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
