#include "topspin/data/safetensors.h"

#include <cstring>
#include <functional>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_util.h"
#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {
namespace {

using ::testing::HasSubstr;
using Bytes = std::vector<std::byte>;

constexpr SafetensorsDType kAllDTypes[] = {
    SafetensorsDType::kBool,   SafetensorsDType::kU8,     SafetensorsDType::kI8,
    SafetensorsDType::kF8E5M2, SafetensorsDType::kF8E4M3, SafetensorsDType::kI16,
    SafetensorsDType::kU16,    SafetensorsDType::kF16,    SafetensorsDType::kBF16,
    SafetensorsDType::kI32,    SafetensorsDType::kU32,    SafetensorsDType::kF32,
    SafetensorsDType::kF64,    SafetensorsDType::kI64,    SafetensorsDType::kU64,
};

template <typename T>
Bytes ToBytes(const std::vector<T>& values) {
  Bytes out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

Bytes Pattern(size_t n, int seed) {
  Bytes out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 31 + seed * 7) & 0xFF);
  return out;
}

std::string Le64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return out;
}

// A file made by hand: the length prefix (the header's size unless
// `length` overrides it), the header text and `data` bytes of data.
fs::path WriteRaw(const testing::TempDir& dir, const std::string& name, const std::string& header,
                  size_t data = 0, std::optional<uint64_t> length = std::nullopt) {
  const fs::path path = dir / (name + ".safetensors");
  WriteFileAtomic(path, Le64(length.value_or(header.size())) + header + std::string(data, 'x'));
  return path;
}

Error OpenError(const fs::path& path) {
  try {
    SafetensorsFile::Open(path);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "opened " << path;
  return InternalError("no error");
}

// Opening `path` throws Error{kData} naming the file and saying each of `parts`.
void ExpectRejected(const fs::path& path, const std::vector<std::string>& parts) {
  const Error e = OpenError(path);
  EXPECT_EQ(e.kind(), ErrorKind::kData) << e.Message();
  EXPECT_THAT(e.Message(), HasSubstr(path.string()));
  EXPECT_FALSE(e.hint().empty()) << e.Message();
  for (const auto& part : parts) EXPECT_THAT(e.Message(), HasSubstr(part));
}

TEST(Safetensors, DTypeNamesAndSizesRoundTrip) {
  for (const auto dtype : kAllDTypes) {
    EXPECT_EQ(SafetensorsDTypeFromName(SafetensorsDTypeName(dtype)), dtype);
  }
  EXPECT_EQ(SafetensorsDTypeSize(SafetensorsDType::kBF16), 2u);
  EXPECT_EQ(SafetensorsDTypeSize(SafetensorsDType::kF64), 8u);
  EXPECT_EQ(SafetensorsDTypeSize(SafetensorsDType::kBool), 1u);
  EXPECT_EQ(SafetensorsDTypeFromName("f32"), std::nullopt);
}

TEST(Safetensors, RoundTripsEveryDTypeZeroElementAndScalarTensors) {
  testing::TempDir dir;
  std::vector<Bytes> storage;
  std::vector<SafetensorsTensor> tensors;
  int seed = 0;
  for (const auto dtype : kAllDTypes) {
    storage.push_back(Pattern(6 * SafetensorsDTypeSize(dtype), ++seed));
    tensors.push_back({fmt::format("layer.{}", SafetensorsDTypeName(dtype)), dtype, {2, 3}, {}});
  }
  storage.push_back({});
  tensors.push_back({"empty", SafetensorsDType::kF32, {0, 4}, {}});
  storage.push_back(ToBytes(std::vector<double>{3.5}));
  tensors.push_back({"scalar", SafetensorsDType::kF64, {}, {}});
  storage.push_back({});
  tensors.push_back({"also.empty", SafetensorsDType::kI64, {3, 0}, {}});
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].bytes = storage[i];
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "7"}};
  const fs::path path = dir / "all.safetensors";
  WriteSafetensors(path, tensors, metadata);

  const auto file = SafetensorsFile::Open(path);
  EXPECT_EQ(file.header_size() % 8, 0u);
  EXPECT_EQ(file.metadata(), metadata);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(tensors[i].name);
    EXPECT_EQ(file.names()[i], tensors[i].name);  // the order given
    const TensorView* t = file.Find(tensors[i].name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t, &file.tensors()[i]);
    EXPECT_EQ(t->dtype, tensors[i].dtype);
    EXPECT_EQ(t->shape, tensors[i].shape);
    EXPECT_TRUE(std::equal(t->bytes.begin(), t->bytes.end(), storage[i].begin(), storage[i].end()));
  }
  EXPECT_EQ(file.Find("scalar")->num_elements(), 1u);
  double scalar = 0;
  std::memcpy(&scalar, file.Find("scalar")->bytes.data(), sizeof(scalar));
  EXPECT_EQ(scalar, 3.5);
  EXPECT_EQ(file.Find("empty")->num_elements(), 0u);
  EXPECT_EQ(file.Find("missing"), nullptr);
}

TEST(Safetensors, WritesTheReferenceBytesForOneTensor) {
  // The bytes the reference implementation writes for this tensor (its
  // test_serialization_forced_alignement): 65 header bytes padded to 72.
  testing::TempDir dir;
  const Bytes data = ToBytes(std::vector<float>{0, 1, 2, 3, 4, 5});
  const std::vector<SafetensorsTensor> tensors = {
      {"attn0", SafetensorsDType::kF32, {1, 1, 2, 3}, data}};
  WriteSafetensors(dir / "a.safetensors", tensors);
  const std::string expected =
      std::string("\x48\0\0\0\0\0\0\0", 8) +
      R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})" + "       " +
      std::string("\0\0\0\0\0\0\x80\x3f\0\0\0\x40\0\0\x40\x40\0\0\x80\x40\0\0\xa0\x40", 24);
  EXPECT_EQ(ReadFile(dir / "a.safetensors"), expected);
  EXPECT_EQ(SafetensorsFile::Open(dir / "a.safetensors").header_size(), 72u);
}

TEST(Safetensors, WritesTheReferenceBytesForEmptyFiles) {
  testing::TempDir dir;
  WriteSafetensors(dir / "empty.safetensors", {});
  EXPECT_EQ(ReadFile(dir / "empty.safetensors"), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  WriteSafetensors(dir / "meta.safetensors", {}, {{"framework", "pt"}});
  EXPECT_EQ(
      ReadFile(dir / "meta.safetensors"),
      std::string("\x28\0\0\0\0\0\0\0", 8) + R"({"__metadata__":{"framework":"pt"}})" + "     ");
  const auto file = SafetensorsFile::Open(dir / "meta.safetensors");
  EXPECT_TRUE(file.names().empty());
  EXPECT_EQ(file.metadata().at("framework"), "pt");
}

TEST(Safetensors, ReadsFilesWhoseTensorsAreNotInHeaderOrder) {
  // The reference writes the header in any order; offsets decide the layout.
  testing::TempDir dir;
  const auto path = WriteRaw(dir, "order",
                             R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},)"
                             R"("a":{"dtype":"I16","shape":[],"data_offsets":[0,2]}})",
                             4);
  const auto file = SafetensorsFile::Open(path);
  EXPECT_EQ(file.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(file.Find("b")->bytes.size(), 2u);
}

TEST(Safetensors, WriterRejectsBrokenPreconditions) {
  testing::TempDir dir;
  const Bytes four(4);
  const auto write = [&](std::vector<SafetensorsTensor> tensors) {
    WriteSafetensors(dir / "bad.safetensors", tensors);
  };
  EXPECT_THROW(write({{"a", SafetensorsDType::kF32, {2}, four}}), Error);  // 4 bytes for 8
  EXPECT_THROW(
      write({{"a", SafetensorsDType::kF32, {1}, four}, {"a", SafetensorsDType::kF32, {1}, four}}),
      Error);
  EXPECT_THROW(write({{"__metadata__", SafetensorsDType::kU8, {4}, four}}), Error);
  EXPECT_THROW(write({{"\xff", SafetensorsDType::kU8, {4}, four}}), Error);
  EXPECT_FALSE(fs::exists(dir / "bad.safetensors"));
}

// ---- damaged and malformed files ---------------------------------------------

constexpr const char* kOne = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";

TEST(SafetensorsBad, TruncatedFiles) {
  testing::TempDir dir;
  const fs::path tiny = dir / "tiny.safetensors";
  WriteFileAtomic(tiny, std::string("\x10\0\0\0\0", 5));
  ExpectRejected(tiny, {"5 bytes is too short", "byte 0"});

  const Bytes data = ToBytes(std::vector<float>{1, 2, 3});
  const std::vector<SafetensorsTensor> tensors = {{"w", SafetensorsDType::kF32, {3}, data}};
  const fs::path cut = dir / "cut.safetensors";
  WriteSafetensors(cut, tensors);
  const std::string whole = ReadFile(cut);
  WriteFileAtomic(cut, whole.substr(0, whole.size() - 2));
  ExpectRejected(cut,
                 {"\"w\"", "data_offsets [0, 12] run past the end of the data buffer (10 bytes"});
}

TEST(SafetensorsBad, HeaderTooBig) {
  testing::TempDir dir;
  ExpectRejected(WriteRaw(dir, "big", "{}", 0, 100'000'001),
                 {"byte 0", "header length 100000001 exceeds the limit of 100000000 bytes"});
  ExpectRejected(WriteRaw(dir, "huge", "{}", 0, ~uint64_t{0}), {"exceeds the limit"});
}

TEST(SafetensorsBad, HeaderPastEndOfFile) {
  testing::TempDir dir;
  ExpectRejected(
      WriteRaw(dir, "past", "{}      ", 0, 64),
      {"byte 0", "the header (64 bytes from byte 8) runs past the end of the file (16 bytes)"});
}

TEST(SafetensorsBad, HeaderNotJson) {
  testing::TempDir dir;
  // The byte is where the parser stopped: "{no" was read.
  ExpectRejected(WriteRaw(dir, "text", "{nope}"), {"byte 10", "the header is not valid JSON"});
  ExpectRejected(WriteRaw(dir, "trailing", "{} x"), {"the header is not valid JSON"});
  ExpectRejected(WriteRaw(dir, "empty", ""), {"the header is not valid JSON"});
  // nlohmann reports this one as out_of_range, not parse_error (found by fuzzing).
  ExpectRejected(WriteRaw(dir, "huge", R"({"w":1e999999})"), {"number overflow"});
  ExpectRejected(WriteRaw(dir, "utf8", "{\"a\xc3\x28\":1}"), {"byte 11", "not valid UTF-8"});
  ExpectRejected(WriteRaw(dir, "deep", std::string(200, '[') + std::string(200, ']')),
                 {"nests deeper than 128 levels"});
}

TEST(SafetensorsBad, HeaderNotAnObject) {
  testing::TempDir dir;
  ExpectRejected(WriteRaw(dir, "array", "[1,2]"),
                 {"byte 8", "the header is a JSON array, not an object"});
  ExpectRejected(WriteRaw(dir, "entry", R"({"w":[1]})"),
                 {"\"w\"", "expected an object with dtype, shape and data_offsets, got array"});
}

TEST(SafetensorsBad, MissingOrUnknownField) {
  testing::TempDir dir;
  ExpectRejected(WriteRaw(dir, "missing", R"({"w":{"dtype":"F32","shape":[2]}})", 8),
                 {"\"w\"", "missing field \"data_offsets\""});
  ExpectRejected(
      WriteRaw(dir, "unknown", fmt::format(R"({{"w":{{{},"offsets":[0,8]}}}})", kOne), 8),
      {"\"w\"", "unknown field \"offsets\""});
}

TEST(SafetensorsBad, BadDType) {
  testing::TempDir dir;
  ExpectRejected(
      WriteRaw(dir, "f128", R"({"w":{"dtype":"F128","shape":[2],"data_offsets":[0,8]}})", 8),
      {"\"w\"", "unknown dtype \"F128\"", "known dtypes: BOOL, U8"});
  ExpectRejected(
      WriteRaw(dir, "lower", R"({"w":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", 8),
      {"unknown dtype \"f32\"", "did you mean \"F32\"?"});
  ExpectRejected(
      WriteRaw(dir, "number", R"({"w":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", 8),
      {"dtype must be a string, got 4"});
}

TEST(SafetensorsBad, NegativeOrFractionalDimension) {
  testing::TempDir dir;
  ExpectRejected(
      WriteRaw(dir, "neg", R"({"w":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,8]}})", 8),
      {"\"w\"", "shape[1] is -3: dimensions must be non-negative integers"});
  ExpectRejected(
      WriteRaw(dir, "frac", R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8),
      {"shape[0] is 2.5"});
  ExpectRejected(WriteRaw(dir, "obj", R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", 8),
                 {"shape must be an array, got 2"});
}

TEST(SafetensorsBad, OverflowingShape) {
  testing::TempDir dir;
  ExpectRejected(
      WriteRaw(dir, "elems",
               R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
      {"\"w\"", "shape [4294967296, 4294967296] of U8 needs more than 2^64 bytes"});
  // Fits as an element count, overflows once multiplied by the dtype size.
  ExpectRejected(
      WriteRaw(dir, "bytes",
               R"({"w":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}})", 8),
      {"needs more than 2^64 bytes"});
}

TEST(SafetensorsBad, OffsetsWithAGap) {
  testing::TempDir dir;
  ExpectRejected(WriteRaw(dir, "middle",
                          R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                          12),
                 {"\"b\"", "gap in the data buffer: bytes [4, 8) before this tensor"});
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  ExpectRejected(WriteRaw(dir, "start", header, 8),
                 {fmt::format("byte {}", 8 + header.size()), "bytes [0, 4) before this tensor"});
  ExpectRejected(WriteRaw(dir, "end", fmt::format(R"({{"a":{{{}}}}})", kOne), 12),
                 {"\"a\"", "gap in the data buffer: its last 4 bytes [8, 12) belong to no tensor"});
}

TEST(SafetensorsBad, OverlappingOffsets) {
  testing::TempDir dir;
  ExpectRejected(WriteRaw(dir, "overlap",
                          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                          12),
                 {"\"b\"", "data_offsets [4, 12] overlap tensor \"a\", which ends at 8"});
}

TEST(SafetensorsBad, OffsetsOutOfRange) {
  testing::TempDir dir;
  ExpectRejected(WriteRaw(dir, "range", fmt::format(R"({{"a":{{{}}}}})", kOne), 4),
                 {"\"a\"", "data_offsets [0, 8] run past the end of the data buffer (4 bytes"});
  ExpectRejected(
      WriteRaw(dir, "backwards", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 8),
      {"data_offsets [8, 4] end before they begin"});
  ExpectRejected(WriteRaw(dir, "one", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0]}})", 0),
                 {"data_offsets must be [begin, end], two non-negative integers, got [0]"});
}

TEST(SafetensorsBad, SizeDisagreesWithShape) {
  testing::TempDir dir;
  ExpectRejected(
      WriteRaw(dir, "size", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
      {"\"w\"", "data_offsets [0, 8] hold 8 bytes, but shape [3] of F32 needs 12"});
}

TEST(SafetensorsBad, DuplicateKeys) {
  testing::TempDir dir;
  ExpectRejected(WriteRaw(dir, "dup", fmt::format(R"({{"w":{{{}}},"w":{{{}}}}})", kOne, kOne), 8),
                 {"\"w\"", "duplicate key \"w\""});
  ExpectRejected(
      WriteRaw(dir, "dupfield",
               R"({"w":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
      {"\"w.dtype\"", "duplicate key \"dtype\""});
  ExpectRejected(WriteRaw(dir, "dupmeta", R"({"__metadata__":{"k":"a","k":"b"}})"),
                 {"\"__metadata__.k\"", "duplicate key \"k\""});
}

TEST(SafetensorsBad, BadMetadata) {
  testing::TempDir dir;
  ExpectRejected(WriteRaw(dir, "value", R"({"__metadata__":{"k":3}})"),
                 {"\"__metadata__\"", "the value of \"k\" is 3, not a string"});
  ExpectRejected(WriteRaw(dir, "array", R"({"__metadata__":["k"]})"),
                 {"\"__metadata__\"", "expected an object of strings, got array"});
}

}  // namespace
}  // namespace topspin
