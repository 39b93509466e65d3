// AppendFile: the file under a metrics sink (internal to perf). Opened for
// appending, written in whole buffers, made durable with fdatasync.
// Not thread-safe; closes on destruction. Errors are Error{kIo} naming the file.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include <spdlog/spdlog.h>

#include "topspin/core/error.h"

namespace topspin::perf_internal {

class AppendFile {
 public:
  // exclusive: fail if `path` exists (else create it or append to it).
  AppendFile(std::filesystem::path path, bool exclusive) : path_(std::move(path)) {
    const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (exclusive ? O_EXCL : 0);
    fd_ = ::open(path_.c_str(), flags, 0644);
    if (fd_ < 0) {
      const int err = errno;
      throw SystemError("cannot open for appending", path_.string(), err,
                        err == EEXIST ? "another writer owns this file: give each writer its "
                                        "own directory or file name"
                                      : "check that the directory is writable");
    }
  }
  ~AppendFile() { ::close(fd_); }
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  // Writes all of `buffer` and empties it. On failure `buffer` keeps only
  // the bytes not yet written, so a later call neither repeats nor loses any.
  void Drain(std::string& buffer) {
    size_t done = 0;
    try {
      while (done < buffer.size()) {
        const ssize_t n = ::write(fd_, buffer.data() + done, buffer.size() - done);
        if (n < 0) {
          if (errno == EINTR) continue;
          const int err = errno;
          throw SystemError("cannot write", path_.string(), err,
                            err == ENOSPC ? "the disk is full: free space and retry" : "");
        }
        done += static_cast<size_t>(n);
        dirty_ = true;
      }
    } catch (...) {
      buffer.erase(0, done);
      throw;
    }
    buffer.clear();
  }

  // fdatasync when anything was written since the last Sync().
  void Sync() {
    if (!dirty_) return;
    if (::fdatasync(fd_) != 0) throw SystemError("cannot fdatasync", path_.string(), errno);
    dirty_ = false;
  }

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  bool dirty_ = false;
};

// std::filesystem::create_directories, failing with Error{kIo}.
inline void CreateDirectories(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw IoError("cannot create directory: " + ec.message(), ErrorWhere{.file = dir.string()},
                  "check the path and its permissions");
  }
}

// Logs the exception being handled; for destructors, which must not throw.
// Call only inside a catch block.
inline void LogDestructorFailure(const char* what_lost) {
  try {
    throw;
  } catch (const Error& e) {
    spdlog::error("{}: {}", what_lost, e.Message());
  } catch (const std::exception& e) {
    spdlog::error("{}: {}", what_lost, e.what());
  } catch (...) {
    spdlog::error("{}: unknown exception", what_lost);
  }
}

}  // namespace topspin::perf_internal
