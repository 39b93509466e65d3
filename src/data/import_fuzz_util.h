// Shared body of the importer fuzz targets (header-only; only *_fuzz.cc
// files include it).
//
// Every input is imported four ways: on_error fail and skip, each once
// serially in one range and once on two threads in tiny ranges. Each run
// must end in rows or a topspin::Error, never a crash; and the two runs of
// a mode must agree exactly (the same rows, the same error message), which
// checks the range splitting and the in-order error reporting.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <sys/mman.h>

#include "data/importers.h"
#include "topspin/core/error.h"

namespace topspin::fuzz {

// One memfd per process, rewritten for every input; its /proc path.
inline const std::string& InputPath(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("importer_fuzz", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) std::abort();  // the harness itself is broken
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  return path;
}

inline void AppendBytes(std::string& out, const void* data, size_t size) {
  out.append(static_cast<const char*>(data), size);
}

// The rows (all chunks concatenated, as raw buffers) and skip counts, or
// the error message.
inline std::string ImportOutcome(const std::string& path, const ImportOptions& options,
                                 const ImportTuning& tuning) {
  try {
    auto importer = OpenImporter({path}, options, tuning);
    Table all = Table::Empty(importer->schema());
    Table chunk;
    while (importer->Next(&chunk)) {
      if (chunk.rows() == 0 || chunk.rows() > options.chunk_rows) std::abort();
      for (size_t r = 0; r < chunk.rows(); ++r) {
        (void)importer->RowLocation(r);
        all.AppendRow(chunk, r);
      }
    }
    if (importer->bytes_read() != importer->bytes_total()) std::abort();
    std::string out = "rows " + std::to_string(all.rows()) + "\n";
    for (const Column& c : all.columns) {
      out += c.name() + ":" + DTypeName(c.dtype()) + "\n";
      AppendBytes(out, c.validity().data(), c.validity().size());
      AppendBytes(out, c.values().data(), c.values().size());
      AppendBytes(out, c.offsets().data(), c.offsets().size() * sizeof(uint64_t));
    }
    for (const auto& [reason, rows] : importer->skipped().reasons) {
      out += reason + " " + std::to_string(rows) + "\n";
    }
    return out;
  } catch (const Error& e) {
    return "error " + e.Message();
  }
}

inline int FuzzImport(const char* format, const uint8_t* data, size_t size) {
  const std::string& path = InputPath(data, size);
  ImportOptions options;
  options.format = format;
  options.chunk_rows = 3;
  options.infer_rows = 4;
  for (const OnError mode : {OnError::kFail, OnError::kSkip}) {
    options.on_error = mode;
    const std::string serial = ImportOutcome(path, options, {.threads = 1, .range_bytes = 1 << 30});
    const std::string split = ImportOutcome(path, options, {.threads = 2, .range_bytes = 5});
    if (serial != split) std::abort();  // the range machinery changed the result
  }
  return 0;
}

}  // namespace topspin::fuzz
