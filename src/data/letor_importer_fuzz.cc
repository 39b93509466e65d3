// libFuzzer entry point for the letor importer: any bytes must import to rows
// or throw topspin::Error, never crash, hang or read out of bounds, and
// give the same outcome however the input is cut into parse ranges (see
// data/import_fuzz_util.h).
#include <cstddef>
#include <cstdint>

#include "data/import_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return topspin::fuzz::FuzzImport("letor", data, size);
}
