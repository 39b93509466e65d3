// Convert: raw files -> a dataset directory. What `topspin convert` runs.
//
//   importer (OpenImporter: csv, jsonl, letor, text)
//     -> group contiguity check (or, with sort_groups, a stable regrouping)
//     -> DatasetWriter -> <writer.out>/manifest.json + shards
//
// The label and group columns come from ImportOptions (label_column,
// group_column) and must be columns of the imported schema: Error kConfig
// naming the missing column and listing the available ones. A group column
// must be int64 or string (Error kConfig, hint: --columns NAME:int64).
//
// Groups must arrive contiguously: a group value that reappears after
// another group is Error kData at the input line of the row where it
// reappears ("file:line", Importer::RowLocation), with the hint "pass
// --sort-groups". With sort_groups every row is held in memory, and groups
// are written in order of first appearance, each group's rows in input
// order (a stable sort). A null group value is a group of its own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include "topspin/data/dataset.h"
#include "topspin/data/importer.h"
#include "topspin/data/manifest.h"

namespace topspin {

// bytes_read of bytes_total input bytes are imported; called from the
// calling thread after every chunk.
using ConvertProgress = std::function<void(uint64_t bytes_read, uint64_t bytes_total)>;

// Imports `inputs` and writes them as a dataset; returns the committed
// manifest. `writer.schema`, `writer.label_column` and `writer.group_column`
// are set from the importer and `options`; `writer.threads` is also the
// number of parser threads (0: one per core, at most 8). `progress` may be
// empty. Rows dropped under OnError::kSkip are reported in `*skipped` when
// it is given. On any error the output is left as <out>.incomplete/, never
// as <out>.
Manifest Convert(const std::vector<std::filesystem::path>& inputs, const ImportOptions& options,
                 DatasetWriterOptions writer, bool sort_groups, ConvertProgress progress,
                 SkipReport* skipped = nullptr);

}  // namespace topspin
