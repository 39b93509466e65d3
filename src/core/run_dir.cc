#include "topspin/core/run_dir.h"

#include <cerrno>

#include <fmt/format.h>
#include <sys/stat.h>

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
    if (errno != EEXIST) {
      throw SystemError("cannot create run directory", dir.string(), errno,
                        "set run.dir to a writable directory");
    }
  }
  throw IoError("no free run number below 100000", ErrorWhere{.file = parent.string()},
                "choose another run.name or clean up " + parent.string());
}

}  // namespace topspin
