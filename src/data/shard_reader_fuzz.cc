// libFuzzer entry point for ShardReader: any bytes must open, verify and
// read to completion or throw topspin::Error; never crash, hang or read out
// of bounds. Seeds (valid small shards) live in tests/fuzz/shard_reader_fuzz/.
//
// The bytes go to an anonymous in-memory file (memfd), opened through
// /proc/self/fd: ShardReader's public API reads paths, and a memfd keeps
// the disk out of the loop.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include <sys/mman.h>

#include "topspin/core/error.h"
#include "topspin/data/shard.h"

namespace {

// One memfd per process, rewritten for every input.
const std::string& InputPath(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("shard_reader_fuzz", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) ::abort();  // the harness itself is broken
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) ::abort();
    done += static_cast<size_t>(n);
  }
  return path;
}

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
