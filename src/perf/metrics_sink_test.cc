// Tests read event files back with a reader written here, independent of
// the writer: a bitwise CRC-32C, the TFRecord mask done by hand, and a
// minimal protobuf decoder.
#include "topspin/perf/metrics_sink.h"

#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <climits>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/perf/tensorboard.h"

namespace topspin {
namespace {

using testing::TempDir;

// ---- an independent TFRecord + protobuf reader -----------------------------

uint32_t BitwiseCrc32c(std::string_view data) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char byte : data) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) != 0 ? 0x82F63B78u : 0);
  }
  return ~crc;
}

uint32_t Mask(uint32_t crc) {
  const uint32_t rotated = (crc >> 15) | (crc << 17);
  return rotated + 0xa282ead8u;
}

uint64_t LoadLittleEndian(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) v = v << 8 | static_cast<unsigned char>(bytes[i]);
  return v;
}

// Splits a TFRecord file; throws std::runtime_error naming the first bad record.
std::vector<std::string> ReadTfRecords(std::string_view file) {
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < file.size()) {
    const std::string at = "record " + std::to_string(records.size());
    if (file.size() - pos < 12) throw std::runtime_error(at + ": truncated header");
    const std::string_view header = file.substr(pos, 8);
    if (LoadLittleEndian(file.substr(pos + 8, 4)) != Mask(BitwiseCrc32c(header))) {
      throw std::runtime_error(at + ": length crc mismatch");
    }
    const uint64_t length = LoadLittleEndian(header);
    pos += 12;
    if (file.size() - pos < length + 4) throw std::runtime_error(at + ": truncated data");
    const std::string_view data = file.substr(pos, length);
    if (LoadLittleEndian(file.substr(pos + length, 4)) != Mask(BitwiseCrc32c(data))) {
      throw std::runtime_error(at + ": data crc mismatch");
    }
    records.emplace_back(data);
    pos += length + 4;
  }
  return records;
}

struct ProtoField {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  uint64_t scalar = 0;     // varint, fixed64 or fixed32 payload
  std::string_view bytes;  // length-delimited payload
};

uint64_t ReadVarint(std::string_view data, size_t& pos) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= data.size()) throw std::runtime_error("truncated varint");
    const auto byte = static_cast<unsigned char>(data[pos++]);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return v;
  }
  throw std::runtime_error("varint longer than 10 bytes");
}

std::vector<ProtoField> ParseProto(std::string_view data) {
  std::vector<ProtoField> fields;
  size_t pos = 0;
  while (pos < data.size()) {
    const uint64_t key = ReadVarint(data, pos);
    ProtoField f{.number = static_cast<uint32_t>(key >> 3),
                 .wire_type = static_cast<uint32_t>(key & 7)};
    const size_t width = f.wire_type == 1 ? 8 : f.wire_type == 5 ? 4 : 0;
    if (f.wire_type == 0) {
      f.scalar = ReadVarint(data, pos);
    } else if (width != 0) {
      if (data.size() - pos < width) throw std::runtime_error("truncated fixed field");
      f.scalar = LoadLittleEndian(data.substr(pos, width));
      pos += width;
    } else if (f.wire_type == 2) {
      const uint64_t length = ReadVarint(data, pos);
      if (data.size() - pos < length) throw std::runtime_error("truncated bytes field");
      f.bytes = data.substr(pos, length);
      pos += length;
    } else {
      throw std::runtime_error("unexpected wire type " + std::to_string(f.wire_type));
    }
    fields.push_back(f);
  }
  return fields;
}

struct Scalar {
  std::string tag;
  float value = 0;
};

struct Event {
  std::optional<double> wall_time;
  std::optional<int64_t> step;
  std::optional<std::string> file_version;
  std::vector<Scalar> scalars;
};

// tensorflow.Event: wall_time = 1 (double), step = 2 (int64), file_version =
// 3 (string), summary = 5; Summary: value = 1 (repeated); Summary.Value:
// tag = 1 (string), simple_value = 2 (float).
Event DecodeEvent(std::string_view data) {
  Event event;
  for (const ProtoField& f : ParseProto(data)) {
    if (f.number == 1 && f.wire_type == 1) event.wall_time = std::bit_cast<double>(f.scalar);
    if (f.number == 2 && f.wire_type == 0) event.step = static_cast<int64_t>(f.scalar);
    if (f.number == 3 && f.wire_type == 2) event.file_version = std::string(f.bytes);
    if (f.number != 5 || f.wire_type != 2) continue;
    for (const ProtoField& value : ParseProto(f.bytes)) {
      if (value.number != 1 || value.wire_type != 2) continue;
      Scalar scalar;
      for (const ProtoField& v : ParseProto(value.bytes)) {
        if (v.number == 1 && v.wire_type == 2) scalar.tag = std::string(v.bytes);
        if (v.number == 2 && v.wire_type == 5) {
          scalar.value = std::bit_cast<float>(static_cast<uint32_t>(v.scalar));
        }
      }
      event.scalars.push_back(scalar);
    }
  }
  return event;
}

std::vector<Event> ReadEventFile(const fs::path& path) {
  std::vector<Event> events;
  for (const std::string& record : ReadTfRecords(ReadFile(path))) {
    events.push_back(DecodeEvent(record));
  }
  return events;
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// ---- masked CRC and framing ------------------------------------------------

TEST(TensorBoard, MaskedCrcMatchesKnownAnswers) {
  ASSERT_EQ(BitwiseCrc32c("123456789"), 0xE3069283u);  // the CRC-32C check value
  // By hand: 0xE3069283 >> 15 = 0x0001C60D; (0xE3069283 << 17) mod 2^32 =
  // 0x25060000; or = 0x2507C60D; + 0xA282EAD8 = 0xC78AB0E5.
  EXPECT_EQ(MaskedCrc32c("123456789", 9), 0xC78AB0E5u);
  // The 8-byte length 0: CRC-32C 0x8C28B28A, masked 0x07980329.
  const char zeros[8] = {};
  ASSERT_EQ(BitwiseCrc32c(std::string_view(zeros, 8)), 0x8C28B28Au);
  EXPECT_EQ(MaskedCrc32c(zeros, 8), 0x07980329u);
  for (std::string_view s :
       {"", "a", "brain.Event:2", "a longer string that spans several words"}) {
    EXPECT_EQ(MaskedCrc32c(s.data(), s.size()), Mask(BitwiseCrc32c(s))) << s;
  }
}

TEST(TensorBoard, TfRecordFramesLengthDataAndBothCrcs) {
  std::string out = "prefix";
  AppendTfRecord(out, "hello");
  AppendTfRecord(out, "");
  ASSERT_EQ(out.size(), 6u + (8 + 4 + 5 + 4) + (8 + 4 + 0 + 4));
  EXPECT_EQ(LoadLittleEndian(std::string_view(out).substr(6, 8)), 5u);
  EXPECT_EQ(out.substr(18, 5), "hello");
  const auto records = ReadTfRecords(std::string_view(out).substr(6));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0], "hello");
  EXPECT_EQ(records[1], "");
}

// ---- event files -------------------------------------------------------------

TEST(TensorBoard, EventFileReadsBackWithVersionStepsTagsAndValues) {
  TempDir dir;
  const double before = WallTimeNow();
  fs::path path;
  {
    TensorBoardWriter writer(dir / "tb");
    path = writer.path();
    writer.AddScalar("loss", 1, 2.5f, 1000.25);
    writer.Write(int64_t{1} << 40, {{"lr", 3e-4}, {"loss", 0.1}}, 1001.5);
    writer.AddScalar("eval/accuracy", -7, -0.75f, 1002.0);
    writer.Flush();
  }
  EXPECT_EQ(path.parent_path(), dir / "tb");
  const std::string name = path.filename().string();
  const std::string prefix = "events.out.tfevents.";
  ASSERT_EQ(name.rfind(prefix, 0), 0u) << name;
  const std::string seconds = name.substr(prefix.size(), 10);
  EXPECT_EQ(seconds.find_first_not_of("0123456789"), std::string::npos) << name;
  EXPECT_NEAR(std::stod(seconds), before, 5);
  EXPECT_EQ(name.substr(prefix.size() + 10), "." + HostName());

  const std::vector<Event> events = ReadEventFile(path);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  ASSERT_TRUE(events[0].wall_time.has_value());
  EXPECT_NEAR(*events[0].wall_time, before, 5);
  EXPECT_TRUE(events[0].scalars.empty());

  EXPECT_EQ(events[1].step, 1);
  EXPECT_EQ(events[1].wall_time, 1000.25);
  ASSERT_EQ(events[1].scalars.size(), 1u);
  EXPECT_EQ(events[1].scalars[0].tag, "loss");
  EXPECT_EQ(events[1].scalars[0].value, 2.5f);

  EXPECT_EQ(events[2].step, int64_t{1} << 40);
  EXPECT_EQ(events[2].wall_time, 1001.5);
  ASSERT_EQ(events[2].scalars.size(), 2u);  // one Event, both values, by name
  EXPECT_EQ(events[2].scalars[0].tag, "loss");
  EXPECT_EQ(events[2].scalars[0].value, 0.1f);
  EXPECT_EQ(events[2].scalars[1].tag, "lr");
  EXPECT_EQ(events[2].scalars[1].value, 3e-4f);

  EXPECT_EQ(events[3].step, -7);
  EXPECT_EQ(events[3].scalars.at(0).tag, "eval/accuracy");
  EXPECT_EQ(events[3].scalars.at(0).value, -0.75f);
  EXPECT_FALSE(events[3].file_version.has_value());
}

TEST(TensorBoard, ScalarEventHasTheExactProtobufBytes) {
  TempDir dir;
  TensorBoardWriter writer(dir.path());
  writer.AddScalar("a", 1, 1.0f, 1.0);
  writer.Flush();
  const auto records = ReadTfRecords(ReadFile(writer.path()));
  ASSERT_EQ(records.size(), 2u);
  // Event{wall_time: 1.0, step: 1, summary{value{tag: "a", simple_value: 1.0}}}, by hand.
  const std::string expected(
      "\x09\x00\x00\x00\x00\x00\x00\xf0\x3f"  // field 1, fixed64: 1.0
      "\x10\x01"                              // field 2, varint: 1
      "\x2a\x0a"                              // field 5, 10 bytes: Summary
      "\x0a\x08"                              //   field 1, 8 bytes: Value
      "\x0a\x01\x61"                          //     field 1, "a"
      "\x15\x00\x00\x80\x3f",                 //     field 2, fixed32: 1.0f
      23);
  EXPECT_EQ(records[1], expected);
}

TEST(TensorBoard, FileIsValidAfterConstructionAndEveryEventIsWrittenAtOnce) {
  TempDir dir;
  fs::path path;
  {
    TensorBoardWriter writer(dir.path());
    path = writer.path();
    ASSERT_EQ(ReadEventFile(path).size(), 1u);  // the version event, already on disk
    writer.AddScalar("loss", 5, 1.5f);
    EXPECT_EQ(ReadEventFile(path).size(), 2u);  // TensorBoard sees it during the run
  }
  const auto events = ReadEventFile(path);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step, 5);
  EXPECT_NEAR(events[1].wall_time.value_or(0), WallTimeNow(), 5);  // default: now
}

TEST(TensorBoard, ReaderDetectsACorruptedByte) {
  TempDir dir;
  std::string bytes;
  {
    TensorBoardWriter writer(dir.path());
    writer.AddScalar("loss", 1, 2.5f, 1.0);
    writer.Flush();
    bytes = ReadFile(writer.path());
  }
  ASSERT_EQ(ReadTfRecords(bytes).size(), 2u);
  const size_t second = bytes.size() - (ReadTfRecords(bytes)[1].size() + 16);
  std::string data_flip = bytes;
  data_flip[second + 12 + 3] ^= 0x01;  // inside the second record's data
  EXPECT_THROW(
      {
        try {
          ReadTfRecords(data_flip);
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "record 1: data crc mismatch");
          throw;
        }
      },
      std::runtime_error);
  std::string length_flip = bytes;
  length_flip[second] ^= 0x01;  // the second record's length
  EXPECT_THROW(
      {
        try {
          ReadTfRecords(length_flip);
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "record 1: length crc mismatch");
          throw;
        }
      },
      std::runtime_error);
}

TEST(TensorBoard, RefusesToOverwriteAndNamesTheFile) {
  TempDir dir;
  TensorBoardWriter first(dir.path(), ".rank0");
  EXPECT_TRUE(first.path().string().ends_with(".rank0"));
  TensorBoardWriter second(dir.path(), ".rank1");  // a suffix keeps writers apart
  EXPECT_NE(first.path(), second.path());
  // Same suffix within the same second: the existing file is kept.
  const std::string first_bytes = ReadFile(first.path());
  try {
    TensorBoardWriter clash(dir.path(), ".rank0");
    // The clock moved on to a new second: a different file, no clash.
    EXPECT_NE(clash.path(), first.path());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_EQ(e.where().file, first.path().string());
  }
  EXPECT_EQ(ReadFile(first.path()), first_bytes);
}

TEST(TensorBoard, UnwritableDirectoryIsAnIoError) {
  TempDir dir;
  WriteFileAtomic(dir / "file", "not a directory");
  try {
    TensorBoardWriter writer(dir / "file" / "tb");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(e.Message().find("file"), std::string::npos) << e.Message();
  }
}

// TensorBoard itself, when this machine's Python has it.
TEST(TensorBoard, TensorBoardPackageReadsTheFile) {
#ifndef TOPSPIN_TEST_PYTHON
#define TOPSPIN_TEST_PYTHON "python3"
#endif
  const char* env = std::getenv("TOPSPIN_PYTHON");
  const std::string python = env != nullptr ? env : TOPSPIN_TEST_PYTHON;
  if (std::system((python + " -c 'import tensorboard' >/dev/null 2>&1").c_str()) != 0) {
    GTEST_SKIP() << "the tensorboard Python package is not installed for " << python
                 << " (set TOPSPIN_PYTHON to a python that has it)";
  }
  TempDir dir;
  {
    TensorBoardWriter writer(dir.path());
    writer.Write(1, {{"loss", 2.5}, {"lr", 0.25}}, 10.0);
    writer.Write(2, {{"loss", -3.0}}, 11.0);
  }
  const std::string script =
      "import sys\n"
      "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator\n"
      "ea = EventAccumulator(sys.argv[1]); ea.Reload()\n"
      "for tag in sorted(ea.Tags()['scalars']):\n"
      "    for s in ea.Scalars(tag): print(tag, s.step, s.value, s.wall_time)\n";
  WriteFileAtomic(dir / "read.py", script);
  const std::string command = python + " " + (dir / "read.py").string() + " " + dir.path().string();
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char chunk[256];
  while (size_t n = std::fread(chunk, 1, sizeof(chunk), pipe)) output.append(chunk, n);
  ASSERT_EQ(::pclose(pipe), 0) << output;
  EXPECT_EQ(output, "loss 1 2.5 10.0\nloss 2 -3.0 11.0\nlr 1 0.25 10.0\n");
}

// ---- JSONL -------------------------------------------------------------------

std::vector<std::string> Lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Jsonl, RoundTripsValuesIncludingNanAndInfinity) {
  TempDir dir;
  const fs::path path = dir / "run" / "metrics.jsonl";  // parent created
  const double tricky = 0.1 + 0.2;
  {
    JsonlWriter writer(path);
    writer.Write(7,
                 {{"loss", tricky},
                  {"nan", std::nan("")},
                  {"up", std::numeric_limits<double>::infinity()},
                  {"down", -std::numeric_limits<double>::infinity()}},
                 1767225600.125);
    EXPECT_GT(fs::file_size(path), 0u);  // written at once; Flush adds fdatasync
    writer.Flush();
  }
  const auto lines = Lines(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("{\"step\":7,\"time\":", 0), 0u) << lines[0];
  const auto json = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(json.at("step").get<int64_t>(), 7);
  EXPECT_EQ(json.at("time").get<double>(), 1767225600.125);
  EXPECT_EQ(json.at("loss").get<double>(), tricky);  // exact round trip
  EXPECT_EQ(json.at("nan"), "nan");
  EXPECT_EQ(json.at("up"), "inf");
  EXPECT_EQ(json.at("down"), "-inf");
  EXPECT_EQ(json.size(), 6u);
}

TEST(Jsonl, ReopenAppendsAndATornLineStaysApart) {
  TempDir dir;
  const fs::path path = dir / "metrics.jsonl";
  {
    JsonlWriter writer(path);
    writer.Write(1, {{"loss", 1.0}}, 1.0);
    writer.Write(2, {{"loss", 0.5}}, 2.0);
  }  // destructor flushes
  {
    JsonlWriter resumed(path);
    resumed.Write(3, {{"loss", 0.25}}, 3.0);
  }
  ASSERT_EQ(Lines(path).size(), 3u);
  { std::ofstream(path, std::ios::app) << "{\"step\":4,\"ti"; }  // a crash mid-line
  {
    JsonlWriter resumed(path);
    resumed.Write(4, {{"loss", 0.125}}, 4.0);
  }
  const auto lines = Lines(path);
  ASSERT_EQ(lines.size(), 5u);
  for (int i : {0, 1, 2}) EXPECT_EQ(nlohmann::json::parse(lines[i]).at("step"), i + 1);
  EXPECT_FALSE(nlohmann::json::accept(lines[3]));
  EXPECT_EQ(nlohmann::json::parse(lines[4]).at("loss"), 0.125);
}

TEST(Jsonl, WhatWasWrittenSurvivesAKilledProcess) {
  TempDir dir;
  const fs::path path = dir / "metrics.jsonl";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    JsonlWriter writer(path);
    for (int step = 1; step <= 3; ++step) writer.Write(step, {{"loss", 1.0 / step}}, step);
    ::raise(SIGKILL);  // no destructor, no flush
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  const auto lines = Lines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(lines[2]).at("step"), 3);
}

TEST(Jsonl, AFullDiskIsAnIoErrorNamingTheFile) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  JsonlWriter writer("/dev/full");
  try {
    writer.Write(1, {{"loss", 1.0}}, 1.0);
    FAIL() << "a write to /dev/full succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(e.Message().find("/dev/full"), std::string::npos) << e.Message();
    EXPECT_NE(e.Message().find("the disk is full"), std::string::npos) << e.Message();
  }
}

TEST(Jsonl, ReservedNamesAreRejected) {
  TempDir dir;
  JsonlWriter writer(dir / "metrics.jsonl");
  EXPECT_THROW(writer.Write(1, {{"step", 1.0}}, 1.0), Error);
  EXPECT_THROW(writer.Write(1, {{"time", 1.0}}, 1.0), Error);
  writer.Flush();
  EXPECT_EQ(fs::file_size(writer.path()), 0u);
}

// ---- MultiSink ----------------------------------------------------------------

struct RecordingSink final : MetricsSink {
  RecordingSink(std::string* log, std::string name, bool fail_flush = false)
      : log(log), name(std::move(name)), fail_flush(fail_flush) {}
  void Write(int64_t step, const MetricValues& values, double) override {
    *log += name + ":w" + std::to_string(step) + ",";
  }
  void Flush() override {
    *log += name + ":f,";
    if (fail_flush) throw IoError("flush failed in " + name);
  }
  std::string* log;
  std::string name;
  bool fail_flush;
};

TEST(MultiSink, FansOutInOrderAndFlushesEveryoneBeforeRethrowing) {
  std::string log;
  MultiSink sink;
  sink.Add(std::make_unique<RecordingSink>(&log, "a", /*fail_flush=*/true));
  sink.Add(std::make_unique<RecordingSink>(&log, "b", /*fail_flush=*/true));
  sink.Add(std::make_unique<RecordingSink>(&log, "c"));
  sink.Write(3, {{"loss", 1.0}}, 1.0);
  EXPECT_EQ(log, "a:w3,b:w3,c:w3,");
  log.clear();
  try {
    sink.Flush();
    FAIL() << "expected the first flush failure";
  } catch (const Error& e) {
    EXPECT_EQ(e.what_text(), "flush failed in a");
  }
  EXPECT_EQ(log, "a:f,b:f,c:f,");
}

TEST(MultiSink, OneWriteReachesJsonlAndTensorBoard) {
  TempDir dir;
  MultiSink sink;
  sink.Add(std::make_unique<JsonlWriter>(dir / "metrics.jsonl"));
  auto tensorboard = std::make_unique<TensorBoardWriter>(dir / "tb");
  const fs::path event_file = tensorboard->path();
  sink.Add(std::move(tensorboard));
  sink.Write(42, {{"loss", 1.5}}, 5.0);
  sink.Flush();
  const auto lines = Lines(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(lines[0]).at("loss"), 1.5);
  const auto events = ReadEventFile(event_file);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step, 42);
  EXPECT_EQ(events[1].scalars.at(0).value, 1.5f);
}

}  // namespace
}  // namespace topspin
