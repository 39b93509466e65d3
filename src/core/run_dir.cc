#include "topspin/core/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <fmt/format.h>

#include "topspin/core/error.h"
#include "topspin/core/files.h"

namespace topspin {

namespace fs = std::filesystem;

std::filesystem::path CreateRunDirectory(const fs::path& parent, const std::string& name,
                                         const Config& config) {
  if (name.empty() || name.find('/') != std::string::npos) {
    throw ConfigError(fmt::format("run name \"{}\" must be non-empty and contain no '/'", name),
                      ErrorWhere{.field = "run.name"});
  }
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) {
    throw IoError("cannot create run parent directory: " + ec.message(),
                  ErrorWhere{.file = parent.string()}, "set run.dir to a writable directory");
  }
  for (int n = 1; n < 100000; ++n) {
    const fs::path dir = parent / fmt::format("{}-{:03}", name, n);
    if (::mkdir(dir.c_str(), 0755) == 0) {
      WriteFileAtomic(dir / "config.yaml",
                      fmt::format("# resolved config of {}\n# config hash: {}\n{}", dir.string(),
                                  config.Hash(), config.ToYaml(true)));
      WriteFileAtomic(dir / "config.hash", config.Hash() + "\n");
      return dir;
    }
    if (errno == ENAMETOOLONG) {
      throw ConfigError(fmt::format("run name \"{}\" is too long for a directory name ({} bytes)",
                                    name, name.size()),
                        ErrorWhere{.field = "run.name"}, "choose a run.name under 200 bytes");
    }
    if (errno != EEXIST) {
      throw SystemError("cannot create run directory", dir.string(), errno,
                        "set run.dir to a writable directory");
    }
  }
  throw IoError("no free run number below 100000", ErrorWhere{.file = parent.string()},
                "choose another run.name or clean up " + parent.string());
}

RunDirLock::RunDirLock(const fs::path& dir) {
  const fs::path path = dir / ".lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw SystemError("cannot create the run's lock file", path.string(), errno,
                      "pass a --run-dir you can write to");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder(32, '\0');
    const ssize_t n = ::pread(fd_, holder.data(), holder.size(), 0);
    holder.resize(n > 0 ? size_t(n) : 0);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw SystemError("cannot lock the run directory", path.string(), err);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
    throw IoError(
        fmt::format("run directory {} is in use by another training (pid {})", dir.string(),
                    holder.empty() ? "unknown" : holder),
        {.file = dir.string()},
        "wait for it to finish or stop it (its checkpoints let you --resume auto later), or "
        "pass another --run-dir");
  }
  const std::string pid = fmt::format("{}\n", ::getpid());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    const int err = errno;
    ::close(fd_);
    throw SystemError("cannot write the run's lock file", path.string(), err);
  }
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace topspin
