#include "topspin/core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "topspin/core/error.h"
#include "topspin/core/rng.h"

namespace topspin {
namespace {

// RAII file descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

fs::path ParentOrDot(const fs::path& path) {
  fs::path parent = path.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// A temp name unlikely to collide between processes and threads.
fs::path TempPathFor(const fs::path& target) {
  static thread_local PhiloxStream stream(
      static_cast<uint64_t>(::getpid()) << 20 ^ reinterpret_cast<uintptr_t>(&target),
      static_cast<uint64_t>(::time(nullptr)));
  return ParentOrDot(target) /
         fmt::format(".{}.tmp-{}-{:08x}", target.filename().string(), ::getpid(), stream.NextU32());
}

void WriteAll(int fd, const void* data, size_t size, const fs::path& path) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      throw SystemError("cannot write", path.string(), err,
                        err == ENOSPC ? "the disk is full: free space and retry" : "");
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

// ---- MmapFile -------------------------------------------------------------

MmapFile::MmapFile(const fs::path& path) : path_(path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw SystemError("cannot open for reading", path.string(), errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw SystemError("cannot stat", path.string(), errno);
  if (!S_ISREG(st.st_mode)) {
    throw IoError("not a regular file", ErrorWhere{.file = path.string()},
                  "pass a regular file, not a directory, pipe or device");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED) throw SystemError("cannot mmap", path.string(), errno);
  data_ = static_cast<const std::byte*>(p);
}

MmapFile::~MmapFile() {
  Reset();
}

MmapFile::MmapFile(MmapFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MmapFile& MmapFile::operator=(MmapFile&& other) noexcept {
  if (this != &other) {
    Reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MmapFile::DropPages(size_t offset, size_t length) const noexcept {
  if (data_ == nullptr || offset >= size_) return;
  static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data_) + offset;
  const uintptr_t end = begin + std::min(length, size_ - offset);
  const uintptr_t first = (begin + page - 1) & ~(page - 1), last = end & ~(page - 1);
  if (last > first) {
    (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  }
}

void MmapFile::Reset() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

// ---- AtomicFileWriter -----------------------------------------------------

AtomicFileWriter::AtomicFileWriter(fs::path target)
    : target_(std::move(target)), temp_(TempPathFor(target_)) {
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw SystemError("cannot create temporary file for", target_.string(), errno,
                      "check that the directory exists and is writable");
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) {
    std::error_code ignored;
    fs::remove(temp_, ignored);
  }
}

void AtomicFileWriter::Write(const void* data, size_t size) {
  if (fd_ < 0) throw InternalError("AtomicFileWriter::Write after Commit: " + target_.string());
  WriteAll(fd_, data, size, target_);
  bytes_written_ += size;
}

void AtomicFileWriter::Commit() {
  if (fd_ < 0) throw InternalError("AtomicFileWriter::Commit twice: " + target_.string());
  if (::fsync(fd_) != 0) throw SystemError("cannot fsync", temp_.string(), errno);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw SystemError("cannot close", temp_.string(), errno);
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    throw SystemError("cannot rename temporary file onto", target_.string(), errno);
  }
  committed_ = true;
  FsyncPath(ParentOrDot(target_));
}

void WriteFileAtomic(const fs::path& path, std::string_view contents) {
  AtomicFileWriter writer(path);
  writer.Write(contents);
  writer.Commit();
}

std::string ReadFile(const fs::path& path) {
  MmapFile file(path);
  return std::string(file.view());
}

void FsyncPath(const fs::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw SystemError("cannot open to fsync", path.string(), errno);
  if (::fsync(fd.get()) != 0) throw SystemError("cannot fsync", path.string(), errno);
}

// ---- AtomicDirectory ------------------------------------------------------

AtomicDirectory::AtomicDirectory(fs::path final_path)
    : final_(std::move(final_path)), work_(final_.string() + ".incomplete") {
  if (fs::exists(final_)) {
    throw IoError("output directory already exists", ErrorWhere{.file = final_.string()},
                  "choose another --out or remove the directory");
  }
  std::error_code ec;
  fs::remove_all(work_, ec);
  if (ec) throw IoError("cannot clear " + work_.string() + ": " + ec.message());
  fs::create_directories(work_, ec);
  if (ec) {
    throw IoError("cannot create directory: " + ec.message(), ErrorWhere{.file = work_.string()});
  }
}

void AtomicDirectory::Commit() {
  if (committed_) throw InternalError("AtomicDirectory::Commit twice: " + final_.string());
  for (const auto& entry : fs::recursive_directory_iterator(work_)) FsyncPath(entry.path());
  FsyncPath(work_);
  if (::rename(work_.c_str(), final_.c_str()) != 0) {
    throw SystemError("cannot rename " + work_.string() + " to", final_.string(), errno);
  }
  committed_ = true;
  FsyncPath(ParentOrDot(final_));
}

// ---- free space -------------------------------------------------------------

uint64_t FreeBytes(const fs::path& path) {
  fs::path probe = path.empty() ? fs::path(".") : path;
  while (!fs::exists(probe) && probe.has_parent_path() && probe != probe.parent_path()) {
    probe = probe.parent_path();
  }
  if (!fs::exists(probe)) probe = ".";
  struct statvfs st {};
  if (::statvfs(probe.c_str(), &st) != 0)
    throw SystemError("cannot statvfs", probe.string(), errno);
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

void EnsureFreeSpace(const fs::path& path, uint64_t needed, std::string_view purpose) {
  const uint64_t free = FreeBytes(path);
  if (free < needed) {
    throw IoError(fmt::format("not enough free space for {}: need {}, have {}", purpose,
                              FormatBytes(needed), FormatBytes(free)),
                  ErrorWhere{.file = path.string()},
                  "free disk space or choose an output directory on a larger disk");
  }
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.{}f} {}", value, value < 10 ? 2 : (value < 100 ? 1 : 0), kUnits[unit]);
}

}  // namespace topspin
