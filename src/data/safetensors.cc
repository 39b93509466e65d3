// safetensors reader and writer (topspin/data/safetensors.h). The reader
// checks the length prefix, then the header text (UTF-8, JSON, no duplicate
// keys, bounded nesting), then each entry, then the layout of the data
// buffer; nothing is trusted before its check.
#include "topspin/data/safetensors.h"

#include <algorithm>
#include <cctype>
#include <tuple>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "topspin/core/error.h"
#include "topspin/core/files.h"
#include "topspin/core/strings.h"

namespace topspin {
namespace {

using Json = nlohmann::json;

constexpr size_t kLengthBytes = 8;     // the u64 header length
constexpr size_t kMaxJsonDepth = 128;  // serde_json's recursion limit in the reference

constexpr const char* kDamagedHint =
    "the file is damaged or is not a safetensors file: re-save it (safetensors save_file, or "
    "topspin)";
constexpr const char* kTruncatedHint =
    "the file is truncated or damaged: copy or download it again";

struct DTypeInfo {
  SafetensorsDType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {SafetensorsDType::kBool, "BOOL", 1},      {SafetensorsDType::kU8, "U8", 1},
    {SafetensorsDType::kI8, "I8", 1},          {SafetensorsDType::kF8E5M2, "F8_E5M2", 1},
    {SafetensorsDType::kF8E4M3, "F8_E4M3", 1}, {SafetensorsDType::kI16, "I16", 2},
    {SafetensorsDType::kU16, "U16", 2},        {SafetensorsDType::kF16, "F16", 2},
    {SafetensorsDType::kBF16, "BF16", 2},      {SafetensorsDType::kI32, "I32", 4},
    {SafetensorsDType::kU32, "U32", 4},        {SafetensorsDType::kF32, "F32", 4},
    {SafetensorsDType::kF64, "F64", 8},        {SafetensorsDType::kI64, "I64", 8},
    {SafetensorsDType::kU64, "U64", 8},
};

const DTypeInfo& Info(SafetensorsDType dtype) {
  return kDTypes[static_cast<size_t>(dtype)];
}

std::vector<std::string> DTypeNames() {
  std::vector<std::string> names;
  for (const auto& info : kDTypes) names.emplace_back(info.name);
  return names;
}

// Offset of the first byte of `s` that does not start a valid UTF-8
// sequence (overlong forms, surrogates and code points past U+10FFFF are
// invalid), or nullopt when all of `s` is valid.
std::optional<size_t> FirstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 1;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (s.size() - i < len) return i;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return i;
    }
    i += len;
  }
  return std::nullopt;
}

std::string ShapeText(const std::vector<uint64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// A header entry that passed its own checks; offsets are relative to the
// data buffer.
struct Entry {
  std::string name;
  SafetensorsDType dtype;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Checks one file's header and data layout. Every error names the file.
class HeaderChecker {
 public:
  HeaderChecker(std::string file, uint64_t header_size)
      : file_(std::move(file)), data_start_(kLengthBytes + header_size) {}

  [[nodiscard]] Error Bad(std::string field, std::optional<uint64_t> byte, std::string what,
                          std::string hint = kDamagedHint) const {
    ErrorWhere where{.file = file_, .field = std::move(field)};
    if (byte) where.byte_offset = static_cast<int64_t>(*byte);
    return DataError(std::move(what), std::move(where), std::move(hint));
  }

  // Parses the header text; also returns the top-level keys in file order.
  Json Parse(std::string_view text, std::vector<std::string>& top_keys) const;
  Entry ParseEntry(const std::string& name, const Json& j) const;
  std::map<std::string, std::string> ParseMetadata(const Json& j) const;
  // Sorts `entries` by offset and checks that they tile [0, buffer_size).
  void CheckLayout(std::vector<Entry>& entries, uint64_t buffer_size) const;

 private:
  SafetensorsDType ParseDType(const std::string& name, const Json& j) const;
  std::vector<uint64_t> ParseShape(const std::string& name, const Json& j) const;
  std::pair<uint64_t, uint64_t> ParseOffsets(const std::string& name, const Json& j) const;
  uint64_t ByteCount(const Entry& e) const;

  std::string file_;
  uint64_t data_start_;  // file offset of the data buffer
};

// Watches the parser's events: rejects duplicate keys (nlohmann keeps the
// last silently) and nesting deeper than kMaxJsonDepth, and records the
// top-level keys in order.
class KeyTracker {
 public:
  KeyTracker(const HeaderChecker& checker, std::vector<std::string>& top_keys)
      : checker_(checker), top_keys_(top_keys) {}

  bool OnEvent(Json::parse_event_t event, const Json& parsed) {
    using E = Json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      if (frames_.size() >= kMaxJsonDepth) {
        throw checker_.Bad(Path(), std::nullopt,
                           fmt::format("the header nests deeper than {} levels", kMaxJsonDepth));
      }
      frames_.push_back({});
    } else if (event == E::object_end || event == E::array_end) {
      frames_.pop_back();
    } else if (event == E::key) {
      OnKey(parsed.get_ref<const std::string&>());
    }
    return true;
  }

 private:
  struct Frame {
    std::unordered_set<std::string> keys;
    std::string key;  // the key being read
  };

  void OnKey(const std::string& key) {
    Frame& frame = frames_.back();
    frame.key = key;
    if (!frame.keys.insert(key).second) {
      throw checker_.Bad(Path(), std::nullopt, fmt::format("duplicate key \"{}\"", key),
                         "a key may appear once per object: the writer is broken or the file "
                         "was edited; re-save it");
    }
    if (frames_.size() == 1) top_keys_.push_back(key);
  }

  std::string Path() const {
    std::vector<std::string> keys;
    for (const auto& f : frames_) {
      if (!f.key.empty()) keys.push_back(f.key);
    }
    return Join(keys, ".");
  }

  const HeaderChecker& checker_;
  std::vector<std::string>& top_keys_;
  std::vector<Frame> frames_;
};

Json HeaderChecker::Parse(std::string_view text, std::vector<std::string>& top_keys) const {
  if (const auto bad = FirstInvalidUtf8(text)) {
    throw Bad("", kLengthBytes + *bad, "the header is not valid UTF-8");
  }
  KeyTracker tracker(*this, top_keys);
  Json root;
  try {
    root = Json::parse(text.begin(), text.end(),
                       [&tracker](int, Json::parse_event_t event, Json& parsed) {
                         return tracker.OnEvent(event, parsed);
                       });
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    if (const auto at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    const uint64_t at = e.byte > 0 ? std::min<uint64_t>(e.byte - 1, text.size()) : 0;
    throw Bad("", kLengthBytes + at, "the header is not valid JSON: " + what);
  } catch (const Json::exception& e) {  // e.g. out_of_range: a number overflows a double
    throw Bad("", kLengthBytes, fmt::format("the header is not valid JSON: {}", e.what()));
  }
  if (!root.is_object()) {
    throw Bad("", kLengthBytes,
              fmt::format("the header is a JSON {}, not an object", root.type_name()));
  }
  return root;
}

Entry HeaderChecker::ParseEntry(const std::string& name, const Json& j) const {
  if (!j.is_object()) {
    throw Bad(name, std::nullopt,
              fmt::format("expected an object with dtype, shape and data_offsets, got {}",
                          j.type_name()));
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      throw Bad(name, std::nullopt,
                fmt::format("unknown field \"{}\" (an entry has exactly dtype, shape and "
                            "data_offsets)",
                            key));
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!j.contains(key)) throw Bad(name, std::nullopt, fmt::format("missing field \"{}\"", key));
  }
  Entry e{
      .name = name, .dtype = ParseDType(name, j["dtype"]), .shape = ParseShape(name, j["shape"])};
  std::tie(e.begin, e.end) = ParseOffsets(name, j["data_offsets"]);
  const uint64_t nbytes = ByteCount(e);
  if (e.end - e.begin != nbytes) {
    throw Bad(
        name, data_start_ + e.begin,
        fmt::format("data_offsets [{}, {}] hold {} bytes, but shape {} of {} needs {}", e.begin,
                    e.end, e.end - e.begin, ShapeText(e.shape), Info(e.dtype).name, nbytes));
  }
  return e;
}

SafetensorsDType HeaderChecker::ParseDType(const std::string& name, const Json& j) const {
  if (!j.is_string()) {
    throw Bad(name, std::nullopt, fmt::format("dtype must be a string, got {}", j.dump()));
  }
  const auto& text = j.get_ref<const std::string&>();
  if (const auto dtype = SafetensorsDTypeFromName(text)) return *dtype;
  const auto names = DTypeNames();
  std::string upper = text;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  const auto guess =
      SafetensorsDTypeFromName(upper) ? std::optional(upper) : ClosestMatch(text, names);
  throw Bad(name, std::nullopt, fmt::format("unknown dtype \"{}\"", text),
            guess ? fmt::format("did you mean \"{}\"?", *guess)
                  : fmt::format("known dtypes: {}", Join(names, ", ")));
}

std::vector<uint64_t> HeaderChecker::ParseShape(const std::string& name, const Json& j) const {
  if (!j.is_array()) {
    throw Bad(name, std::nullopt, fmt::format("shape must be an array, got {}", j.dump()));
  }
  std::vector<uint64_t> shape;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_unsigned()) {
      throw Bad(
          name, std::nullopt,
          fmt::format("shape[{}] is {}: dimensions must be non-negative integers", i, j[i].dump()));
    }
    shape.push_back(j[i].get<uint64_t>());
  }
  return shape;
}

std::pair<uint64_t, uint64_t> HeaderChecker::ParseOffsets(const std::string& name,
                                                          const Json& j) const {
  if (!j.is_array() || j.size() != 2 || !j[0].is_number_unsigned() || !j[1].is_number_unsigned()) {
    throw Bad(name, std::nullopt,
              fmt::format("data_offsets must be [begin, end], two non-negative integers, got {}",
                          j.dump()));
  }
  const uint64_t begin = j[0].get<uint64_t>(), end = j[1].get<uint64_t>();
  if (end < begin) {
    throw Bad(name, std::nullopt,
              fmt::format("data_offsets [{}, {}] end before they begin", begin, end));
  }
  return {begin, end};
}

uint64_t HeaderChecker::ByteCount(const Entry& e) const {
  uint64_t n = Info(e.dtype).size;
  for (uint64_t dim : e.shape) {
    if (__builtin_mul_overflow(n, dim, &n)) {
      throw Bad(e.name, std::nullopt,
                fmt::format("shape {} of {} needs more than 2^64 bytes", ShapeText(e.shape),
                            Info(e.dtype).name));
    }
  }
  return n;
}

std::map<std::string, std::string> HeaderChecker::ParseMetadata(const Json& j) const {
  if (!j.is_object()) {
    throw Bad("__metadata__", std::nullopt,
              fmt::format("expected an object of strings, got {}", j.type_name()));
  }
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : j.items()) {
    if (!value.is_string()) {
      throw Bad("__metadata__", std::nullopt,
                fmt::format("the value of \"{}\" is {}, not a string", key, value.dump()));
    }
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

void HeaderChecker::CheckLayout(std::vector<Entry>& entries, uint64_t buffer_size) const {
  for (const Entry& e : entries) {
    if (e.end > buffer_size) {
      throw Bad(e.name, data_start_ + std::min(e.begin, buffer_size),
                fmt::format("data_offsets [{}, {}] run past the end of the data buffer ({} "
                            "bytes from byte {} to the end of the file)",
                            e.begin, e.end, buffer_size, data_start_),
                kTruncatedHint);
    }
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;  // the buffer is tiled up to here
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin > covered) {
      throw Bad(e.name, data_start_ + covered,
                fmt::format("gap in the data buffer: bytes [{}, {}) before this tensor belong "
                            "to no tensor",
                            covered, e.begin));
    }
    if (e.begin < covered) {
      throw Bad(e.name, data_start_ + e.begin,
                fmt::format("data_offsets [{}, {}] overlap tensor \"{}\", which ends at {}",
                            e.begin, e.end, previous->name, covered));
    }
    covered = e.end;
    previous = &e;
  }
  if (covered != buffer_size) {
    throw Bad(previous != nullptr ? previous->name : "", data_start_ + covered,
              fmt::format("gap in the data buffer: its last {} bytes [{}, {}) belong to no tensor",
                          buffer_size - covered, covered, buffer_size));
  }
}

uint64_t DecodeU64(std::span<const std::byte> bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v |= std::to_integer<uint64_t>(bytes[i]) << (8 * i);
  return v;
}

}  // namespace

const char* SafetensorsDTypeName(SafetensorsDType dtype) {
  return Info(dtype).name;
}

std::optional<SafetensorsDType> SafetensorsDTypeFromName(std::string_view name) {
  for (const auto& info : kDTypes) {
    if (name == info.name) return info.dtype;
  }
  return std::nullopt;
}

size_t SafetensorsDTypeSize(SafetensorsDType dtype) {
  return Info(dtype).size;
}

uint64_t TensorView::num_elements() const {
  uint64_t n = 1;
  for (uint64_t dim : shape) n *= dim;  // checked against overflow at Open
  return n;
}

// ---- SafetensorsFile ---------------------------------------------------------

struct SafetensorsFile::Impl {
  explicit Impl(const fs::path& p) : path(p), file_name(p.string()), file(p) {}

  uint64_t ReadHeaderSize() const;
  void Load();
  void AddTensors(std::vector<Entry> entries);

  fs::path path;
  std::string file_name;
  MmapFile file;
  uint64_t header_size = 0;
  std::vector<TensorView> tensors;
  std::vector<std::string> names;
  std::map<std::string, size_t, std::less<>> index;
  std::map<std::string, std::string> metadata;
};

uint64_t SafetensorsFile::Impl::ReadHeaderSize() const {
  const uint64_t size = file.size();
  const auto bad = [&](std::string what, const char* hint) {
    return DataError(std::move(what), ErrorWhere{.file = file_name, .byte_offset = 0}, hint);
  };
  if (size < kLengthBytes) {
    throw bad(fmt::format("{} bytes is too short for a safetensors file (the header length "
                          "alone takes 8)",
                          size),
              kTruncatedHint);
  }
  const uint64_t n = DecodeU64(file.bytes().first(kLengthBytes));
  if (n > kSafetensorsMaxHeaderSize) {
    throw bad(
        fmt::format("header length {} exceeds the limit of {} bytes", n, kSafetensorsMaxHeaderSize),
        kDamagedHint);
  }
  if (n > size - kLengthBytes) {
    throw bad(fmt::format("the header ({} bytes from byte 8) runs past the end of the file "
                          "({} bytes)",
                          n, size),
              kTruncatedHint);
  }
  return n;
}

void SafetensorsFile::Impl::Load() {
  header_size = ReadHeaderSize();
  const HeaderChecker checker(file_name, header_size);
  std::vector<std::string> keys;
  const Json root = checker.Parse(file.view().substr(kLengthBytes, header_size), keys);
  std::vector<Entry> entries;
  for (const auto& key : keys) {
    if (key == "__metadata__") {
      metadata = checker.ParseMetadata(root[key]);
    } else {
      entries.push_back(checker.ParseEntry(key, root[key]));
    }
  }
  checker.CheckLayout(entries, file.size() - kLengthBytes - header_size);
  AddTensors(std::move(entries));
}

void SafetensorsFile::Impl::AddTensors(std::vector<Entry> entries) {
  const auto data = file.bytes().subspan(kLengthBytes + header_size);
  tensors.reserve(entries.size());
  names.reserve(entries.size());
  for (auto& e : entries) {
    index.emplace(e.name, tensors.size());
    names.push_back(e.name);
    tensors.push_back(TensorView{.name = std::move(e.name),
                                 .dtype = e.dtype,
                                 .shape = std::move(e.shape),
                                 .bytes = data.subspan(e.begin, e.end - e.begin)});
  }
}

SafetensorsFile SafetensorsFile::Open(const fs::path& path) {
  auto impl = std::make_unique<Impl>(path);
  impl->Load();
  return SafetensorsFile(std::move(impl));
}

SafetensorsFile::SafetensorsFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SafetensorsFile::~SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;

const fs::path& SafetensorsFile::path() const {
  return impl_->path;
}
uint64_t SafetensorsFile::header_size() const {
  return impl_->header_size;
}
const std::vector<std::string>& SafetensorsFile::names() const {
  return impl_->names;
}
const std::vector<TensorView>& SafetensorsFile::tensors() const {
  return impl_->tensors;
}
const TensorView* SafetensorsFile::Find(std::string_view name) const {
  const auto it = impl_->index.find(name);
  return it == impl_->index.end() ? nullptr : &impl_->tensors[it->second];
}
const std::map<std::string, std::string>& SafetensorsFile::metadata() const {
  return impl_->metadata;
}

// ---- WriteSafetensors --------------------------------------------------------

namespace {

// A JSON string literal for `s`, which must be valid UTF-8.
std::string Quote(const fs::path& path, const std::string& s) {
  if (FirstInvalidUtf8(s)) {
    throw InternalError(
        fmt::format("WriteSafetensors {}: \"{}\" is not valid UTF-8", path.string(), s));
  }
  return Json(s).dump();
}

// The entry for `t` at data offset `begin`; returns the offset after it.
uint64_t AppendEntry(const fs::path& path, const SafetensorsTensor& t, uint64_t begin,
                     std::string& header) {
  const auto fail = [&](const std::string& what) {
    return InternalError(
        fmt::format("WriteSafetensors {}: tensor \"{}\": {}", path.string(), t.name, what));
  };
  if (t.name == "__metadata__") throw fail("the name is reserved for the metadata");
  if (static_cast<size_t>(t.dtype) >= std::size(kDTypes)) throw fail("unknown dtype");
  uint64_t nbytes = SafetensorsDTypeSize(t.dtype);
  for (uint64_t dim : t.shape) {
    if (__builtin_mul_overflow(nbytes, dim, &nbytes)) throw fail("the shape overflows 2^64 bytes");
  }
  if (t.bytes.size() != nbytes) {
    throw fail(fmt::format("{} bytes given, but shape {} of {} needs {}", t.bytes.size(),
                           ShapeText(t.shape), SafetensorsDTypeName(t.dtype), nbytes));
  }
  header += fmt::format("{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                        Quote(path, t.name), SafetensorsDTypeName(t.dtype), fmt::join(t.shape, ","),
                        begin, begin + nbytes);
  return begin + nbytes;
}

std::string BuildHeader(const fs::path& path, std::span<const SafetensorsTensor> tensors,
                        const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto& [key, value] : metadata) {
      if (header.back() != '{') header += ',';
      header += Quote(path, key) + ":" + Quote(path, value);
    }
    header += "}";
  }
  std::unordered_set<std::string_view> seen;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (!seen.insert(t.name).second) {
      throw InternalError(
          fmt::format("WriteSafetensors {}: tensor \"{}\" is given twice", path.string(), t.name));
    }
    if (header.back() != '{') header += ',';
    offset = AppendEntry(path, t, offset, header);
  }
  header += "}";
  header.resize((header.size() + kLengthBytes - 1) / kLengthBytes * kLengthBytes, ' ');
  if (header.size() > kSafetensorsMaxHeaderSize) {
    throw InternalError(
        fmt::format("WriteSafetensors {}: the header would take {} bytes, over "
                    "the limit of {} that readers accept",
                    path.string(), header.size(), kSafetensorsMaxHeaderSize));
  }
  return header;
}

}  // namespace

void WriteSafetensors(const fs::path& path, std::span<const SafetensorsTensor> tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string header = BuildHeader(path, tensors, metadata);
  unsigned char length[kLengthBytes];
  for (size_t i = 0; i < kLengthBytes; ++i) {
    length[i] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  }
  AtomicFileWriter out(path);
  out.Write(length, sizeof(length));
  out.Write(header);
  for (const auto& t : tensors) out.Write(t.bytes.data(), t.bytes.size());
  out.Commit();
}

}  // namespace topspin
