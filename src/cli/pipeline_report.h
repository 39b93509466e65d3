// Runs a configured ranking pipeline and reports what it produced and where
// its time went; shared by `topspin pipeline` and `topspin demo`.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "topspin/core/config.h"

namespace topspin::cli {

struct PipelineReportOptions {
  std::string dataset_key = "data.train";
  uint64_t epochs = 1;
  uint64_t max_batches = 0;  // 0: all batches of `epochs`
  bool show_batch = true;    // print the first list of the first batch
  std::string trace;         // when set: a Perfetto trace of every stage and Next() wait
};

// Prints the features, a progress line, throughput, stage utilisation and
// the data stall; returns the same as JSON.
nlohmann::json RunPipelineReport(const Config& config, const PipelineReportOptions& options);

}  // namespace topspin::cli
