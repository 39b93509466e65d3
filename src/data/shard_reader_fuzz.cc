// libFuzzer entry point for ShardReader: any bytes must open, verify and
// read to completion or throw topspin::Error; never crash, hang or read out
// of bounds. Seeds (valid small shards) live in tests/fuzz/shard_reader_fuzz/.
// The bytes reach the reader as a memfd (data/fuzz_input.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/fuzz_input.h"
#include "topspin/core/error.h"
#include "topspin/data/shard.h"

namespace {

using topspin::fuzzing::InputPath;

void ReadEverything(const topspin::ShardReader& reader, bool verify) {
  for (size_t g = 0; g < reader.num_row_groups(); ++g) {
    for (size_t c = 0; c < reader.schema().size(); ++c) {
      try {
        const topspin::Column column = reader.ReadChunk(g, c, verify);
        for (size_t r = 0; r < column.size(); ++r) {
          if (column.dtype() == topspin::DType::kString) (void)column.StringAt(r);
          if (topspin::IsVariableLength(column.dtype()) &&
              column.dtype() != topspin::DType::kString) {
            (void)column.TokensAt(r);
          }
        }
      } catch (const topspin::Error&) {
        // A damaged chunk; the others must still read.
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const topspin::ShardReader reader(InputPath(data, size));
    for (const auto& spec : reader.schema()) (void)reader.ColumnIndex(spec.name);
    ReadEverything(reader, /*verify=*/false);  // layout checks alone
    ReadEverything(reader, /*verify=*/true);
    reader.VerifyAll();
    for (size_t g = 0; g < reader.num_row_groups(); ++g) (void)reader.ReadRowGroup(g);
  } catch (const topspin::Error&) {
  }
  return 0;
}
