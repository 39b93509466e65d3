// libFuzzer entry point for SafetensorsFile: any bytes must open and read
// every tensor to the last byte, or throw topspin::Error; never crash, hang
// or read out of bounds. Seeds (small valid files from WriteSafetensors)
// live in tests/fuzz/safetensors_fuzz/.
// The bytes reach the reader as a memfd (data/fuzz_input.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/fuzz_input.h"
#include "topspin/core/error.h"
#include "topspin/data/safetensors.h"

namespace {

using topspin::fuzzing::InputPath;

// Touches every byte of every tensor and checks the promises of the header.
void ReadEverything(const topspin::SafetensorsFile& file) {
  unsigned sum = 0;
  for (const auto& t : file.tensors()) {
    if (file.Find(t.name) != &t) ::abort();
    if (t.bytes.size() != t.num_elements() * topspin::SafetensorsDTypeSize(t.dtype)) ::abort();
    for (std::byte b : t.bytes) sum += std::to_integer<unsigned>(b);
  }
  for (const auto& [key, value] : file.metadata()) sum += key.size() + value.size();
  [[maybe_unused]] static volatile unsigned sink;
  sink = sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto file = topspin::SafetensorsFile::Open(InputPath(data, size));
    ReadEverything(file);
  } catch (const topspin::Error&) {
  }
  return 0;
}
