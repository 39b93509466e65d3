#include <unistd.h>

#include <bit>
#include <climits>
#include <ctime>

#include <fmt/format.h>

#include "perf/append_file.h"
#include "topspin/core/hash.h"
#include "topspin/perf/tensorboard.h"

namespace topspin {
namespace {

// ---- protobuf wire format, only what tensorflow.Event needs ----------------

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void PutLittleEndian(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutTag(std::string& out, uint32_t field, WireType type) {
  PutVarint(out, field << 3 | type);
}

void PutDouble(std::string& out, uint32_t field, double v) {
  PutTag(out, field, kFixed64);
  PutLittleEndian(out, std::bit_cast<uint64_t>(v), 8);
}

void PutFloat(std::string& out, uint32_t field, float v) {
  PutTag(out, field, kFixed32);
  PutLittleEndian(out, std::bit_cast<uint32_t>(v), 4);
}

void PutInt64(std::string& out, uint32_t field, int64_t v) {
  PutTag(out, field, kVarint);
  PutVarint(out, static_cast<uint64_t>(v));  // negative: 10 bytes, as protobuf does
}

void PutBytes(std::string& out, uint32_t field, std::string_view bytes) {
  PutTag(out, field, kLengthDelimited);
  PutVarint(out, bytes.size());
  out.append(bytes);
}

// Field numbers of tensorflow.Event, Summary and Summary.Value.
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
constexpr uint32_t kSummaryValue = 1;
constexpr uint32_t kValueTag = 1, kValueSimpleValue = 2;

void PutScalarValue(std::string& summary, std::string_view tag, float value) {
  std::string v;
  PutBytes(v, kValueTag, tag);
  PutFloat(v, kValueSimpleValue, value);
  PutBytes(summary, kSummaryValue, v);
}

std::string ScalarEvent(double wall_time, int64_t step, const std::string& summary) {
  std::string event;
  PutDouble(event, kEventWallTime, wall_time);
  PutInt64(event, kEventStep, step);
  PutBytes(event, kEventSummary, summary);
  return event;
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::filesystem::path EventFilePath(const std::filesystem::path& dir, std::string_view suffix) {
  perf_internal::CreateDirectories(dir);
  return dir / fmt::format("events.out.tfevents.{:010d}.{}{}",
                           static_cast<int64_t>(std::time(nullptr)), HostName(), suffix);
}

}  // namespace

uint32_t MaskedCrc32c(const void* data, size_t size) {
  const uint32_t crc = Crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

void AppendTfRecord(std::string& out, std::string_view data) {
  const size_t start = out.size();
  PutLittleEndian(out, data.size(), 8);
  PutLittleEndian(out, MaskedCrc32c(out.data() + start, 8), 4);
  out.append(data);
  PutLittleEndian(out, MaskedCrc32c(data.data(), data.size()), 4);
}

struct TensorBoardWriter::Impl {
  explicit Impl(std::filesystem::path path) : file(std::move(path), /*exclusive=*/true) {}

  void Append(std::string_view event) {
    AppendTfRecord(buffer, event);
    file.Drain(buffer);
  }

  perf_internal::AppendFile file;
  std::string buffer;  // whole TFRecords not yet written (a full disk refused them)
};

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir,
                                     std::string_view filename_suffix)
    : impl_(std::make_unique<Impl>(EventFilePath(dir, filename_suffix))) {
  std::string event;
  PutDouble(event, kEventWallTime, WallTimeNow());
  PutBytes(event, kEventFileVersion, kTensorBoardFileVersion);
  impl_->Append(event);
  Flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  try {
    Flush();
  } catch (...) {
    perf_internal::LogDestructorFailure("tensorboard events lost at exit");
  }
}

void TensorBoardWriter::AddScalar(std::string_view tag, int64_t step, float value,
                                  double wall_time) {
  std::string summary;
  PutScalarValue(summary, tag, value);
  impl_->Append(ScalarEvent(wall_time, step, summary));
}

void TensorBoardWriter::Write(int64_t step, const MetricValues& values, double wall_time) {
  if (values.empty()) return;
  std::string summary;
  for (const auto& [tag, value] : values) PutScalarValue(summary, tag, static_cast<float>(value));
  impl_->Append(ScalarEvent(wall_time, step, summary));
}

void TensorBoardWriter::Flush() {
  impl_->file.Drain(impl_->buffer);
  impl_->file.Sync();
}

const std::filesystem::path& TensorBoardWriter::path() const {
  return impl_->file.path();
}

}  // namespace topspin
