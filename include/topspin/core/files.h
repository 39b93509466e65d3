// Files: memory-mapped reading, crash-safe writes, free-space checks.
//
// Crash safety: a file written with AtomicFileWriter (or WriteFileAtomic)
// is either entirely the old content or entirely the new content after a
// crash at any point: bytes go to a temporary file in the same directory,
// which is fsynced, renamed over the target, and the directory is fsynced.
// AtomicDirectory does the same for a directory built file by file.
// All functions throw topspin::Error (kind io) naming the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace topspin {

namespace fs = std::filesystem;

// A read-only memory map of a whole file. Move-only; unmaps on destruction.
// An empty file maps to an empty span. Thread-safe for concurrent reads.
class MmapFile {
 public:
  MmapFile() = default;
  explicit MmapFile(const fs::path& path);
  ~MmapFile();
  MmapFile(MmapFile&& other) noexcept;
  MmapFile& operator=(MmapFile&& other) noexcept;
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const fs::path& path() const { return path_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
  // Drops this mapping's resident pages that lie wholly inside
  // [offset, offset + length), so the process's RSS stops counting bytes it
  // has read (the kernel's page cache keeps them; a later read faults them
  // back in). Safe while other threads read the same bytes. Advice only:
  // failure is ignored.
  void DropPages(size_t offset, size_t length) const noexcept;

 private:
  void Reset() noexcept;

  fs::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// Writes a file so that it appears complete or not at all. Not thread-safe.
// Destroying the writer without Commit() removes the temporary file and
// leaves any existing target untouched.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(fs::path target);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void Write(const void* data, size_t size);
  void Write(std::string_view s) { Write(s.data(), s.size()); }
  // fsync the data, rename over the target, fsync the directory.
  void Commit();

  const fs::path& target() const { return target_; }
  const fs::path& temp_path() const { return temp_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  fs::path target_;
  fs::path temp_;
  int fd_ = -1;
  uint64_t bytes_written_ = 0;
  bool committed_ = false;
};

// WriteFileAtomic(path, bytes): AtomicFileWriter in one call.
void WriteFileAtomic(const fs::path& path, std::string_view contents);

// Reads a whole file into a string.
std::string ReadFile(const fs::path& path);

// Builds a directory under `final_path + ".incomplete"` and renames it to
// `final_path` on Commit(), so a reader never sees a half-written directory
// under the final name. Without Commit() the incomplete directory stays for
// inspection (it never looks complete); a new AtomicDirectory for the same
// path clears it first. Commit() fails if `final_path` exists.
class AtomicDirectory {
 public:
  explicit AtomicDirectory(fs::path final_path);
  AtomicDirectory(const AtomicDirectory&) = delete;
  AtomicDirectory& operator=(const AtomicDirectory&) = delete;

  // Where to write files now.
  const fs::path& path() const { return work_; }
  const fs::path& final_path() const { return final_; }
  // fsync every file and the directory, rename, fsync the parent.
  void Commit();

 private:
  fs::path final_;
  fs::path work_;
  bool committed_ = false;
};

// fsync a file or directory by path.
void FsyncPath(const fs::path& path);

// Bytes available to an unprivileged user on the filesystem holding `path`
// (the nearest existing ancestor is used when `path` does not exist yet).
uint64_t FreeBytes(const fs::path& path);

// Throws an io Error with a hint when fewer than `needed` bytes are free.
void EnsureFreeSpace(const fs::path& path, uint64_t needed, std::string_view purpose);

// "1.5 GiB", "312 KiB", "17 B".
std::string FormatBytes(uint64_t bytes);

}  // namespace topspin
