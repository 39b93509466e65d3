// TensorBoard event files, written without TensorFlow or a protobuf library.
//
// A file is a sequence of TFRecords, each framed as
//   uint64 length (little-endian)
//   uint32 MaskedCrc32c(the 8 length bytes)
//   length bytes of data: one serialized tensorflow.Event
//   uint32 MaskedCrc32c(data)
// The first Event carries wall_time and file_version "brain.Event:2"; each
// later one carries wall_time (double), step (int64) and a Summary whose
// Values hold tag (string) and simple_value (float). TensorBoard reads
// every file whose name contains "tfevents" in the directory it is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "topspin/perf/metrics_sink.h"

namespace topspin {

inline constexpr const char* kTensorBoardFileVersion = "brain.Event:2";

// TFRecord's checksum: CRC-32C, rotated right by 15 bits, plus 0xa282ead8
// (all uint32 arithmetic), so that a CRC stored in the data it covers does
// not checksum to a constant.
uint32_t MaskedCrc32c(const void* data, size_t size);

// Appends `data` framed as one TFRecord to `out`.
void AppendTfRecord(std::string& out, std::string_view data);

// Writes one event file, events.out.tfevents.<unix seconds, 10 digits>.
// <hostname><filename_suffix>, in `dir` (created if missing). The
// constructor writes the file_version event and flushes it, so the file is
// valid from the start. Two writers in one directory need different
// suffixes (e.g. ".rank3"): an existing file is never overwritten
// (Error{kIo}). Not thread-safe.
class TensorBoardWriter final : public MetricsSink {
 public:
  explicit TensorBoardWriter(const std::filesystem::path& dir,
                             std::string_view filename_suffix = {});
  ~TensorBoardWriter() override;
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One Event holding one scalar. Values are stored as float (TensorBoard's
  // simple_value).
  void AddScalar(std::string_view tag, int64_t step, float value, double wall_time = WallTimeNow());
  // One Event holding every value of `values` (in name order).
  void Write(int64_t step, const MetricValues& values, double wall_time) override;
  // Writes the buffered events and fdatasyncs the file.
  void Flush() override;

  // The event file.
  const std::filesystem::path& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace topspin
