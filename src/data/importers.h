// The importers behind OpenImporter (internal to the data module; the
// public API is topspin/data/importer.h).
//
// csv, jsonl and letor run on the range machinery of range_importer.h and
// take an ImportTuning (parser threads, bytes per parse task); text is
// src/data/text_importer.cc. Each throws Error kIo for an unreadable input,
// kData for malformed content found while opening (header, inference), and
// kConfig for options that do not fit the format.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "data/range_importer.h"
#include "topspin/data/importer.h"

namespace topspin {

std::unique_ptr<Importer> OpenCsvImporter(const std::vector<std::filesystem::path>& inputs,
                                          const ImportOptions& options,
                                          const ImportTuning& tuning = {});
std::unique_ptr<Importer> OpenJsonlImporter(const std::vector<std::filesystem::path>& inputs,
                                            const ImportOptions& options,
                                            const ImportTuning& tuning = {});
std::unique_ptr<Importer> OpenLetorImporter(const std::vector<std::filesystem::path>& inputs,
                                            const ImportOptions& options,
                                            const ImportTuning& tuning = {});
std::unique_ptr<Importer> OpenTextImporter(const std::vector<std::filesystem::path>& inputs,
                                           const ImportOptions& options);

// The parquet importer lives in its own module (src/parquet/, linked only
// into the CLI and its tests, so that nothing else loads libarrow); it
// registers its opener here. The opener applies options.part itself (after
// expanding directories) and sets the importer's share.
using ImporterOpener = std::unique_ptr<Importer> (*)(const std::vector<std::filesystem::path>&,
                                                     const ImportOptions&, const ImportTuning&);
void RegisterParquetImporter(ImporterOpener opener);

// OpenImporter with explicit tuning (convert passes its --threads here).
std::unique_ptr<Importer> OpenImporter(const std::vector<std::filesystem::path>& inputs,
                                       const ImportOptions& options, const ImportTuning& tuning);

}  // namespace topspin
