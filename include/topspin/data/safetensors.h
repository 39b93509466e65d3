// safetensors files: the tensor format of Hugging Face's `safetensors`
// package, which PyTorch, JAX and most checkpoint tools read and write.
//
// Layout (little-endian):
//   bytes [0, 8)        N: u64, the length of the header
//   bytes [8, 8 + N)    the header: a UTF-8 JSON object
//                         {"NAME": {"dtype": "F32", "shape": [2, 3],
//                                   "data_offsets": [BEGIN, END]}, ...,
//                          "__metadata__": {"KEY": "VALUE", ...}}   (optional)
//   bytes [8 + N, EOF)  the data buffer; a tensor's bytes are
//                       buffer[BEGIN, END), row-major (C order), little-endian
//
// Reading applies the checks of the reference implementation (safetensors'
// tensor.rs) and more, so a file that opens can be trusted: the header
// length is at most kSafetensorsMaxHeaderSize and lies inside the file; the
// header is valid UTF-8 JSON, an object without duplicate keys; every entry
// has exactly dtype, shape and data_offsets with the right types; the
// element count times the dtype size does not overflow and equals
// END - BEGIN; the tensors cover the data buffer exactly, without gaps or
// overlaps; "__metadata__" maps strings to strings. Every violation is an
// Error{kData} naming the file, the tensor (field) and the byte offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace topspin {

// The reference implementation's MAX_HEADER_SIZE: longer headers are refused
// before anything is parsed.
inline constexpr uint64_t kSafetensorsMaxHeaderSize = 100'000'000;

// Element types, in the reference's order (increasing alignment). The header
// spells them as SafetensorsDTypeName() returns ("F32", "BF16", "BOOL", ...).
enum class SafetensorsDType : uint8_t {
  kBool,    // "BOOL", one byte, 0 or 1
  kU8,      // "U8"
  kI8,      // "I8"
  kF8E5M2,  // "F8_E5M2"
  kF8E4M3,  // "F8_E4M3"
  kI16,     // "I16"
  kU16,     // "U16"
  kF16,     // "F16", IEEE-754 binary16
  kBF16,    // "BF16", bfloat16
  kI32,     // "I32"
  kU32,     // "U32"
  kF32,     // "F32"
  kF64,     // "F64"
  kI64,     // "I64"
  kU64,     // "U64"
};

const char* SafetensorsDTypeName(SafetensorsDType dtype);
// The dtype spelled `name` (case-sensitive, as in the header), or nullopt.
std::optional<SafetensorsDType> SafetensorsDTypeFromName(std::string_view name);
// Bytes per element: 1, 2, 4 or 8.
size_t SafetensorsDTypeSize(SafetensorsDType dtype);

// One tensor of an open file. `bytes` points into the file's memory map and
// lives as long as the SafetensorsFile; it holds num_elements() *
// SafetensorsDTypeSize(dtype) bytes and is not necessarily aligned for the
// dtype (copy it, or check the address, before reinterpreting it).
struct TensorView {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<uint64_t> shape;  // [] for a scalar (one element)
  std::span<const std::byte> bytes;

  uint64_t num_elements() const;  // product of shape; 1 for a scalar
};

// A checked, memory-mapped safetensors file. Move-only; all const methods are
// thread-safe.
class SafetensorsFile {
 public:
  // Maps and checks the file (see the top of this header). Throws
  // Error{kData} for a malformed file, Error{kIo} when it cannot be read.
  static SafetensorsFile Open(const std::filesystem::path& path);

  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;

  const std::filesystem::path& path() const;
  uint64_t header_size() const;  // N
  // Tensor names in data-buffer order (by BEGIN; ties, i.e. empty tensors
  // at one offset, in header order). WriteSafetensors' order survives.
  const std::vector<std::string>& names() const;
  // The tensors, in names() order.
  const std::vector<TensorView>& tensors() const;
  // The tensor called `name`, or nullptr.
  const TensorView* Find(std::string_view name) const;
  // "__metadata__" (empty when the file has none).
  const std::map<std::string, std::string>& metadata() const;

 private:
  struct Impl;
  explicit SafetensorsFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One tensor to write. `bytes` (borrowed for the call) must hold exactly
// product(shape) * SafetensorsDTypeSize(dtype) bytes, little-endian, C order.
struct SafetensorsTensor {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<uint64_t> shape;  // [] for a scalar
  std::span<const std::byte> bytes;
};

// Writes `tensors` and `metadata` to `path` through AtomicFileWriter (the
// file appears complete or not at all). The header is compact JSON like the
// reference's: "__metadata__" first (left out when empty), then the tensors;
// it is padded with spaces to a multiple of 8 bytes. Tensors are laid out
// in the data buffer in the order given (the reference sorts by dtype and
// name instead; readers do not care), with 64-bit offsets. Names must be
// unique, valid UTF-8 and not "__metadata__"; a caller that breaks a
// precondition gets Error{kInternal} and no file.
void WriteSafetensors(const std::filesystem::path& path, std::span<const SafetensorsTensor> tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace topspin
