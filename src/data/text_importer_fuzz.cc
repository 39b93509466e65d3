// libFuzzer entry point for the text importer (byte tokenizer): any bytes
// must import to token rows or throw topspin::Error (invalid UTF-8), never
// crash, hang or read out of bounds (see data/import_fuzz_util.h).
#include <cstddef>
#include <cstdint>

#include "data/import_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return topspin::fuzz::FuzzImport("text", data, size);
}
